"""Recorder node (and the `record_demo` CLI): topics -> one rosbag2 MCAP bag.

Subscribes to each listed topic as soon as a publisher announces its type, raw (the CDR bytes as
they arrive, whatever the type), with a QoS matched to the publishers (reliable when they all
are, transient-local when they all latch), and hands the bytes to `bag.QueuedBagWriter`. Shows
duration, size and drops every `progress_period_s`. Ctrl-C or SIGTERM (rclpy stops spinning,
`run_node` calls `close()`) drains the queue and finalises the bag; a write failure (disk full,
size limit) stops the node with exit status 1 and a message naming the file. SIGHUP (the
terminal closed) ends the recording the same way: a bag is only readable once closed, so a hang-up
must not kill the process before `close()`.

Each topic's entry in the bag carries the QoS profiles its publishers offered when the recorder
subscribed (what `ros2 bag record` stores, and what `ros2 bag play` publishes with).

Parameters: `output` (bag folder to create; empty: `recordings/demo_<time>`), `topics` (default:
the camera's colour, depth and camera_info), `max_queued_mb`, `progress_period_s`, `duration_s`
(0: until stopped; else wall-clock seconds from the start, whether or not messages arrive),
`compression` (`none`, default, or `zstd` MCAP chunks: docs/demonstrations.md, "Measured").
A parameter of the wrong type or a topic that is not a valid ROS name ends the node with one line
and exit status 1.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.duration import Duration
from rclpy.exceptions import InvalidTopicNameException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.topic_endpoint_info import TopicEndpointInfo
from rclpy.validate_topic_name import validate_topic_name
from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

from instant_fold_core.errors import ConfigError
from instant_fold_demo.bag import COMPRESSIONS, BagError, QueuedBagWriter
from instant_fold_demo.rgbd_bag import CameraTopics
from instant_fold_ros.node_main import run_node

DEFAULT_TOPICS = list(CameraTopics().as_dict().values())


def message_class(msgtype: str) -> type:
    """The generated Python class of a type name like 'sensor_msgs/msg/Image'."""
    package, kind, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.{kind}"), name)


def _qos_time(duration: Duration) -> QosTime:
    """rmw's (sec, nsec) of a QoS duration (infinite: rmw's 9223372036 s 854775807 ns, as rosbag2 writes)."""
    sec, nsec = divmod(duration.nanoseconds, 1_000_000_000)
    return QosTime(sec, nsec)


def offered_qos(publishers: Sequence[TopicEndpointInfo]) -> list[Qos]:
    """The QoS profiles `publishers` offer, as discovery reports them (discovery does not carry a
    publisher's history and depth: rclpy reports `unknown` and 0, and so does the bag)."""
    profiles = []
    for info in publishers:
        q = info.qos_profile
        profiles.append(
            Qos(
                QosHistory(int(q.history)),
                q.depth,
                QosReliability(int(q.reliability)),
                QosDurability(int(q.durability)),
                _qos_time(q.deadline),
                _qos_time(q.lifespan),
                QosLiveliness(int(q.liveliness)),
                _qos_time(q.liveliness_lease_duration),
                q.avoid_ros_namespace_conventions,
            )
        )
    return profiles


class RecorderParameterError(ConfigError):
    """A recorder parameter of the wrong type or value; the message names it and what to write."""


def check_topics(topics: Sequence[str]) -> list[str]:
    """The topics as given, or a `RecorderParameterError` naming the first invalid one (a topic
    that can never be published would leave the recorder waiting for it forever)."""
    for topic in topics:
        try:
            validate_topic_name(topic)
        except InvalidTopicNameException as exc:
            reason = str(exc).splitlines()[0].removeprefix("Invalid topic name: ")
            raise RecorderParameterError(f"topic {topic!r} is not a valid ROS topic name ({reason})") from None
    return list(topics)


class RecorderNode(Node):
    def __init__(self, parameter_overrides: list[Parameter] | None = None) -> None:
        # No /rosout: the closing line is logged after Ctrl-C has shut the context down, where a
        # rosout publisher only adds "Failed to publish log message to rosout".
        super().__init__("recorder", enable_rosout=False, parameter_overrides=parameter_overrides)
        output = self._param("output", "", str) or time.strftime("recordings/demo_%Y%m%d_%H%M%S")
        self.wanted: list[str] = check_topics(self._param("topics", DEFAULT_TOPICS, list))
        max_queued_mb = self._param("max_queued_mb", 512.0, float)
        self.duration_s = self._param("duration_s", 0.0, float)
        progress_period_s = self._param("progress_period_s", 2.0, float)
        compression = self._param("compression", "none", str)
        if compression not in COMPRESSIONS:
            raise RecorderParameterError(
                f"recorder parameter compression: expected one of {', '.join(COMPRESSIONS)}, got {compression!r}"
            )
        if self.duration_s < 0 or max_queued_mb <= 0 or progress_period_s <= 0:
            raise RecorderParameterError(
                "duration_s must be >= 0, max_queued_mb and progress_period_s > 0 "
                f"(got {self.duration_s:g}, {max_queued_mb:g}, {progress_period_s:g})"
            )
        self.finished = False
        self.exit_code = 0
        self.received = 0
        self.writer: QueuedBagWriter | None = None
        signal.signal(signal.SIGHUP, self._hang_up)
        try:
            self.writer = QueuedBagWriter(
                output, max_queued_bytes=int(max_queued_mb * 1024 * 1024), compression=compression
            )
        except BagError as exc:
            self._fail(exc)
            return
        self.get_logger().info(f"recording {', '.join(self.wanted)} to {self.writer.path}")
        self._recording: dict[str, object] = {}
        self.create_timer(0.2, self._discover)
        self.create_timer(progress_period_s, self._progress)
        if self.duration_s > 0:
            self._duration_timer = self.create_timer(self.duration_s, self._time_up)

    def _param(self, name: str, default: Any, kind: type) -> Any:
        """A parameter checked for its type: a wrong one is one clear line, not rclpy's traceback
        (`output: 1` in YAML is an integer, so the message says how to quote it)."""
        value = self.declare_parameter(name, default, ParameterDescriptor(dynamic_typing=True)).value
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if kind is list:
            ok = isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
        else:
            ok = isinstance(value, kind) and not isinstance(value, bool)
        if not ok:
            wanted = {list: "a list of strings", str: "a string", float: "a number"}[kind]
            hint = f" (quote it in YAML: {name}: '{value}')" if kind is str else ""
            raise RecorderParameterError(f"recorder parameter {name}: expected {wanted}, got {value!r}{hint}")
        return list(value) if kind is list else value

    def _hang_up(self, signum: int, frame: object) -> None:
        """SIGHUP: stop like Ctrl-C (the main loop sees `finished` and `run_node` closes the bag)."""
        self.get_logger().info("hang-up: closing the recording")
        self.finished = True

    def _time_up(self) -> None:
        """`duration_s` of wall time has passed since the start: stop, messages or not."""
        self._duration_timer.cancel()
        self.finished = True

    def _fail(self, exc: BagError) -> None:
        self.get_logger().error(str(exc))
        self.finished = True
        self.exit_code = 1

    @staticmethod
    def _qos(infos: Sequence[TopicEndpointInfo]) -> QoSProfile:
        """A subscription QoS every one of the publishers `infos` can match."""
        reliable = all(i.qos_profile.reliability == ReliabilityPolicy.RELIABLE for i in infos)
        latched = all(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for i in infos)
        return QoSProfile(
            history=HistoryPolicy.KEEP_LAST,
            depth=100,
            reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
            durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
        )

    def _discover(self) -> None:
        """Subscribe to wanted topics that now have a publisher (and so a known type)."""
        assert self.writer is not None
        missing = [t for t in self.wanted if t not in self._recording]
        if not missing:
            return
        types = dict(self.get_topic_names_and_types())
        for topic in missing:
            publishers = self.get_publishers_info_by_topic(topic)
            if not types.get(topic) or not publishers:
                continue
            msgtype = types[topic][0]
            try:
                self.writer.add_topic(topic, msgtype, offered_qos=offered_qos(publishers))
                cls = message_class(msgtype)
            except (BagError, ImportError, AttributeError, ValueError) as exc:
                self._fail(BagError(f"cannot record {topic} ({msgtype}): {exc}"))
                return
            self._recording[topic] = self.create_subscription(
                cls, topic, self._callback(topic), self._qos(publishers), raw=True
            )
            self.get_logger().info(f"recording {topic} ({msgtype})")

    def _callback(self, topic: str) -> Callable[[bytes], None]:
        def store(data: bytes) -> None:
            if self.finished or self.writer is None:
                return
            self.received += 1
            try:
                self.writer.put(topic, self.get_clock().now().nanoseconds, data)
            except BagError as exc:
                self._fail(exc)

        return store

    def _progress(self) -> None:
        assert self.writer is not None
        stats = self.writer.stats()
        waiting = [t for t in self.wanted if t not in self._recording]
        note = f"; waiting for {', '.join(waiting)}" if waiting else ""
        self.get_logger().info(f"{self.writer.path}: {stats.line()}{note}")
        if self.writer.error is not None:
            self._fail(self.writer.error)

    def close(self) -> None:
        """Drain the queue and finalise the bag (called by `run_node` on every exit path)."""
        if self.writer is None:
            return
        try:
            stats = self.writer.close()
        except BagError as exc:
            self._fail(exc)
            return
        per_topic = ", ".join(f"{t} {n}" for t, n in stats.per_topic.items())
        self.get_logger().info(f"closed {self.writer.path}: {stats.line()}, {self.received} received [{per_topic}]")


def _run(factory: Callable[[], RecorderNode], args: Sequence[str] | None) -> int:
    """`run_node`, with a bad parameter as one line on stderr and exit status 1."""
    try:
        return run_node(factory, args)
    except RecorderParameterError as exc:
        print(f"recorder: {exc}", file=sys.stderr)
        return 1


def main(args: list[str] | None = None) -> int:
    return _run(RecorderNode, args)


def record_main(argv: Sequence[str] | None = None) -> int:
    """`record_demo OUTPUT [--topics ...] [--duration S] [--compression zstd]`: the recorder node from the command line.

    The values go to the node as typed parameters, not through `-p name:=value`, whose YAML
    parsing would turn an output named `1`, `true` or `[a]` into a number, a bool or a list."""
    parser = argparse.ArgumentParser(description="Record topics (default: the camera's) to a rosbag2 MCAP bag.")
    parser.add_argument("output", help="bag folder to create (never overwritten)")
    parser.add_argument("--topics", nargs="+", default=DEFAULT_TOPICS, help="topics to record")
    parser.add_argument(
        "--duration", type=float, default=0.0, help="stop after this many seconds of wall time (0: Ctrl-C)"
    )
    parser.add_argument("--max-queue-mb", type=float, default=512.0, help="bound on unwritten data in memory")
    parser.add_argument(
        "--compression", choices=COMPRESSIONS, default="none", help="MCAP chunk compression (zstd: smaller, costs CPU)"
    )
    args, ros_args = parser.parse_known_args(argv)
    overrides = [
        Parameter("output", Parameter.Type.STRING, args.output),
        Parameter("topics", Parameter.Type.STRING_ARRAY, list(args.topics)),
        Parameter("duration_s", Parameter.Type.DOUBLE, args.duration),
        Parameter("max_queued_mb", Parameter.Type.DOUBLE, args.max_queue_mb),
        Parameter("compression", Parameter.Type.STRING, args.compression),
    ]
    return _run(lambda: RecorderNode(overrides), ["record_demo", *ros_args])


if __name__ == "__main__":
    sys.exit(record_main())
