"""The driver boundary: what the controller needs from one arm, and nothing more.

In the spirit of ros2_control's hardware interfaces, a driver only moves one arm's end effector
to Cartesian positions in that arm's base frame (orientation fixed by the driver), drives its
gripper, and reports what it measures. Safety, frames and timing live in the controller; the
driver's job is the device protocol.

A dual-arm robot is built by a factory registered under a name (`robot.driver` in the robot
config): it returns a `RobotDrivers` with the two arm drivers and, for simulators, a `Lockstep`
that owns simulated time. The node then reads time from the lockstep and advances it once per
control tick, instead of using the wall clock.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from instant_fold_control.config import RobotConfig
from instant_fold_core.errors import ExternalError


class DriverError(ExternalError):
    """A driver cannot do what was asked (device error, bad parameter); the text says which arm/device."""


class DriverConnectionError(DriverError):
    """The device cannot be reached or stopped answering."""


@dataclass(frozen=True)
class ArmMeasurement:
    """One arm's measured state in its base frame."""

    position: np.ndarray  # [3] m
    openness: float  # [0, 1]; 1 = open
    stamp: float  # time.monotonic() of the measurement (or simulated time)
    joints: np.ndarray | None = None  # joint positions (rad) where the device reports them


class ArmDriver(abc.ABC):
    """One arm. All positions are in the arm's base frame, in metres."""

    def __init__(self, arm: str) -> None:
        self.arm = arm

    @abc.abstractmethod
    def connect(self) -> None:
        """Reach the device, enable it and start holding its current pose; DriverConnectionError if unreachable."""

    @abc.abstractmethod
    def read_state(self) -> ArmMeasurement:
        """The latest measurement (non-blocking)."""

    @abc.abstractmethod
    def command_cartesian(self, position: np.ndarray) -> None:
        """Track this end-effector position (fixed orientation); called at the control rate."""

    @abc.abstractmethod
    def set_gripper(self, openness: float) -> None:
        """Open (1) or close (0) the gripper."""

    @abc.abstractmethod
    def hold(self) -> None:
        """No new targets will come for a while: settle at the last commanded position and stay."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop motion now (e-stop path); commanding again resumes."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop and release the device (idempotent)."""

    @staticmethod
    def checked_position(arm: str, position: np.ndarray) -> np.ndarray:
        """Last line of defence: a driver never forwards a non-finite position."""
        p = np.asarray(position, dtype=np.float64)
        if p.shape != (3,) or not np.isfinite(p).all():
            raise DriverError(f"{arm} arm: refusing to send position {p.tolist()} (need 3 finite values)")
        return p


class Lockstep(Protocol):
    """Simulated time owned by a simulator-backed robot."""

    def now(self) -> float:
        """Current simulated time (s)."""
        ...

    def advance(self, until: float) -> None:
        """Simulate up to `until` (blocking), after the tick's commands were sent."""
        ...


@dataclass
class RobotDrivers:
    """The drivers of a dual-arm robot (left, right) and, for simulators, its lockstep."""

    left: ArmDriver
    right: ArmDriver
    lockstep: Lockstep | None = None

    @property
    def arms(self) -> tuple[ArmDriver, ArmDriver]:
        return (self.left, self.right)

    def connect(self) -> None:
        """Connect both arms; if one cannot be reached, release both and re-raise (a half-connected
        robot would hold a device nobody commands)."""
        try:
            for driver in self.arms:
                driver.connect()
        except DriverError:
            self.close()
            raise

    def close(self) -> None:
        for driver in self.arms:
            driver.close()


DriverFactory = Callable[[RobotConfig], RobotDrivers]
