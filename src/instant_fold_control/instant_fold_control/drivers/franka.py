"""Franka (Panda / FR3) arm driver through franky (PyPI `franky-control`, wraps libfranka).

Each control tick sends an asynchronous absolute `CartesianMotion` to the new target at the
fixed end-effector orientation; franky pre-empts the running motion and its Ruckig planner
keeps the motion within the relative dynamics (so the controller's linear interpolation reaches
the arm as a smooth, limit-respecting path). franky multiplies the robot's relative dynamics
factor with each motion's, so the configured factor is set once, on the robot, and motions
carry 1.0.

The gripper has its own thread: franky's gripper state reads block (about 0.1 s on hardware)
and a gripper command waits for the previous one to finish, so neither may run in a control
tick. The thread runs the latest requested open/close (`move` to the maximum width, or a
force-controlled `grasp`), checks its result, and otherwise keeps the measured width fresh; a
failed gripper command is reported by the next `read_state` (the controller latches the e-stop).

After `stop()` (e-stop) or a failed motion (e.g. a collision reflex), franky keeps the control
exception and re-raises it on the next motion; the next command therefore first collects it
(`join_motion`) and calls `recover_from_errors()`, so a reset resumes without a restart.

franky is imported when connecting, so the rest of the package works without it; a missing
library or an unreachable FCI raises a DriverError naming the arm and the host. Tested against
`testing/franky_standin.py` (franky's behaviour at this boundary) and up to a real connection
attempt; not on hardware.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from instant_fold_control.config import RobotConfig
from instant_fold_control.drivers.base import (
    ArmDriver,
    ArmMeasurement,
    DriverConnectionError,
    DriverError,
    RobotDrivers,
)
from instant_fold_core.config import check_keys
from instant_fold_core.contracts import gripper_closed
from instant_fold_core.errors import ConfigError

INSTALL_HINT = "the franka driver needs franky: pip install franky-control==2.0.0"


def import_franky() -> Any:
    """The franky module, or a DriverError that says how to install it."""
    try:
        import franky
    except ImportError as exc:
        raise DriverError(f"{INSTALL_HINT} ({exc})") from exc
    return franky


@dataclass(frozen=True)
class FrankaParams:
    """Per-arm parameters (`arms.<arm>.driver` in config/robots/franka.yaml)."""

    host: str
    #: End-effector orientation held fixed (x, y, z, w) in the base frame; None = measured at connect.
    orientation: tuple[float, float, float, float] | None = None
    relative_dynamics_factor: float = 0.1
    gripper_speed: float = 0.05  # m/s
    gripper_force: float = 20.0  # N
    gripper: bool = True

    @classmethod
    def from_mapping(cls, arm: str, values: Mapping[str, Any]) -> FrankaParams:
        where = f"arms.{arm}.driver"
        try:
            check_keys(where, values, optional=cls.__dataclass_fields__)
        except ConfigError as exc:
            raise DriverError(f"Franka parameters: {exc}") from None
        if "host" not in values:
            raise DriverError(f"{where}.host: required (the arm's FCI address)")
        kwargs = dict(values)
        if kwargs.get("orientation") is not None:
            q = np.asarray(kwargs["orientation"], dtype=np.float64)
            if q.shape != (4,) or abs(np.linalg.norm(q) - 1) > 1e-3:
                raise DriverError(
                    f"{where}.orientation: expected a unit quaternion [x, y, z, w], got {kwargs['orientation']!r}"
                )
            kwargs["orientation"] = tuple(float(v) for v in q)
        params = cls(**kwargs)
        if not 0 < params.relative_dynamics_factor <= 1:
            raise DriverError(
                f"{where}.relative_dynamics_factor: must be in (0, 1], got {params.relative_dynamics_factor}"
            )
        return params


def cartesian_motion(franky: Any, position: np.ndarray, orientation: np.ndarray) -> Any:
    """An absolute franky CartesianMotion to `position` (base frame, m) at a fixed orientation.

    Its relative dynamics factor stays 1.0: the robot's factor (set at connect) is the limit.
    """
    pose = franky.Affine(np.asarray(position, dtype=np.float64), np.asarray(orientation, dtype=np.float64))
    return franky.CartesianMotion(franky.RobotPose(pose), franky.ReferenceType.Absolute)


def franky_errors(franky: Any) -> tuple[type[BaseException], ...]:
    """What franky raises for device problems (`GripperException` is not a `franky.Exception`)."""
    return (franky.Exception, franky.GripperException)


class FrankaDriver(ArmDriver):
    """One Franka arm (+ optional Franka Hand).

    `franky` is the franky module to use (default: imported at connect); tests pass the stand-in.
    """

    def __init__(self, arm: str, params: FrankaParams, franky: Any = None) -> None:
        super().__init__(arm)
        self.params = params
        self.label = f"{arm} arm (Franka {params.host})"
        self._franky: Any = franky
        self._errors: tuple[type[BaseException], ...] = ()
        self._robot: Any = None
        self._gripper: GripperWorker | None = None
        self._orientation = np.array([1.0, 0.0, 0.0, 0.0])
        self._needs_recovery = False

    def connect(self) -> None:
        franky = self._franky = self._franky or import_franky()
        self._errors = franky_errors(franky)
        try:
            self._robot = franky.Robot(self.params.host)
            self._robot.relative_dynamics_factor = self.params.relative_dynamics_factor
            self._recover()
            if self.params.gripper:
                self._gripper = GripperWorker(self.label, franky.Gripper(self.params.host), self.params)
        except franky.NetworkException as exc:
            raise DriverConnectionError(f"{self.label}: cannot reach the FCI at {self.params.host}: {exc}") from exc
        except self._errors as exc:
            raise DriverError(f"{self.label}: {exc}") from exc
        measured = self._robot.current_pose.end_effector_pose
        self._orientation = np.asarray(
            self.params.orientation if self.params.orientation is not None else measured.quaternion, dtype=np.float64
        ).ravel()

    def read_state(self) -> ArmMeasurement:
        robot = self._require()
        openness = 1.0 if self._gripper is None else self._gripper.openness()
        try:
            pose = robot.current_pose.end_effector_pose
            joints = robot.current_joint_positions
        except self._errors as exc:
            raise DriverError(f"{self.label}: reading the state failed: {exc}") from exc
        return ArmMeasurement(
            np.asarray(pose.translation, dtype=np.float64).ravel(),
            openness,
            time.monotonic(),
            np.asarray(joints, dtype=np.float64).ravel(),
        )

    def command_cartesian(self, position: np.ndarray) -> None:
        target = self.checked_position(self.label, position)
        robot = self._require()
        motion = cartesian_motion(self._franky, target, self._orientation)
        try:
            if self._needs_recovery:
                self._recover()
            robot.move(motion, asynchronous=True)
        except self._errors as exc:
            self._needs_recovery = True
            raise DriverError(f"{self.label}: motion to {target.tolist()} failed: {exc}") from exc

    def set_gripper(self, openness: float) -> None:
        if self._gripper is not None:
            self._gripper.request(closed=bool(gripper_closed(float(openness))))

    def hold(self) -> None:
        # The last asynchronous CartesianMotion ends at the last commanded target and franky keeps
        # the arm there: settling is what the arm already does, nothing is sent.
        self._require()

    def stop(self) -> None:
        if self._robot is None:
            return
        self._needs_recovery = True  # franky stores the pre-empted motion's exception
        try:
            self._robot.stop()
        except self._errors as exc:
            raise DriverError(f"{self.label}: stop failed: {exc}") from exc

    def close(self) -> None:
        if self._gripper is not None:
            self._gripper.close()
        if self._robot is not None:
            with contextlib.suppress(*self._errors):  # closing anyway
                self._robot.stop()
            self._robot = self._gripper = None

    def _recover(self) -> None:
        """Collect the stored control exception (stop, reflex) and clear the robot's errors."""
        # The stored exception is the one that made recovery necessary; it was reported when it happened.
        with contextlib.suppress(*self._errors):
            self._robot.join_motion()
        if not self._robot.recover_from_errors():
            raise DriverError(f"{self.label}: recover_from_errors() failed; check the arm in Desk")
        self._needs_recovery = False

    def _require(self) -> Any:
        if self._robot is None:
            raise DriverConnectionError(f"{self.label}: not connected")
        return self._robot


