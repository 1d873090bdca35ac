"""Faults: a controller stopped while its `sim` driver waits for the simulator (issue 31).

Before: when a run failed at start-up (the sim node exited), the runner's SIGINT reached the
controller inside the sim driver's wait for `sim/step`; the KeyboardInterrupt left with the
link's executor thread still spinning and its node alive, and the process ended with the C++
runtime's "terminate called without an active exception" in graph.log. Now the link stops its
thread and destroys its node before the exception leaves.
"""

from __future__ import annotations

import threading

import pytest

pytestmark = pytest.mark.ros


def test_an_interrupted_connect_leaves_no_link_thread_or_node(ros_env: dict[str, str], monkeypatch) -> None:
    import rclpy
    from rclpy.client import Client

    from instant_fold_sim.sim_driver import SimLink

    def interrupted(self, timeout_sec=None) -> bool:
        raise KeyboardInterrupt  # what Ctrl-C / the runner's SIGINT raises in the waiting thread

    monkeypatch.setattr(Client, "wait_for_service", interrupted)
    rclpy.init(domain_id=int(ros_env["ROS_DOMAIN_ID"]))
    try:
        link = SimLink(connect_timeout_s=60.0)
        with pytest.raises(KeyboardInterrupt):
            link.connect()
        assert link._spinner is None and link._node is None
        assert not [t for t in threading.enumerate() if t.name == "sim_driver_link"]
    finally:
        rclpy.try_shutdown()
