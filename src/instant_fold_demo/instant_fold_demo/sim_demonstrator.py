"""sim_demonstrator: a demonstrator for machines without a camera, folding with the simulated arms.

Nobody folds in front of a camera here, and the simulator renders cloth but no hands; so to try
the capture pipeline without a RealSense, the simulator plays camera and robot (the sim node
publishes the camera topics and the exact cloth mask) and this node plays the person: it moves
the simulated grippers through the keyposes of a demonstration file (by default the bundled
simulated one), frame by frame over `sim/step`, at the pace the keyframes were recorded at
(their `frame_index`), closing and opening the grippers as the keyframes' events say, like a
teleoperator. Each measured arm state is published on `arms/state` (`DualArmState`, stamped
with the simulated time of the frame it belongs to), as the fold graph's controller publishes
it. A recorder beside it gets a bag that `extract --events arm-state --mask recorded` turns into
a demonstration (`instant_fold_demo.sim_recording` starts all three).

The replay is open loop: it reproduces the demonstration only when the simulator starts from
that demonstration's start state (its garment and seed, which `sim_recording` passes on).

Parameters: `demonstration` (file; empty: the bundled one), `keyframes` (replay only the first N,
0: all), `wait_for_subscribers` (start once the camera topics, `cloth/mask` and `arms/state` are
subscribed: a recorder still discovering topics would miss the first frames), `settle_s` (after that),
`linger_s` (after the last step, so the recorder receives the last frame before the graph stops).
"""

from __future__ import annotations

import sys
import time

import numpy as np
from rclpy.client import Client
from rclpy.node import Node
from rclpy.task import Future
from rclpy.time import Time

from instant_fold_core.contracts import gripper_closed
from instant_fold_core.demonstration import DemonstrationError, load_demonstration
from instant_fold_interfaces.msg import DualArmState
from instant_fold_interfaces.srv import SimStep
from instant_fold_ros.bringup_share import models_dir
from instant_fold_ros.conversions import dual_arm_state_to_msg, make_header
from instant_fold_ros.node_main import run_node
from instant_fold_ros.qos import COMMAND_QOS

#: The bundled simulated demonstration (models/demos/README.md).
BUNDLED_DEMO = "demos/proc_00001_sleeves_down__bottom_up.safetensors"
#: The simulator's frame rate (instant_fold_sim ClothSimConfig.fps): one step is one frame.
SIM_FPS = 20.0
#: An unanswered read of the simulator's state is sent again after this long (s): a reply to a
#: client the service has not matched yet is lost for good (instant_fold_sim.sim_driver, same fix).
READ_RESEND_S = 1.0
#: What a recording of the demonstration needs subscribed before the first step.
RECORDED = ("camera/color", "camera/depth", "camera/camera_info", "cloth/mask", "arms/state")


