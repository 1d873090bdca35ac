"""Action chunks -> timed camera-frame trajectories (receding horizon, linear interpolation).

The chunk itself is the core's `instant_fold_core.contracts.ActionChunk` (valid by construction;
`ActionChunk.waypoints` resolves ABSOLUTE/DELTA). Only its first `steps_to_execute` steps are
executed, one every `step_duration` seconds, linearly interpolated from where the arms are being
commanded when the chunk starts (the paper interpolates between actions for smooth execution;
orientation is held fixed elsewhere).

Choice (the paper is silent): a step's gripper openness is applied when its position is
*reached*, so a grasp closes at the grasp point rather than on the way there.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np


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
