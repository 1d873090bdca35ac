"""RGB-D frames in a recorded bag: the camera topics (colour, aligned depth, CameraInfo) paired
by their shared header stamp, decoded with `rosbags` (no rclpy) into `RGBDFrame`s.

Frames stream one at a time: a minute of 640x480 RGB-D is gigabytes, so callers keep only what
they need per frame and re-read the few frames they keep (`read_rgbd_frames(..., indices=)`).

Frame times must increase: hand tracking runs MediaPipe in video mode, which refuses a frame not
later than the one before, and keyframes are ordered by them. A frame with the previous frame's
header stamp and the same colour and depth pixels is a re-publication, not a new frame (the
simulator re-sends its latest frame while its time stands still), and is skipped (compared by
content: serialized messages differ in their alignment padding); any other frame stamped at or
before the previous one is refused with the frames and stamps named, unless `stamps="receive"`
orders frames by the time the recorder received them instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from instant_fold_core.rgbd import RGBDFrame
from instant_fold_demo.bag import BagError, bag_topics, read_messages, typestore_for, write_messages
from instant_fold_ros.conversions import (
    MessageConversionError,
    dual_arm_state_from_msg,
    make_header,
    rgbd_from_msgs,
    rgbd_to_msgs,
)
from instant_fold_ros.standins.image_bridge import image_from_msg

IMAGE = "sensor_msgs/msg/Image"
CAMERA_INFO = "sensor_msgs/msg/CameraInfo"
DUAL_ARM_STATE = "instant_fold_interfaces/msg/DualArmState"


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


Stamps = Literal["header", "receive"]


def _same(a: Any, b: Any) -> bool:
    """Whether two images' pixel buffers are equal."""
    return len(a) == len(b) and bool(np.array_equal(np.asarray(a), np.asarray(b)))


def _pairs(path: str | Path, topics: CameraTopics) -> Iterator[tuple[int, dict[str, Any], Any]]:
    """(header stamp, {color, depth, received}, CameraInfo) of every colour image that has a depth
    image of the same stamp, in recording order. The CameraInfo is that stamp's, else the latest
    before it; pairs recorded before any CameraInfo arrived (a recorder whose camera_info
    subscription matched a moment later than the images') take the first one that follows: a
    camera's intrinsics do not change during a recording."""
    store = typestore_for([IMAGE, CAMERA_INFO])
    pending: dict[int, dict[str, Any]] = {}
    early: list[tuple[int, dict[str, Any]]] = []
    latest_info: Any = None
    roles = {topics.color: "color", topics.depth: "depth", topics.info: "info"}
    for message in read_messages(path, roles):
        msg: Any = store.deserialize_cdr(message.data, message.msgtype)
        stamp = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
        role = roles[message.topic]
        if role == "info":
            latest_info = msg
            for early_stamp, parts in early:
                yield early_stamp, parts, msg
            early.clear()
        parts = pending.setdefault(stamp, {})
        parts[role] = msg
        if role == "color":
            parts["received"] = message.stamp_ns
        if "color" not in parts or "depth" not in parts:
            continue
        del pending[stamp]
        for old in [s for s in pending if s < stamp]:  # images whose partner never came
            del pending[old]
        info = parts.get("info", latest_info)
        if info is None:
            early.append((stamp, parts))
        else:
            yield stamp, parts, info
    if early:
        raise BagError(f"bag {path}: no CameraInfo in the whole recording")


