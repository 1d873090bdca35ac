"""The execute-fold state machine without ROS: freshness, event counting, every way a fold ends."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from instant_fold_core.contracts import ActionChunk, ChunkRepresentation, FoldOutcome, FoldPhase
from instant_fold_core.dataset.keyframes import arm_events, gripper_events
from instant_fold_core.errors import ConfigError
from instant_fold_learning.policy.progress import EventCounter, episode_event_counts
from instant_fold_policy.fold_loop import (
    NANOSECONDS,
    Finish,
    FoldLoop,
    FoldLoopConfig,
    Query,
    Wait,
)

HOME = np.array([[-0.3, 0.1, 0.9], [0.3, 0.1, 0.9]])
AWAY = (0.0, 0.0, 1.0)


def state(left=(-0.3, 0.1, 0.9), right=(0.3, 0.1, 0.9), open_left=1.0, open_right=1.0) -> np.ndarray:
    return np.array([[*left, open_left], [*right, open_right]])


def observe(loop: FoldLoop[str], s: np.ndarray, ns: int, tokens: str | None = None) -> None:
    """Tokens and an arm state taken at the same instant."""
    loop.on_tokens(tokens or f"tokens@{ns}", ns)
    loop.on_state(s, ns)


def query(loop: FoldLoop[str], now_s: float = 0.0) -> Query[str]:
    decision = loop.next(now_s)
    assert isinstance(decision, Query), decision
    return decision


# -- queries and freshness ----------------------------------------------------------------------


def test_home_at_start_is_not_a_finished_fold() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(), HOME)
    observe(loop, state(), 0, "first")
    decision = query(loop)
    assert decision.tokens == "first" and decision.tokens_ns == 0
    np.testing.assert_array_equal(decision.arm_state, state())
    assert loop.finished is None and loop.step == 0


def test_a_chunk_never_starts_before_the_observation_it_answers() -> None:
    """A host whose clock is behind the observation's stamp (a simulator's clock that has not yet
    ticked to the frame) sends the chunk "before" the frame: it starts executing at the frame."""
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(), HOME)
    observe(loop, state(), 5 * NANOSECONDS)
    query(loop)
    loop.chunk_sent(1 * NANOSECONDS, steps=1, step_duration_s=0.1, now_s=0.0)
    observe(loop, state(left=AWAY), 5 * NANOSECONDS + 50_000_000)  # 0.05 s after the frame: executing
    assert isinstance(loop.next(0.0), Wait)
    observe(loop, state(left=AWAY), 5 * NANOSECONDS + 100_000_000)
    assert query(loop).tokens_ns == 5 * NANOSECONDS + 100_000_000


def test_nothing_observed_waits_for_the_rest_of_the_timeout() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(observation_timeout_s=10.0), HOME, now_s=100.0)
    assert loop.next(103.0) == Wait(7.0)
    loop.on_tokens("tokens", 0)  # no arm state yet
    assert loop.next(104.0) == Wait(6.0)
    loop2: FoldLoop[str] = FoldLoop(FoldLoopConfig(observation_timeout_s=10.0), HOME, now_s=100.0)
    loop2.on_state(state(), 5)  # no tokens yet
    assert loop2.next(101.0) == Wait(9.0)


def test_freshness_follows_executed_steps_and_step_limit() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(max_steps=2), HOME)
    observe(loop, state(), 0)
    query(loop)
    loop.chunk_sent(10 * NANOSECONDS, steps=4, step_duration_s=0.1, now_s=1.0)
    assert loop.step == 1
    # taken before the chunk's 4 steps of 0.1 s were executed: stale
    observe(loop, state(left=AWAY), 10 * NANOSECONDS + int(0.39 * NANOSECONDS))
    assert isinstance(loop.next(1.5), Wait)
    observe(loop, state(left=AWAY), 10 * NANOSECONDS + int(0.4 * NANOSECONDS), "after")
    assert query(loop, 1.5).tokens == "after"
    loop.chunk_sent(11 * NANOSECONDS, steps=4, step_duration_s=0.1, now_s=2.0)
    assert isinstance(loop.next(2.0), Wait)  # the step limit waits for the last chunk's observation too
    observe(loop, state(left=AWAY), 12 * NANOSECONDS)
    assert loop.next(2.5) == Finish(FoldOutcome.STEP_LIMIT, "0 gripper events", hold=False)
    assert loop.step == 2


@pytest.mark.parametrize(("steps", "step_duration_s", "end_ns"), [(3, 0.1, 300_000_000), (3, 0.3, 900_000_000)])
def test_the_chunk_end_is_exact_to_the_nanosecond(steps: int, step_duration_s: float, end_ns: int) -> None:
    """3 * 0.1 s is 0.30000000000000004 and 3 * 0.3 s 0.8999999999999999 in floating point: the
    boundary still lies at 0.3 s and 0.9 s."""
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(), HOME)
    observe(loop, state(), 0)
    query(loop)
    loop.chunk_sent(NANOSECONDS, steps=steps, step_duration_s=step_duration_s, now_s=0.0)
    observe(loop, state(left=AWAY), NANOSECONDS + end_ns - 1)
    assert isinstance(loop.next(0.0), Wait)
    observe(loop, state(left=AWAY), NANOSECONDS + end_ns)
    assert query(loop).tokens_ns == NANOSECONDS + end_ns


def test_tokens_older_than_the_last_chunk_end_wait_even_with_a_fresh_state() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(), HOME)
    observe(loop, state(), 0)
    query(loop)
    loop.chunk_sent(0, steps=5, step_duration_s=0.1, now_s=0.0)  # executed by 0.5 s
    loop.on_tokens("old", 400_000_000)
    loop.on_state(state(left=AWAY), 900_000_000)
    assert isinstance(loop.next(0.1), Wait)
    loop.on_tokens("new", 500_000_000)
    decision = query(loop, 0.1)
    assert decision.tokens == "new" and decision.tokens_ns == 500_000_000
    np.testing.assert_array_equal(decision.arm_state, state(left=AWAY))


def test_a_state_older_than_the_tokens_waits_for_one_that_is_not() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(), HOME)
    loop.on_state(state(), 100)
    loop.on_tokens("frame", 200)
    assert isinstance(loop.next(0.0), Wait)
    loop.on_state(state(left=AWAY), 199)
    assert isinstance(loop.next(0.0), Wait)
    loop.on_state(state(left=(0.1, 0.0, 1.0)), 200)  # the same instant is fresh
    np.testing.assert_array_equal(query(loop).arm_state, state(left=(0.1, 0.0, 1.0)))
    loop.on_state(state(left=(0.2, 0.0, 1.0)), 250)  # a newer state is the one the policy sees
    decision = query(loop)
    assert decision.tokens_ns == 200
    np.testing.assert_array_equal(decision.arm_state, state(left=(0.2, 0.0, 1.0)))


# -- events and completion ----------------------------------------------------------------------


def test_events_count_every_transition_of_every_state() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(), HOME)
    loop.on_state(state(open_left=0.0, open_right=0.0), 0)  # the first state is no event
    assert loop.events_executed == 0
    loop.on_state(state(open_left=0.0, open_right=0.0), 1)
    assert loop.events_executed == 0
    loop.on_state(state(open_left=0.9, open_right=0.9), 2)  # both open: two events
    assert loop.events_executed == 2
    loop.on_state(state(open_left=0.6, open_right=0.4), 3)  # threshold 0.5: the right closes
    assert loop.events_executed == 3
    # states that are never queried count as well (the arms moved between observations)
    assert loop.step == 0


def test_observations_older_than_the_latest_are_ignored() -> None:
    """A multi-threaded host may deliver callbacks out of order: a late, older state must not
    count its transitions again, and older tokens must not replace newer ones."""
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(), HOME)
    loop.on_state(state(open_left=1.0), 10)
    loop.on_state(state(open_left=0.0), 30)
    loop.on_state(state(open_left=1.0), 20)  # late: ignored
    assert loop.events_executed == 1
    assert loop.latest_state[0, 3] == 0.0
    loop.on_tokens("new", 30)
    loop.on_tokens("old", 20)
    assert query(loop).tokens == "new"


def test_completes_after_grasp_release_and_return_home() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(min_events=2), HOME)
    trajectory = [
        state(),
        state(left=AWAY),  # reach
        state(left=AWAY, open_left=0.0),  # grasp
        state(left=(0.1, 0.0, 0.95), open_left=0.0),  # carry
        state(left=(0.1, 0.0, 0.95)),  # release
    ]
    for i, s in enumerate(trajectory):
        observe(loop, s, i * NANOSECONDS)
        query(loop, float(i))
        loop.chunk_sent(i * NANOSECONDS, steps=10, step_duration_s=0.1, now_s=float(i))
    assert loop.events_executed == 2
    observe(loop, state(left=(-0.29, 0.11, 0.9)), len(trajectory) * NANOSECONDS)  # within 3 cm
    finish = loop.next(float(len(trajectory)))
    assert finish == Finish(FoldOutcome.COMPLETED, "2 gripper events", hold=False)
    assert loop.finished is finish and loop.step == len(trajectory)


@pytest.mark.parametrize(
    "near_home",
    [
        state(open_right=0.0),  # home but a gripper still closed
        state(left=(-0.3, 0.2, 0.9)),  # 10 cm away
        state(right=(0.3, 0.1, 0.94)),  # 4 cm away
    ],
)
def test_almost_home_is_not_home(near_home: np.ndarray) -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(min_events=0), HOME)
    assert not loop.at_home(near_home)
    observe(loop, near_home, 0)
    assert isinstance(loop.next(0.0), Query)
    observe(loop, state(), 1)
    assert loop.at_home(state())
    assert loop.next(0.0) == Finish(FoldOutcome.COMPLETED, f"{loop.events_executed} gripper events", hold=False)


def test_home_before_the_required_events_goes_on() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(min_events=4), HOME)
    frames = [
        state(),
        state(left=AWAY, open_left=0.0),  # grasp (1)
        state(left=AWAY),  # release (2)
        state(),  # home with 2 of 4 events: not done
        state(right=AWAY, open_right=0.0),  # grasp (3)
        state(right=AWAY),  # release (4)
    ]
    for i, s in enumerate(frames):
        observe(loop, s, i * NANOSECONDS)
        query(loop, float(i))
        loop.chunk_sent(i * NANOSECONDS, steps=1, step_duration_s=0.1, now_s=float(i))
    assert loop.events_executed == 4
    observe(loop, state(), 10 * NANOSECONDS)
    assert loop.next(10.0) == Finish(FoldOutcome.COMPLETED, "4 gripper events", hold=False)


@pytest.mark.parametrize(("min_events", "expected", "required"), [(4, 2, 2), (2, 6, 2), (2, None, 2), (3, 0, 0)])
def test_demonstrations_with_fewer_events_require_fewer(min_events: int, expected: int | None, required: int) -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(min_events=min_events), HOME, expected_events=expected)
    assert loop.required_events == required


def test_a_demonstration_with_two_events_completes_after_two() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(min_events=4), HOME, expected_events=2)
    for i, s in enumerate([state(), state(left=AWAY, open_left=0.0), state(left=AWAY)]):
        observe(loop, s, i * NANOSECONDS)
        query(loop)
        loop.chunk_sent(i * NANOSECONDS, steps=1, step_duration_s=0.1, now_s=0.0)
    observe(loop, state(), 5 * NANOSECONDS)
    assert loop.next(0.0) == Finish(FoldOutcome.COMPLETED, "2 gripper events", hold=False)


def test_completion_wins_over_the_step_limit() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(max_steps=1, min_events=0), HOME)
    observe(loop, state(left=AWAY), 0)
    query(loop)
    loop.chunk_sent(0, steps=1, step_duration_s=0.1, now_s=0.0)
    observe(loop, state(), NANOSECONDS)
    finish = loop.next(0.0)
    assert isinstance(finish, Finish) and finish.outcome is FoldOutcome.COMPLETED


# -- cancel, timeout, failure -------------------------------------------------------------------


def test_cancel_finishes_with_the_arms_holding_even_with_a_fresh_observation() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(), HOME)
    observe(loop, state(left=AWAY), 0)
    finish = loop.next(0.0, cancel_requested=True)
    assert finish == Finish(FoldOutcome.CANCELED, "canceled; arms hold", hold=True)
    assert loop.next(1.0) is finish  # final, even once the request is gone


def test_no_fresh_observation_in_time_aborts_with_the_arms_holding() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(observation_timeout_s=2.0), HOME, now_s=50.0)
    wait = loop.next(51.5)
    assert isinstance(wait, Wait) and wait.timeout_s == pytest.approx(0.5)
    finish = loop.next(52.0)
    assert finish == Finish(FoldOutcome.ABORTED, "no fresh cloth tokens and arm state for 2 s", hold=True)
    observe(loop, state(), 0)  # too late: a Finish is final
    assert loop.next(52.1) is finish


def test_the_timeout_counts_from_the_last_chunk() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(observation_timeout_s=2.0), HOME, now_s=0.0)
    observe(loop, state(), 0)
    query(loop, 1.9)
    loop.chunk_sent(0, steps=1, step_duration_s=0.1, now_s=60.0)
    observe(loop, state(), 50_000_000)  # stale: taken while the chunk executed
    assert loop.next(61.0) == Wait(1.0)
    finish = loop.next(62.0)
    assert isinstance(finish, Finish) and finish.outcome is FoldOutcome.ABORTED and finish.hold


def test_fresh_observations_that_keep_coming_never_time_out() -> None:
    """A fold far longer than the timeout, a fresh observation 0.8 s after each chunk of 1 s."""
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(observation_timeout_s=1.0, max_steps=1000), HOME, now_s=0.0)
    now = 0.0
    for i in range(30):
        observe(loop, state(left=AWAY), i * NANOSECONDS)
        query(loop, now)
        loop.chunk_sent(i * NANOSECONDS, steps=10, step_duration_s=0.1, now_s=now)
        now += 0.8
        assert isinstance(loop.next(now), Wait)  # before the next observation: still waiting
    assert loop.finished is None and loop.step == 30 and now > 20.0


def test_fail_aborts_with_the_arms_holding() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(), HOME)
    observe(loop, state(), 0)
    query(loop)
    finish = loop.fail("prediction failed: boom")
    assert finish == Finish(FoldOutcome.ABORTED, "prediction failed: boom", hold=True)
    assert loop.finished is finish
    observe(loop, state(left=AWAY), NANOSECONDS)
    assert loop.next(0.0) is finish
    assert loop.next(0.0, cancel_requested=True) is finish


def test_a_completed_fold_stays_completed() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(min_events=0), HOME)
    observe(loop, state(), 0)
    finish = loop.next(0.0)
    assert finish == Finish(FoldOutcome.COMPLETED, "0 gripper events", hold=False)
    observe(loop, state(left=AWAY), NANOSECONDS)
    assert loop.next(1e6) is finish  # not a query, not a timeout
    assert loop.next(0.0, cancel_requested=True) is finish  # not a cancel


# -- a host --------------------------------------------------------------------------------------

FRAME_NS = 100_000_000  # the fake world renders a frame every 0.1 s
#: Scripted arm states, one per frame; the last one repeats.
FOLD_SCRIPT = [
    state(),  # 0 query
    state(left=(-0.1, 0.0, 1.0)),  # 1
    state(left=AWAY),  # 2 query
    state(left=AWAY, open_left=0.0),  # 3 grasp
    state(left=(0.1, 0.0, 1.0), open_left=0.0),  # 4 query
    state(left=(0.1, 0.0, 1.0)),  # 5 release
    state(left=(-0.1, 0.1, 0.9)),  # 6 query
    state(),  # 7 home, but the chunk of frame 6 is still executing
    state(),  # 8 fresh and home: completed
]


def run_host(loop: FoldLoop[str], script: list[np.ndarray], steps: int, max_frames: int = 100):
    """What a host does: per frame, the tokens arrive, then the arm state of the same instant;
    `next()` after each; a query is answered by a chunk of `steps` steps of one frame each."""
    decisions: list[str] = []
    queries = 0
    for frame in range(max_frames):
        ns, now_s = frame * FRAME_NS, frame * 0.1
        loop.on_tokens(f"tokens@{frame}", ns)
        assert isinstance(loop.next(now_s), Wait)  # the arm state of this frame is not there yet
        loop.on_state(script[min(frame, len(script) - 1)], ns)
        decision = loop.next(now_s)
        decisions.append(type(decision).__name__[0])
        if isinstance(decision, Finish):
            return decision, queries, decisions
        if isinstance(decision, Query):
            assert decision.tokens == f"tokens@{frame}" and decision.tokens_ns == ns
            queries += 1
            loop.chunk_sent(ns, steps, 0.1, now_s)
    raise AssertionError(f"no finish in {max_frames} frames: {''.join(decisions)}")


def test_a_host_loop_folds_to_completion() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(max_steps=50), HOME, expected_events=2)
    finish, queries, decisions = run_host(loop, FOLD_SCRIPT, steps=2)
    assert finish == Finish(FoldOutcome.COMPLETED, "2 gripper events", hold=False)
    assert queries == 4 and loop.step == 4
    assert "".join(decisions) == "QWQWQWQWF"


def test_a_host_loop_that_never_returns_home_hits_the_step_limit() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(max_steps=5), HOME, expected_events=2)
    finish, queries, decisions = run_host(loop, FOLD_SCRIPT[:6], steps=3)  # ends released, away from home
    assert finish == Finish(FoldOutcome.STEP_LIMIT, "2 gripper events", hold=False)
    assert queries == 5
    assert "".join(decisions) == "QWWQWWQWWQWWQWWF"


# -- feedback and configuration -----------------------------------------------------------------


def after_events(events: int, expected: int, at=(AWAY, AWAY), home_after_events: bool = False) -> FoldLoop[str]:
    """A loop whose left arm has opened and closed `events` times (a demonstration with `expected`
    events), now at `at`: open after an even number of events, holding cloth after an odd one."""
    config = FoldLoopConfig(min_events=2, home_after_events=home_after_events)
    loop: FoldLoop[str] = FoldLoop(config, HOME, expected_events=expected)
    for i in range(events + 1):
        loop.on_state(state(open_left=float(i % 2 == 0)), i)
    loop.on_state(state(*at, open_left=float(events % 2 == 0)), events + 1)
    assert loop.events_executed == events
    return loop


NEAR_HOME = state(left=(-0.3, 0.25, 0.9), right=(0.35, 0.0, 0.95))  # 15 and 11 cm off


def test_the_policy_returns_home_only_after_all_demonstrated_events_with_open_grippers() -> None:
    assert after_events(4, expected=4).phase_after(NEAR_HOME) is FoldPhase.RETURNING_HOME
    assert after_events(4, expected=4).phase_after(None) is FoldPhase.EXECUTING
    # Two events are enough to complete at home (min_events), not to be sent home mid-fold.
    assert after_events(2, expected=4).phase_after(NEAR_HOME) is FoldPhase.EXECUTING
    assert after_events(4, expected=4).phase_after(state(left=AWAY)) is FoldPhase.EXECUTING  # 40 cm off
    assert after_events(4, expected=4).phase_after(state(open_right=0.0)) is FoldPhase.EXECUTING  # will grasp
    assert after_events(5, expected=4).phase_after(NEAR_HOME) is FoldPhase.EXECUTING  # holds cloth


def test_home_after_events_goes_home_whatever_the_policy_aims_at_next() -> None:
    """`home_after_events`: the demonstration's events done, grippers open, is enough: a policy
    heading for another grasp (40 cm from home) is sent home; before that, or holding cloth, not."""
    grasp_again = state(left=AWAY, open_left=0.0)
    assert after_events(4, expected=4).phase_after(grasp_again) is FoldPhase.EXECUTING
    assert after_events(4, expected=4, home_after_events=True).phase_after(grasp_again) is FoldPhase.RETURNING_HOME
    assert after_events(2, expected=4, home_after_events=True).phase_after(grasp_again) is FoldPhase.EXECUTING
    assert after_events(5, expected=4, home_after_events=True).phase_after(grasp_again) is FoldPhase.EXECUTING
    assert after_events(4, expected=4, home_after_events=True).phase_after(None) is FoldPhase.RETURNING_HOME


def policy_chunk(keypose: np.ndarray | None) -> ActionChunk:
    """The policy's answer: H = 4 steps, the first 2 executed, 0.05 s apart (the steps do not matter here)."""
    return ActionChunk(np.zeros((4, 2, 3), np.float32), np.zeros((4, 2), np.float32), 2, 0.05, keypose=keypose)


