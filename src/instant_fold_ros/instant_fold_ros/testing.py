"""Test support: an isolated ROS domain per test so parallel test runs never cross-talk (the main
job, `instant_fold.sim_fold`, reserves its domain the same way, so it never meets them either).

`isolated_ros_env()` reserves a ROS_DOMAIN_ID that no other process on this machine holds (an
exclusive lock file per id) and returns an environment for child processes that uses it with
localhost-only discovery.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from instant_fold_ros.dds_profile import use_project_dds_profile

#: Domain ids that map to valid DDS ports on Linux (0-101); 0 is left to interactive use.
DOMAIN_IDS = range(1, 102)
LOCK_DIR = Path(tempfile.gettempdir()) / "instant_fold_ros_domains"


@contextmanager
def isolated_ros_env() -> Iterator[dict[str, str]]:
    """Yield a copy of os.environ with a reserved ROS_DOMAIN_ID; release it on exit."""
    LOCK_DIR.mkdir(exist_ok=True)
    start = os.getpid() % len(DOMAIN_IDS)
    for offset in range(len(DOMAIN_IDS)):
        domain = DOMAIN_IDS[(start + offset) % len(DOMAIN_IDS)]
        handle = open(LOCK_DIR / f"{domain}.lock", "w")  # noqa: SIM115 - held for the whole context
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        try:
            env = dict(os.environ)
            env.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", PYTHONUNBUFFERED="1")
            yield env
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()
        return
    raise RuntimeError(f"all ROS domain ids {DOMAIN_IDS.start}-{DOMAIN_IDS.stop - 1} are in use on this machine")


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
