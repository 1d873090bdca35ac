"""The `sim` robot driver: the controller's arms are the sim node's kinematic grippers.

Registered under the entry-point group `instant_fold_control.drivers` (name `sim`), so the
controller loads it like the Dobot or Franka drivers. Both arm drivers share one `SimLink`: a
small ROS client of the sim node's `sim/step` service, with its own node and executor thread
inside the controller process. The link is also the robot's `Lockstep`: the controller reads
simulated time from it and, after sending a tick's commands, asks it to advance to the next tick;
the call returns once the simulator has stepped, so simulated time never runs ahead of control.

Positions cross the boundary in the camera optical frame (the sim node's frame); the arm drivers
convert to and from each arm's base frame with the same extrinsics the controller uses, so the
sim robot needs no calibration of its own.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from instant_fold_control.config import ArmConfig, RobotConfig
from instant_fold_control.drivers.base import (
    ArmDriver,
    ArmMeasurement,
    DriverConnectionError,
    DriverError,
    RobotDrivers,
)
from instant_fold_interfaces.srv import SimStep
from instant_fold_ros.node_main import spin_until_shutdown, wait_for_future

DEFAULT_SERVICE = "sim/step"
DEFAULT_TIMEOUT_S = 60.0  # one step may simulate several frames on a slow CPU


class SimLink:
    """Shared state of both simulated arms and the lock-stepped connection to the sim node."""

    def __init__(self, service: str = DEFAULT_SERVICE, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.service = service
        self.timeout_s = timeout_s
        self.target = np.zeros((2, 3))  # camera frame
        self.openness = np.ones(2)
        self.state: np.ndarray | None = None  # [2, 4] camera frame, from the last answer
        self.sim_time = 0.0
        self._node: Node | None = None
        self._client: Any = None
        self._executor: SingleThreadedExecutor | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def connect(self, wait_s: float = 30.0) -> None:
        if self._node is not None:
            return
        # Not the process's global arguments: those rename every node to the controller's name.
        node = self._node = rclpy.create_node("sim_driver_link", use_global_arguments=False)
        self._client = node.create_client(SimStep, self.service)
        self._executor = SingleThreadedExecutor()
        self._executor.add_node(node)
        self._thread = threading.Thread(target=self._spin, name="sim_driver_link", daemon=True)
        self._thread.start()
        if not self._client.wait_for_service(timeout_sec=wait_s):
            self.close()
            raise DriverConnectionError(
                f"sim driver: no simulator answers on '{self.service}' after {wait_s:g} s (is the sim node running?)"
            )
        self._call(until=-1.0)  # read the state without stepping
        assert self.state is not None
        self.target = self.state[:, :3].copy()
        self.openness = self.state[:, 3].copy()

    def _spin(self) -> None:
        # Ctrl-C shuts the process's context down before the controller closes its drivers.
        if self._executor is not None:
            spin_until_shutdown(self._executor)

    def _call(self, until: float) -> None:
        if self._client is None:
            raise DriverConnectionError("sim driver: not connected")
        request = SimStep.Request(
            target=self.target.ravel().tolist(), openness=self.openness.tolist(), until=float(until)
        )
        with self._lock:
            future = self._client.call_async(request)
            if not wait_for_future(future, self.timeout_s):
                raise DriverConnectionError(f"sim driver: '{self.service}' did not answer within {self.timeout_s:g} s")
        response = future.result()
        if response is None or not response.success:
            raise DriverError(f"sim driver: step refused: {getattr(response, 'message', 'no response')}")
        self.state = np.asarray(response.state, dtype=np.float64).reshape(2, 4)
        self.sim_time = float(response.sim_time)

    # Lockstep
    def now(self) -> float:
        return self.sim_time

    def advance(self, until: float) -> None:
        self._call(until)

    def close(self) -> None:
        """Stop the executor thread, then destroy the node (idempotent)."""
        if self._executor is not None:
            self._executor.shutdown(timeout_sec=1.0)
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        if self._node is not None:
            self._node.destroy_node()
        self._node = self._client = self._executor = self._thread = None


class SimArmDriver(ArmDriver):
    """One simulated arm: base-frame commands in, base-frame measurements out."""

    def __init__(self, index: int, arm: ArmConfig, link: SimLink) -> None:
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


def make_robot(config: RobotConfig) -> RobotDrivers:
    """Entry point `sim`: two arms on one lock-stepped link (options under `arms.<arm>.driver`
    of the left arm: `service`, `timeout_s`)."""
    options = dict(config.arms[0].driver)
    link = SimLink(str(options.get("service", DEFAULT_SERVICE)), float(options.get("timeout_s", DEFAULT_TIMEOUT_S)))
    left, right = (SimArmDriver(i, arm, link) for i, arm in enumerate(config.arms))
    return RobotDrivers(left, right, lockstep=link)
