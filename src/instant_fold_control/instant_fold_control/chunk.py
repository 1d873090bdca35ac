"""Action chunks -> timed camera-frame trajectories (receding horizon, linear interpolation).

Semantics follow `ActionChunk.msg`: positions are ABSOLUTE targets, or DELTA displacements where
step 0 is relative to the state the chunk was predicted from and step h to the target of step
h-1. Only the first `steps_to_execute` steps are executed, one every `step_duration` seconds,
linearly interpolated from where the arms are being commanded when the chunk starts (the paper
interpolates between actions for smooth execution; orientation is held fixed elsewhere).

Choice (the paper is silent): a step's gripper openness is applied when its position is
*reached*, so a grasp closes at the grasp point rather than on the way there.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from instant_fold_core.contracts import ChunkRepresentation


class ChunkError(ValueError):
    """A chunk is malformed or not executable; the message names the field."""


@dataclass(frozen=True)
class Chunk:
    """H dual-arm steps in the camera frame: positions [H, 2, 3] (m), openness [H, 2] in [0, 1]."""

    positions: np.ndarray
    openness: np.ndarray
    representation: int
    steps_to_execute: int
    step_duration: float

    def validate(self) -> None:
        """Raise ChunkError naming the first bad field (shape, range, NaN/inf)."""
        pos, opn = np.asarray(self.positions), np.asarray(self.openness)
        if pos.ndim != 3 or pos.shape[1:] != (2, 3) or pos.shape[0] < 1:
            raise ChunkError(f"chunk.positions: expected shape (H, 2, 3) with H >= 1, got {pos.shape}")
        if opn.shape != pos.shape[:2]:
            raise ChunkError(f"chunk.openness: expected shape {pos.shape[:2]}, got {opn.shape}")
        for name, arr in (("positions", pos), ("openness", opn)):
            bad = ~np.isfinite(arr)
            if bad.any():
                steps = sorted({int(i) for i in np.argwhere(bad)[:, 0]})
                raise ChunkError(f"chunk.{name}: non-finite values at step(s) {steps}")
        if ((opn < 0) | (opn > 1)).any():
            raise ChunkError("chunk.openness: values must be in [0, 1]")
        if self.representation not in tuple(ChunkRepresentation):
            raise ChunkError(f"chunk.representation: unknown value {self.representation}")
        if not 1 <= self.steps_to_execute <= pos.shape[0]:
            raise ChunkError(f"chunk.steps_to_execute: must be in [1, {pos.shape[0]}], got {self.steps_to_execute}")
        if not (np.isfinite(self.step_duration) and self.step_duration > 0):
            raise ChunkError(f"chunk.step_duration: must be positive, got {self.step_duration}")

    def waypoints(self, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Absolute targets of the executed steps: positions [k, 2, 3], openness [k, 2].

        Args:
            reference: [2, 3] positions of the state the chunk was predicted from (used by DELTA).
        """
        self.validate()
        k = self.steps_to_execute
        steps = np.asarray(self.positions, dtype=np.float64)[:k]
        if self.representation == ChunkRepresentation.DELTA:
            steps = np.asarray(reference, dtype=np.float64)[None] + np.cumsum(steps, axis=0)
        return steps, np.asarray(self.openness, dtype=np.float64)[:k]


@dataclass(frozen=True)
class Trajectory:
    """Waypoints reached at start_time + (i + 1) * step_duration, linear in between."""

    start_time: float
    start: np.ndarray  # [2, 3]
    positions: np.ndarray  # [k, 2, 3]
    openness: np.ndarray  # [k, 2]
    step_duration: float

    @property
    def end_time(self) -> float:
        return self.start_time + len(self.positions) * self.step_duration

    def sample(self, t: float) -> tuple[np.ndarray, int]:
        """Position [2, 3] at time t, and how many waypoints have been reached by then."""
        s = (t - self.start_time) / self.step_duration
        if s <= 0:
            return self.start.copy(), 0
        k = len(self.positions)
        if s >= k:
            return self.positions[-1].copy(), k
        i = int(np.floor(s))
        a = self.start if i == 0 else self.positions[i - 1]
        b = self.positions[i]
        return a + (s - i) * (b - a), i

    def min_arm_distance(self) -> float:
        """Smallest distance between the two arms along the whole (synchronous) path."""
        points = np.concatenate([self.start[None], self.positions])
        d = points[:, 0] - points[:, 1]  # left - right per knot
        best = float(np.linalg.norm(d[0]))
        for d0, d1 in itertools.pairwise(d):
            v = d1 - d0
            vv = float(v @ v)
            s = 0.0 if vv == 0 else float(np.clip(-(d0 @ v) / vv, 0.0, 1.0))
            best = min(best, float(np.linalg.norm(d0 + s * v)))
        return best
