"""The simulated dual arm behind the controller's driver boundary, without ROS.

Both arm drivers share one link to the simulator, which is also the robot's `Lockstep`: the
controller reads simulated time from it and, after a tick's commands, asks it to advance. The
link's transport is the only thing that differs between hosts: `sim_driver.SimLink` calls the sim
node's `sim/step` service over DDS (sim in the loop), `WorldLink` steps a `SimWorld` in the same
process (the evaluator). Everything else (frames, checks, lockstep) is this module's, so both
hosts drive the simulator through the same code.

Positions cross the link in the camera optical frame (the simulator's frame); the arm drivers
convert to and from each arm's base frame with the same extrinsics the controller uses, so the
sim robot needs no calibration of its own.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

import numpy as np

from instant_fold_control.config import ArmConfig, RobotConfig
from instant_fold_control.drivers.base import (
    ArmDriver,
    ArmMeasurement,
    DriverConnectionError,
    DriverError,
    RobotDrivers,
)

if TYPE_CHECKING:  # the simulator is imported only by the in-process link, not by the controller's `sim` driver
    from .sim_world import SimWorld


class SimLinkBase(abc.ABC):
    """Shared state of both simulated arms and the lock-stepped connection to the simulator."""

    def __init__(self) -> None:
        self.target = np.zeros((2, 3))  # camera frame
        self.openness = np.ones(2)
        self.state: np.ndarray | None = None  # [2, 4] camera frame, from the last exchange
        self.sim_time = 0.0
        self.connected = False

    @abc.abstractmethod
    def _exchange(self, until: float) -> tuple[np.ndarray, float]:
        """Send the targets, simulate up to `until` (-1: read only), return (state [2, 4], sim time)."""

    @abc.abstractmethod
    def _open(self) -> None:
        """Reach the simulator (transport set-up); DriverConnectionError if it cannot be reached."""

    @abc.abstractmethod
    def _close(self) -> None:
        """Release the transport."""

    def connect(self) -> None:
        if self.connected:
            return
        self._open()
        self.connected = True
        self._call(until=-1.0)  # read the state without stepping
        assert self.state is not None
        self.target = self.state[:, :3].copy()
        self.openness = self.state[:, 3].copy()

    def _call(self, until: float) -> None:
        if not self.connected:
            raise DriverConnectionError("sim driver: not connected")
        state, sim_time = self._exchange(until)
        self.state = np.asarray(state, dtype=np.float64).reshape(2, 4)
        self.sim_time = float(sim_time)

    # Lockstep
    def now(self) -> float:
        return self.sim_time

    def advance(self, until: float) -> None:
        self._call(until)

    def close(self) -> None:
        """Release the transport (idempotent)."""
        if self.connected:
            self._close()
        self.connected = False


class WorldLink(SimLinkBase):
    """The link to a `SimWorld` in this process: a step is a direct call."""

    def __init__(self, world: SimWorld) -> None:
        super().__init__()
        self.world = world

    def _open(self) -> None:
        """Nothing to reach: the world is in this process."""

    def _close(self) -> None:
        """Nothing to release: the world belongs to the caller."""

    def _exchange(self, until: float) -> tuple[np.ndarray, float]:
        from .sim_world import SimWorldError

        try:
            self.world.step(self.target, self.openness, until)
        except SimWorldError as exc:
            raise DriverError(f"sim driver: step refused: {exc}") from exc
        return self.world.arm_state(), self.world.sim_time


class SimArmDriver(ArmDriver):
    """One simulated arm: base-frame commands in, base-frame measurements out."""

    def __init__(self, index: int, arm: ArmConfig, link: SimLinkBase) -> None:
        super().__init__(arm.name)
        self.index, self.extrinsics, self.link = index, arm.extrinsics, link

    def connect(self) -> None:
        self.link.connect()

    def read_state(self) -> ArmMeasurement:
        if self.link.state is None:
            raise DriverConnectionError(f"{self.arm} arm: sim driver not connected")
        s = self.link.state[self.index]
        return ArmMeasurement(self.extrinsics.to_base(s[:3]), float(s[3]), self.link.sim_time)

    def command_cartesian(self, position: np.ndarray) -> None:
        self.link.target[self.index] = self.extrinsics.to_camera(self.checked_position(self.arm, position))

    def set_gripper(self, openness: float) -> None:
        if not np.isfinite(openness):
            raise DriverError(f"{self.arm} arm: refusing gripper openness {openness}")
        self.link.openness[self.index] = float(np.clip(openness, 0.0, 1.0))

    def hold(self) -> None:
        """The kinematic gripper stays at its last target: nothing to send."""

    def stop(self) -> None:
        """Simulated time only advances while tracking, so a stopped arm stays where it is."""

    def close(self) -> None:
        self.link.close()


def sim_robot(config: RobotConfig, link: SimLinkBase) -> RobotDrivers:
    """Two simulated arms on one lock-stepped link."""
    left, right = (SimArmDriver(i, arm, link) for i, arm in enumerate(config.arms))
    return RobotDrivers(left, right, lockstep=link)
