"""Executed chunks as timed trajectories: linear interpolation, the closest approach of the arms.
(The chunk's own semantics, ABSOLUTE vs DELTA, are tested with the contract in the core.)"""

from __future__ import annotations

import numpy as np
import pytest

from instant_fold_control.chunk import Trajectory

REFERENCE = np.array([[-0.2, 0.0, 0.8], [0.2, 0.0, 0.8]])


def test_interpolation_is_linear_between_steps_and_holds_at_the_end() -> None:
    start = REFERENCE.copy()
    wp = np.stack([start + 0.1, start + 0.3])
    traj = Trajectory(10.0, start, wp, np.ones((2, 2)), 0.5)
    assert np.allclose(traj.sample(10.0)[0], start)
    assert np.allclose(traj.sample(10.25)[0], start + 0.05)  # half way to step 0
    pos, reached = traj.sample(10.75)
    assert np.allclose(pos, start + 0.2) and reached == 1  # half way from step 0 to step 1
    pos, reached = traj.sample(99.0)
    assert np.allclose(pos, wp[-1]) and reached == 2
    assert traj.end_time == pytest.approx(11.0)


def test_min_arm_distance_matches_dense_sampling() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        traj = Trajectory(0.0, rng.uniform(-0.3, 0.3, (2, 3)), rng.uniform(-0.3, 0.3, (3, 2, 3)), np.ones((3, 2)), 0.1)
        dense = min(np.linalg.norm(np.subtract(*traj.sample(t)[0])) for t in np.linspace(0, traj.end_time, 3001))
        assert traj.min_arm_distance() == pytest.approx(dense, abs=1e-3)
        assert traj.min_arm_distance() <= dense + 1e-12
