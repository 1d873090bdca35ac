"""Synthetic table-top RGB-D scenes with known ground truth (there is no camera here)."""

from __future__ import annotations

import numpy as np

from instant_fold_core.rgbd import RGBDFrame


def table_scene(
    size: tuple[int, int] = (120, 160),
    tilt_deg: float = 8.0,
    cloth_height: float = 0.006,
    noise: float = 0.0005,
    with_gripper: bool = True,
    seed: int = 0,
) -> tuple[RGBDFrame, np.ndarray]:
    """A tilted table ~1 m below the camera, a T-shaped cloth on it, a gripper blob high above.

    Returns the frame and the ground-truth cloth mask.
    """
    h, w = size
    f = 0.9 * w
    k = np.array([[f, 0, w / 2], [0, f, h / 2], [0, 0, 1]], np.float32)
    u, v = np.meshgrid(np.arange(w), np.arange(h))
    rays = np.stack([(u - k[0, 2]) / f, (v - k[1, 2]) / f, np.ones_like(u, dtype=float)], -1)
    tilt = np.deg2rad(tilt_deg)
    normal = np.array([0.0, np.sin(tilt), -np.cos(tilt)])  # facing the camera
    d = -1.0  # plane n . p = d: 1 m from the camera

    def depth_of_plane(offset: float) -> np.ndarray:
        return (d + offset) / (rays @ normal)

    depth = depth_of_plane(0.0)
    cloth = np.zeros((h, w), bool)
    cloth[int(0.3 * h) : int(0.75 * h), int(0.35 * w) : int(0.65 * w)] = True  # body
    cloth[int(0.3 * h) : int(0.42 * h), int(0.2 * w) : int(0.8 * w)] = True  # sleeves
    depth = np.where(cloth, depth_of_plane(cloth_height), depth)
    if with_gripper:
        gripper = (u - 0.15 * w) ** 2 + (v - 0.15 * h) ** 2 < (0.06 * w) ** 2
        depth = np.where(gripper, depth_of_plane(0.25), depth)
    depth = depth + np.random.default_rng(seed).normal(0, noise, depth.shape)
    color = np.full((h, w, 3), 90, np.uint8)
    color[cloth] = (200, 40, 40)
    frame = RGBDFrame(color=color, depth=depth.astype(np.float32), intrinsics=k, stamp_ns=1, frame_number=0)
    return frame, cloth
