"""The Franka driver: against the franky stand-in (franky's behaviour at the module boundary, with
real franky motion objects and exceptions), and real franky objects and connection attempts."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from instant_fold_control.drivers.base import DriverConnectionError, DriverError
from instant_fold_control.drivers.franka import FrankaDriver, FrankaParams, cartesian_motion, import_franky
from instant_fold_control.testing.franky_standin import FrankyStandIn

HOST = "franka-standin"


@pytest.fixture
def franky() -> Any:
    return import_franky()  # franky-control is in the pinned environment


@pytest.fixture
def standin(franky: Any) -> FrankyStandIn:
    return FrankyStandIn(franky, gripper_read_s=0.02)


@pytest.fixture
def driver(standin: FrankyStandIn) -> Iterator[FrankaDriver]:
    d = FrankaDriver("left", FrankaParams(host=HOST, gripper_speed=1.0), franky=standin)
    d.connect()
    yield d
    d.close()


def _wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def _next_error(driver: FrankaDriver) -> str:
    """The text of the first DriverError that read_state raises (within the wait)."""
    errors: list[str] = []

    def failed() -> bool:
        try:
            driver.read_state()
        except DriverError as exc:
            errors.append(str(exc))
        return bool(errors)

    assert _wait_for(failed)
    return errors[0]


def test_the_dynamics_factor_applies_once(driver: FrankaDriver, standin: FrankyStandIn) -> None:
    """Item 1: franky multiplies robot and motion factors; the configured 0.1 must be the product."""
    robot = standin.robots[HOST]
    driver.command_cartesian(np.array([0.45, 0.0, 0.3]))
    assert robot.effective_dynamics_factor == pytest.approx(0.1)
    assert robot.speed_limit == pytest.approx(0.17)  # franky's default 1.7 m/s limit x 0.1


def test_state_reads_never_wait_for_the_gripper(driver: FrankaDriver, standin: FrankyStandIn) -> None:
    """Item 2: Gripper.width blocks (~0.1 s on hardware): it is read on the gripper thread, never in read_state."""
    gripper = standin.grippers[HOST]
    caller = threading.get_ident()
    reads_at_connect = gripper.width_reads.count(caller)
    for _ in range(20):
        driver.read_state()
    assert gripper.width_reads.count(caller) == reads_at_connect
    assert driver.read_state().openness == pytest.approx(1.0)
    driver.set_gripper(0.0)
    assert _wait_for(lambda: driver.read_state().openness == pytest.approx(0.0))  # measured width, fresh


def test_gripper_commands_never_stall_the_caller_and_failures_are_reported(
    driver: FrankaDriver, standin: FrankyStandIn, franky: Any
) -> None:
    """Item 3: franky waits for the previous gripper command; that wait must not be in a control tick."""
    gripper = standin.grippers[HOST]
    gripper.hold_motions()  # the grasp does not finish until released
    driver.set_gripper(0.0)
    assert _wait_for(lambda: gripper.commands[-1:] == [("grasp", 0.0)])
    opener = threading.Thread(target=driver.set_gripper, args=(1.0,), daemon=True)
    opener.start()
    opener.join(timeout=3.0)
    assert not opener.is_alive()  # returned while the grasp is still running
    gripper.release_motions()
    assert _wait_for(lambda: gripper.commands[-1:] == [("move", 0.08)])
    assert _wait_for(lambda: driver.read_state().openness == pytest.approx(1.0))
    gripper.fail_next = franky.CommandException("libfranka gripper: Command failed!")
    driver.set_gripper(0.0)
    assert "gripper grasp failed: libfranka gripper: Command failed!" in _next_error(driver)
    assert _wait_for(lambda: driver.read_state().openness == pytest.approx(0.0))  # the request stood and was retried
    gripper.fail_next = franky.GripperException("gripper connection lost")  # not a franky.Exception
    driver.set_gripper(1.0)
    assert "left arm (Franka franka-standin): gripper open failed: gripper connection lost" in _next_error(driver)
    assert _wait_for(lambda: driver.read_state().openness == pytest.approx(1.0))


def test_motion_resumes_after_an_estop_and_reset(driver: FrankaDriver, standin: FrankyStandIn) -> None:
    """Item 4: stop() leaves franky a stored control exception; the next command must not re-raise it."""
    robot = standin.robots[HOST]
    driver.command_cartesian(np.array([0.5, 0.0, 0.3]))
    driver.stop()
    moves = robot.moves
    driver.command_cartesian(np.array([0.5, 0.05, 0.3]))  # after the controller's reset
    assert robot.moves == moves + 1
    assert np.allclose(robot.target, [0.5, 0.05, 0.3])


def test_a_collision_reflex_is_reported_then_recovered_without_a_restart(
    driver: FrankaDriver, standin: FrankyStandIn
) -> None:
    robot = standin.robots[HOST]
    driver.command_cartesian(np.array([0.5, 0.0, 0.3]))
    robot.collide()
    with pytest.raises(DriverError, match="reflex"):
        driver.command_cartesian(np.array([0.5, 0.0, 0.3]))  # reported: the controller latches its e-stop
    driver.command_cartesian(np.array([0.5, 0.02, 0.3]))  # after reset: recovered, moving again
    assert not robot.has_errors
    assert _wait_for(lambda: np.allclose(driver.read_state().position, [0.5, 0.02, 0.3], atol=1e-6))


def test_gripper_exceptions_at_connect_become_driver_errors(standin: FrankyStandIn, franky: Any) -> None:
    """Item 4: franky.GripperException is not a franky.Exception and used to escape the error mapping."""

    def broken_gripper(host: str) -> Any:
        raise franky.GripperException("no gripper at " + host)

    standin.Gripper = broken_gripper  # type: ignore[method-assign]
    driver = FrankaDriver("right", FrankaParams(host=HOST), franky=standin)
    with pytest.raises(DriverError, match=r"right arm \(Franka franka-standin\): no gripper at franka-standin"):
        driver.connect()
    driver.close()


def test_missing_franky_gives_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "franky", None)  # makes `import franky` raise ImportError
    with pytest.raises(DriverError, match="pip install franky-control"):
        FrankaDriver("left", FrankaParams(host="127.0.0.1")).connect()


def test_motion_is_an_absolute_cartesian_target_at_fixed_orientation() -> None:
    franky = pytest.importorskip("franky", reason="franky-control is not installed (see docs/control.md)")
    down = np.array([1.0, 0.0, 0.0, 0.0])  # x, y, z, w: gripper pointing down
    motion = cartesian_motion(franky, np.array([0.45, -0.1, 0.2]), down)
    assert isinstance(motion, franky.CartesianMotion)
    assert motion.relative_dynamics_factor.velocity == 1.0  # the robot's factor is the limit
    assert motion.reference_type == franky.ReferenceType.Absolute
    pose = motion.target.pose.end_effector_pose
    assert np.allclose(np.ravel(pose.translation), [0.45, -0.1, 0.2])
    q = np.ravel(pose.quaternion)
    assert np.allclose(q, down) or np.allclose(q, -down)
    # franky's Affine agrees with our quaternion convention (x, y, z, w)
    from instant_fold_control.transforms import quaternion_to_matrix

    assert np.allclose(pose.matrix[:3, :3], quaternion_to_matrix(down))


def test_unreachable_robot_gives_a_clear_error() -> None:
    pytest.importorskip("franky", reason="franky-control is not installed (see docs/control.md)")
    driver = FrankaDriver("right", FrankaParams(host="127.0.0.1"))
    with pytest.raises(
        DriverConnectionError, match=r"right arm \(Franka 127.0.0.1\): cannot reach the FCI at 127.0.0.1"
    ):
        driver.connect()
    with pytest.raises(DriverConnectionError, match="not connected"):
        driver.read_state()
    with pytest.raises(DriverError, match="refusing to send"):
        driver.command_cartesian(np.array([np.inf, 0, 0]))
    driver.close()


def test_params_are_validated() -> None:
    with pytest.raises(DriverError, match=r"arms\.left\.driver\.orientation: expected a unit quaternion"):
        FrankaParams.from_mapping("left", {"host": "x", "orientation": [1, 1, 0, 0]})
    with pytest.raises(DriverError, match="relative_dynamics_factor"):
        FrankaParams.from_mapping("left", {"host": "x", "relative_dynamics_factor": 2})
    with pytest.raises(
        DriverError, match=r"Franka parameters: arms.left.driver: unknown keys \['arms.left.driver.speed'\]"
    ):
        FrankaParams.from_mapping("left", {"host": "x", "speed": 1})
    params = FrankaParams.from_mapping("left", {"host": "x", "orientation": [0, 0, 0, 1]})
    assert params.orientation == (0.0, 0.0, 0.0, 1.0)


def test_import_guard_returns_the_module_when_installed() -> None:
    franky = pytest.importorskip("franky", reason="franky-control is not installed (see docs/control.md)")
    assert import_franky() is franky


def test_the_standin_offers_only_what_franky_has(franky: Any) -> None:
    """Every Robot/Gripper member the stand-in simulates exists on franky's real classes."""
    from instant_fold_control.testing.franky_standin import StandInGripper, StandInRobot

    hooks = {"collide", "speed_limit", "hold_motions", "release_motions"}
    for standin_cls, real in ((StandInRobot, franky.Robot), (StandInGripper, franky.Gripper)):
        simulated = {n for n in vars(standin_cls) if not n.startswith("_")} - hooks
        assert simulated and all(hasattr(real, n) for n in simulated), sorted(
            n for n in simulated if not hasattr(real, n)
        )