class GripperWorker:
    """Owns the Franka Hand on one thread: latest open/close request, result check, fresh width."""

    #: Pause between two width reads when nothing else is to do (a read itself blocks ~0.1 s on hardware).
    POLL_S = 0.05

    def __init__(self, label: str, gripper: Any, params: FrankaParams) -> None:
        self.label = label
        self._gripper = gripper
        self._params = params
        self._max_width = float(gripper.max_width)
        self._width = float(gripper.width)
        self._requested: bool | None = None  # closed?
        self._applied: bool | None = None
        self._error: str | None = None
        self._wake = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name=f"franka-gripper-{label}", daemon=True)
        self._thread.start()

    def request(self, closed: bool) -> None:
        """Ask for open/closed; returns at once (the latest request wins)."""
        with self._wake:
            self._requested = closed
            self._wake.notify()

    def openness(self) -> float:
        """The last measured opening in [0, 1]; DriverError once if a gripper command or read failed."""
        with self._wake:
            error, self._error = self._error, None
            width = self._width
        if error is not None:
            raise DriverError(f"{self.label}: {error}")
        return float(np.clip(width / self._max_width, 0.0, 1.0))

    def close(self) -> None:
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join(timeout=5.0)

    def _run(self) -> None:
        while True:
            with self._wake:
                if self._closing:
                    return
                closed = self._requested if self._requested != self._applied else None
                self._applied = self._requested
            if closed is None:
                self._read_width()
            else:
                self._command(closed)

    def _command(self, closed: bool) -> None:
        p, what = self._params, "grasp" if closed else "open"
        try:
            if closed:
                ok = self._gripper.grasp(0.0, p.gripper_speed, p.gripper_force, epsilon_outer=self._max_width)
            else:
                ok = self._gripper.move(self._max_width, p.gripper_speed)
            if ok:
                return
            error = f"gripper {what} did not succeed (is_grasped false after the command)"
        except Exception as exc:  # franky.Exception or GripperException; the thread must outlive it
            error = f"gripper {what} failed: {exc}"
        with self._wake:
            self._error = error
            self._applied = None  # the request stands and is tried again
            self._wake.wait(self.POLL_S)

    def _read_width(self) -> None:
        try:
            width = float(self._gripper.width)  # blocking read
        except Exception as exc:  # the thread must outlive a failed read; the caller hears of it
            with self._wake:
                self._error = f"gripper state read failed: {exc}"
                self._wake.wait(self.POLL_S)
            return
        with self._wake:
            self._width = width
            if self._requested == self._applied and not self._closing:
                self._wake.wait(self.POLL_S)


def make_robot(config: RobotConfig) -> RobotDrivers:
    """Driver factory registered as `franka`: one FrankaDriver per arm."""
    left, right = (FrankaDriver(arm.name, FrankaParams.from_mapping(arm.name, arm.driver)) for arm in config.arms)
    return RobotDrivers(left, right)
