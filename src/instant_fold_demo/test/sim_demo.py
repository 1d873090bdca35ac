"""A simulated "human" demonstration: the simulator's scripted fold rendered as RGB-D (a real
rosbag), with hands that a tracker stand-in reports where the simulator's grippers are.

What is and is not real here: the bag, the frames (Newton cloth rendered by the simulator), the
plane segmenter and the whole extraction are real; the hands are not rendered (the simulator has
no hands), so `ScriptedHands` reports landmarks around each gripper's projected position with a
pinch that follows the gripper's openness, and depth at the "fingertips" is the cloth's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scripted_hands import ScriptedHands, pinch_of

from instant_fold_core.dataset.keyframes import gripper_events
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_demo.hands import project
from instant_fold_demo.rgbd_bag import write_rgbd_bag


def episode_bag(path: Path, rgb, depth, intrinsics, fps: float) -> Path:
    """The rendered frames as the camera node would have recorded them."""
    step = round(1e9 / fps)
    frames = (
        RGBDFrame(rgb[t], depth[t], intrinsics, stamp_ns=10**9 + t * step, frame_number=t) for t in range(len(rgb))
    )
    return write_rgbd_bag(path, frames)


def gripper_hands(arm_state: np.ndarray, intrinsics: np.ndarray, fps: float, size: float = 14.0) -> ScriptedHands:
    """Hands at the grippers: per frame and arm, the projected position and the pinch of its openness."""
    step = round(1e9 / fps)
    script = {}
    for t, arms in enumerate(arm_state):
        stamp_ms = (10**9 + t * step) // 1_000_000
        script[stamp_ms] = [(a, project(arms[a, :3], intrinsics), pinch_of(arms[a, 3])) for a in (0, 1)]
    return ScriptedHands(script, size)


def true_events(arm_state: np.ndarray) -> list[tuple[int, str, int, np.ndarray]]:
    """(arm, kind, frame, position) of every grasp/release of the simulated grippers."""
    closed = arm_state[:, :, 3] < 0.5
    out = []
    for t in gripper_events(arm_state):
        for a in (0, 1):
            if closed[t, a] != closed[t - 1, a]:
                out.append((a, "grasp" if closed[t, a] else "release", int(t), arm_state[t, a, :3]))
    return sorted(out, key=lambda e: (e[2], e[0]))


class SimMasks:
    """`Segmenter` giving the simulator's exact cloth mask of each frame (by frame number), as the
    graph's `segmentation:=sim` does: the plane segmenter's height threshold does not separate the
    simulator's single-layer cloth from its table (docs/demonstrations.md)."""

    def __init__(self, masks: np.ndarray) -> None:
        self.masks = masks

    def segment(self, frame: RGBDFrame) -> np.ndarray:
        return self.masks[frame.frame_number]
