"""The safety layer through the controller core: clamp, speed, min distance, NaN, watchdog, e-stop."""

from __future__ import annotations

import numpy as np
import pytest

from instant_fold_control.config import RobotConfig, parse_robot_config
from instant_fold_control.controller import DualArmController, Mode
from instant_fold_core.contracts import ActionChunk, ChunkRepresentation
from instant_fold_core.errors import InvalidInputError, NonFiniteError

DT = 0.01  # 100 Hz control ticks
START = np.array([[-0.2, 0.0, 0.8], [0.2, 0.0, 0.8]])  # camera frame


class Harness:
    """A controller fed with an ideal arm: the measurement is the last command."""

    def __init__(self, robot: RobotConfig) -> None:
        self.robot = robot
        self.controller = DualArmController(robot, self._log)
        self.logs: list[tuple[str, str]] = []
        self.t = 0.0
        self.sent: list[np.ndarray] = []  # commanded camera-frame positions per tick
        self._measure(START, np.ones(2))
        self.controller.step(self.t)

    def _log(self, level: str, text: str) -> None:
        self.logs.append((level, text))

    def _measure(self, cam: np.ndarray, openness: np.ndarray) -> None:
        base = tuple(arm.extrinsics.to_base(p) for arm, p in zip(self.robot.arms, cam, strict=True))
        self.controller.update_measurement((base[0], base[1]), openness, self.t)

    def run(self, seconds: float) -> None:
        for _ in range(round(seconds / DT)):
            self.t += DT
            out = self.controller.step(self.t)
            assert out is not None
            self.sent.append(out.positions)
            self._measure(out.positions, out.openness)

    def chunk(
        self, positions: np.ndarray, representation: int = ChunkRepresentation.ABSOLUTE, steps: int | None = None, **kw
    ) -> bool:
        h = len(positions)
        openness = kw.pop("openness", np.ones((h, 2)))
        chunk = ActionChunk(positions, openness, steps or h, kw.pop("step_duration", 0.1), representation)
        return self.controller.submit_chunk(chunk, self.t, kw.pop("observation_time", None))

    @property
    def counts(self):
        return self.controller.safety.counts


@pytest.fixture
def harness(robot: RobotConfig) -> Harness:
    return Harness(robot)


def test_tracks_an_absolute_chunk_with_linear_interpolation(harness: Harness) -> None:
    target = START + np.array([[0.0, 0.02, 0.0], [0.0, -0.02, 0.0]])
    assert harness.chunk(np.stack([target]), step_duration=0.2)
    harness.run(0.1)
    assert np.allclose(harness.sent[-1], (START + target) / 2, atol=1e-9)  # half way after half the step
    harness.run(0.2)
    assert np.allclose(harness.sent[-1], target)
    assert harness.controller.mode == Mode.TRACKING


def test_out_of_workspace_steps_are_clamped_and_logged(robot_dict) -> None:
    harness = Harness(parse_robot_config(robot_dict(watchdog_timeout=2.0)))
    lo, hi = harness.robot.safety.workspace_min, harness.robot.safety.workspace_max
    steps = np.stack([START, START.copy()])
    steps[1, 0] = [-0.2, 0.0, 1.5]  # left arm 0.57 m below the workspace floor (into the table)
    assert harness.chunk(steps, step_duration=0.3)
    harness.run(0.7)
    sent = np.stack(harness.sent)
    assert (sent >= lo - 1e-12).all() and (sent <= hi + 1e-12).all()
    assert np.allclose(sent[-1, 0], [-0.2, 0.0, hi[2]])  # reached the clamped target on the boundary
    assert harness.counts["clamped"] == 1
    assert any("outside workspace" in text for _, text in harness.logs)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_chunks_are_refused_whole(harness: Harness, bad: float) -> None:
    steps = np.stack([START + 0.01, START + 0.02, START + 0.03])
    steps[1, 1, 2] = bad
    with pytest.raises(NonFiniteError) as caught:  # as the controller node receives it from a message
        harness.chunk(steps)
    harness.controller.refuse_chunk(caught.value)
    harness.run(0.2)
    assert np.allclose(np.stack(harness.sent), START)  # never moved
    assert harness.counts["refused_nonfinite"] == 1
    assert harness.controller.mode == Mode.HOLD


def test_other_broken_chunks_are_counted_as_malformed(harness: Harness) -> None:
    with pytest.raises(InvalidInputError) as caught:
        harness.chunk(np.stack([START]), openness=np.full((1, 2), 2.0))
    harness.controller.refuse_chunk(caught.value)
    assert harness.counts["refused_malformed"] == 1 and harness.counts["refused_nonfinite"] == 0


