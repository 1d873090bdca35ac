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


def test_the_partner_is_the_arm_whose_event_of_the_same_keyframe_does_not_come() -> None:
    together, one_then_other = EventSchedule.from_keypose(TOGETHER), EventSchedule.from_keypose(ONE_THEN_OTHER)
    left_only, both = np.array([True, False]), np.array([True, True])
    for made in ([0, 0], [1, 1]):  # the grasps, then the releases
        np.testing.assert_array_equal(together.partners(np.array(made), left_only), [False, True])
        np.testing.assert_array_equal(together.partners(np.array(made), both), [False, False])
    # The right's grasp comes after the left's carry, not with it; and none is due past the demonstration.
    np.testing.assert_array_equal(one_then_other.partners(np.array([0, 0]), left_only), [False, False])
    np.testing.assert_array_equal(together.partners(np.array([2, 2]), left_only), [False, False])


def test_events_past_the_demonstrations_never_wait() -> None:
    s = EventSchedule.from_keypose(ONE_THEN_OTHER)
    np.testing.assert_array_equal(s.held(np.array([0, 2]), np.array([True, True])), [False, False])


def test_first_event_steps_per_arm() -> None:
    openness = np.array([[1.0, 0.0], [0.2, 0.0], [0.1, 1.0]])
    np.testing.assert_array_equal(first_event_steps(openness, np.array([False, False])), [1, 0])
    np.testing.assert_array_equal(first_event_steps(openness, np.array([False, True])), [1, 2])
    np.testing.assert_array_equal(first_event_steps(np.ones((3, 2)), np.array([False, False])), [-1, -1])


def ordered_loop(demo: np.ndarray, wait: int = 60, call: bool = False) -> FoldLoop[str]:
    loop: FoldLoop[str] = FoldLoop(
        FoldLoopConfig(event_order=True, event_order_wait=wait, event_order_call=call),
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


def at_home(openness: list[list[float]], keypose: np.ndarray) -> ActionChunk:
    """Four steps with both arms at home, the given gripper openness per step ([left, right]; the
    last row repeated to four), the first two executed, and the keypose [2, 4] the chunk reports."""
    rows = np.array(openness + openness[-1:] * (4 - len(openness)), np.float32)
    return ActionChunk(
        np.repeat(HOME[None], 4, 0).astype(np.float32), rows, 2, 0.05, keypose=keypose.astype(np.float32)
    )


#: Grasp keyposes: the left arm's under its home, the right's 0.025 m beside its home (one step at 0.5 m/s).
GRASPS = np.array([[-0.3, 0.1, 0.8, 0.0], [0.325, 0.1, 0.9, 0.0]])


@pytest.mark.parametrize("call", [False, True])
def test_a_called_partner_goes_straight_to_its_keypose_and_makes_its_event_there(call: bool) -> None:
    loop = ordered_loop(TOGETHER, call=call)
    sent = loop.steer(at_home([[1, 1], [0, 1]], GRASPS)).chunk  # the left closes, the right stays open
    positions = sent.absolute_positions(HOME)
    if not call:  # the left arm waits for a right grasp the policy does not make
        np.testing.assert_array_equal(sent.openness[:, 0], [1, 1, 1, 1])
        np.testing.assert_array_equal(sent.openness[:, 1], [1, 1, 1, 1])
        assert loop.partners_called == 0 and loop.events_ordered == 1
        return
    # The right arm arrives at its grasp in one step and closes there; the left closes as the policy said.
    np.testing.assert_allclose(positions[:, 1], np.repeat(GRASPS[1:, :3], 4, 0), atol=1e-6)
    np.testing.assert_array_equal(sent.openness[:, 1], [0, 0, 0, 0])
    np.testing.assert_array_equal(sent.openness[:, 0], [1, 0, 0, 0])
    assert loop.partners_called == 1 and loop.events_ordered == 0


def test_a_partner_farther_than_the_executed_steps_arrives_over_several_queries() -> None:
    loop = ordered_loop(TOGETHER, call=True)
    far = GRASPS.copy()
    far[1, 0] += 0.05  # 0.075 m: three steps, two executed per query
    sent = loop.steer(at_home([[0, 1]], far)).chunk
    positions = sent.absolute_positions(HOME)
    np.testing.assert_allclose(positions[:, 1, 0], HOME[1, 0] + 0.025 * np.array([1, 2, 3, 3]), atol=1e-6)
    np.testing.assert_array_equal(sent.openness[:, 1], [1, 1, 0, 0])
    # Its close lies past the executed steps: the left arm waits at its own, open, for the next query.
    np.testing.assert_array_equal(sent.openness[:, 0], [1, 1, 1, 1])
    assert loop.partners_called == 1 and loop.events_ordered == 1


def test_a_carrying_partner_is_not_called_to_its_release() -> None:
    loop = ordered_loop(TOGETHER, call=True)
    loop.on_state(np.concatenate([HOME, np.zeros((2, 1))], axis=1), 1)  # both grasped
    releases = GRASPS.copy()
    releases[:, 3] = 1.0
    sent = loop.steer(at_home([[1, 0]], releases)).chunk  # the left lets go
    np.testing.assert_array_equal(sent.openness[:, 1], [0, 0, 0, 0])  # the right carries on as the policy said
    np.testing.assert_array_equal(sent.openness[:, 0], [0, 0, 0, 0])  # the left waits, closed
    assert loop.partners_called == 0 and loop.events_ordered == 1


def test_a_partner_whose_keypose_is_not_its_event_is_not_called() -> None:
    loop = ordered_loop(TOGETHER, call=True)
    open_keypose = GRASPS.copy()
    open_keypose[:, 3] = 1.0  # the policy reports no grasp for the right arm
    sent = loop.steer(at_home([[0, 1]], open_keypose)).chunk
    np.testing.assert_array_equal(sent.openness[:, 1], [1, 1, 1, 1])
    assert loop.partners_called == 0 and loop.events_ordered == 1


def test_without_event_order_the_schedule_is_not_read() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(), HOME, 4, schedule=EventSchedule.from_keypose(ONE_THEN_OTHER))
    loop.on_tokens("tokens", 0)
    loop.on_state(np.concatenate([HOME, np.ones((2, 1))], axis=1), 0)
    chunk = descending_chunk(True, True)
    assert loop.steer(chunk).chunk is chunk


def test_a_wait_that_is_not_a_count_is_refused() -> None:
    with pytest.raises(ConfigError, match="event_order_wait"):
        FoldLoopConfig(event_order_wait=-1)
