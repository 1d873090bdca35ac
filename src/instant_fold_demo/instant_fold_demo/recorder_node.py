"""Recorder node (and the `record_demo` CLI): topics -> one rosbag2 MCAP bag.

Subscribes to each listed topic as soon as a publisher announces its type, raw (the CDR bytes as
they arrive, whatever the type), with a QoS matched to the publishers (reliable when they all
are, transient-local when they all latch), and hands the bytes to `bag.QueuedBagWriter`. Shows
duration, size and drops every `progress_period_s`. Ctrl-C or SIGTERM (rclpy stops spinning,
`run_node` calls `close()`) drains the queue and finalises the bag; a write failure (disk full,
size limit) stops the node with exit status 1 and a message naming the file.

Parameters: `output` (bag folder to create; empty: `recordings/demo_<time>`), `topics` (default:
the camera's colour, depth and camera_info), `max_queued_mb`, `progress_period_s`, `duration_s`
(0: until stopped).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable, Sequence

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from instant_fold_demo.bag import BagError, QueuedBagWriter
from instant_fold_demo.rgbd_bag import CameraTopics
from instant_fold_ros.node_main import run_node

DEFAULT_TOPICS = list(CameraTopics().as_dict().values())


def message_class(msgtype: str) -> type:
    """The generated Python class of a type name like 'sensor_msgs/msg/Image'."""
    package, kind, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.{kind}"), name)


class RecorderNode(Node):
    def __init__(self) -> None:
        super().__init__("recorder")
        p = self.declare_parameter
        output = str(p("output", "").value) or time.strftime("recordings/demo_%Y%m%d_%H%M%S")
        self.wanted: list[str] = list(map(str, p("topics", DEFAULT_TOPICS).value))
        max_queued_mb = float(p("max_queued_mb", 512.0).value)
        self.duration_s = float(p("duration_s", 0.0).value)
        progress_period_s = float(p("progress_period_s", 2.0).value)
        self.finished = False
        self.exit_code = 0
        self.received = 0
        self.writer: QueuedBagWriter | None = None
        try:
            self.writer = QueuedBagWriter(output, max_queued_bytes=int(max_queued_mb * 1024 * 1024))
        except BagError as exc:
            self._fail(exc)
            return
        self.get_logger().info(f"recording {', '.join(self.wanted)} to {self.writer.path}")
        self._recording: dict[str, object] = {}
        self.create_timer(0.2, self._discover)
        self.create_timer(progress_period_s, self._progress)

    def _fail(self, exc: BagError) -> None:
        self.get_logger().error(str(exc))
        self.finished = True
        self.exit_code = 1

    def _qos(self, topic: str) -> QoSProfile:
        infos = self.get_publishers_info_by_topic(topic)
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
            if not types.get(topic) or not self.get_publishers_info_by_topic(topic):
                continue
            msgtype = types[topic][0]
            try:
                self.writer.add_topic(topic, msgtype)
                cls = message_class(msgtype)
            except (BagError, ImportError, AttributeError, ValueError) as exc:
                self._fail(BagError(f"cannot record {topic} ({msgtype}): {exc}"))
                return
            self._recording[topic] = self.create_subscription(
                cls, topic, self._callback(topic), self._qos(topic), raw=True
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
        elif self.duration_s > 0 and stats.duration_s >= self.duration_s:
            self.finished = True

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


def main(args: list[str] | None = None) -> int:
    return run_node(RecorderNode, args)


def record_main(argv: Sequence[str] | None = None) -> int:
    """`record_demo OUTPUT [--topics ...] [--duration S]`: the recorder node from the command line."""
    parser = argparse.ArgumentParser(description="Record topics (default: the camera's) to a rosbag2 MCAP bag.")
    parser.add_argument("output", help="bag folder to create (never overwritten)")
    parser.add_argument("--topics", nargs="+", default=DEFAULT_TOPICS, help="topics to record")
    parser.add_argument("--duration", type=float, default=0.0, help="stop after this many seconds (0: Ctrl-C)")
    parser.add_argument("--max-queue-mb", type=float, default=512.0, help="bound on unwritten data in memory")
    args, ros_args = parser.parse_known_args(argv)
    ros = [
        "record_demo", *ros_args, "--ros-args",
        "-p", f"output:={args.output}",
        "-p", f"topics:=[{','.join(args.topics)}]",
        "-p", f"duration_s:={args.duration}",
        "-p", f"max_queued_mb:={args.max_queue_mb}",
    ]  # fmt: skip
    return run_node(RecorderNode, ros)


if __name__ == "__main__":
    sys.exit(record_main())