def test_non_finite_output_never_leaves_the_safety_layer(robot: RobotConfig) -> None:
    from instant_fold_control.safety import SafetyLayer

    layer = SafetyLayer(robot.safety, lambda *_: None)
    out = layer.filter_output(START, np.array([[np.nan, 0, 0.8], [0.2, 0, 0.8]]), DT)
    assert np.array_equal(out, START) and layer.counts["held_nonfinite"] == 1


def test_speed_is_limited_per_tick(robot_dict) -> None:
    harness = Harness(parse_robot_config(robot_dict(watchdog_timeout=2.0)))
    far = START + np.array([[0.3, 0.0, 0.0], [0.0, 0.0, 0.1]])
    assert harness.chunk(np.stack([far]), step_duration=0.05)  # asks for 6 m/s
    harness.run(1.0)
    sent = np.concatenate([START[None], np.stack(harness.sent)])
    step = np.linalg.norm(np.diff(sent, axis=0), axis=-1)
    assert step.max() <= harness.robot.safety.max_speed * DT + 1e-9
    assert np.allclose(sent[-1], far)  # still gets there, at the limit
    assert harness.counts["speed_limited"] > 0


def test_chunk_bringing_grippers_too_close_is_refused(harness: Harness) -> None:
    close = np.array([[-0.04, 0.0, 0.8], [0.04, 0.0, 0.8]])  # 8 cm apart < 12 cm
    assert not harness.chunk(np.stack([START, close]))
    harness.run(0.3)
    assert np.allclose(np.stack(harness.sent), START)
    assert harness.counts["refused_distance"] == 1


def test_grippers_may_separate_when_already_too_close(robot_dict) -> None:
    h = Harness(parse_robot_config(robot_dict(min_gripper_distance=0.5)))  # START is 0.4 m apart
    apart = START + np.array([[-0.05, 0, 0], [0.05, 0, 0]])
    assert h.chunk(np.stack([apart]))
    h.run(0.3)
    assert np.allclose(h.sent[-1], apart)
    closer = START + np.array([[0.05, 0, 0], [-0.05, 0, 0]])
    assert not h.chunk(np.stack([closer]))


def test_output_that_would_bring_grippers_closer_holds_both(robot: RobotConfig) -> None:
    from instant_fold_control.safety import SafetyLayer

    layer = SafetyLayer(robot.safety, lambda *_: None)
    previous = np.array([[-0.07, 0, 0.8], [0.07, 0, 0.8]])
    out = layer.filter_output(previous, np.array([[-0.05, 0, 0.8], [0.05, 0, 0.8]]), 1.0)
    assert np.array_equal(out, previous) and layer.counts["held_distance"] == 1


def test_watchdog_holds_within_the_timeout_when_chunks_stop(harness: Harness) -> None:
    """A long chunk whose producer dies: the arms stop within watchdog_timeout of the last chunk."""
    timeout = harness.robot.safety.watchdog_timeout
    goal = START + np.array([[0.0, 0.3, 0.0], [0.0, 0.3, 0.0]])
    assert harness.chunk(np.stack([goal]), step_duration=3.0)  # would take 3 s
    start_t = harness.t
    harness.run(1.5)
    sent = np.stack(harness.sent)
    moving = np.linalg.norm(np.diff(sent, axis=0), axis=-1).max(axis=-1) > 0
    last_motion = start_t + (np.flatnonzero(moving).max() + 2) * DT
    assert last_motion <= start_t + timeout + DT + 1e-9
    assert np.allclose(sent[-1], sent[round(timeout / DT) + 1])  # frozen afterwards
    assert not np.allclose(sent[-1], goal)
    assert harness.controller.mode == Mode.HOLD and harness.counts["watchdog_hold"] == 1


def test_fresh_chunks_keep_the_watchdog_quiet(harness: Harness) -> None:
    for i in range(10):
        assert harness.chunk(np.stack([START + np.array([[0, 0.01 * i, 0], [0, 0.01 * i, 0]])]), step_duration=0.2)
        harness.run(0.2)
    assert harness.counts["watchdog_hold"] == 0 and harness.controller.mode == Mode.TRACKING


def test_estop_latches_until_reset(harness: Harness) -> None:
    goal = START + np.array([[0.0, 0.1, 0.0], [0.0, 0.1, 0.0]])
    assert harness.chunk(np.stack([goal]), step_duration=1.0)
    harness.run(0.2)
    harness.controller.estop()
    held = harness.sent[-1]
    harness.run(0.3)
    assert harness.controller.mode == Mode.ESTOP and np.allclose(harness.sent[-1], held)
    assert not harness.chunk(np.stack([goal]))
    assert harness.counts["refused_estop"] == 1
    harness.run(2.0)  # the e-stop does not time out
    assert harness.controller.mode == Mode.ESTOP
    harness.controller.reset()
    harness.run(0.05)
    assert harness.controller.mode == Mode.HOLD
    assert harness.chunk(np.stack([goal]), step_duration=0.2)
    harness.run(0.4)
    assert np.allclose(harness.sent[-1], goal)


