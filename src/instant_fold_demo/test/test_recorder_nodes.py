"""Recorder and bag player as real processes over DDS: a bag recorded from live publishers and
stopped mid-stream by SIGINT or SIGTERM holds every message it received, intact; a recorded bag
played back arrives on the camera topics with its frames' shared stamps."""

from __future__ import annotations

import io
import re
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import CameraInfo, Image
from test_bag import frames

from instant_fold_demo.bag import bag_topics, read_messages
from instant_fold_demo.rgbd_bag import write_rgbd_bag
from instant_fold_interfaces.msg import ClothTokens
from instant_fold_ros.conversions import camera_info_from_intrinsics, make_header, tokens_to_msg
from instant_fold_ros.graph_spec import GraphSpec, NodeSpec
from instant_fold_ros.qos import COMMAND_QOS, LATCHED_QOS, OBSERVATION_QOS
from instant_fold_ros.standins.image_bridge import image_from_msg, image_to_msg
from instant_fold_ros.standins.process_runner import ProcessRunner, find_executable
from instant_fold_ros.testing import TopicProbe

pytestmark = pytest.mark.ros

TOPICS = ("/camera/color", "/camera/camera_info", "/cloth/tokens")


def _recorder(tmp_path: Path, env: dict[str, str], output: Path) -> subprocess.Popen[str]:
    params = tmp_path / "recorder.yaml"
    params.write_text(
        f"recorder:\n  ros__parameters:\n    output: '{output}'\n    topics: {list(TOPICS)}\n    progress_period_s: 0.5\n"
    )
    node = NodeSpec("recorder", "instant_fold_demo", "recorder_node", parameters=(params,))
    return subprocess.Popen(
        [str(find_executable(node)), *node.ros_arguments()], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _messages(i: int) -> tuple[Image, CameraInfo, ClothTokens]:
    header = make_header("cam")
    header.stamp.sec = i
    color = image_to_msg(np.full((48, 64, 3), i % 256, np.uint8), "rgb8", header)
    k = np.array([[100.0, 0, 32], [0, 100.0, 24], [0, 0, 1]])
    tokens = tokens_to_msg(np.full((8, 3), float(i), np.float32), np.zeros((8, 4), np.float32), header=header)
    return color, camera_info_from_intrinsics(k, 64, 48, header), tokens


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_recording_stopped_mid_stream_keeps_every_received_message(
    tmp_path: Path, ros_env: dict[str, str], stop: signal.Signals
) -> None:
    output = tmp_path / "demo_bag"
    with TopicProbe(ros_env) as probe:
        qos = (OBSERVATION_QOS, LATCHED_QOS, OBSERVATION_QOS)
        types = (Image, CameraInfo, ClothTokens)
        pubs = [probe.node.create_publisher(t, name, q) for t, name, q in zip(types, TOPICS, qos, strict=True)]
        recorder = _recorder(tmp_path, ros_env, output)
        try:
            assert probe.spin_until(lambda: all(p.get_subscription_count() for p in pubs), 60.0), (
                "recorder never subscribed"
            )
            for i in range(60):
                if i == 45:
                    recorder.send_signal(stop)  # mid-stream: 15 more messages per topic follow
                for pub, msg in zip(pubs, _messages(i), strict=True):
                    pub.publish(msg)
                probe.spin_until(lambda: False, 1 / 30)
            log, _ = recorder.communicate(timeout=60)
        finally:
            if recorder.poll() is None:
                recorder.kill()
    assert recorder.returncode == 0, log
    closed = re.search(r"closed .*?: [\d.]+ s, [\d.]+ MB, (\d+) messages \(0 dropped\), (\d+) received", log)
    assert closed, log
    assert "MB" in log.split("closed")[0], "no size/duration shown while recording"
    written, received = int(closed[1]), int(closed[2])
    assert written == received >= 3 * 40
    counts = bag_topics(output)
    assert {t: c[0] for t, c in counts.items()} == {
        "/camera/color": "sensor_msgs/msg/Image",
        "/camera/camera_info": "sensor_msgs/msg/CameraInfo",
        "/cloth/tokens": "instant_fold_interfaces/msg/ClothTokens",
    }
    assert sum(c[1] for c in counts.values()) == written
    seen: dict[str, list[int]] = {t: [] for t in TOPICS}
    for message in read_messages(output):
        msg = deserialize_message(message.data, dict(zip(TOPICS, types, strict=True))[message.topic])
        i = msg.header.stamp.sec
        expected = _messages(i)[TOPICS.index(message.topic)]
        assert msg == expected, f"{message.topic} message {i} changed on the way"
        seen[message.topic].append(i)
    for topic, indices in seen.items():
        assert indices == sorted(indices) and len(set(indices)) == len(indices), topic


def test_unwritable_output_ends_the_recorder_with_a_clear_error(tmp_path: Path, ros_env: dict[str, str]) -> None:
    (tmp_path / "file").write_text("not a folder")
    recorder = _recorder(tmp_path, ros_env, tmp_path / "file" / "bag")
    log, _ = recorder.communicate(timeout=60)
    assert recorder.returncode == 1, log
    assert "is not a folder" in log and "Traceback" not in log


def test_recorded_bag_plays_back_into_the_graph(tmp_path: Path, ros_env: dict[str, str]) -> None:
    original = frames(6)
    bag = write_rgbd_bag(tmp_path / "bag", original)
    params = tmp_path / "player.yaml"
    params.write_text(f"bag_player:\n  ros__parameters:\n    bag: '{bag}'\n    rate: 1.0\n")
    graph = GraphSpec("play", (NodeSpec("bag_player", "instant_fold_demo", "bag_player", parameters=(params,)),))
    out = io.StringIO()
    with TopicProbe(ros_env) as probe:
        colors = probe.subscribe(Image, "/camera/color", COMMAND_QOS)  # deep enough to keep all 6
        depths = probe.subscribe(Image, "/camera/depth", COMMAND_QOS)
        infos = probe.subscribe(CameraInfo, "/camera/camera_info", COMMAND_QOS)
        runner = ProcessRunner(graph, env=ros_env, output=out)
        runner.start()
        started = time.time_ns()
        try:
            probe.spin_until(lambda: min(len(colors), len(depths), len(infos)) >= 6, 60.0)
            assert runner.wait() == 0, out.getvalue()  # the player ends after the bag
        finally:
            runner.shutdown()
    assert "played" in out.getvalue() and (len(colors), len(depths), len(infos)) == (6, 6, 6), out.getvalue()
    offsets = set()
    for frame, color, depth, info in zip(original, colors, depths, infos, strict=True):
        assert np.array_equal(image_from_msg(color), frame.color)
        assert np.array_equal(image_from_msg(depth), frame.depth)
        stamps = {m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in (color, depth, info)}
        assert len(stamps) == 1  # still one header per frame
        offsets.add(stamps.pop() - frame.stamp_ns)
    assert len(offsets) == 1 and offsets.pop() + original[0].stamp_ns >= started  # restamped to "now"