def test_steer_passes_the_policy_chunk_through_while_folding() -> None:
    loop = after_events(2, expected=4)
    chunk = policy_chunk(NEAR_HOME)
    steer = loop.steer(chunk)
    assert steer.chunk is chunk and steer.phase is FoldPhase.EXECUTING


def guarded_loop(guard_m: float) -> FoldLoop[str]:
    """A loop (guard `guard_m`) whose left arm grasped at AWAY and let go there; the right never closed."""
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(regrasp_guard_m=guard_m), HOME, expected_events=4)
    loop.on_state(state(left=AWAY), 0)
    loop.on_state(state(left=AWAY, open_left=0.0), 1)
    loop.on_state(state(left=AWAY), 2)
    return loop


def closing_chunk() -> ActionChunk:
    """Both grippers commanded closed from the second step on."""
    openness = np.ones((4, 2), np.float32)
    openness[1:] = 0.0
    return ActionChunk(np.zeros((4, 2, 3), np.float32), openness, 2, 0.05, keypose=NEAR_HOME)


def test_the_regrasp_guard_holds_open_an_arm_that_just_let_go_until_it_moves_away() -> None:
    """Only the arm that let go is held open, only where it would close, and only until it is
    farther than the guard (x, y) from where it let go; lifting straight up does not count."""
    loop = guarded_loop(0.05)
    steered = loop.steer(closing_chunk()).chunk
    assert steered.openness[:, 0].tolist() == [1.0, 1.0, 1.0, 1.0]  # the left arm stays open
    assert steered.openness[:, 1].tolist() == [1.0, 0.0, 0.0, 0.0]  # the right arm is not guarded
    assert loop.regrasps_guarded == 1
    lifted = (AWAY[0] + 0.03, AWAY[1], AWAY[2] - 0.2)  # 3 cm sideways, 20 cm up
    loop.on_state(state(left=lifted), 3)
    assert loop.steer(closing_chunk()).chunk.openness[1:, 0].tolist() == [1.0, 1.0, 1.0]
    loop.on_state(state(left=(AWAY[0] + 0.06, AWAY[1], AWAY[2])), 4)  # 6 cm away: free
    chunk = closing_chunk()
    assert loop.steer(chunk).chunk is chunk
    loop.on_state(state(left=AWAY), 5)  # back at the release point: a release is guarded once
    assert loop.steer(chunk).chunk is chunk
    assert loop.regrasps_guarded == 2


