"""rosbag2 MCAP files: written with `rosbags`, read back byte for byte and decoded by rclpy's own
deserializer; RGB-D frames paired by stamp; clear errors for bad targets, a full disk (a real
file-size limit of the OS) and bad bags."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import CameraInfo, Image

from instant_fold_core.rgbd import RGBDFrame
from instant_fold_demo.bag import BagError, QueuedBagWriter, bag_topics, read_messages, write_messages
from instant_fold_demo.rgbd_bag import CameraTopics, check_camera_bag, read_rgbd_frames, write_rgbd_bag
from instant_fold_interfaces.msg import ClothTokens
from instant_fold_ros.conversions import make_header, tokens_to_msg
from instant_fold_ros.standins.image_bridge import image_to_msg

K = np.array([[300.0, 0, 64], [0, 300.0, 48], [0, 0, 1]], np.float32)


def frames(n: int, size: tuple[int, int] = (96, 128), seed: int = 0) -> list[RGBDFrame]:
    rng = np.random.default_rng(seed)
    return [
        RGBDFrame(
            rng.integers(0, 255, (*size, 3), dtype=np.uint8),
            rng.uniform(0.5, 1.5, size).astype(np.float32),
            K,
            stamp_ns=1_700_000_000_000_000_000 + i * 33_333_333,
        )
        for i in range(n)
    ]


def test_any_message_type_round_trips_byte_for_byte(tmp_path: Path) -> None:
    image = image_to_msg(np.arange(12, dtype=np.uint8).reshape(2, 2, 3), "rgb8", make_header("cam"))
    tokens = tokens_to_msg(
        np.ones((4, 3), np.float32), np.zeros((4, 8), np.float32), header=make_header("cam"), encoder_id="enc"
    )
    written = [
        ("/camera/color", 5, serialize_message(image)),
        ("/cloth/tokens", 7, serialize_message(tokens)),
        ("/camera/color", 9, serialize_message(image)),
    ]
    path = write_messages(
        tmp_path / "bag",
        {"/camera/color": "sensor_msgs/msg/Image", "/cloth/tokens": "instant_fold_interfaces/msg/ClothTokens"},
        written,
    )
    assert sorted(p.name for p in path.iterdir()) == ["bag.mcap", "metadata.yaml"]
    assert bag_topics(path) == {
        "/camera/color": ("sensor_msgs/msg/Image", 2),
        "/cloth/tokens": ("instant_fold_interfaces/msg/ClothTokens", 1),
    }
    read = [(m.topic, m.stamp_ns, m.data) for m in read_messages(path)]
    assert read == written
    assert deserialize_message(read[1][2], ClothTokens).encoder_id == "enc"
    assert bytes(deserialize_message(read[0][2], Image).data) == bytes(image.data)


def test_rgbd_frames_round_trip_and_stream_by_index(tmp_path: Path) -> None:
    original = frames(5)
    path = write_rgbd_bag(tmp_path / "bag", original)
    back = list(read_rgbd_frames(path))
    assert [f.frame_number for f in back] == [0, 1, 2, 3, 4]
    for a, b in zip(original, back, strict=True):
        assert np.array_equal(a.color, b.color) and np.array_equal(a.depth, b.depth)
        assert np.array_equal(a.intrinsics, b.intrinsics) and a.stamp_ns == b.stamp_ns
    assert [f.frame_number for f in read_rgbd_frames(path, indices=[3, 1])] == [1, 3]


def test_bad_targets_are_refused_clearly(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    with pytest.raises(BagError, match="exists already"):
        QueuedBagWriter(tmp_path / "taken")
    (tmp_path / "file").write_text("x")
    with pytest.raises(BagError, match="is not a folder"):
        QueuedBagWriter(tmp_path / "file" / "bag")


def test_queue_is_bounded_and_counts_drops(tmp_path: Path) -> None:
    writer = QueuedBagWriter(tmp_path / "bag", max_queued_bytes=100)
    writer.add_topic("/camera/color", "sensor_msgs/msg/Image")
    data = serialize_message(image_to_msg(np.zeros((8, 8, 3), np.uint8), "rgb8"))
    assert len(data) > 100 and writer.put("/camera/color", 1, data) is False
    stats = writer.close()
    assert (stats.messages, stats.dropped) == (0, 1)


def test_full_disk_gives_a_clear_error(tmp_path: Path) -> None:
    """A real OS refusal: the writer runs under a 2 MB file-size limit (RLIMIT_FSIZE, EFBIG), as a
    full disk refuses writes (ENOSPC); both map to the same message."""
    script = textwrap.dedent(
        f"""
        import resource, signal
        import numpy as np
        from rclpy.serialization import serialize_message
        from instant_fold_demo.bag import BagError, QueuedBagWriter
        from instant_fold_ros.standins.image_bridge import image_to_msg
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2_000_000, 2_000_000))
        writer = QueuedBagWriter({str(tmp_path / "bag")!r})
        writer.add_topic("/camera/color", "sensor_msgs/msg/Image")
        data = serialize_message(image_to_msg(np.ones((240, 320, 3), np.uint8), "rgb8"))
        try:
            for i in range(100):
                writer.put("/camera/color", i, data)
            writer.close()
        except BagError as exc:
            print("ERROR", exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "ERROR no space left while writing" in out.stdout, out.stdout + out.stderr
    assert "free disk space or record elsewhere" in out.stdout


def test_bad_bags_are_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(BagError, match="does not exist"):
        bag_topics(tmp_path / "missing")
    path = write_rgbd_bag(tmp_path / "bag", frames(3))
    with pytest.raises(BagError, match="no depth topic /depth"):
        check_camera_bag(path, CameraTopics(depth="/depth"))
    with pytest.raises(BagError, match="no camera_info topic /info"):
        list(read_rgbd_frames(path, CameraTopics(info="/info")))
    unclosed = shutil.copytree(path, tmp_path / "unclosed")
    (unclosed / "metadata.yaml").unlink()
    with pytest.raises(BagError, match="was not closed"):
        bag_topics(unclosed)
    truncated = shutil.copytree(path, tmp_path / "truncated")
    mcap = truncated / "bag.mcap"
    mcap.write_bytes(mcap.read_bytes()[: mcap.stat().st_size // 2])
    with pytest.raises(BagError, match="truncated"):
        list(read_rgbd_frames(truncated))
    assert len(list(read_rgbd_frames(path))) == 3  # the original is untouched


def test_mismatched_resolutions_are_refused(tmp_path: Path) -> None:
    (frame,) = frames(1)
    info = CameraInfo(width=64, height=48, k=K.astype(float).ravel().tolist())
    color = image_to_msg(frame.color, "rgb8", make_header("cam"))
    depth = image_to_msg(frame.depth, "32FC1", make_header("cam"))
    types = {"/camera/color": "sensor_msgs/msg/Image", "/camera/depth": "sensor_msgs/msg/Image",
             "/camera/camera_info": "sensor_msgs/msg/CameraInfo"}  # fmt: skip
    path = write_messages(
        tmp_path / "bag",
        types,
        [(t, 0, serialize_message(m)) for t, m in zip(types, (color, depth, info), strict=True)],
    )
    with pytest.raises(BagError, match=r"frame 0 .*CameraInfo: size 64x48 does not match the images 128x96"):
        list(read_rgbd_frames(path))