def waypoints(keypose: np.ndarray, frame_index: np.ndarray, start: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per simulated frame: (targets [2, 3], gripper command [2]) that move the arms from `start`
    ([2, 4]) through the keyposes ([K, 2, 4]) in straight lines at the keyframes' pace
    (`frame_index`). Where a keyframe changes a gripper, one frame holds still with the new
    command, as a hand pauses to pinch: `sim/step` applies the gripper command before moving, so
    the grasp (or release) happens at the keypose and the next recorded state shows it there."""
    out: list[tuple[np.ndarray, np.ndarray]] = []
    position, openness = start[:, :3].astype(np.float64), start[:, 3].astype(np.float64)
    for i in range(len(keypose)):
        frames = int(frame_index[i]) - (int(frame_index[i - 1]) if i else 0)
        goal = keypose[i, :, :3].astype(np.float64) if frames > 0 else position  # a keyframe at the start: no move
        for k in range(1, frames + 1):
            out.append((position + (goal - position) * (k / frames), openness.copy()))
        position, command = goal, keypose[i, :, 3].astype(np.float64)
        if (gripper_closed(command) != gripper_closed(openness)).any():
            out.append((position, command))
        openness = command
    return out


class SimDemonstratorNode(Node):
    def __init__(self) -> None:
        super().__init__("sim_demonstrator")
        p = self.declare_parameter
        path = str(p("demonstration", "").value) or str(models_dir() / BUNDLED_DEMO)
        count = int(p("keyframes", 0).value)
        self.wait_for_subscribers = bool(p("wait_for_subscribers", True).value)
        self.settle_s = float(p("settle_s", 1.0).value)
        self.linger_s = float(p("linger_s", 1.0).value)
        demo = load_demonstration(path)
        self.keypose = demo.keypose[:count] if count > 0 else demo.keypose
        self.frame_index = demo.frame_index[: len(self.keypose)]
        self.finished = False
        self.exit_code = 0
        self.client: Client = self.create_client(SimStep, "sim/step")
        self.state_pub = self.create_publisher(DualArmState, "arms/state", COMMAND_QOS)
        self.plan: list[tuple[np.ndarray, np.ndarray]] = []
        self.step = 0
        self.sim_time = 0.0
        self.ready_since: float | None = None
        self.done_at: float | None = None
        self.pending: Future | None = None
        self.read_sent_at: float | None = None  # when the pending request is a read: its time
        self.get_logger().info(f"replaying {len(self.keypose)} keyframes of {path} with the simulated arms")
        self.create_timer(0.05, self._tick)

    def _tick(self) -> None:
        """Wait for the simulator and the recorder, then keep one step in flight until the end."""
        now = time.monotonic()
        if self.done_at is not None:
            self.finished = now - self.done_at >= self.linger_s
            return
        if self.pending is not None:
            if self.read_sent_at is not None and now - self.read_sent_at >= READ_RESEND_S:
                self.client.remove_pending_request(self.pending)
                self._send(None)
            return
        if self.ready_since is None:
            listening = all(self.count_subscribers(t) for t in RECORDED)
            if self.client.service_is_ready() and (listening or not self.wait_for_subscribers):
                self.ready_since = now
            return
        if now - self.ready_since < self.settle_s:
            return
        self._send(None)

    def _send(self, command: tuple[np.ndarray, np.ndarray] | None) -> None:
        """One `sim/step`: to the next frame with `command`, or (None) nowhere, to read the state."""
        request = SimStep.Request()
        if command is None:
            request.until = self.sim_time  # steps nothing: answers the current state
        else:
            request.target = command[0].ravel().tolist()
            request.openness = command[1].tolist()
            request.until = self.sim_time + 1.0 / SIM_FPS
        self.read_sent_at = time.monotonic() if command is None else None
        self.pending = self.client.call_async(request)
        self.pending.add_done_callback(self._answered)

    def _answered(self, future: Future) -> None:
        if future is not self.pending:  # a read sent again meanwhile: its reply is the one awaited
            return
        self.read_sent_at = None
        response = future.result()
        if response is None or not response.success:
            message = "no answer" if response is None else response.message
            self.get_logger().error(f"sim/step refused step {self.step}: {message}")
            self.finished, self.exit_code = True, 1
            return
        self.sim_time = response.sim_time
        state = np.asarray(response.state, np.float32).reshape(2, 4)
        stamp = Time(nanoseconds=round(self.sim_time * 1e9)).to_msg()
        self.state_pub.publish(dual_arm_state_to_msg(state, make_header("camera_color_optical_frame", stamp)))
        if not self.plan and self.step == 0:
            self.plan = waypoints(self.keypose, self.frame_index, state)
        if self.step < len(self.plan):
            self.step += 1
            self._send(self.plan[self.step - 1])
            return
        self.pending = None
        self.done_at = time.monotonic()
        self.get_logger().info(f"demonstration replayed: {len(self.plan)} frames, {self.sim_time:.2f} s simulated")


def main(args: list[str] | None = None) -> int:
    try:
        return run_node(SimDemonstratorNode, args)
    except DemonstrationError as exc:
        print(f"sim_demonstrator: {exc}", file=sys.stderr)
        return 1