@pytest.mark.parametrize("guard_m", [-0.01, float("nan"), float("inf")])
def test_a_regrasp_guard_that_is_not_a_distance_is_refused(guard_m: float) -> None:
    with pytest.raises(ConfigError, match="regrasp_guard_m"):
        FoldLoopConfig(regrasp_guard_m=guard_m)


def test_without_the_regrasp_guard_a_close_after_a_release_passes() -> None:
    chunk = closing_chunk()
    assert guarded_loop(0.0).steer(chunk).chunk is chunk


def gated_loop(gate_m: float, open_left: float = 1.0) -> FoldLoop[str]:
    """A loop (grasp gate `gate_m`) with the left arm at the origin (open unless `open_left` = 0), the right open."""
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(grasp_gate_m=gate_m), HOME, expected_events=4)
    loop.on_state(state(left=(0.0, 0.0, 1.0), right=(0.6, 0.0, 1.0), open_left=open_left), 0)
    return loop


def sweeping_chunk(representation: ChunkRepresentation = ChunkRepresentation.ABSOLUTE) -> ActionChunk:
    """Both grippers commanded closed at every step; the left arm sweeps x 0 -> 0.3 in 10 cm steps
    towards its reported grasp at x = 0.3, the right stays at x = 0.6 and reports no grasp (open)."""
    absolute = np.zeros((4, 2, 3), np.float32)
    absolute[:, 0, 0] = [0.0, 0.1, 0.2, 0.3]
    absolute[:, :, 2] = 1.0
    absolute[:, 1, 0] = 0.6
    positions = absolute
    if representation == ChunkRepresentation.DELTA:  # steps from the measured state
        positions = np.diff(absolute, axis=0, prepend=np.array([[[0.0, 0.0, 1.0], [0.6, 0.0, 1.0]]], np.float32))
    keypose = np.array([[0.3, 0.0, 1.0, 0.0], [0.6, 0.0, 1.0, 1.0]], np.float32)
    return ActionChunk(positions, np.zeros((4, 2), np.float32), 2, 0.05, representation, keypose)


