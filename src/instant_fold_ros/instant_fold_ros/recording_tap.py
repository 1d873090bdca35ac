"""The fold graph's topics into a `FoldRecording` (instant_fold_core.fold_recording): the ROS side
of a fold's Rerun recording.

Thin on purpose: each callback unpacks one message with the package's conversions and makes one
call of the core's recorder, stamped with the message's own stamp (simulated time under a
simulator), so the main job's recording has the layout of the in-process evaluator's. A message
that cannot be unpacked or recorded is counted in `refused` and skipped: a view of the fold must
never end the fold.

`attach` subscribes the topics, one subscription per topic: a host that listens to one of them
too (the main job's latency probe) passes its own callback to run on the same message, rather
than subscribing again. Each callback costs the host's executor time, so `arms/state` (published at
the controller's state rate in wall time, 50 Hz) is optional: the main job takes the arm state of
each query from the fold's feedback instead (`on_state` with `ExecuteFold.Feedback.state`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rclpy.node import Node
from rclpy.subscription import Subscription
from rclpy.time import Time
from sensor_msgs.msg import CameraInfo, Image

from instant_fold_core.errors import InvalidInputError
from instant_fold_core.fold_recording import FoldRecording
from instant_fold_interfaces.msg import ActionChunk as ActionChunkMsg
from instant_fold_interfaces.msg import ClothTokens, DualArmState
from instant_fold_ros.conversions import (
    action_chunk_from_msg,
    dual_arm_state_from_msg,
    intrinsics_from_camera_info,
    tokens_from_msg,
)
from instant_fold_ros.qos import COMMAND_QOS, OBSERVATION_QOS
from instant_fold_ros.standins.image_bridge import image_from_msg


def _seconds(msg: Any) -> float:
    return Time.from_msg(msg.header.stamp).nanoseconds / 1e9


def _chain(first: Callable[[Any], None] | None, then: Callable[[Any], None]) -> Callable[[Any], None]:
    """One subscription's callback: the host's `first` (if any), then the tap's."""
    if first is None:
        return then

    def both(msg: Any) -> None:
        first(msg)
        then(msg)

    return both


class RecordingTap:
    """Feeds `recording` from messages; stamps already recorded on a topic are skipped (the sim node
    republishes its latest frame while simulated time stands still)."""

    def __init__(self, recording: FoldRecording) -> None:
        self.recording = recording
        self.queries = 0
        self.refused = 0
        self._seen: dict[str, float] = {}

    def _new(self, topic: str, stamp: float) -> bool:
        if stamp <= self._seen.get(topic, -1.0):
            return False
        self._seen[topic] = stamp
        return True

    def _guarded(self, record: Callable[[], None]) -> None:
        try:
            record()
        except (InvalidInputError, ValueError):  # conversions and the recorder raise these kinds
            self.refused += 1

    def attach(
        self,
        node: Node,
        latency: Callable[[ActionChunkMsg], Mapping[str, float]] | None = None,
        also: Mapping[str, Callable[[Any], None]] | None = None,
        arm_state: bool = True,
    ) -> list[Subscription]:
        """Subscribe `node` to the fold graph's camera, mask, token and command topics (and
        `arms/state` with `arm_state`). `latency(msg)`: the latencies of a command (name -> ms);
        `also`: topic -> a callback of the host's that runs first on each of that topic's messages.
        Returns the subscriptions, so a host can wait for them to be matched before the fold starts
        (a short fold can end before discovery reaches a node that started last)."""
        extra = dict(also or {})
        unknown = set(extra) - {"camera/camera_info", "camera/color", "cloth/mask", "cloth/tokens", "arms/command"}
        if unknown or ("arms/state" in extra and not arm_state):
            raise ValueError(f"also: no subscription of the tap for {sorted(unknown or {'arms/state'})}")

        def command(msg: ActionChunkMsg) -> None:
            self.on_command(msg, latency(msg) if latency is not None else {})

        topics: list[tuple[type, str, Callable[[Any], None]]] = [
            (CameraInfo, "camera/camera_info", self.on_camera_info),
            (Image, "camera/color", self.on_color),
            (Image, "cloth/mask", self.on_mask),
            (ClothTokens, "cloth/tokens", self.on_tokens),
            (ActionChunkMsg, "arms/command", command),
        ]
        if arm_state:
            topics.append((DualArmState, "arms/state", self.on_state))
        return [
            node.create_subscription(
                kind,
                topic,
                _chain(extra.get(topic), callback),
                COMMAND_QOS if topic == "arms/command" else OBSERVATION_QOS,
            )
            for kind, topic, callback in topics
        ]

    def on_camera_info(self, msg: CameraInfo) -> None:
        if not self.recording.has_camera:
            self._guarded(lambda: self.recording.camera(intrinsics_from_camera_info(msg), msg.width, msg.height))

    def on_color(self, msg: Image) -> None:
        if self._new("color", stamp := _seconds(msg)):
            self._guarded(lambda: self.recording.observation(stamp, rgb=image_from_msg(msg, ("rgb8",))))

    def on_mask(self, msg: Image) -> None:
        if self._new("mask", stamp := _seconds(msg)):
            self._guarded(lambda: self.recording.observation(stamp, mask=image_from_msg(msg, ("mono8",))))

    def on_tokens(self, msg: ClothTokens) -> None:
        if self._new("tokens", stamp := _seconds(msg)):

            def record() -> None:
                tokens = tokens_from_msg(msg)
                self.recording.tokens(stamp, tokens.positions, tokens.valid)

            self._guarded(record)

    def on_state(self, msg: DualArmState) -> None:
        """A measured arm state (`arms/state`, or the state a fold's feedback carries)."""
        # The controller publishes at its state rate in wall time; in lockstep most messages repeat
        # the last simulated instant, and are dropped before anything is unpacked.
        if self._new("state", stamp := _seconds(msg)):
            self._guarded(lambda: self.recording.arm_state(stamp, dual_arm_state_from_msg(msg)))

    def on_command(self, msg: ActionChunkMsg, latency_ms: Mapping[str, float]) -> None:
        """One chunk the policy server sent, stamped with the observation it answers."""

        def record() -> None:
            self.recording.query(self.queries, _seconds(msg), action_chunk_from_msg(msg), latency_ms)
            self.queries += 1

        self._guarded(record)
