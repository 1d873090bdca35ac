"""A simulated fold's record, read from the scene: the start's `InitInfo` and the `FoldRecord`.

The record types are the core's (`instant_fold_core.fold_record`, the contract between the
simulator and the evaluation); here is how the simulator fills them from a `ClothScene`.
"""

from __future__ import annotations

import numpy as np

from instant_fold_core.fold_record import FoldRecord, InitInfo, grasp_episodes

from .coverage import Coverage
from .scene import ClothScene


def init_info(scene: ClothScene, keypoint_ids: np.ndarray) -> InitInfo:
    """The start state of a same-init family: `scene`'s keypoints now, its garment size, its fps."""
    size = scene.garment.size() * scene.config.garment_scale
    return InitInfo(scene.positions()[keypoint_ids].astype(np.float64), float(size), float(scene.config.fps))


def record_fold(
    trace: list[np.ndarray] | np.ndarray, scene: ClothScene, keypoint_ids: np.ndarray, coverage: Coverage
) -> FoldRecord:
    """The record of the fold that produced `trace` (per-frame [2, 4] gripper states) and left
    `scene` in its final state; `coverage` holds the start footprint."""
    trace_arr = np.asarray(trace, dtype=np.float64)
    positions = scene.positions()
    return FoldRecord(
        tuple(grasp_episodes(trace_arr)),
        positions[keypoint_ids].astype(np.float64),
        coverage.fold_rate(positions),
        len(trace_arr) - 1,
    )