def read_rgbd_frames(
    path: str | Path,
    topics: CameraTopics = CameraTopics(),
    indices: Iterable[int] | None = None,
    stamps: Stamps = "header",
) -> Iterator[RGBDFrame]:
    """The bag's RGB-D frames in order, numbered 0, 1, ... in `frame_number` (only `indices` when
    given): colour and depth images paired by stamp with their CameraInfo (`_pairs`).
    Re-publications of the previous frame are skipped. A frame's `stamp_ns` is its header stamp,
    or with `stamps="receive"` the time its colour image reached the recorder; either must
    increase from frame to frame (`BagError` otherwise).
    """
    check_camera_bag(path, topics)
    wanted = None if indices is None else set(indices)
    number = 0
    previous: tuple[int, int, Any, Any] | None = None  # frame stamp, header stamp, colour and depth pixels
    for stamp, parts, info in _pairs(path, topics):
        color, depth = parts["color"].data, parts["depth"].data
        if previous is not None and stamp == previous[1] and _same(color, previous[2]) and _same(depth, previous[3]):
            continue  # the same frame sent again
        frame_stamp = stamp if stamps == "header" else parts["received"]
        if previous is not None and frame_stamp <= previous[0]:
            raise BagError(
                f"bag {path}: frame {number} is stamped {frame_stamp} ns, not after frame {number - 1} "
                f"({previous[0]} ns): the {'camera' if stamps == 'header' else 'recording'} clock does not "
                "increase" + (" (use --stamps receive to order frames by arrival)" if stamps == "header" else "")
            )
        previous = (frame_stamp, stamp, color, depth)
        if wanted is None or number in wanted:
            try:
                frame = rgbd_from_msgs(parts["color"], parts["depth"], info)
            except MessageConversionError as exc:
                raise BagError(f"bag {path}: frame {number} (stamp {stamp} ns): {exc}") from exc
            yield RGBDFrame(frame.color, frame.depth, frame.intrinsics, frame_stamp, number, frame.distortion)
        number += 1
        if wanted is not None and number > max(wanted, default=-1):
            return
    if number == 0:
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


def _stamped(path: str | Path, topic: str, msgtype: str) -> Iterator[tuple[int, Any]]:
    """(header stamp ns, deserialized message) of every message on `topic`, which must hold `msgtype`."""
    present = bag_topics(path)
    if topic not in present:
        raise BagError(f"bag {path} has no topic {topic} (it holds: {sorted(present) or 'nothing'})")
    if present[topic][0] != msgtype:
        raise BagError(f"bag {path}: {topic} holds {present[topic][0]}, expected {msgtype}")
    store = typestore_for([msgtype])
    for message in read_messages(path, [topic]):
        msg: Any = store.deserialize_cdr(message.data, msgtype)
        yield msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec, msg


def read_masks(path: str | Path, topic: str = "/cloth/mask") -> dict[int, np.ndarray]:
    """header stamp -> recorded cloth mask (bool [H, W]) of a bag holding `cloth/mask` (mono8,
    non-zero = cloth), as the simulator (or a segmentation node) published it beside the images."""
    masks = {}
    for stamp, msg in _stamped(path, topic, IMAGE):
        try:
            masks[stamp] = np.packbits(image_from_msg(msg, ("mono8",)) > 0)
        except MessageConversionError as exc:
            raise BagError(f"bag {path}: {topic} at stamp {stamp} ns: {exc}") from exc
    if not masks:
        raise BagError(f"bag {path}: {topic} holds no messages")
    return masks


def read_arm_states(path: str | Path, topic: str) -> tuple[np.ndarray, np.ndarray]:
    """Header stamps (int64 [N], increasing) and arm states (float32 [N, 2, 4], camera frame) of a
    `DualArmState` topic in a bag (the controller's `arms/state`, the simulated demonstrator's)."""
    pairs = []
    for stamp, msg in _stamped(path, topic, DUAL_ARM_STATE):
        try:
            pairs.append((stamp, dual_arm_state_from_msg(msg)))
        except MessageConversionError as exc:
            raise BagError(f"bag {path}: {topic} at stamp {stamp} ns: {exc}") from exc
    if not pairs:
        raise BagError(f"bag {path}: {topic} holds no messages")
    pairs.sort(key=lambda p: p[0])
    return np.array([p[0] for p in pairs], np.int64), np.stack([p[1] for p in pairs])
