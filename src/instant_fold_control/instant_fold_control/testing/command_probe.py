"""A stand-in policy for integration tests: runs a script of chunks and service calls, records states.

It builds `ActionChunk` messages field by field (not through the validating conversions), so
it can send exactly what a faulty policy would: NaN steps, targets outside the workspace. It
waits for the first `arms/state`, runs each action after its delay (a chunk on `arms/command`,
or a std_srvs/Trigger call such as `control/estop`), keeps listening for `listen_s`, then
writes a JSON report (action times, service answers and when they came, states with receive
times) and exits 0.

Usage: python -m instant_fold_control.testing.command_probe SCRIPT.json REPORT.json [--ros-args ...]
where SCRIPT.json is a list of actions, each {"delay_s": s, "chunk": {positions [H][2][3],
openness [H][2], representation, steps_to_execute, step_duration}} (with "unstamped": true, its
header stamp is 0) or {"delay_s": s, "call": service name}. Times are time.monotonic() (system-wide on Linux, comparable across processes).
"""

from __future__ import annotations

import array
import functools
import json
import sys
import time
from pathlib import Path
from typing import Any

import rclpy
from rclpy.client import Client
from rclpy.node import Node
from rclpy.task import Future
from rclpy.time import Time
from std_srvs.srv import Trigger

from instant_fold_interfaces.msg import ActionChunk, DualArmState
from instant_fold_ros.conversions import dual_arm_state_from_msg, make_header
from instant_fold_ros.node_main import run_node
from instant_fold_ros.qos import COMMAND_QOS, OBSERVATION_QOS


def chunk_message(spec: dict[str, Any], header: Any) -> ActionChunk:
    """An ActionChunk with exactly these values (no validation: the point is to send bad ones)."""
    positions = [float(v) for step in spec["positions"] for arm in step for v in arm]
    openness = [float(v) for step in spec["openness"] for v in step]
    return ActionChunk(
        header=header,
        representation=int(spec["representation"]),
        horizon=len(spec["positions"]),
        steps_to_execute=int(spec["steps_to_execute"]),
        step_duration=float(spec["step_duration"]),
        positions=array.array("f", positions),
        openness=array.array("f", openness),
    )


class CommandProbe(Node):
    def __init__(self, actions: list[dict[str, Any]], report: Path) -> None:
        super().__init__("command_probe")
        self.listen_s = float(self.declare_parameter("listen_s", 2.0).value)
        self.timeout_s = float(self.declare_parameter("timeout_s", 60.0).value)
        self.frame_id = str(self.declare_parameter("frame_id", "camera_color_optical_frame").value)
        self.actions, self.report = actions, report
        self.states: list[dict[str, Any]] = []
        self.done: list[dict[str, Any]] = []  # executed actions: time and, for calls, the answer
        self.finished, self.exit_code = False, 1
        self._last_action: float | None = None
        self._in_flight = False
        self._started = time.monotonic()
        self._pub = self.create_publisher(ActionChunk, "arms/command", COMMAND_QOS)
        self._trigger_clients: dict[str, Client] = {
            a["call"]: self.create_client(Trigger, a["call"]) for a in actions if "call" in a
        }
        self.create_subscription(DualArmState, "arms/state", self._on_state, OBSERVATION_QOS)
        self.create_timer(0.005, self._tick)

    def _on_state(self, msg: DualArmState) -> None:
        self.states.append({"t": time.monotonic(), "state": dual_arm_state_from_msg(msg).tolist()})

    def _ready(self) -> bool:
        return (
            bool(self.states)
            and self._pub.get_subscription_count() > 0
            and all(c.service_is_ready() for c in self._trigger_clients.values())
        )

    def _tick(self) -> None:
        now = time.monotonic()
        if now - self._started > self.timeout_s:
            self._finish(f"timed out after {self.timeout_s} s (states: {len(self.states)}, actions: {len(self.done)})")
            return
        if self._in_flight or not self._ready():
            return
        if self._last_action is None:
            self._last_action = now
        if len(self.done) == len(self.actions):
            if now - self._last_action >= self.listen_s:
                self._finish(None)
            return
        action = self.actions[len(self.done)]
        if now - self._last_action < action.get("delay_s", 0.0):
            return
        self._last_action = now
        if "chunk" in action:
            stamp = Time() if action.get("unstamped") else self.get_clock().now()
            header = make_header(self.frame_id, stamp.to_msg())
            self._pub.publish(chunk_message(action["chunk"], header))
            self.done.append({"t": now, "chunk": True})
        else:
            self._in_flight = True
            future = self._trigger_clients[action["call"]].call_async(Trigger.Request())
            future.add_done_callback(functools.partial(self._answered, t=now, name=action["call"]))

    def _answered(self, future: Future, *, t: float, name: str) -> None:
        response, answered = future.result(), time.monotonic()
        if response is None:
            self.done.append({"t": t, "call": name, "success": False, "message": "no answer", "answered_t": answered})
        else:
            self.done.append(
                {"t": t, "call": name, "success": response.success, "message": response.message, "answered_t": answered}
            )
        self._last_action = answered
        self._in_flight = False

    def _finish(self, failure: str | None) -> None:
        report = {"failure": failure, "actions": self.done, "states": self.states}
        self.report.write_text(json.dumps(report))
        self.exit_code = 0 if failure is None else 1
        self.finished = True


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    user = rclpy.utilities.remove_ros_args(argv)
    if len(user) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    actions = json.loads(Path(user[0]).read_text())
    return run_node(lambda: CommandProbe(actions, Path(user[1])), argv)


if __name__ == "__main__":
    sys.exit(main())
