"""Franka (Panda / FR3) arm driver through franky (PyPI `franky-control`, wraps libfranka).

Each control tick sends an asynchronous absolute `CartesianMotion` to the new target at the
fixed end-effector orientation; franky pre-empts the running motion and its Ruckig planner
keeps the motion within the configured relative dynamics (so the controller's linear
interpolation reaches the arm as a smooth, limit-respecting path). The gripper opens with
`move_async(max_width)` and closes with `grasp_async` (force-controlled), on state changes only.

franky is imported when connecting, so the rest of the package works without it; a missing
library or an unreachable FCI raises a DriverError naming the arm and the host. Tested up to the
library boundary (real franky motion objects, real connection attempts); not on hardware.
"""

from __future__ import annotations

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
        unknown = sorted(set(values) - set(cls.__dataclass_fields__))
        if unknown:
            raise DriverError(f"{where}: unknown Franka parameters {unknown}")
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


def cartesian_motion(franky: Any, position: np.ndarray, orientation: np.ndarray, dynamics: float) -> Any:
    """An absolute franky CartesianMotion to `position` (base frame, m) at a fixed orientation."""
    pose = franky.Affine(np.asarray(position, dtype=np.float64), np.asarray(orientation, dtype=np.float64))
    return franky.CartesianMotion(
        franky.RobotPose(pose), franky.ReferenceType.Absolute, relative_dynamics_factor=dynamics
    )


class FrankaDriver(ArmDriver):
    """One Franka arm (+ optional Franka Hand)."""

    def __init__(self, arm: str, params: FrankaParams) -> None:
        super().__init__(arm)
        self.params = params
        self.label = f"{arm} arm (Franka {params.host})"
        self._franky: Any = None
        self._robot: Any = None
        self._gripper: Any = None
        self._orientation = np.array([1.0, 0.0, 0.0, 0.0])
        self._max_width = 0.08
        self._gripper_closed: bool | None = None

    def connect(self) -> None:
        franky = self._franky = import_franky()
        try:
            self._robot = franky.Robot(self.params.host)
            self._robot.relative_dynamics_factor = self.params.relative_dynamics_factor
            self._robot.recover_from_errors()
            if self.params.gripper:
                self._gripper = franky.Gripper(self.params.host)
                self._max_width = float(self._gripper.max_width)
        except franky.NetworkException as exc:
            raise DriverConnectionError(f"{self.label}: cannot reach the FCI at {self.params.host}: {exc}") from exc
        except franky.Exception as exc:
            raise DriverError(f"{self.label}: {exc}") from exc
        measured = self._robot.current_pose.end_effector_pose
        self._orientation = np.asarray(
            self.params.orientation if self.params.orientation is not None else measured.quaternion, dtype=np.float64
        ).ravel()

    def read_state(self) -> ArmMeasurement:
        robot = self._require()
        pose = robot.current_pose.end_effector_pose
        openness = 1.0 if self._gripper is None else float(np.clip(self._gripper.width / self._max_width, 0, 1))
        return ArmMeasurement(
            np.asarray(pose.translation, dtype=np.float64).ravel(),
            openness,
            time.monotonic(),
            np.asarray(robot.current_joint_positions, dtype=np.float64).ravel(),
        )

    def command_cartesian(self, position: np.ndarray) -> None:
        target = self.checked_position(self.label, position)
        robot = self._require()
        motion = cartesian_motion(self._franky, target, self._orientation, self.params.relative_dynamics_factor)
        try:
            robot.move(motion, asynchronous=True)
        except self._franky.Exception as exc:
            raise DriverError(f"{self.label}: motion to {target.tolist()} failed: {exc}") from exc

    def set_gripper(self, openness: float) -> None:
        closed = float(openness) < 0.5
        if self._gripper is None or closed == self._gripper_closed:
            return
        p = self.params
        if closed:
            self._gripper.grasp_async(0.0, p.gripper_speed, p.gripper_force, epsilon_outer=self._max_width)
        else:
            self._gripper.move_async(self._max_width, p.gripper_speed)
        self._gripper_closed = closed

    def hold(self) -> None:
        # The last asynchronous CartesianMotion ends at the last commanded target and franky keeps
        # the arm there: settling is what the arm already does, nothing is sent.
        self._require()

    def stop(self) -> None:
        if self._robot is not None:
            self._robot.stop()

    def close(self) -> None:
        if self._robot is not None:
            try:
                self._robot.stop()
            finally:
                self._robot = self._gripper = None

    def _require(self) -> Any:
        if self._robot is None:
            raise DriverConnectionError(f"{self.label}: not connected")
        return self._robot


def make_robot(config: RobotConfig) -> RobotDrivers:
    """Driver factory registered as `franka`: one FrankaDriver per arm."""
    left, right = (FrankaDriver(arm.name, FrankaParams.from_mapping(arm.name, arm.driver)) for arm in config.arms)
    return RobotDrivers(left, right)
