"""The project's Fast DDS profile: chosen where a process starts ROS, and in effect in a node.

Why it matters: with Fast DDS's 512 KiB shared-memory segment, one simulated RGB-D frame filled
it and a `sim/step` answer waited for the 3 s heartbeat (docs/architecture.md, "DDS transport").
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from instant_fold_ros.dds_profile import PROFILE, PROFILE_VARIABLE, use_project_dds_profile

NS = {"dds": "http://www.eprosima.com"}
SEGMENT_BYTES = 16 * 1024 * 1024
#: One 640 x 480 RealSense frame as the graph publishes it: rgb8 + 32FC1 depth + mono8 mask.
REALSENSE_FRAME_BYTES = 640 * 480 * (3 + 4 + 1)


def test_the_profile_is_chosen_unless_the_user_chose_one_or_another_middleware() -> None:
    env: dict[str, str] = {}
    assert use_project_dds_profile(env) == PROFILE and env[PROFILE_VARIABLE] == str(PROFILE)
    mine = {"RMW_IMPLEMENTATION": "rmw_fastrtps_cpp", PROFILE_VARIABLE: "/home/me/dds.xml"}
    assert use_project_dds_profile(mine) == Path("/home/me/dds.xml") and mine[PROFILE_VARIABLE] == "/home/me/dds.xml"
    cyclone = {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}
    assert use_project_dds_profile(cyclone) is None and PROFILE_VARIABLE not in cyclone


def test_the_segment_holds_frames_in_flight_and_lost_samples_are_repaired_quickly() -> None:
    profiles = ET.parse(PROFILE).getroot().find("dds:profiles", NS)
    assert profiles is not None
    shm = [
        d
        for d in profiles.iterfind("dds:transport_descriptors/dds:transport_descriptor", NS)
        if d.findtext("dds:type", namespaces=NS) == "SHM"
    ]
    assert len(shm) == 1
    segment = int(shm[0].findtext("dds:segment_size", namespaces=NS) or 0)
    assert segment >= 4 * REALSENSE_FRAME_BYTES  # a real camera's frames, two readers' queues of two
    participant = profiles.find("dds:participant[@is_default_profile='true']", NS)
    assert participant is not None
    used = [t.text for t in participant.iterfind("dds:rtps/dds:userTransports/dds:transport_id", NS)]
    assert shm[0].findtext("dds:transport_id", namespaces=NS) in used
    assert participant.findtext("dds:rtps/dds:useBuiltinTransports", namespaces=NS) == "false"
    heartbeat = profiles.find("dds:data_writer[@is_default_profile='true']/dds:times/dds:heartbeat_period", NS)
    assert heartbeat is not None
    period = (
        int(heartbeat.findtext("dds:sec", namespaces=NS) or 0)
        + int(heartbeat.findtext("dds:nanosec", namespaces=NS) or 0) / 1e9
    )
    assert 0 < period <= 0.1


def _mapped_segments(pid: int) -> dict[str, int]:
    """Fast DDS shared-memory segments process `pid` maps: path -> size in bytes."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    paths = {line.split()[-1] for line in maps.splitlines() if "/dev/shm/fastdds_" in line}
    return {p: Path(p).stat().st_size for p in paths if Path(p).exists()}


@pytest.mark.ros
@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="reads the node's mappings from /proc (Linux)")
def test_a_node_started_the_project_way_maps_the_large_segment(ros_env: dict[str, str]) -> None:
    """A node process (`node_main.run_node`, as `ros2 run`/`ros2 launch`/the runner start them),
    with no profile in its environment, publishes through a 16 MiB shared-memory segment."""
    env = {k: v for k, v in ros_env.items() if k != PROFILE_VARIABLE}
    code = textwrap.dedent(
        """
        from rclpy.node import Node
        from std_msgs.msg import String
        from instant_fold_ros.node_main import run_node

        class Talker(Node):
            def __init__(self):
                super().__init__("dds_profile_talker")
                pub = self.create_publisher(String, "dds_profile_check", 1)
                self.create_subscription(String, "dds_profile_check", lambda _m: None, 1)
                self.create_timer(0.1, lambda: pub.publish(String(data="x")))

        run_node(Talker)
        """
    )
    process = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30.0
        segments: dict[str, int] = {}
        while process.poll() is None and time.monotonic() < deadline:
            segments = _mapped_segments(process.pid)
            if any(size >= SEGMENT_BYTES for size in segments.values()):
                break
            time.sleep(0.2)
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=20)
    assert any(size >= SEGMENT_BYTES for size in segments.values()), (segments, stderr[-2000:])
