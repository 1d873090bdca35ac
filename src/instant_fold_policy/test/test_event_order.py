"""The arms' gripper events held to the demonstration's order (`event_order`, `FoldLoopConfig.event_order`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from instant_fold_core.contracts import ActionChunk, ChunkRepresentation
from instant_fold_core.errors import ConfigError
from instant_fold_learning.policy.progress import event_counts
from instant_fold_policy.event_order import EventSchedule, first_event_steps
from instant_fold_policy.fold_loop import FoldLoop, FoldLoopConfig

HOME = np.array([[-0.3, 0.1, 0.9], [0.3, 0.1, 0.9]])


def keyframes(left: list[int], right: list[int]) -> np.ndarray:
    """Keyframe arm states [K, 2, 4] with the given gripper openness per keyframe (1 open, 0 closed)."""
    k = np.zeros((len(left), 2, 4))
    k[:, 0, :3], k[:, 1, :3] = HOME[0], HOME[1]
    k[:, 0, 3], k[:, 1, 3] = left, right
    return k


#: Left carries (grasp, release), then the right: a shoulders-down fold.
ONE_THEN_OTHER = keyframes([1, 0, 1, 1, 1], [1, 1, 1, 0, 1])
#: Both arms grasp in one keyframe and release in the next: a bimanual side fold.
TOGETHER = keyframes([1, 0, 1], [1, 0, 1])


def test_the_schedule_counts_events_as_the_policy_reads_them() -> None:
    demo = keyframes([0, 0, 1, 0, 1, 1], [1, 0, 0, 1, 1, 0])  # a start closed counts one event
    expected = event_counts(torch.from_numpy(demo)).numpy()
    np.testing.assert_array_equal(EventSchedule.from_keypose(demo).counts, expected)


@pytest.mark.parametrize("bad", [np.zeros((0, 2, 4)), np.zeros((3, 2, 3)), np.full((2, 2, 4), np.nan)])
def test_a_malformed_demonstration_has_no_schedule(bad: np.ndarray) -> None:
    with pytest.raises(ValueError):
        EventSchedule.from_keypose(bad)


def test_an_arm_waits_for_the_events_the_demonstration_makes_before_its_own() -> None:
    s = EventSchedule.from_keypose(ONE_THEN_OTHER)
    both = np.array([True, True])
    # Nothing made: the left may grasp, the right waits for the left's grasp and release.
    np.testing.assert_array_equal(s.held(np.array([0, 0]), both), [False, True])
    np.testing.assert_array_equal(s.held(np.array([1, 0]), both), [False, True])
    np.testing.assert_array_equal(s.held(np.array([2, 0]), both), [False, False])
    # An arm whose chunk makes no event is never held.
    np.testing.assert_array_equal(s.held(np.array([0, 0]), np.array([True, False])), [False, False])


def test_events_of_one_keyframe_wait_for_each_other() -> None:
    s = EventSchedule.from_keypose(TOGETHER)
    for made in ([0, 0], [1, 1]):  # the grasps, then the releases
        made_ = np.array(made)
        np.testing.assert_array_equal(s.held(made_, np.array([True, False])), [True, False])
        np.testing.assert_array_equal(s.held(made_, np.array([False, True])), [False, True])
        np.testing.assert_array_equal(s.held(made_, np.array([True, True])), [False, False])
    # The other arm went first anyway (its wait ran out): this one follows at once.
    np.testing.assert_array_equal(s.held(np.array([0, 1]), np.array([True, False])), [False, False])


def test_events_past_the_demonstrations_never_wait() -> None:
    s = EventSchedule.from_keypose(ONE_THEN_OTHER)
    np.testing.assert_array_equal(s.held(np.array([0, 2]), np.array([True, True])), [False, False])


def test_first_event_steps_per_arm() -> None:
    openness = np.array([[1.0, 0.0], [0.2, 0.0], [0.1, 1.0]])
    np.testing.assert_array_equal(first_event_steps(openness, np.array([False, False])), [1, 0])
    np.testing.assert_array_equal(first_event_steps(openness, np.array([False, True])), [1, 2])
    np.testing.assert_array_equal(first_event_steps(np.ones((3, 2)), np.array([False, False])), [-1, -1])


def ordered_loop(demo: np.ndarray, wait: int = 60) -> FoldLoop[str]:
    loop: FoldLoop[str] = FoldLoop(
        FoldLoopConfig(event_order=True, event_order_wait=wait),
        HOME,
        expected_events=4,
        schedule=EventSchedule.from_keypose(demo),
    )
    arms = np.concatenate([HOME, np.ones((2, 1))], axis=1)
    loop.on_tokens("tokens", 0)
    loop.on_state(arms, 0)
    loop.next(0.0)
    return loop


def descending_chunk(close_left: bool, close_right: bool, representation=ChunkRepresentation.ABSOLUTE) -> ActionChunk:
    """Four steps down from home; each arm told closes from step 2."""
    drop = np.array([0.0, 0.0, -0.1])[None, None] * np.arange(1, 5)[:, None, None]
    positions = HOME[None] + drop
    if representation == ChunkRepresentation.DELTA:
        positions = np.diff(positions, axis=0, prepend=HOME[None])
    openness = np.ones((4, 2))
    openness[2:, 0] = 0.0 if close_left else 1.0
    openness[2:, 1] = 0.0 if close_right else 1.0
    return ActionChunk(positions.astype(np.float32), openness.astype(np.float32), 4, 0.05, representation)


@pytest.mark.parametrize("representation", list(ChunkRepresentation))
def test_the_fold_loop_holds_an_arm_where_its_event_would_be_made(representation) -> None:
    loop = ordered_loop(ONE_THEN_OTHER)
    sent = loop.steer(descending_chunk(True, True, representation)).chunk
    positions = sent.absolute_positions(HOME)
    # The left closes as the policy said; the right stays open where its close would have been.
    np.testing.assert_array_equal(sent.openness[:, 0], [1, 1, 0, 0])
    np.testing.assert_array_equal(sent.openness[:, 1], [1, 1, 1, 1])
    np.testing.assert_allclose(positions[:, 0, 2], HOME[0, 2] - 0.1 * np.arange(1, 5), atol=1e-6)
    np.testing.assert_allclose(positions[2:, 1, 2], HOME[1, 2] - 0.3, atol=1e-6)
    np.testing.assert_allclose(positions[:2, 1, 2], HOME[1, 2] - 0.1 * np.arange(1, 3), atol=1e-6)
    assert loop.events_ordered == 1


def test_the_fold_loop_lets_the_held_arm_go_once_the_other_has_made_its_events() -> None:
    loop = ordered_loop(ONE_THEN_OTHER)
    for left in (0.0, 1.0):  # the left arm grasps, then lets go
        loop.on_state(np.concatenate([HOME, [[left], [1.0]]], axis=1), 1)
    assert loop.arm_events.tolist() == [2, 0]
    chunk = descending_chunk(False, True)
    assert loop.steer(chunk).chunk is chunk


def test_a_hold_ends_after_the_wait_and_the_fold_goes_on_in_the_policys_order() -> None:
    loop = ordered_loop(ONE_THEN_OTHER, wait=2)
    right_first = descending_chunk(False, True)
    held = [loop.steer(right_first).chunk is not right_first for _ in range(4)]
    assert held == [True, True, False, False]
    assert loop.order_waits_expired == 1 and loop.events_ordered == 2
    # The right arm grasped first: its release is not held for the left arm's carry either.
    loop.on_state(np.concatenate([HOME, [[1.0], [0.0]]], axis=1), 1)
    release = descending_chunk(False, False)  # open grippers: the right arm lets go
    assert loop.steer(release).chunk is release


def test_a_wait_counts_queries_at_one_event() -> None:
    """Queries held at the left arm's grasp do not count towards its release's wait."""
    loop = ordered_loop(TOGETHER, wait=2)
    grasp = descending_chunk(True, False)
    assert [loop.steer(grasp).chunk is not grasp for _ in range(2)] == [True, True]
    both = descending_chunk(True, True)
    assert loop.steer(both).chunk is both
    loop.on_state(np.concatenate([HOME, [[0.0], [0.0]]], axis=1), 1)
    release = ActionChunk(both.positions, np.array([[1.0, 0.0]] * 4, np.float32), 4, 0.05)
    assert [loop.steer(release).chunk is not release for _ in range(2)] == [True, True]
    assert loop.order_waits_expired == 0


def test_without_event_order_the_schedule_is_not_read() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(), HOME, 4, schedule=EventSchedule.from_keypose(ONE_THEN_OTHER))
    loop.on_tokens("tokens", 0)
    loop.on_state(np.concatenate([HOME, np.ones((2, 1))], axis=1), 0)
    chunk = descending_chunk(True, True)
    assert loop.steer(chunk).chunk is chunk


def test_a_wait_that_is_not_a_count_is_refused() -> None:
    with pytest.raises(ConfigError, match="event_order_wait"):
        FoldLoopConfig(event_order_wait=-1)
