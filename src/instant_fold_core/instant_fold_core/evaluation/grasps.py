"""First grasps: where each arm first closes its gripper, and how far from the oracle's.

Geom. and C-SR@95 judge where the garment ends up, not whether the arms went to the right places
to get there. The first grasp of each arm is where a fold is decided (an arm that closes on the
wrong part folds the wrong part) and the most direct thing to compare with the scripted oracle
from the same start: `first_grasps` takes it from a fold's grasp-release episodes (the gripper's
position at the frame it closes), `GraspReference` holds the oracle's, and `first_grasp_error`
measures the distance between them in the table plane (xy) and in 3D.

**Choice**, the oracle's first grasp of an arm is the coordinate-wise *median* of the first grasps
of its K executions: with the execution noise (a Gaussian pick offset per execution) the median
estimates the nominal pick point as the mean does, but an execution whose arm went somewhere else
first (the shipped CPU bank has a few, 20+ cm off) does not drag it away; the distance to the
*nearest* execution would shrink as K grows and reward a larger bank. An arm is expected to grasp
when more than half of the executions grasp with it; a fold that never grasps with an expected
arm *missed* it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .events import GraspEpisode, MetricsError

#: Distance (m) within which a first grasp counts as landed (`within_5cm` of the summary).
WITHIN_M = 0.05


def first_grasps(episodes: Sequence[GraspEpisode]) -> np.ndarray:
    """[2, 3] position of each arm at its first grasp; a NaN row for an arm that never grasped."""
    out = np.full((2, 3), np.nan)
    for e in sorted(episodes, key=lambda e: e.grasp_frame):
        if np.isnan(out[e.arm]).all():
            out[e.arm] = e.grasp
    return out


@dataclass(frozen=True)
class FirstGraspError:
    """One fold's first grasps against the oracle's, per arm (left, right).

    `xy` and `xyz` are distances (m, after the caller's scale) for the arms that the oracle grasps
    with and the fold grasped with, else None."""

    expected: tuple[bool, bool]  # the oracle's executions grasp with this arm
    grasped: tuple[bool, bool]  # the fold grasped with this arm
    xy: tuple[float | None, float | None]
    xyz: tuple[float | None, float | None]

    def to_json(self) -> dict[str, Any]:
        return {
            "expected": list(self.expected),
            "grasped": list(self.grasped),
            "xy_m": list(self.xy),
            "xyz_m": list(self.xyz),
        }


@dataclass(frozen=True)
class GraspReference:
    """The oracle's first grasp of each arm for one (start, context): [2, 3], NaN rows for the
    arms the oracle does not grasp with (module docstring)."""

    position: np.ndarray

    @classmethod
    def from_runs(cls, first: Sequence[np.ndarray]) -> GraspReference:
        """From the `first_grasps` [2, 3] of each of the K oracle executions."""
        runs = np.asarray(first, dtype=np.float64)
        if runs.ndim != 3 or runs.shape[1:] != (2, 3) or len(runs) == 0:
            raise MetricsError(f"first grasps: expected [K > 0, 2, 3], got {runs.shape}")
        position = np.full((2, 3), np.nan)
        for arm in range(2):
            grasped = runs[:, arm][~np.isnan(runs[:, arm]).any(axis=1)]
            if 2 * len(grasped) > len(runs):
                position[arm] = np.median(grasped, axis=0)
        return cls(position)

    @property
    def expected(self) -> tuple[bool, bool]:
        left, right = (not np.isnan(p).any() for p in self.position)
        return left, right

    def error(self, first: np.ndarray, scale: float = 1.0) -> FirstGraspError:
        """Distances of a fold's `first_grasps` [2, 3] to the reference, times `scale` (what turns
        the positions' units into metres)."""
        f = np.asarray(first, dtype=np.float64)
        if f.shape != (2, 3):
            raise MetricsError(f"first grasps: expected [2, 3], got {f.shape}")
        grasped = [not np.isnan(p).any() for p in f]
        xy: list[float | None] = [None, None]
        xyz: list[float | None] = [None, None]
        for arm in range(2):
            if self.expected[arm] and grasped[arm]:
                d = f[arm] - self.position[arm]
                xy[arm] = float(np.linalg.norm(d[:2]) * scale)
                xyz[arm] = float(np.linalg.norm(d) * scale)
        return FirstGraspError(self.expected, (grasped[0], grasped[1]), (xy[0], xy[1]), (xyz[0], xyz[1]))


def _stats(values: list[float]) -> dict[str, float] | None:
    return {"mean": float(np.mean(values)), "median": float(np.median(values))} if values else None


def summarize_first_grasps(errors: Sequence[FirstGraspError]) -> dict[str, Any]:
    """Pooled over (fold, expected arm): `arms` expected, `measured` (the fold grasped with it),
    `missed`, mean and median of the measured xy and xyz distances (m), and `within_5cm`: the
    share of expected arms whose first grasp landed within `WITHIN_M` in xy (a missed grasp is
    not within). None where there is nothing to average."""
    expected = [(e, arm) for e in errors for arm in range(2) if e.expected[arm]]
    xy = [v for e, arm in expected if (v := e.xy[arm]) is not None]
    xyz = [v for e, arm in expected if (v := e.xyz[arm]) is not None]
    return {
        "arms": len(expected),
        "measured": len(xy),
        "missed": len(expected) - len(xy),
        "xy_m": _stats(xy),
        "xyz_m": _stats(xyz),
        "within_5cm": (sum(v <= WITHIN_M for v in xy) / len(expected)) if expected else None,
    }
