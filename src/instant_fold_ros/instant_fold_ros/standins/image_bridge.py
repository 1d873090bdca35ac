"""numpy <-> sensor_msgs/Image: the stand-in for `cv_bridge` (not available as a wheel).

`image_to_msg` / `image_from_msg` play `cv2_to_imgmsg` / `imgmsg_to_cv2` for the encodings the
graph uses, validating the layout (encoding, step, byte count) and naming the field on error. On an
apt-installed ROS, `cv_bridge.CvBridge` can replace them; colour then arrives as OpenCV's BGR
unless `desired_encoding="rgb8"` is asked for.
"""

from __future__ import annotations

import numpy as np
from sensor_msgs.msg import Image
from std_msgs.msg import Header

from instant_fold_ros.message_errors import MessageConversionError, check_field

#: encoding -> (dtype, channels) of the sensor_msgs/Image encodings the graph uses.
IMAGE_ENCODINGS: dict[str, tuple[np.dtype, int]] = {
    "rgb8": (np.dtype(np.uint8), 3),
    "bgr8": (np.dtype(np.uint8), 3),
    "rgba8": (np.dtype(np.uint8), 4),
    "bgra8": (np.dtype(np.uint8), 4),
    "mono8": (np.dtype(np.uint8), 1),
    "8UC1": (np.dtype(np.uint8), 1),
    "mono16": (np.dtype(np.uint16), 1),
    "16UC1": (np.dtype(np.uint16), 1),
    "32FC1": (np.dtype(np.float32), 1),
}


def image_to_msg(image: np.ndarray, encoding: str, header: Header | None = None) -> Image:
    """Pack an [H, W] or [H, W, C] array with a known encoding into sensor_msgs/Image."""
    if encoding not in IMAGE_ENCODINGS:
        raise MessageConversionError(f"Image.encoding: unsupported '{encoding}' (supported: {sorted(IMAGE_ENCODINGS)})")
    dtype, channels = IMAGE_ENCODINGS[encoding]
    shape: tuple[int | None, ...] = (None, None) if channels == 1 else (None, None, channels)
    image = check_field(f"Image[{encoding}]", image, shape, dtype)
    height, width = image.shape[:2]
    return Image(
        header=header if header is not None else Header(),
        height=height,
        width=width,
        encoding=encoding,
        is_bigendian=0,
        step=width * channels * dtype.itemsize,
        data=np.ascontiguousarray(image).tobytes(),
    )


def image_from_msg(msg: Image, allowed: tuple[str, ...] | None = None) -> np.ndarray:
    """Unpack sensor_msgs/Image to an [H, W] or [H, W, C] array (a copy), validating the layout.

    Args:
        msg: the image.
        allowed: encodings the caller accepts (e.g. ("rgb8", "bgr8") for colour); others raise.
    """
    encoding = msg.encoding
    if encoding not in IMAGE_ENCODINGS or (allowed is not None and encoding not in allowed):
        accepted = sorted(allowed if allowed is not None else IMAGE_ENCODINGS)
        raise MessageConversionError(f"Image.encoding: got '{encoding}', expected one of {accepted}")
    dtype, channels = IMAGE_ENCODINGS[encoding]
    h, w = int(msg.height), int(msg.width)
    if h == 0 or w == 0:
        raise MessageConversionError(f"Image: empty image ({w}x{h})")
    row = w * channels * dtype.itemsize
    if msg.step < row:
        raise MessageConversionError(f"Image.step: {msg.step} is smaller than width x pixel size = {row}")
    if len(msg.data) != msg.step * h:
        raise MessageConversionError(f"Image.data: expected {msg.step * h} bytes (step x height), got {len(msg.data)}")
    raw = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(h, msg.step)[:, :row]
    big = dtype.newbyteorder(">") if msg.is_bigendian else dtype
    out = raw.copy().view(big).astype(dtype, copy=False)
    return out.reshape(h, w) if channels == 1 else out.reshape(h, w, channels)
