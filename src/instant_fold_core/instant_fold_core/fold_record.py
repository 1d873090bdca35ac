"""The record of a fold: what a simulator reports of it and what the evaluation scores.

Every fold the evaluation scores, a scripted oracle execution or a policy rollout, is reduced to a
`FoldRecord` (the grasp-release episodes of both grippers, each with the gripper's position at
grasp and release, which is where the first-grasp error comes from; the final semantic keypoints
and the fold rate) measured against the `InitInfo` of its start state (the start keypoints that
define the garment frame, the garment size that normalises distances, the frame rate). Both are a
few hundred bytes of JSON: the simulator writes them (`instant_fold_sim.outcome`, from its scene),
the sim node sends them to the main job, and an oracle bank is small enough to cache and ship;
the metrics (`instant_fold_evaluation`) are computed from them when a table is made, so a change
of metric never needs the simulator again. A contract between the simulator and the evaluation,
so it lives in the core, below both.

All positions are simulation-space metres in the scene's world frame (table plane = xy).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from instant_fold_core.contracts import gripper_closed
from instant_fold_core.errors import InvalidInputError


class MetricsError(InvalidInputError):
    """Input a metric cannot be computed from (wrong shape, non-finite, too few runs)."""


def finite_array(name: str, a: np.ndarray, shape: tuple[int | None, ...]) -> np.ndarray:
    """`a` as float64 after checking its shape (`None`: any size) and that every value is finite."""
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim != len(shape) or any(s is not None and s != d for s, d in zip(shape, arr.shape, strict=True)):
        raise MetricsError(f"{name}: expected shape {shape}, got {arr.shape}")
    if not np.isfinite(arr).all():
        raise MetricsError(f"{name}: contains NaN or infinite values")
    return arr


@dataclass(frozen=True)
class GraspEpisode:
    """One gripper closing and opening again: frames and world positions at grasp and release.

    `released` is False when the gripper was still closed at the end; the release fields then hold
    the last frame."""

    arm: int
    grasp_frame: int
    release_frame: int
    grasp: np.ndarray  # [3]
    release: np.ndarray  # [3]
    released: bool


def grasp_episodes(trace: np.ndarray) -> list[GraspEpisode]:
    """Episodes of a per-frame gripper trace [T, 2, 4] (x, y, z, openness), by grasp time then arm.

    A gripper is closed while `gripper_closed` says so."""
    tr = finite_array("trace", trace, (None, 2, 4))
    episodes = []
    for arm in range(2):
        closed = gripper_closed(tr[:, arm, 3])
        edges = np.diff(closed.astype(np.int8), prepend=0, append=0)
        for start, stop in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True):
            released = bool(stop < len(tr))
            end = int(stop) if released else len(tr) - 1
            episodes.append(
                GraspEpisode(arm, int(start), end, tr[start, arm, :3].copy(), tr[end, arm, :3].copy(), released)
            )
    return sorted(episodes, key=lambda e: (e.grasp_frame, e.arm))


@dataclass(frozen=True)
class InitInfo:
    """The start state of a same-init family: start keypoints [7, 3], garment size, fps."""

    start_keypoints: np.ndarray
    garment_size: float
    fps: float

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
