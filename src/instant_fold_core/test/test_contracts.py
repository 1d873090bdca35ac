"""The action-chunk contract: valid by construction, every broken invariant named by field and
kind (NaN/inf apart), ABSOLUTE vs DELTA waypoints, and immutable once built."""

from __future__ import annotations

import numpy as np
import pytest

from instant_fold_core.contracts import ActionChunk, ChunkRepresentation
from instant_fold_core.errors import InvalidInputError, NonFiniteError

REFERENCE = np.array([[-0.2, 0.0, 0.8], [0.2, 0.0, 0.8]])


def _chunk(positions: np.ndarray, representation: int, steps: int) -> ActionChunk:
    return ActionChunk(positions, np.ones((len(positions), 2)), steps, 0.1, representation)


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


@pytest.mark.parametrize(
    ("change", "kind", "message"),
    [
        (
            {"positions": np.full((4, 2, 3), np.nan)},
            NonFiniteError,
            r"positions: NaN or infinite values at step\(s\) \[0, 1, 2, 3\]",
        ),
        ({"openness": np.full((4, 2), np.inf)}, NonFiniteError, "openness: NaN or infinite"),
        ({"keypose": np.full((2, 4), np.nan)}, NonFiniteError, "keypose: NaN or infinite"),
        ({"openness": np.full((4, 2), 2.0)}, InvalidInputError, r"openness: values must be in \[0, 1\]"),
        ({"steps_to_execute": 5}, InvalidInputError, r"steps_to_execute: must be in \[1, 4\]"),
        ({"steps_to_execute": 0}, InvalidInputError, r"steps_to_execute: must be in \[1, 4\]"),
        ({"step_duration": 0.0}, InvalidInputError, "step_duration: must be positive"),
        ({"step_duration": np.nan}, InvalidInputError, "step_duration: must be positive"),
        ({"representation": 7}, InvalidInputError, "representation: unknown value 7"),
        ({"positions": np.zeros((4, 3))}, InvalidInputError, r"positions: expected shape \(H, 2, 3\)"),
        (
            {"positions": np.zeros((0, 2, 3)), "openness": np.zeros((0, 2))},
            InvalidInputError,
            r"positions: .* with H >= 1, got \(0, 2, 3\)",
        ),
        ({"openness": np.ones((3, 2))}, InvalidInputError, r"openness: expected shape \(4, 2\)"),
        ({"keypose": np.zeros((2, 3))}, InvalidInputError, r"keypose: expected shape \(2, 4\)"),
        ({"keypose": np.full((2, 4), 2.0)}, InvalidInputError, r"keypose: openness must be in \[0, 1\]"),
    ],
)
def test_a_chunk_that_breaks_the_contract_is_never_built(change: dict, kind: type, message: str) -> None:
    fields = {
        "positions": np.zeros((4, 2, 3)),
        "openness": np.ones((4, 2)),
        "steps_to_execute": 2,
        "step_duration": 0.1,
        "representation": ChunkRepresentation.DELTA,
    } | change
    with pytest.raises(kind, match="ActionChunk." + message) as caught:
        ActionChunk(**fields)
    # NaN/inf is the only kind the controller counts apart.
    assert isinstance(caught.value, NonFiniteError) == (kind is NonFiniteError)


def test_one_nan_step_is_reported_by_index() -> None:
    positions = np.zeros((4, 2, 3))
    positions[2, 1, 0] = np.inf
    with pytest.raises(NonFiniteError, match=r"step\(s\) \[2\]"):
        _chunk(positions, ChunkRepresentation.DELTA, 2)


def test_a_built_chunk_cannot_be_changed_behind_its_back() -> None:
    positions = np.zeros((2, 2, 3), np.float32)
    chunk = _chunk(positions, ChunkRepresentation.ABSOLUTE, 1)
    positions[0, 0, 0] = np.nan  # the caller's array is not the chunk's
    assert np.isfinite(chunk.positions).all() and chunk.positions.dtype == np.float32
    with pytest.raises(ValueError, match="read-only"):
        chunk.positions[0, 0, 0] = np.nan
    assert chunk.representation is ChunkRepresentation.ABSOLUTE


def test_targets_joins_positions_and_openness() -> None:
    targets = np.random.default_rng(1).uniform(0, 1, (3, 2, 4)).astype(np.float32)
    chunk = ActionChunk(targets[..., :3], targets[..., 3], 2, 0.05)
    assert chunk.representation is ChunkRepresentation.ABSOLUTE and chunk.horizon == 3
    np.testing.assert_array_equal(chunk.targets, targets)
