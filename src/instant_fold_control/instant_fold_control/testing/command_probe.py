"""A stand-in policy for integration tests: publishes given chunks verbatim, records arm states.

It builds `ActionChunk` messages field by field (not through the validating conversions), so
it can send exactly what a faulty policy would: NaN steps, targets outside the workspace. It
waits for the first `arms/state`, publishes each chunk after its delay, keeps listening for
`listen_s`, then writes a JSON report (states with receive times) and exits 0.

Usage: python -m instant_fold_control.testing.command_probe CHUNKS.json REPORT.json [--ros-args ...]
where CHUNKS.json is a list of {positions [H][2][3], openness [H][2], representation,
steps_to_execute, step_duration, delay_s} and the report path receives the recording.
"""

from __future__ import annotations

import array
import json
import sys
import time
from pathlib import Path
from typing import Any

import rclpy
from rclpy.node import Node

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
    def __init__(self, chunks: list[dict[str, Any]], report: Path) -> None:
        super().__init__("command_probe")
        self.listen_s = float(self.declare_parameter("listen_s", 2.0).value)
        self.timeout_s = float(self.declare_parameter("timeout_s", 30.0).value)
        self.frame_id = str(self.declare_parameter("frame_id", "camera_color_optical_frame").value)
        self.chunks, self.report = chunks, report
        self.states: list[dict[str, Any]] = []
        self.published: list[float] = []
        self.finished, self.exit_code = False, 1
        self._first_state: float | None = None
        self._started = time.monotonic()
        self._pub = self.create_publisher(ActionChunk, "arms/command", COMMAND_QOS)
        self.create_subscription(DualArmState, "arms/state", self._on_state, OBSERVATION_QOS)
        self.create_timer(0.01, self._tick)

    def _on_state(self, msg: DualArmState) -> None:
        now = time.monotonic()
        if self._first_state is None:
            self._first_state = now
        self.states.append({"t": now, "state": dual_arm_state_from_msg(msg).tolist()})

    def _tick(self) -> None:
        now = time.monotonic()
        if now - self._started > self.timeout_s:
            self._finish(f"timed out after {self.timeout_s} s (states received: {len(self.states)})")
            return
        if self._first_state is None or self._pub.get_subscription_count() == 0:
            return
        elapsed = now - self._first_state
        due = sum(spec.get("delay_s", 0.0) for spec in self.chunks[: len(self.published) + 1])
        if len(self.published) < len(self.chunks) and elapsed >= due:
            spec = self.chunks[len(self.published)]
            self._pub.publish(chunk_message(spec, make_header(self.frame_id, self.get_clock().now().to_msg())))
            self.published.append(now)
        elif len(self.published) == len(self.chunks) and now - self.published[-1] >= self.listen_s:
            self._finish(None)

    def _finish(self, failure: str | None) -> None:
        self.report.write_text(json.dumps({"failure": failure, "published": self.published, "states": self.states}))
        self.exit_code = 0 if failure is None else 1
        self.finished = True


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    user = rclpy.utilities.remove_ros_args(argv)
    if len(user) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    chunks = json.loads(Path(user[0]).read_text())
    return run_node(lambda: CommandProbe(chunks, Path(user[1])), argv)


if __name__ == "__main__":
    sys.exit(main())
