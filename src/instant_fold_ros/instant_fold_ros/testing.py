"""Test support: a probe that publishes, subscribes and calls services in a test's own ROS domain
(`instant_fold_ros.domains.isolated_ros_env`)."""

from __future__ import annotations

import time
from typing import Any

from instant_fold_ros.dds_profile import use_project_dds_profile


class TopicProbe:
    """An in-test ROS participant on an isolated domain that records what arrives on topics.

    Runs in its own rclpy context, so it never disturbs the test process's other ROS use.
    """

    def __init__(self, env: dict[str, str], name: str = "test_probe") -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self._rclpy = rclpy
        self.context = rclpy.Context()
        use_project_dds_profile()
        rclpy.init(context=self.context, domain_id=int(env["ROS_DOMAIN_ID"]))
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.received: dict[str, list] = {}

    def subscribe(self, msg_type: type, topic: str, qos=None) -> list:
        from instant_fold_ros.qos import OBSERVATION_QOS

        messages: list = self.received.setdefault(topic, [])
        self.node.create_subscription(msg_type, topic, messages.append, qos or OBSERVATION_QOS)
        return messages

    def spin_until(self, condition, timeout_s: float) -> bool:
        """Spin until `condition()` holds or the timeout passes; return whether it held."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if condition():
                return True
            self.executor.spin_once(timeout_sec=0.05)
        return bool(condition())

    def call(self, srv_type: type, name: str, request, timeout_s: float = 30.0):
        """Call a service once it is available; return the response (or None on timeout)."""
        client: Any = self.node.create_client(srv_type, name)
        if not self.spin_until(client.service_is_ready, timeout_s):
            return None
        future = client.call_async(request)
        self.spin_until(future.done, timeout_s)
        return future.result() if future.done() else None

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self._rclpy.shutdown(context=self.context)

    def __enter__(self) -> TopicProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
