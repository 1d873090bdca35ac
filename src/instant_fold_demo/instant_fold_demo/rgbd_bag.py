"""RGB-D frames in a recorded bag: the camera topics (colour, aligned depth, CameraInfo) paired
by their shared header stamp, decoded with `rosbags` (no rclpy) into `RGBDFrame`s.

Frames stream one at a time: a minute of 640x480 RGB-D is gigabytes, so callers keep only what
they need per frame and re-read the few frames they keep (`read_rgbd_frames(..., indices=)`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from instant_fold_core.rgbd import RGBDFrame
from instant_fold_demo.bag import BagError, bag_topics, read_messages, typestore_for, write_messages
from instant_fold_ros.conversions import MessageConversionError, make_header, rgbd_from_msgs, rgbd_to_msgs

IMAGE = "sensor_msgs/msg/Image"
CAMERA_INFO = "sensor_msgs/msg/CameraInfo"


@dataclass(frozen=True)
class CameraTopics:
    """Where the camera's streams are in a bag (the camera node's topics by default)."""

    color: str = "/camera/color"
    depth: str = "/camera/depth"
    info: str = "/camera/camera_info"

    def as_dict(self) -> dict[str, str]:
        return {"color": self.color, "depth": self.depth, "camera_info": self.info}


def check_camera_bag(path: str | Path, topics: CameraTopics = CameraTopics()) -> dict[str, int]:
    """Refuse a bag that lacks a camera stream or holds it with the wrong type; return counts."""
    present = bag_topics(path)
    counts = {}
    for role, topic in topics.as_dict().items():
        expected = CAMERA_INFO if role == "camera_info" else IMAGE
        if topic not in present:
            raise BagError(f"bag {path} has no {role} topic {topic} (it holds: {sorted(present) or 'nothing'})")
        msgtype, count = present[topic]
        if msgtype != expected:
            raise BagError(f"bag {path}: {topic} holds {msgtype}, expected {expected}")
        if count == 0:
            raise BagError(f"bag {path}: {role} topic {topic} holds no messages")
        counts[role] = count
    return counts


def read_rgbd_frames(
    path: str | Path, topics: CameraTopics = CameraTopics(), indices: Iterable[int] | None = None
) -> Iterator[RGBDFrame]:
    """The bag's RGB-D frames in order, numbered 0, 1, ... in `frame_number` (only `indices` when
    given). A colour image pairs with the depth image of the same stamp; the CameraInfo of that
    stamp, else the latest one before it, gives the intrinsics. Unpaired images are skipped.
    """
    check_camera_bag(path, topics)
    store = typestore_for([IMAGE, CAMERA_INFO])
    wanted = None if indices is None else set(indices)
    pending: dict[int, dict[str, Any]] = {}
    latest_info: Any = None
    number = 0
    roles = {topics.color: "color", topics.depth: "depth", topics.info: "info"}
    for message in read_messages(path, roles):
        msg: Any = store.deserialize_cdr(message.data, message.msgtype)
        stamp = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
        role = roles[message.topic]
        if role == "info":
            latest_info = msg
        parts = pending.setdefault(stamp, {})
        parts[role] = msg
        if "color" not in parts or "depth" not in parts:
            continue
        info = parts.get("info", latest_info)
        if info is None:
            continue  # its CameraInfo may follow with the same stamp
        del pending[stamp]
        for old in [s for s in pending if s < stamp]:  # images whose partner never came
            del pending[old]
        if wanted is None or number in wanted:
            try:
                frame = rgbd_from_msgs(parts["color"], parts["depth"], info)
            except MessageConversionError as exc:
                raise BagError(f"bag {path}: frame {number} (stamp {stamp} ns): {exc}") from exc
            yield RGBDFrame(frame.color, frame.depth, frame.intrinsics, stamp, number, frame.distortion)
        number += 1
        if wanted is not None and number > max(wanted, default=-1):
            return
    if number == 0:
        if latest_info is None:
            raise BagError(f"bag {path}: no CameraInfo precedes or accompanies any image pair")
        raise BagError(f"bag {path}: no colour image has a depth image with the same stamp")


def write_rgbd_bag(
    path: str | Path, frames: Iterable[RGBDFrame], topics: CameraTopics = CameraTopics(),
    frame_id: str = "camera_color_optical_frame",
) -> Path:  # fmt: skip
    """Write frames as the camera node publishes them (one header per frame, stamped with
    `frame.stamp_ns`), serialized by rclpy exactly as over DDS. For tools and tests."""
    from builtin_interfaces.msg import Time
    from rclpy.serialization import serialize_message

    def messages() -> Iterator[tuple[str, int, bytes]]:
        for frame in frames:
            stamp = Time(sec=frame.stamp_ns // 10**9, nanosec=frame.stamp_ns % 10**9)
            msgs = rgbd_to_msgs(frame, make_header(frame_id, stamp))
            for topic, msg in zip((topics.color, topics.depth, topics.info), msgs, strict=True):
                yield topic, frame.stamp_ns, serialize_message(msg)

    types = {topics.color: IMAGE, topics.depth: IMAGE, topics.info: CAMERA_INFO}
    return write_messages(path, types, messages())
