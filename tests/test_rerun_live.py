"""A fold streams live to Rerun's web viewer (`sim_fold --view live`): the recording tap, fed over
real DDS, streams to the viewer's gRPC proxy, and a client of that proxy receives the fold while
it is still running, not only after it.

The client is Rerun's own command-line viewer in headless mode (`rerun --connect <proxy> --save`),
which writes what it receives to a file: no browser is needed to see that the data arrives. The
graph is a stand-in publisher of the fold graph's topics (camera, camera info, mask, tokens,
commands) in one rclpy context and the main job's tap in another, on a reserved ROS domain; the
main job itself is too slow for the default suite (minutes on the 2-core machine).
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from instant_fold_core.contracts import ActionChunk
from instant_fold_core.fold_recording import FoldRecording, FoldRecordingError
from instant_fold_core.rerun_web import free_port, rerun_executable, serve_live

rerun_chunk = pytest.importorskip("rerun.chunk", reason="rerun-sdk is pinned in requirements/python.lock")

W, H = 32, 24
K = np.array([[40.0, 0, 16], [0, 40, 12], [0, 0, 1]])
CLOTH = np.array([0.0, 0.0, 0.8])  # where the tokens and chunks are, camera frame


def rows(path: Path) -> Counter[str]:
    """Rows per entity in an `.rrd` that may still be being written (a torn last message: retry)."""
    if not path.is_file():
        return Counter()
    try:
        counts: Counter[str] = Counter()
        for chunk in rerun_chunk.RrdReader(path).stream():
            counts[chunk.entity_path] += chunk.to_record_batch().num_rows
        return counts
    except Exception:  # a half-written file (a torn last message): the caller polls again
        return Counter()


def wait_for(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return bool(condition())


class Publisher:
    """Publishes the fold graph's observation and command topics, frame by frame, in its own context."""

    def __init__(self, domain: int) -> None:
        import rclpy
        from sensor_msgs.msg import CameraInfo, Image

        from instant_fold_interfaces.msg import ActionChunk as ActionChunkMsg
        from instant_fold_interfaces.msg import ClothTokens
        from instant_fold_ros.qos import COMMAND_QOS, OBSERVATION_QOS

        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain)
        self.node = rclpy.create_node("live_publisher", context=self.context)
        self.pub = {
            "info": self.node.create_publisher(CameraInfo, "camera/camera_info", OBSERVATION_QOS),
            "color": self.node.create_publisher(Image, "camera/color", OBSERVATION_QOS),
            "mask": self.node.create_publisher(Image, "cloth/mask", OBSERVATION_QOS),
            "tokens": self.node.create_publisher(ClothTokens, "cloth/tokens", OBSERVATION_QOS),
            "command": self.node.create_publisher(ActionChunkMsg, "arms/command", COMMAND_QOS),
        }

    def subscribed(self) -> bool:
        return all(p.get_subscription_count() > 0 for p in self.pub.values())

    def frame(self, t: int) -> None:
        """Frame `t` (stamped t * 50 ms of simulated time) and the policy's answer to it."""
        from rclpy.time import Time

        from instant_fold_ros.conversions import (
            action_chunk_to_msg,
            camera_info_from_intrinsics,
            make_header,
            tokens_to_msg,
        )
        from instant_fold_ros.standins.image_bridge import image_to_msg

        header = make_header("camera_color_optical_frame", Time(nanoseconds=(t + 1) * 50_000_000).to_msg())
        rng = np.random.default_rng(t)
        self.pub["info"].publish(camera_info_from_intrinsics(K, W, H, header))
        self.pub["color"].publish(image_to_msg(rng.integers(0, 255, (H, W, 3), dtype=np.uint8), "rgb8", header))
        self.pub["mask"].publish(image_to_msg((rng.random((H, W)) > 0.5).astype(np.uint8) * 255, "mono8", header))
        self.pub["tokens"].publish(tokens_to_msg(rng.normal(0, 0.1, (8, 3)) + CLOTH, np.zeros((8, 4)), header=header))
        chunk = ActionChunk(rng.normal(0, 0.1, (4, 2, 3)) + CLOTH, np.ones((4, 2)), 2, 0.05)
        self.pub["command"].publish(action_chunk_to_msg(chunk, header))

    def close(self) -> None:
        import rclpy

        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


