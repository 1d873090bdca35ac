"""A small recording of a robot demonstration, as the simulator and `sim_demonstrator` record it
(camera topics, the cloth mask and `arms/state` sharing each frame's stamp), written in seconds:
the synthetic table-and-cloth scene of `test_keyframes`, with the left gripper closing on the
cloth at frame 10 and opening at frame 20. For the command-line checks that need a bag
`extract` accepts without MediaPipe; the simulator's own recording is `test_sim_capture.py`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
from rclpy.serialization import serialize_message
from rclpy.time import Time
from test_keyframes import CLOTH, GRASP_PX, RELEASE_PX, K, _frames, _script

from instant_fold_demo.bag import write_messages
from instant_fold_demo.hands import backproject
from instant_fold_demo.rgbd_bag import CAMERA_INFO, DUAL_ARM_STATE, IMAGE
from instant_fold_ros.conversions import dual_arm_state_to_msg, make_header, rgbd_to_msgs
from instant_fold_ros.standins.image_bridge import image_to_msg

HOME = np.array([[-0.5, -0.1, 0.8, 1.0], [0.5, -0.1, 0.8, 1.0]], np.float32)
GRASP_AT, RELEASE_AT = 10, 20


def arm_states(frames: int = 30) -> np.ndarray:
    """[T, 2, 4]: the left gripper closed on the cloth from GRASP_AT, open again from RELEASE_AT."""
    grasp, release = backproject(*GRASP_PX, CLOTH, K), backproject(*RELEASE_PX, CLOTH, K)
    states = np.repeat(HOME[None], frames, axis=0)
    for t in range(frames):
        if GRASP_AT <= t < RELEASE_AT:
            states[t, 0] = [*(grasp + (release - grasp) * (t - GRASP_AT) / (RELEASE_AT - GRASP_AT)), 0.0]
        elif t >= RELEASE_AT:
            states[t, 0] = [*release, 1.0]
    return states


def robot_bag(path: Path, frames: int = 30, stamps: list[int] | None = None, repeat: bool = False) -> Path:
    """Write the recording; `stamps` (ns per frame) replaces the frames' increasing stamps;
    `repeat` sends every frame twice, as the simulator re-publishes while its time stands still."""
    images = _frames(_script(frames), frames)
    states = arm_states(frames)
    cloth = images[0].depth < 0.995

    def messages() -> Iterator[tuple[str, int, bytes]]:
        for t, frame in enumerate(images):
            stamp_ns = frame.stamp_ns if stamps is None else stamps[t]
            header = make_header("camera_color_optical_frame", Time(nanoseconds=stamp_ns).to_msg())
            color, depth, info = rgbd_to_msgs(frame, header)
            mask = image_to_msg(cloth.astype(np.uint8) * 255, "mono8", header)
            arms = dual_arm_state_to_msg(states[t], header)
            for copy in range(2 if repeat else 1):
                received = 10**18 + (2 * t + copy) * 16_000_000  # the recorder's clock: always increasing
                for topic, msg in (("/camera/color", color), ("/camera/depth", depth), ("/camera/camera_info", info),
                                   ("/cloth/mask", mask), ("/arms/state", arms)):  # fmt: skip
                    yield topic, received, serialize_message(msg)

    types = {"/camera/color": IMAGE, "/camera/depth": IMAGE, "/camera/camera_info": CAMERA_INFO,
             "/cloth/mask": IMAGE, "/arms/state": DUAL_ARM_STATE}  # fmt: skip
    return write_messages(path, types, messages())
