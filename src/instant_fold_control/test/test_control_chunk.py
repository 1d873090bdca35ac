"""Chunk semantics (ABSOLUTE vs DELTA, receding horizon) and linear interpolation."""

from __future__ import annotations

import numpy as np
import pytest

from instant_fold_control.chunk import Chunk, ChunkError, Trajectory
from instant_fold_core.contracts import ChunkRepresentation

REFERENCE = np.array([[-0.2, 0.0, 0.8], [0.2, 0.0, 0.8]])


def _chunk(positions: np.ndarray, representation: int, steps: int, openness: np.ndarray | None = None) -> Chunk:
    h = len(positions)
    return Chunk(positions, np.ones((h, 2)) if openness is None else openness, representation, steps, 0.1)


def test_absolute_executes_only_the_first_steps() -> None:
    positions = np.random.default_rng(0).uniform(-0.3, 0.3, (8, 2, 3))
    waypoints, openness = _chunk(positions, ChunkRepresentation.ABSOLUTE, 4).waypoints(REFERENCE)
    assert np.array_equal(waypoints, positions[:4]) and openness.shape == (4, 2)


def test_delta_accumulates_from_the_reference_state() -> None:
    """Step 0 is relative to the predicted-from state, step h to the target of step h-1."""
    deltas = np.zeros((4, 2, 3))
    deltas[:, 0, 0] = 0.01  # left arm moves +1 cm in x every step
    deltas[:, 1, 2] = -0.02  # right arm moves 2 cm towards the camera every step
    waypoints, _ = _chunk(deltas, ChunkRepresentation.DELTA, 3).waypoints(REFERENCE)
    assert np.allclose(waypoints[:, 0, 0], [-0.19, -0.18, -0.17])
    assert np.allclose(waypoints[:, 1, 2], [0.78, 0.76, 0.74])
    assert np.allclose(waypoints[:, 0, 1:], REFERENCE[0, 1:]) and np.allclose(waypoints[:, 1, :2], REFERENCE[1, :2])


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


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"positions": np.full((4, 2, 3), np.nan)}, r"chunk.positions: non-finite values at step\(s\) \[0, 1, 2, 3\]"),
        ({"openness": np.full((4, 2), 2.0)}, r"chunk.openness: values must be in \[0, 1\]"),
        ({"steps_to_execute": 5}, r"steps_to_execute: must be in \[1, 4\]"),
        ({"step_duration": 0.0}, "step_duration: must be positive"),
        ({"representation": 7}, "representation: unknown value 7"),
        ({"positions": np.zeros((4, 3))}, r"expected shape \(H, 2, 3\)"),
    ],
)
def test_malformed_chunks_name_the_field(change: dict, message: str) -> None:
    fields = {
        "positions": np.zeros((4, 2, 3)),
        "openness": np.ones((4, 2)),
        "representation": ChunkRepresentation.DELTA,
    }
    fields |= {"steps_to_execute": 2, "step_duration": 0.1} | change
    with pytest.raises(ChunkError, match=message):
        Chunk(**fields).validate()


def test_one_nan_step_is_reported_by_index() -> None:
    positions = np.zeros((4, 2, 3))
    positions[2, 1, 0] = np.inf
    with pytest.raises(ChunkError, match=r"step\(s\) \[2\]"):
        _chunk(positions, ChunkRepresentation.DELTA, 2).validate()