@pytest.mark.parametrize("representation", [ChunkRepresentation.ABSOLUTE, ChunkRepresentation.DELTA])
def test_the_grasp_gate_lets_an_open_arm_close_only_at_the_grasp_its_chunk_reports(representation) -> None:
    """Closes farther than the gate (x, y) from the keypose's grasp are held open; an arm whose
    keypose is no grasp closes nowhere; an arm already closed, a chunk without a keypose and a
    loop without the gate pass untouched."""
    loop = gated_loop(0.05)
    steered = loop.steer(sweeping_chunk(representation)).chunk
    assert steered.openness[:, 0].tolist() == [1.0, 1.0, 1.0, 0.0]  # closes only on arrival
    assert steered.openness[:, 1].tolist() == [1.0, 1.0, 1.0, 1.0]  # its keypose is open
    assert loop.grasps_gated == 1
    holding = gated_loop(0.05, open_left=0.0)
    assert holding.steer(sweeping_chunk(representation)).chunk.openness[:, 0].tolist() == [0.0] * 4
    no_keypose = dataclasses.replace(sweeping_chunk(representation), keypose=None)
    assert loop.steer(no_keypose).chunk is no_keypose
    chunk = sweeping_chunk(representation)
    assert gated_loop(0.0).steer(chunk).chunk is chunk
    assert loop.grasps_gated == 1