def test_stale_chunks_are_refused(harness: Harness) -> None:
    harness.run(2.0)
    assert not harness.chunk(np.stack([START]), observation_time=harness.t - 1.5)
    assert harness.counts["refused_stale"] == 1
    assert harness.chunk(np.stack([START]), observation_time=harness.t - 0.1)


def test_delta_is_relative_to_the_state_at_the_observation_time(harness: Harness) -> None:
    goal = START + np.array([[0.0, 0.1, 0.0], [0.0, 0.1, 0.0]])
    assert harness.chunk(np.stack([goal]), step_duration=0.5)
    harness.run(0.25)
    observed_at, observed = harness.t, harness.controller.state()
    assert observed is not None
    harness.run(0.15)  # the arms kept moving while the policy was thinking
    delta = np.zeros((1, 2, 3))
    delta[0, :, 0] = [0.01, -0.01]
    assert harness.chunk(delta, ChunkRepresentation.DELTA, observation_time=observed_at)
    harness.run(0.5)
    assert np.allclose(harness.sent[-1], observed[:, :3] + delta[0], atol=1e-9)


def test_gripper_changes_when_the_step_is_reached(harness: Harness) -> None:
    openness = np.array([[1.0, 1.0], [0.0, 1.0]])  # left closes at step 1
    assert harness.chunk(np.stack([START, START]), openness=openness, step_duration=0.1)
    harness.run(0.15)
    assert np.allclose(harness.controller.state()[:, 3], [1, 1])  # type: ignore[index]
    harness.run(0.1)
    assert np.allclose(harness.controller.state()[:, 3], [0, 1])  # type: ignore[index]


def test_base_frame_targets_follow_the_extrinsics(harness: Harness) -> None:
    out = harness.controller.step(harness.t)
    assert out is not None
    for arm, cam, base in zip(harness.robot.arms, out.positions, out.base_positions, strict=True):
        assert np.allclose(arm.extrinsics.to_camera(base), cam)
    # left base: x to the table centre, z up -> START left (-0.2, 0, 0.8) is 0.4 m in front, 0.15 m up
    assert np.allclose(out.base_positions[0], [0.4, 0.0, 0.15])
    assert np.allclose(out.base_positions[1], [0.4, 0.0, 0.15])


def test_arm_starting_outside_the_workspace_is_brought_in_at_the_speed_limit(robot_dict) -> None:
    """E.g. a home pose above the box: outputs are clamped (counted every tick, logged once)."""
    robot = parse_robot_config(robot_dict(watchdog_timeout=2.0))
    h = Harness(robot)
    outside = START.copy()
    outside[0, 2] = 0.4  # 15 cm above the workspace ceiling (towards the camera)
    h.controller.update_measurement(
        tuple(arm.extrinsics.to_base(p) for arm, p in zip(robot.arms, outside, strict=True)), np.ones(2), h.t
    )
    h.controller.reset()  # command from the measured (outside) pose
    assert h.chunk(np.stack([START]), step_duration=0.1)
    h.run(1.0)
    sent = np.concatenate([outside[None], np.stack(h.sent)])
    assert (np.linalg.norm(np.diff(sent, axis=0), axis=-1) <= robot.safety.max_speed * DT + 1e-9).all()
    assert np.allclose(sent[-1], START)
    assert h.counts["clamped"] > 1
    assert sum("clamped to the workspace" in text for _, text in h.logs) == 1


def test_plan_finishes_when_the_last_step_is_due(robot_dict) -> None:
    """What a lock-stepped simulator waits on: the chunk's time, even if the speed limit lags."""
    harness = Harness(parse_robot_config(robot_dict(max_speed=1.0)))
    assert harness.controller.plan_finished(harness.t)  # no plan yet
    near = START + np.array([[0.0, 0.01, 0.0], [0.0, 0.01, 0.0]])
    assert harness.chunk(np.stack([near, near]), step_duration=0.05)
    assert not harness.controller.plan_finished(harness.t)
    harness.run(0.05)
    assert not harness.controller.plan_finished(harness.t)  # one step left
    harness.run(0.05)
    assert harness.controller.plan_finished(harness.t)
    far = START + np.array([[0.0, 0.3, 0.0], [0.0, 0.3, 0.0]])  # 0.3 m at 1 m/s: 0.3 s, not 0.1 s
    assert harness.chunk(np.stack([far, far]), step_duration=0.05)
    harness.run(0.09)
    assert not harness.controller.plan_finished(harness.t)
    harness.run(0.01)
    assert harness.controller.plan_finished(harness.t)
    lag = np.linalg.norm(far - harness.sent[-1], axis=1)
    assert np.allclose(lag, 0.2, atol=0.011)  # 0.1 s at 1 m/s: 0.1 m of 0.3 m done
