"""Execute-fold loop decisions: freshness, event counting, completion, step limit."""

from __future__ import annotations

import numpy as np
import pytest

from instant_fold_policy.fold_loop import NANOSECONDS, FoldLoop, FoldLoopConfig, Outcome, Phase

HOME = np.array([[-0.3, 0.1, 0.9], [0.3, 0.1, 0.9]])


def state(left=(-0.3, 0.1, 0.9), right=(0.3, 0.1, 0.9), open_left=1.0, open_right=1.0) -> np.ndarray:
    return np.array([[*left, open_left], [*right, open_right]])


def test_constants_match_the_action_definition() -> None:
    from instant_fold_interfaces.action import ExecuteFold

    for outcome in Outcome:
        assert getattr(ExecuteFold.Result, f"OUTCOME_{outcome.name}") == outcome.value
    for phase in Phase:
        assert getattr(ExecuteFold.Feedback, f"PHASE_{phase.name}") == phase.value


def test_home_at_start_is_not_a_finished_fold() -> None:
    loop = FoldLoop(FoldLoopConfig(), HOME)
    loop.observe_state(state())
    assert loop.outcome(state()) is None


def test_completes_after_grasp_release_and_return_home() -> None:
    loop = FoldLoop(FoldLoopConfig(min_events=2), HOME)
    trajectory = [
        state(),
        state(left=(0.0, 0.0, 1.0)),  # reach
        state(left=(0.0, 0.0, 1.0), open_left=0.0),  # grasp
        state(left=(0.1, 0.0, 0.95), open_left=0.0),  # carry
        state(left=(0.1, 0.0, 0.95)),  # release
    ]
    for s in trajectory:
        loop.observe_state(s)
        assert loop.outcome(s) is None
    assert loop.events_executed == 2
    home = state()
    loop.observe_state(home)
    assert loop.outcome(home) is Outcome.COMPLETED
    # home but a gripper still closed is not done
    assert loop.outcome(state(open_right=0.0)) is None
    assert loop.outcome(state(left=(-0.3, 0.2, 0.9))) is None  # 10 cm away


def test_demonstrations_with_fewer_events_require_fewer() -> None:
    loop = FoldLoop(FoldLoopConfig(min_events=4), HOME, expected_events=2)
    assert loop.required_events == 2


def test_freshness_follows_executed_steps_and_step_limit() -> None:
    loop = FoldLoop(FoldLoopConfig(max_steps=2), HOME)
    assert loop.is_fresh(0)
    loop.chunk_sent(10 * NANOSECONDS, steps=4, step_duration_s=0.1)
    assert not loop.is_fresh(10 * NANOSECONDS + int(0.39 * NANOSECONDS))
    assert loop.is_fresh(10 * NANOSECONDS + int(0.4 * NANOSECONDS))
    assert loop.outcome(state(left=(0.0, 0.0, 1.0))) is None
    loop.chunk_sent(11 * NANOSECONDS, steps=4, step_duration_s=0.1)
    assert loop.outcome(state(left=(0.0, 0.0, 1.0))) is Outcome.STEP_LIMIT


def test_phase_is_returning_home_when_the_next_keypose_is_home() -> None:
    loop = FoldLoop(FoldLoopConfig(min_events=0), HOME)
    assert loop.phase_after(None) is Phase.EXECUTING
    assert loop.phase_after(state()) is Phase.RETURNING_HOME
    assert loop.phase_after(state(left=(0.0, 0.0, 1.0))) is Phase.EXECUTING


def test_bad_home_is_refused() -> None:
    with pytest.raises(ValueError, match="home"):
        FoldLoop(FoldLoopConfig(), np.full((2, 3), np.nan))
