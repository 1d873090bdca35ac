"""controller_node: the ROS face of the dual-arm controller (a thin adapter).

Subscribes `arms/command` (ActionChunk; a message larger than the largest acceptable chunk is
refused before it is deserialised), publishes `arms/state` (DualArmState, camera frame,
`state_rate_hz` >= 30), serves `control/estop` and `control/reset` (std_srvs/Trigger), and
publishes the static transforms camera -> each base when tf2_ros is importable (not from the
ROS wheels). Parameters: `robot` (name of config/robots/<robot>.yaml; its `driver` selects the
driver), `robot_config` (explicit path, overrides `robot`), `control_rate_hz`, `state_rate_hz`.

A driver failure during operation latches the e-stop (arms stopped, logged); a robot that
cannot be reached at start-up ends the process with a clear error and exit code 1.

The e-stop and reset services have a callback group of their own, served by a second executor
thread: however many chunks, ticks and state messages are queued, an e-stop is answered at once
(it latches and stops the drivers without waiting for the control thread; see `ControlLoop`).
"""

from __future__ import annotations

import array
import sys

import numpy as np
from rclpy.node import Node
from rclpy.serialization import deserialize_message, serialize_message
from rclpy.time import Time
from std_srvs.srv import Trigger

from instant_fold_control.config import RobotConfig, find_robot_config, load_robot_config
from instant_fold_control.control_loop import ControlLoop
from instant_fold_control.controller import DualArmController
from instant_fold_control.drivers import make_robot_drivers
from instant_fold_control.drivers.base import DriverError, RobotDrivers
from instant_fold_control.safety import LOG_PERIOD_S
from instant_fold_core.errors import ConfigError, InvalidInputError
from instant_fold_interfaces.msg import ActionChunk, DualArmState
from instant_fold_ros.conversions import action_chunk_from_msg, dual_arm_state_to_msg, make_header
from instant_fold_ros.message_errors import MessageConversionError
from instant_fold_ros.node_main import SideNode, run_node
from instant_fold_ros.qos import COMMAND_QOS, OBSERVATION_QOS
from instant_fold_ros.services import create_guarded_service

COMMAND_TOPIC = "arms/command"
STATE_TOPIC = "arms/state"
ESTOP_SERVICE = "control/estop"
RESET_SERVICE = "control/reset"
#: Frame-id characters a chunk message may carry within `max_chunk_message_bytes`.
FRAME_ID_ALLOWANCE = 256


def max_chunk_message_bytes(max_steps: int) -> int:
    """Serialized size of the largest chunk message the controller can accept: `max_steps` steps,
    a keypose and a frame id of `FRAME_ID_ALLOWANCE` characters. Measured on a message, so the
    bound follows the message definition. A larger message is refused before it is deserialised:
    before, a 2,000,000-step chunk (64 MB) was deserialised and converted (about 0.3 s, 0.9 s on a
    loaded machine, with state publishing paused) only to be refused for its length."""
    largest = ActionChunk(
        header=make_header("f" * FRAME_ID_ALLOWANCE),
        horizon=max_steps,
        positions=array.array("f", bytes(4 * 6 * max_steps)),
        openness=array.array("f", bytes(4 * 2 * max_steps)),
        has_keypose=True,
    )
    return len(serialize_message(largest))