@pytest.mark.ros
@pytest.mark.filterwarnings("ignore:RRD file has no footer")  # what a streaming client saves has none
def test_a_client_of_the_live_viewer_receives_the_fold_while_it_runs(tmp_path: Path, ros_env) -> None:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from instant_fold_ros.recording_tap import RecordingTap

    received = tmp_path / "received.rrd"
    with serve_live(web_port=0, log=tmp_path / "rerun_web.log") as viewer:
        client_port = free_port("127.0.0.1", 0)
        client = subprocess.Popen(
            [str(rerun_executable()), "--connect", viewer.proxy, "--save", str(received), "--bind", "127.0.0.1",
             "--port", str(client_port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        domain = int(ros_env["ROS_DOMAIN_ID"])
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=domain)
        publisher = Publisher(domain)
        executor = SingleThreadedExecutor(context=context)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        try:
            recording = FoldRecording(tmp_path / "fold.rrd", stream_to=viewer.proxy)
            tap = RecordingTap(recording)
            node = rclpy.create_node("sim_fold", context=context)
            taken = Counter[str]()  # camera frames the tap took (it records each one it takes)
            tap.attach(
                node,
                latency=lambda msg: {"tokens_to_command": 12.5},
                also={"camera/color": lambda msg: taken.update(["rgb"])},
                arm_state=False,
            )
            executor.add_node(node)
            spinner.start()
            assert wait_for(publisher.subscribed, 30), "the tap never subscribed"
            t = 0
            while_running = Counter[str]()
            deadline = time.monotonic() + 60
            # the fold runs: frames keep coming until the client has received some of them
            while not while_running["/camera/rgb"] and time.monotonic() < deadline:
                publisher.frame(t)
                t += 1
                time.sleep(0.1)
                while_running = rows(received)
            # the recording is still open (closed below): the data arrived during the fold
            assert while_running["/camera/rgb"] > 0, "nothing reached the viewer's client during the fold"
            for _ in range(5):  # and a little more after that
                publisher.frame(t)
                t += 1
                time.sleep(0.1)
            assert wait_for(lambda: tap.queries == t, 30), f"{tap.queries} of {t} commands reached the tap"
            executor.shutdown()
            spinner.join(30)  # the last callback has returned: nothing is recorded after this
            recording.close()
            assert recording.stream_error is None
            written = rows(tmp_path / "fold.rrd")
            # Commands are queued (depth 10): every one is recorded. Observations keep only the
            # freshest two, so on a loaded machine a frame can be replaced before the tap takes it:
            # the file holds every frame the tap took.
            assert written["/policy/chunk"] == tap.queries == t
            assert 0 < written["/camera/rgb"] == taken["rgb"] <= t
            # everything the file holds, the client got too (the proxy keeps it for late clients)
            assert wait_for(lambda: rows(received)["/camera/rgb"] == written["/camera/rgb"], 30)
            got = rows(received)
            for entity in ("/camera/mask", "/cloth/tokens", "/policy/chunk", "/latency/tokens_to_command"):
                assert got[entity] == written[entity] > 0, entity
        finally:
            executor.shutdown()
            publisher.close()
            rclpy.shutdown(context=context)
            client.terminate()
            client.wait(timeout=30)
    assert viewer.process.poll() is not None


def test_stream_to_must_be_a_rerun_address(tmp_path: Path) -> None:
    with pytest.raises(FoldRecordingError, match="stream_to: expected a Rerun gRPC address"):
        FoldRecording(tmp_path / "fold.rrd", stream_to="http://127.0.0.1:9876")


def test_a_viewer_that_goes_away_leaves_the_file_whole(tmp_path: Path) -> None:
    """Closing the viewer mid-fold ends the stream, not the recording: the file has every frame."""
    viewer = serve_live(web_port=0)
    recording = FoldRecording(tmp_path / "fold.rrd", stream_to=viewer.proxy)
    recording.camera(K, W, H)
    for t in range(20):
        recording.observation(0.05 * t, np.zeros((H, W, 3), np.uint8))
        if t == 5:
            viewer.close()
    recording.close()
    assert recording.stream_error is not None
    assert rows(tmp_path / "fold.rrd")["/camera/rgb"] == 20
