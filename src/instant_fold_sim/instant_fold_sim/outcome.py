"""What the evaluation keeps of a fold: its start, its gripper events and its final geometry.

Every fold scored by the evaluation, a scripted oracle execution or a policy rollout, is reduced
to a `FoldRecord` (the grasp-release episodes of both grippers, each with the gripper's position
at grasp and release, which is where the first-grasp error comes from; the final semantic
keypoints and the fold rate) measured against the `InitInfo` of its start state (the start keypoints that
define the garment frame, the garment size that normalises distances, the frame rate). Both are
a few hundred bytes of JSON, which is what makes an oracle bank small enough to cache and ship;
the metrics (`instant_fold_core.evaluation`) are computed from them when a table is made, so a
change of metric never needs the simulator again.

All positions are simulation-space metres in the scene's world frame (table plane = xy).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from instant_fold_core.evaluation.coverage import Coverage
from instant_fold_core.evaluation.events import GraspEpisode, grasp_episodes

from .scene import ClothScene


@dataclass(frozen=True)
class InitInfo:
    """The start state of a same-init family: start keypoints [7, 3], garment size, fps."""

    start_keypoints: np.ndarray
    garment_size: float
    fps: float

    @classmethod
    def of(cls, scene: ClothScene, keypoint_ids: np.ndarray) -> InitInfo:
        size = scene.garment.size() * scene.config.garment_scale
        return cls(scene.positions()[keypoint_ids].astype(np.float64), float(size), float(scene.config.fps))

    def to_json(self) -> dict[str, Any]:
        return {"start_keypoints": self.start_keypoints.tolist(), "garment_size": self.garment_size, "fps": self.fps}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> InitInfo:
        return cls(np.asarray(d["start_keypoints"], dtype=np.float64), float(d["garment_size"]), float(d["fps"]))


@dataclass(frozen=True)
class FoldRecord:
    """One fold's outcome: its grasp-release episodes, final keypoints [7, 3], fold rate, length."""

    episodes: tuple[GraspEpisode, ...]
    final_keypoints: np.ndarray
    fold_rate: float
    frames: int

    def to_json(self) -> dict[str, Any]:
        return {
            "episodes": [
                {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in asdict(e).items()}
                for e in self.episodes
            ],
            "final_keypoints": self.final_keypoints.tolist(),
            "fold_rate": self.fold_rate,
            "frames": self.frames,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FoldRecord:
        episodes = tuple(
            GraspEpisode(
                int(e["arm"]),
                int(e["grasp_frame"]),
                int(e["release_frame"]),
                np.asarray(e["grasp"], dtype=np.float64),
                np.asarray(e["release"], dtype=np.float64),
                bool(e["released"]),
            )
            for e in d["episodes"]
        )
        return cls(
            episodes, np.asarray(d["final_keypoints"], dtype=np.float64), float(d["fold_rate"]), int(d["frames"])
        )


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