@pytest.mark.parametrize("gate_m", [-0.01, float("nan"), float("inf")])
def test_a_grasp_gate_that_is_not_a_distance_is_refused(gate_m: float) -> None:
    with pytest.raises(ConfigError, match="grasp_gate_m"):
        FoldLoopConfig(grasp_gate_m=gate_m)


def test_steer_moves_home_in_a_straight_line_at_the_configured_speed() -> None:
    start = np.array([(-0.3, 0.1, 1.3), (0.3, -0.1, 0.9)])  # 40 and 20 cm from home: 16 steps
    loop = after_events(4, expected=4, at=start)
    path = [start]
    for k in range(8):  # chunks of the policy's horizon (4), first 2 executed, 0.05 s per step
        steer = loop.steer(policy_chunk(None if k else NEAR_HOME))
        assert steer.phase is FoldPhase.RETURNING_HOME and steer.chunk.horizon == 4
        assert steer.chunk.representation is ChunkRepresentation.ABSOLUTE and steer.chunk.step_duration == 0.05
        assert steer.chunk.steps_to_execute == 2 and (steer.chunk.openness == 1.0).all()
        path += list(steer.chunk.positions[:2])
        ns = (k + 1) * 2 * FRAME_NS
        loop.chunk_sent(ns - 2 * FRAME_NS, 2, 0.1, 0.0)
        observe(loop, np.concatenate([steer.chunk.positions[1], np.ones((2, 1))], axis=1), ns)
    speeds = np.linalg.norm(np.diff(np.array(path), axis=0), axis=2) / 0.05
    assert speeds.max() <= 0.5 + 1e-5
    np.testing.assert_allclose(speeds, np.broadcast_to(speeds[:1], speeds.shape), rtol=1e-4)  # straight, steady
    np.testing.assert_allclose(path[-1], HOME, atol=1e-6)
    assert loop.next(0.0) == Finish(FoldOutcome.COMPLETED, "4 gripper events", hold=False)


