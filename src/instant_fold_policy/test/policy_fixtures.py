"""Synthetic frames and demonstrations for the policy-server tests."""

from __future__ import annotations

import numpy as np

from instant_fold_core.contracts import KeyframeEvent
from instant_fold_core.demonstration import Demonstration
from instant_fold_core.rgbd import RGBDFrame

K = np.array([[110.0, 0, 64], [0, 110.0, 48], [0, 0, 1]], np.float32)


def cloth_frame(shift: float = 0.0) -> tuple[RGBDFrame, np.ndarray]:
    """A 96x128 view of a rectangular cloth 1 m below the camera (table at 1.01 m)."""
    depth = np.full((96, 128), 1.01, np.float32)
    mask = np.zeros((96, 128), bool)
    x0 = 30 + int(shift)
    mask[25:70, x0 : x0 + 60] = True
    depth[mask] = 1.0
    color = np.full((96, 128, 3), 80, np.uint8)
    color[mask] = (200, 60, 60)
    return RGBDFrame(color, depth, K), mask


HOME = np.array([[-0.25, 0.05, 0.9, 1.0], [0.25, 0.05, 0.9, 1.0]], np.float32)


def make_demonstration() -> Demonstration:
    frames = [cloth_frame(s) for s in (0.0, 5.0, 10.0)]
    grasp = HOME.copy()
    grasp[0, :3], grasp[0, 3] = (-0.1, 0.0, 1.0), 0.0
    return Demonstration(
        color=np.stack([f.color for f, _ in frames]),
        depth=np.stack([f.depth for f, _ in frames]),
        mask=np.stack([m for _, m in frames]),
        intrinsics=K,
        keypose=np.stack([grasp, HOME, HOME]),
        events=np.array([[KeyframeEvent.GRASP, 0], [KeyframeEvent.RELEASE, 0], [4, 4]], np.uint8),
        frame_index=np.array([0, 10, 20], np.int32),
        name="test-demo",
    )
