"""Bag player node: publishes a recorded rosbag2 bag into the graph (the stand-in for `ros2 bag
play` where ROS 2's CLI is not installed).

The camera node's own playback replays RealSense recordings (.db3 from the SDK), not rosbag2;
this node replays what `record_demo` wrote, so a recorded demonstration can feed segmentation
and the tokenizer like a live camera. Messages keep their recorded spacing (scaled by `rate`;
0 = as fast as possible). With `restamp` (default) every header stamp is shifted by one offset so
the first frame is stamped "now": frames stay paired by identical stamps and consumers that test
freshness accept them. With `wait_for_subscribers` (default) playback starts once every played
topic has a subscriber, plus `settle_s` (the subscriber's side of a DDS match can complete after
the publisher's), so nothing is published before the graph listens; at the end it waits until
reliable subscribers acknowledged everything before exiting.

Publishers are reliable, keep-last 10 (they match the graph's keep-last-2 observation
subscribers); at `rate` 0 a burst can still outrun such a subscriber, which then keeps the newest.

Parameters: `bag` (required), `topics` (empty: all), `rate`, `loop`, `restamp`,
`wait_for_subscribers`, `settle_s`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.serialization import deserialize_message, serialize_message

from instant_fold_demo.bag import BagError, BagMessage, bag_topics, read_messages
from instant_fold_demo.recorder_node import message_class
from instant_fold_ros.node_main import run_node
from instant_fold_ros.qos import COMMAND_QOS


class BagPlayerNode(Node):
    def __init__(self) -> None:
        super().__init__("bag_player")
        p = self.declare_parameter
        self.bag = str(p("bag", "").value)
        wanted: list[str] = [t for t in map(str, p("topics", [""]).value) if t]
        self.rate = float(p("rate", 1.0).value)
        self.loop = bool(p("loop", False).value)
        self.restamp = bool(p("restamp", True).value)
        self.wait_for_subscribers = bool(p("wait_for_subscribers", True).value)
        self.settle_s = float(p("settle_s", 0.5).value)
        self._matched_at: float | None = None
        self._started = False
        self.finished = False
        self.exit_code = 0
        self.published = 0
        try:
            if not self.bag:
                raise BagError("parameter 'bag' is empty: name the bag folder to play")
            present = bag_topics(self.bag)
            unknown = sorted(set(wanted) - set(present))
            if unknown:
                raise BagError(f"bag {self.bag} has no topics {unknown} (it holds: {sorted(present)})")
            self.topics = {t: present[t][0] for t in (wanted or present)}
            self._outputs: dict[str, Any] = {
                t: self.create_publisher(message_class(msgtype), t, COMMAND_QOS) for t, msgtype in self.topics.items()
            }
        except (BagError, ImportError, AttributeError) as exc:
            self.get_logger().error(str(exc))
            self.finished, self.exit_code = True, 1
            return
        self.create_timer(0.005, self._tick)

    def _start(self) -> None:
        self._started = True
        self._messages: Iterator[BagMessage] = read_messages(self.bag, self.topics)
        self._next: BagMessage | None = next(self._messages, None)
        self._t0_wall = time.monotonic()
        self._t0_bag = self._next.stamp_ns if self._next else 0
        self._stamp_offset: int | None = None

    def _due(self, message: BagMessage) -> bool:
        if self.rate <= 0:
            return True
        return (message.stamp_ns - self._t0_bag) / 1e9 / self.rate <= time.monotonic() - self._t0_wall

    def _payload(self, message: BagMessage) -> bytes:
        """The bytes to publish: as recorded, or with the header stamp shifted (restamp)."""
        if not self.restamp:
            return message.data
        msg: Any = deserialize_message(message.data, message_class(message.msgtype))
        header = getattr(msg, "header", None)
        if header is None:
            return message.data
        old = header.stamp.sec * 10**9 + header.stamp.nanosec
        if self._stamp_offset is None:
            self._stamp_offset = self.get_clock().now().nanoseconds - old
        new = old + self._stamp_offset
        header.stamp.sec, header.stamp.nanosec = new // 10**9, new % 10**9
        return serialize_message(msg)

    def _tick(self) -> None:
        if self.finished:
            return
        if not self._started:
            if self.wait_for_subscribers:
                if any(pub.get_subscription_count() == 0 for pub in self._outputs.values()):
                    return
                self._matched_at = self._matched_at or time.monotonic()
                if time.monotonic() - self._matched_at < self.settle_s:
                    return
            self.get_logger().info(f"playing {self.bag} ({', '.join(self.topics)})")
            self._start()
        try:
            while self._next is not None and self._due(self._next):
                self._outputs[self._next.topic].publish(self._payload(self._next))
                self.published += 1
                self._next = next(self._messages, None)
        except BagError as exc:
            self.get_logger().error(str(exc))
            self.finished, self.exit_code = True, 1
            return
        if self._next is None:
            self.get_logger().info(f"played {self.bag}: {self.published} messages")
            if self.loop:
                self._start()
            else:
                for pub in self._outputs.values():
                    pub.wait_for_all_acked(Duration(seconds=5.0))
                self.finished = True


def main(args: list[str] | None = None) -> int:
    return run_node(BagPlayerNode, args)