def test_the_last_home_chunk_ends_at_home() -> None:
    loop = after_events(4, expected=4, at=((-0.3, 0.1, 0.93), (0.3, 0.1, 0.9)))  # 3 cm: 2 steps
    steer = loop.steer(policy_chunk(NEAR_HOME))
    np.testing.assert_allclose(steer.chunk.positions[1:], np.broadcast_to(HOME, (3, 2, 3)), atol=1e-6)


def test_the_robots_home_replaces_the_demonstrations_when_it_arrives_during_the_fold() -> None:
    """The latched home topic may reach the policy server after the fold started: the home it
    tells is the one the fold ends at and moves to."""
    robot_home = HOME + np.array([0.0, 0.0, 0.1])
    loop = after_events(4, expected=4, at=HOME)  # started with HOME (a demonstration's terminal keypose)
    assert loop.at_home(state())
    loop.on_home(robot_home)
    assert not loop.at_home(state())
    steer = loop.steer(policy_chunk(NEAR_HOME))
    assert steer.phase is FoldPhase.RETURNING_HOME
    np.testing.assert_allclose(steer.chunk.positions[-1], robot_home, atol=1e-6)  # 10 cm: 4 steps


def test_bad_home_is_refused() -> None:
    with pytest.raises(ValueError, match="home"):
        FoldLoop(FoldLoopConfig(), np.full((2, 3), np.nan))
    with pytest.raises(ValueError, match="home"):
        FoldLoop(FoldLoopConfig(), np.zeros(6))
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(), HOME)
    with pytest.raises(ValueError, match="home"):
        loop.on_home(np.full((2, 3), np.inf))
    np.testing.assert_array_equal(loop.home, HOME)


def test_every_reader_counts_the_same_events_at_the_gripper_boundary() -> None:
    """A half-open gripper (openness exactly 0.5) is open for the fold loop, the training episodes'
    events and counts, the keyframes and the policy server's counter alike (`gripper_closed`): two
    thresholds would let the loop end a fold on events the policy never counted."""
    openness = np.array([[1.0, 1.0], [0.5, 1.0], [0.49, 0.5], [0.5, 0.2], [0.2, 0.5]])
    trace = np.zeros((len(openness), 2, 4))
    trace[..., 3] = openness
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(), HOME)
    counter = EventCounter()
    for t, arms in enumerate(trace):
        loop.on_state(arms, t)
        counted = counter.observe(arms)
    per_arm = [len(frames) for frames in arm_events(trace)]
    assert per_arm == [3, 2] == counted.tolist() == episode_event_counts(trace)[-1].tolist()
    assert loop.events_executed == sum(per_arm)
    np.testing.assert_array_equal(gripper_events(trace), [2, 3, 4])