class ControllerNode(Node):
    """Chunks in, driver commands out, state published, safety counted."""

    def __init__(self) -> None:
        super().__init__("controller_node")
        robot = str(self.declare_parameter("robot", "dobot").value)
        path = str(self.declare_parameter("robot_config", "").value)
        control_rate = float(self.declare_parameter("control_rate_hz", 100.0).value)
        state_rate = float(self.declare_parameter("state_rate_hz", 50.0).value)
        if state_rate < 30.0:
            raise ConfigError(
                f"state_rate_hz: must be >= 30 (the policy reads arm state at camera rate), got {state_rate}"
            )
        self.robot: RobotConfig = load_robot_config(path or find_robot_config(robot))
        self.controller = DualArmController(self.robot, self._log)
        self.drivers: RobotDrivers = make_robot_drivers(self.robot)
        self.get_logger().info(
            f"robot '{self.robot.name}' ({self.robot.source}), driver '{self.robot.driver}': connecting"
        )
        self.drivers.connect()
        self.loop = ControlLoop(self.controller, self.drivers, 1.0 / control_rate, self._log)
        # Chunk stamps are ROS time; with a lock-stepped simulator the graph runs on its /clock
        # (use_sim_time), which is the lockstep's time itself.
        self._clock_offset = 0.0 if self.drivers.lockstep is not None else self._ros_seconds() - self.loop.now()
        self.loop.read()
        self._state_pub = self.create_publisher(DualArmState, STATE_TOPIC, OBSERVATION_QOS)
        self._max_chunk_bytes = max_chunk_message_bytes(self.robot.safety.max_chunk_steps)
        # raw: the chunk's size is checked before it is deserialised (`max_chunk_message_bytes`).
        self.create_subscription(ActionChunk, COMMAND_TOPIC, self._on_chunk, COMMAND_QOS, raw=True)
        # The e-stop is answered while a tick blocks (a lock-stepped step, a slow driver): the
        # safety services live on a node with an executor thread of their own (node_main.SideNode).
        self._safety = SideNode(self, "safety")
        for service, callback in ((ESTOP_SERVICE, self._on_estop), (RESET_SERVICE, self._on_reset)):
            create_guarded_service(self._safety.node, Trigger, service, callback)
        self._safety.start()
        self.create_timer(1.0 / control_rate, self.loop.tick)
        self.create_timer(1.0 / state_rate, self._publish_state)
        self.create_timer(LOG_PERIOD_S, self._summary)
        self._publish_static_transforms()
        self.get_logger().info(f"ready: control {control_rate:.0f} Hz, state {state_rate:.0f} Hz")

    # --- time ---------------------------------------------------------------------------------

    def _ros_seconds(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    # --- callbacks ----------------------------------------------------------------------------

    @staticmethod
    def _deserialise(data: bytes) -> ActionChunk:
        try:
            return deserialize_message(data, ActionChunk)
        except Exception as exc:  # bytes no rclpy publisher would send (a foreign peer's): refused, not fatal
            raise MessageConversionError(f"ActionChunk: cannot be deserialised: {exc}") from exc

    def _on_chunk(self, data: bytes) -> None:
        if len(data) > self._max_chunk_bytes:
            # Counted with the chunks refused for their length (`DualArmController.submit_chunk`).
            self.controller.safety.event(
                "refused_long",
                f"chunk refused: message of {len(data)} bytes, more than a chunk of safety.max_chunk_steps "
                f"({self.robot.safety.max_chunk_steps}) steps can be ({self._max_chunk_bytes} bytes); not deserialised",
                "error",
            )
            return
        try:
            msg = self._deserialise(data)
            chunk = action_chunk_from_msg(msg)
        except InvalidInputError as exc:  # the message's layout or the chunk contract
            self.controller.refuse_chunk(exc)
            return
        # Stamp 0 is a time like any other: under a simulator the first frame's, in real time 1970's
        # (refused as stale). Read as "no stamp", it skipped the staleness check.
        observation = Time.from_msg(msg.header.stamp).nanoseconds * 1e-9 - self._clock_offset
        self.loop.submit(chunk, observation)

    def _publish_state(self) -> None:
        state = self.controller.state()
        if state is None:
            return
        if self.drivers.lockstep is not None:
            # The simulated instant of the measurement, the clock the simulator stamps images with.
            stamp = Time(nanoseconds=round(self.loop.measured_at * 1e9)).to_msg()
        else:
            stamp = self.get_clock().now().to_msg()
        header = make_header(self.robot.camera_frame, stamp)
        self._state_pub.publish(dual_arm_state_to_msg(state.astype(np.float32), header))

    def _on_estop(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self.loop.estop("e-stop service called")
        response.success, response.message = True, "e-stop latched; call control/reset to resume"
        return response

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        if self.loop.reset():
            response.success, response.message = True, "e-stop released; holding position"
        else:
            response.success, response.message = False, "drivers are not reporting state; e-stop stays latched"
        return response

    def _summary(self) -> None:
        self.get_logger().info(self.loop.summary())

    def _log(self, level: str, text: str) -> None:
        # One call site per severity: rclpy refuses different severities from the same line.
        logger = self.get_logger()
        if level == "error":
            logger.error(text)
        elif level == "warn":
            logger.warning(text)
        elif level == "info":
            logger.info(text)
        else:
            logger.debug(text)

    def _publish_static_transforms(self) -> None:
        try:
            from geometry_msgs.msg import TransformStamped
            from tf2_ros import StaticTransformBroadcaster
        except ImportError:
            self.get_logger().info("tf2_ros not available: static camera->base transforms not published")
            return
        transforms = []
        for arm in self.robot.arms:
            translation, quaternion = arm.extrinsics.base_pose_in_camera()
            t = TransformStamped()
            t.header = make_header(self.robot.camera_frame, self.get_clock().now().to_msg())
            t.child_frame_id = arm.base_frame
            t.transform.translation.x, t.transform.translation.y, t.transform.translation.z = map(float, translation)
            q = t.transform.rotation
            q.x, q.y, q.z, q.w = map(float, quaternion)
            transforms.append(t)
        self._tf = StaticTransformBroadcaster(self)
        self._tf.sendTransform(transforms)

    def close(self) -> None:
        """Called by run_node on shutdown: stop serving the safety services, stop the arms and
        release the devices."""
        self._safety.close()
        self.drivers.close()


def main(args: list[str] | None = None) -> int:
    try:
        # The control callbacks on the node's thread, the e-stop and reset services on their own.
        return run_node(ControllerNode, args)
    except (DriverError, ConfigError) as exc:
        print(f"controller_node: {exc}", file=sys.stderr)
        return 1
