"""ControlLoop without ROS: ticks over a small lock-stepped robot, driver failures, the wall clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pytest

from instant_fold_control import control_loop
from instant_fold_control.config import ArmConfig, RobotConfig
from instant_fold_control.control_loop import ControlLoop
from instant_fold_control.controller import DualArmController, Mode
from instant_fold_control.drivers.base import (
    ArmDriver,
    ArmMeasurement,
    DriverConnectionError,
    DriverError,
    RobotDrivers,
)
from instant_fold_core.contracts import ActionChunk

PERIOD = 0.1
#: Both arms at the start (camera frame: x, y, z, openness), inside the test robot's workspace.
START = np.array([[-0.2, 0.0, 0.8, 1.0], [0.2, 0.0, 0.8, 1.0]])


class FakeSim:
    """The arms' true state (camera frame) and simulated time. As a robot's lockstep, `advance`
    moves both arms to their commanded targets at once and makes `until` the time."""

    def __init__(self) -> None:
        self.state = START.copy()
        self.target = START[:, :3].copy()
        self.openness = START[:, 3].copy()
        self.time = 0.0
        self.advances: list[float] = []
        self.fail = False

    def now(self) -> float:
        return self.time

    def advance(self, until: float) -> None:
        if self.fail:
            raise DriverConnectionError("sim: the simulator stopped answering")
        self.advances.append(until)
        self.state[:, :3], self.state[:, 3] = self.target, self.openness
        self.time = until


class FakeArm(ArmDriver):
    """One arm of the fake sim, in its base frame; records what it is asked to do."""

    def __init__(self, index: int, arm: ArmConfig, sim: FakeSim) -> None:
        super().__init__(arm.name)
        self.index, self.extrinsics, self.sim = index, arm.extrinsics, sim
        self.commands: list[np.ndarray] = []  # camera frame
        self.grippers: list[float] = []
        self.holds = self.stops = 0
        self.failing: set[str] = set()

    def _check(self, call: str) -> None:
        if call in self.failing:
            raise DriverError(f"{self.arm} arm: {call} failed")

    def connect(self) -> None:
        self._check("connect")

    def read_state(self) -> ArmMeasurement:
        self._check("read_state")
        s = self.sim.state[self.index]
        return ArmMeasurement(self.extrinsics.to_base(s[:3]), float(s[3]), self.sim.time)

    def command_cartesian(self, position: np.ndarray) -> None:
        self._check("command_cartesian")
        camera = self.extrinsics.to_camera(self.checked_position(self.arm, position))
        self.commands.append(camera)
        self.sim.target[self.index] = camera

    def set_gripper(self, openness: float) -> None:
        self._check("set_gripper")
        self.grippers.append(openness)
        self.sim.openness[self.index] = openness

    def hold(self) -> None:
        self.holds += 1

    def stop(self) -> None:
        self.stops += 1
        self._check("stop")

    def close(self) -> None:
        pass


@dataclass
class Rig:
    sim: FakeSim
    left: FakeArm
    right: FakeArm
    controller: DualArmController
    loop: ControlLoop
    log: list[tuple[str, str]] = field(default_factory=list)


def make_rig(robot: RobotConfig, lockstep: bool = True) -> Rig:
    sim = FakeSim()
    left, right = (FakeArm(i, arm, sim) for i, arm in enumerate(robot.arms))
    log: list[tuple[str, str]] = []

    def record(level: str, text: str) -> None:
        log.append((level, text))

    controller = DualArmController(robot, record)
    loop = ControlLoop(controller, RobotDrivers(left, right, sim if lockstep else None), PERIOD, record)
    return Rig(sim, left, right, controller, loop, log)


def wall_clock_rig(robot: RobotConfig, monkeypatch, start: float) -> tuple[Rig, SimpleNamespace]:
    """A rig without lockstep whose monotonic clock is `clock.t` (a real robot's loop)."""
    clock = SimpleNamespace(t=start)
    monkeypatch.setattr(control_loop, "time", SimpleNamespace(monotonic=lambda: clock.t))
    return make_rig(robot, lockstep=False), clock


def chunk(positions: list, openness: list, step_duration: float = PERIOD) -> ActionChunk:
    return ActionChunk(np.array(positions, float), np.array(openness, float), len(positions), step_duration)


@pytest.fixture
def rig(robot: RobotConfig) -> Rig:
    """A lock-stepped rig at simulated time 0, measured, whose controller has stepped once.

    The controller's first step has no earlier step to measure the speed limit over (dt = 0), so
    it does not move; a running controller is past it."""
    rig = make_rig(robot)
    assert rig.loop.read()
    assert rig.controller.step(rig.loop.now()) is not None
    return rig


def test_a_chunk_runs_one_tick_per_step_and_time_stands_still_between_chunks(rig: Rig) -> None:
    wp1 = [[-0.18, 0.0, 0.8], [0.2, 0.02, 0.8]]
    wp2 = [[-0.16, 0.0, 0.8], [0.2, 0.04, 0.8]]
    assert rig.loop.now() == 0.0
    assert rig.controller.submit_chunk(chunk([wp1, wp2], [[1, 1], [0, 1]]), rig.loop.now())

    rig.loop.tick()
    assert rig.sim.advances == [pytest.approx(0.1)] and rig.loop.now() == pytest.approx(0.1)
    np.testing.assert_allclose(rig.sim.state[:, :3], wp1, atol=1e-9)
    # the state of the new instant was read before anyone could publish the old one
    assert rig.loop.measured_at == pytest.approx(0.1)
    np.testing.assert_allclose(rig.controller.state(), rig.sim.state, atol=1e-9)

    rig.loop.tick()
    assert rig.sim.advances == pytest.approx([0.1, 0.2])
    np.testing.assert_allclose(rig.sim.state[:, :3], wp2, atol=1e-9)
    np.testing.assert_array_equal(rig.sim.state[:, 3], [0.0, 1.0])  # the grasp at its waypoint
    assert rig.controller.mode is Mode.TRACKING

    for _ in range(5):  # the plan is done: time waits for the next chunk
        rig.loop.tick()
    assert rig.sim.advances == pytest.approx([0.1, 0.2]) and rig.loop.now() == pytest.approx(0.2)
    assert len(rig.left.commands) == len(rig.right.commands) == 2
    np.testing.assert_allclose(rig.controller.state(), rig.sim.state, atol=1e-9)

    # the next chunk starts where time stood still, well past any watchdog in wall-clock terms
    assert rig.controller.submit_chunk(chunk([wp1], [[1, 1]]), rig.loop.now())
    rig.loop.tick()
    assert rig.sim.advances == pytest.approx([0.1, 0.2, 0.3])
    np.testing.assert_allclose(rig.sim.state[:, :3], wp1, atol=1e-9)
    assert rig.controller.safety.counts["watchdog_hold"] == 0


def test_a_refused_chunk_holds_the_arms_while_simulated_time_runs_its_duration(rig: Rig) -> None:
    """Under lockstep a refused chunk must not freeze simulated time: the policy would never see a
    new observation and the fold would stall (a robot's clock runs on while it holds)."""
    close = [[-0.03, 0.0, 0.8], [0.03, 0.0, 0.8]]  # 6 cm apart, under the 12 cm minimum
    assert not rig.loop.submit(chunk([close] * 3, [[1, 1]] * 3), rig.loop.now())
    assert rig.controller.safety.counts["refused_distance"] == 1

    for _ in range(6):
        rig.loop.tick()
    assert rig.sim.advances == pytest.approx([0.1, 0.2, 0.3])  # its 3 steps, then time waits again
    np.testing.assert_allclose(rig.sim.state, START, atol=1e-9)  # held where they were
    assert rig.controller.mode is Mode.HOLD

    wp = [[-0.18, 0.0, 0.8], [0.2, 0.0, 0.8]]  # the next chunk runs as usual
    assert rig.loop.submit(chunk([wp], [[1, 1]]), rig.loop.now())
    rig.loop.tick()
    assert rig.sim.advances == pytest.approx([0.1, 0.2, 0.3, 0.4])
    np.testing.assert_allclose(rig.sim.state[:, :3], wp, atol=1e-9)


def test_gripper_openness_is_sent_once_per_change(rig: Rig) -> None:
    positions = [[[-0.2, 0.0, 0.8], [0.2, 0.0, 0.8]]] * 4
    openness = [[1, 1], [0, 1], [0, 1], [1, 1]]
    assert rig.controller.submit_chunk(chunk(positions, openness), rig.loop.now())
    for _ in range(6):
        rig.loop.tick()
    assert rig.left.grippers == [1.0, 0.0, 1.0]  # the first tick sends the current openness
    assert rig.right.grippers == [1.0]
    assert len(rig.left.commands) == 4 and rig.sim.advances == pytest.approx([0.1, 0.2, 0.3, 0.4])


@pytest.mark.parametrize("failing", ["command_cartesian", "set_gripper", "read_state", "advance"])
def test_a_driver_failure_latches_the_estop_and_stops_the_arms(rig: Rig, failing: str) -> None:
    assert rig.controller.submit_chunk(chunk([[[-0.18, 0.0, 0.8], [0.2, 0.0, 0.8]]] * 3, [[1, 1]] * 3), 0.0)
    if failing == "advance":
        rig.sim.fail = True
    else:
        rig.right.failing.add(failing)
    rig.loop.tick()
    assert rig.controller.estopped and rig.controller.mode is Mode.ESTOP
    assert rig.controller.safety.counts["estop"] == 1
    reason = "sim: the simulator stopped answering" if failing == "advance" else f"right arm: {failing} failed"
    assert ("error", f"[safety:estop #1] driver failure: {reason}") in rig.log
    assert (rig.left.stops, rig.right.stops) == (1, 1)
    commands = len(rig.left.commands)
    for _ in range(3):
        rig.loop.tick()
    assert rig.sim.advances == [] and rig.loop.now() == 0.0  # nothing simulated
    assert len(rig.left.commands) == commands <= 1  # nothing commanded after the failure
    assert (rig.left.stops, rig.right.stops) == (1, 1)  # stopped once
    assert not rig.controller.submit_chunk(chunk([[[-0.18, 0.0, 0.8], [0.2, 0.0, 0.8]]], [[1, 1]]), 0.0)


def test_a_failing_stop_is_logged_and_the_other_arm_still_stops(rig: Rig) -> None:
    rig.left.failing.update({"read_state", "stop"})
    assert not rig.loop.read()
    assert rig.controller.estopped
    assert (rig.left.stops, rig.right.stops) == (1, 1)
    assert ("error", "left arm: stop failed: left arm: stop failed") in rig.log


def test_without_lockstep_ticks_follow_the_monotonic_clock(robot: RobotConfig, monkeypatch) -> None:
    rig, clock = wall_clock_rig(robot, monkeypatch, start=100.0)
    assert rig.loop.lockstep is None and rig.loop.now() == 100.0
    rig.loop.tick()  # holds at the measured position: the first step
    assert rig.loop.measured_at == 100.0 and rig.controller.mode is Mode.HOLD
    assert rig.left.holds == rig.right.holds == 1 and rig.left.commands == []
    wp1 = [[-0.18, 0.0, 0.8], [0.2, 0.02, 0.8]]
    assert rig.controller.submit_chunk(chunk([wp1, wp1], [[1, 1], [1, 1]]), rig.loop.now())
    clock.t = 100.05
    rig.loop.tick()
    # commanded where the plan is at the clock's time (half way to wp1), not one period later
    np.testing.assert_allclose(rig.left.commands[-1], [-0.19, 0.0, 0.8], atol=1e-9)
    np.testing.assert_allclose(rig.right.commands[-1], [0.2, 0.01, 0.8], atol=1e-9)
    clock.t = 100.3
    rig.loop.tick()
    np.testing.assert_allclose(rig.left.commands[-1], wp1[0], atol=1e-9)
    assert len(rig.left.commands) == 2  # one command per tick, past the end of the plan too
    clock.t = 100.7  # no chunk for 0.65 s > watchdog 0.5 s: hold, once
    rig.loop.tick()
    rig.loop.tick()
    assert rig.controller.mode is Mode.HOLD and rig.left.holds == rig.right.holds == 2
    # the arms only move when a simulator advances them, and nothing did
    assert rig.sim.advances == [] and rig.sim.time == 0.0
    np.testing.assert_array_equal(rig.sim.state, START)
    assert rig.loop.measured_at == 100.7


def test_a_tick_reads_the_arms_steps_the_controller_and_writes_the_commands(rig: Rig) -> None:
    """The node's one call per timer tick does the whole read -> update -> write sequence."""
    target = [[-0.18, 0.0, 0.8], [0.2, 0.02, 0.8]]
    assert rig.loop.submit(chunk([target], [[0, 1]]), observation_time=rig.loop.now())
    rig.loop.tick()
    assert rig.controller.mode is Mode.TRACKING and rig.loop.measured_at == pytest.approx(0.1)
    # written in each arm's base frame (the fake arms record them back in the camera frame)
    np.testing.assert_allclose([rig.left.commands[-1], rig.right.commands[-1]], target, atol=1e-9)
    assert (rig.left.grippers, rig.right.grippers) == ([0.0], [1.0])
    assert rig.left.holds == rig.right.holds == 0
    np.testing.assert_allclose(rig.controller.state(), np.c_[target, [0.0, 1.0]], atol=1e-9)


def test_a_stale_chunk_is_refused_and_the_arms_hold_once_the_plan_runs_dry(robot: RobotConfig, monkeypatch) -> None:
    """A real robot's loop (wall clock): a chunk answering an old observation never replaces the
    plan; when no fresh chunk comes within the watchdog timeout the arms hold where they were
    commanded (the drivers are told once) and nothing more is written."""
    rig, clock = wall_clock_rig(robot, monkeypatch, start=100.0)
    rig.loop.tick()  # the first step holds at the measured position
    wp1 = [[-0.18, 0.0, 0.8], [0.2, 0.02, 0.8]]
    assert rig.loop.submit(chunk([wp1], [[1, 1]]), observation_time=100.0)
    clock.t = 100.1
    rig.loop.tick()
    np.testing.assert_allclose(rig.left.commands[-1], wp1[0], atol=1e-9)

    wp2 = [[-0.1, 0.0, 0.8], [0.2, 0.1, 0.8]]
    age = robot.safety.max_chunk_age + 0.5
    assert not rig.loop.submit(chunk([wp2], [[1, 1]]), observation_time=clock.t - age)
    assert rig.controller.safety.counts["refused_stale"] == 1
    clock.t = 100.4  # within the watchdog timeout of the last accepted chunk: still tracking it
    rig.loop.tick()
    assert rig.controller.mode is Mode.TRACKING
    np.testing.assert_allclose(rig.left.commands[-1], wp1[0], atol=1e-9)

    written = len(rig.left.commands)
    for t in (100.7, 100.8, 100.9):  # past watchdog_timeout (0.5 s) after the chunk of t = 100.0
        clock.t = t
        rig.loop.tick()
    assert rig.controller.mode is Mode.HOLD and rig.controller.safety.counts["watchdog_hold"] == 1
    assert rig.left.holds == rig.right.holds == 2  # once at the start, once now
    assert len(rig.left.commands) == len(rig.right.commands) == written  # nothing written while holding
    np.testing.assert_allclose(rig.controller.step(clock.t).positions, wp1, atol=1e-9)  # held at wp1
    assert rig.loop.measured_at == 100.9  # still read every tick


def test_the_summary_reports_the_mode_and_the_safety_events(rig: Rig) -> None:
    assert rig.loop.summary() == "mode hold; safety events none"
    assert not rig.loop.submit(chunk([[[-0.2, 0.0, 0.8], [0.2, 0.0, 0.8]]], [[1, 1]]), observation_time=-5.0)
    assert rig.loop.summary() == "mode hold; safety events {'refused_stale': 1}"


def test_a_robot_that_cannot_connect_one_arm_releases_both(rig: Rig) -> None:
    closed: list[str] = []
    for arm in (rig.left, rig.right):
        arm.close = lambda arm=arm: closed.append(arm.arm)  # type: ignore[method-assign]
    rig.right.failing.add("connect")
    with pytest.raises(DriverError, match="right arm: connect failed"):
        rig.loop.drivers.connect()
    assert closed == ["left", "right"]


def test_the_period_must_be_positive(robot: RobotConfig) -> None:
    rig = make_rig(robot)
    for period in (0.0, -0.1, float("nan")):
        with pytest.raises(ValueError, match="period_s"):
            ControlLoop(rig.controller, rig.loop.drivers, period)
