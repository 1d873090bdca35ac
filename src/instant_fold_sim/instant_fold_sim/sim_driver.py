"""The `sim` robot driver: the controller's arms are the sim node's kinematic grippers.

Registered under the entry-point group `instant_fold_control.drivers` (name `sim`), so the
controller loads it like the Dobot or Franka drivers. The arms and the lockstep are
`sim_arms`' (shared with the in-process evaluator); this module is only their transport over
ROS: `SimLink` is a small client of the sim node's `sim/step` service, with its own node and
executor thread inside the controller process. A step call returns once the simulator has
stepped, so simulated time never runs ahead of control.

A step takes as long as the simulator needs on this machine: the link waits for the answer while
the sim node's service is on the graph, and fails only once it has been gone for `timeout_s`
(a wall-clock bound on the answer would abort a lock-stepped fold whenever the CPU is busy).

The first exchange, the read at connect, is re-sent every `READ_RESEND_S` until answered: DDS
discovery is not symmetric, so `wait_for_service` can return before the simulator has matched the
link's reply reader, and a reply sent then is lost for good (seen once in CI: the read waited until
the test's timeout). A read changes nothing in the simulator, so sending it twice is harmless; by
the time it is answered both directions are matched, and steps are sent once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from instant_fold_control.config import RobotConfig
from instant_fold_control.drivers.base import DriverConnectionError, DriverError, RobotDrivers
from instant_fold_interfaces.srv import SimStep
from instant_fold_ros.node_main import ExecutorThread

from .sim_arms import SimLinkBase, sim_robot

DEFAULT_SERVICE = "sim/step"
DEFAULT_TIMEOUT_S = 10.0  # s the simulator may be gone from the graph during a step
DEFAULT_CONNECT_TIMEOUT_S = 30.0  # s to wait for the simulator's service at connect
#: How often a waiting step checks that the simulator is still on the graph (s).
LIVENESS_CHECK_S = 0.5
#: How long an unanswered read waits before it is sent again (s).
READ_RESEND_S = 1.0


class SimLink(SimLinkBase):
    """The link to the sim node over its `sim/step` service."""

    def __init__(
        self,
        service: str = DEFAULT_SERVICE,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    ) -> None:
        super().__init__()
        self.service = service
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._node: Node | None = None
        self._client: Any = None
        self._spinner: ExecutorThread | None = None
        self._lock = threading.Lock()

    def _open(self) -> None:
        wait_s = self.connect_timeout_s
        # Not the process's global arguments: those rename every node to the controller's name.
        node = self._node = rclpy.create_node("sim_driver_link", use_global_arguments=False)
        self._client = node.create_client(SimStep, self.service)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        self._spinner = ExecutorThread(executor, "sim_driver_link")
        self._spinner.start()
        try:
            ready = self._client.wait_for_service(timeout_sec=wait_s)
        except BaseException:
            # Ctrl-C while waiting (the runner stopping a graph whose sim node failed): stop the
            # link's thread and node before the exception leaves. Left spinning, the process ended
            # with them alive and the C++ runtime aborted it ("terminate called without an
            # active exception" in the graph's log).
            self._close()
            raise
        if not ready:
            self._close()
            raise DriverConnectionError(
                f"sim driver: no simulator answers on '{self.service}' after {wait_s:g} s (is the sim node running?)"
            )

    def _exchange(self, until: float) -> tuple[np.ndarray, float]:
        if self._client is None:
            raise DriverConnectionError("sim driver: not connected")
        request = SimStep.Request(
            target=self.target.ravel().tolist(), openness=self.openness.tolist(), until=float(until)
        )
        with self._lock:
            future = self._wait_while_alive(request, resend_s=READ_RESEND_S if until < 0 else None)
        response = future.result()
        if response is None or not response.success:
            raise DriverError(f"sim driver: step refused: {getattr(response, 'message', 'no response')}")
        return np.asarray(response.state, dtype=np.float64), float(response.sim_time)

    def _wait_while_alive(self, request: SimStep.Request, resend_s: float | None) -> Any:
        """Send `request` and wait for its answer as long as the simulator is on the graph (sent
        again every `resend_s` while unanswered, if given); the first answered future.
        DriverConnectionError (the request cancelled) once the simulator has been gone for
        `timeout_s`."""
        answered: list[Any] = []  # futures in the order their replies came
        replied = threading.Event()

        def on_reply(future: Any) -> None:
            answered.append(future)
            replied.set()

        def send() -> Any:
            future = self._client.call_async(request)
            future.add_done_callback(on_reply)
            return future

        future, sent_at = send(), time.monotonic()
        gone_since: float | None = None
        while not replied.wait(LIVENESS_CHECK_S):
            client = self._client  # None once the link is closed from another thread (shutdown)
            if client is None:
                future.cancel()
                raise DriverConnectionError("sim driver: the link was closed during a step")
            now = time.monotonic()
            if client.service_is_ready():
                gone_since = None
                if resend_s is not None and now - sent_at >= resend_s:
                    client.remove_pending_request(future)  # a reply still in flight may yet come
                    future, sent_at = send(), now
                continue
            gone_since = now if gone_since is None else gone_since
            if now - gone_since >= self.timeout_s:
                future.cancel()
                raise DriverConnectionError(
                    f"sim driver: the simulator ('{self.service}') left the graph during a step "
                    f"(gone for {self.timeout_s:g} s)"
                )
        if answered[0] is not future:
            client = self._client
            if client is not None:
                client.remove_pending_request(future)
        return answered[0]

    def _close(self) -> None:
        """Stop the executor thread, then destroy the node (`ExecutorThread.stop`)."""
        if self._spinner is not None:
            self._spinner.stop(self._node)
        self._node = self._client = self._spinner = None


def make_robot(config: RobotConfig) -> RobotDrivers:
    """Entry point `sim`: two arms on one lock-stepped link (options under `arms.<arm>.driver`
    of the left arm: `service`; `timeout_s`, how long the simulator may be gone from the graph;
    `connect_timeout_s`, how long to wait for it at connect: a simulator answers once its scene
    is built, which for the Isaac Lab backend takes minutes)."""
    options = dict(config.arms[0].driver)
    link = SimLink(
        str(options.get("service", DEFAULT_SERVICE)),
        float(options.get("timeout_s", DEFAULT_TIMEOUT_S)),
        float(options.get("connect_timeout_s", DEFAULT_CONNECT_TIMEOUT_S)),
    )
    return sim_robot(config, link)
