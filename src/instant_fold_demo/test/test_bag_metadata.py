"""Bags that `ros2 bag info` and Foxglove read as their own (issue 30, "Also noticed in the bags"):
a real distribution name, the QoS profiles the publishers offered, optional zstd chunks, an empty
bag that starts at 0. Each test fails on the code before the fix. Besides `rosbags` (our writer's
own library), every bag is read by `mcap_file` below, a reader of the MCAP format written from its
specification (https://mcap.dev/spec) that shares no code with the writer (rosbag2_py, the
reference reader, has no wheels)."""

from __future__ import annotations

import json
import os
import signal
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from rosbags.rosbag2 import Reader
from std_msgs.msg import String
from test_capture_faults import _record_demo
from test_recorder_nodes import _messages

from instant_fold_demo.bag import BagError, BagWriter, read_messages, write_messages
from instant_fold_ros.qos import LATCHED_QOS, OBSERVATION_QOS
from instant_fold_ros.testing import TopicProbe

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

REPO = Path(__file__).resolve().parents[3]
RMW_INFINITE = {"sec": 9223372036, "nsec": 854775807}  # rmw's RMW_DURATION_INFINITE, as rosbag2 writes it


@dataclass
class McapFile:
    """What an MCAP file holds, read record by record."""

    chunks: list[dict] = field(default_factory=list)  # compression, message_start_time, message_end_time
    channels: dict[int, dict] = field(default_factory=dict)  # id -> topic, metadata
    messages: list[tuple[int, int, bytes]] = field(default_factory=list)  # channel id, log time, data
    metadata: dict[str, dict[str, str]] = field(default_factory=dict)  # Metadata records by name
    statistics: dict = field(default_factory=dict)


def _string(b: memoryview, at: int) -> tuple[str, int]:
    (n,) = struct.unpack_from("<I", b, at)
    return bytes(b[at + 4 : at + 4 + n]).decode(), at + 4 + n


def _string_map(b: memoryview, at: int) -> tuple[dict[str, str], int]:
    (size,) = struct.unpack_from("<I", b, at)
    end, at, out = at + 4 + size, at + 4, {}
    while at < end:
        key, at = _string(b, at)
        out[key], at = _string(b, at)
    return out, end


def _records(data: memoryview, into: McapFile) -> None:
    """Parse a run of records (the file's, or a chunk's) into `into`."""
    at = 0
    while at < len(data):
        op, size = data[at], struct.unpack_from("<Q", data, at + 1)[0]
        body, at = data[at + 9 : at + 9 + size], at + 9 + size
        if op == 0x04:  # Channel
            cid, _schema = struct.unpack_from("<HH", body)
            topic, o = _string(body, 4)
            _encoding, o = _string(body, o)
            into.channels[cid] = {"topic": topic, "metadata": _string_map(body, o)[0]}
        elif op == 0x05:  # Message
            cid, _seq, log_time, _pub = struct.unpack_from("<HIQQ", body)
            into.messages.append((cid, log_time, bytes(body[22:])))
        elif op == 0x06:  # Chunk
            start, end, raw_size, _crc = struct.unpack_from("<QQQI", body)
            compression, o = _string(body, 28)
            (n,) = struct.unpack_from("<Q", body, o)
            payload = bytes(body[o + 8 : o + 8 + n])
            into.chunks.append({"compression": compression, "message_start_time": start, "message_end_time": end})
            records = zstd.decompress(payload) if compression == "zstd" else payload
            assert compression in ("", "zstd") and len(records) == raw_size
            _records(memoryview(records), into)
        elif op == 0x0B:  # Statistics
            fields = struct.unpack_from("<QHIIIIQQ", body)
            into.statistics = dict(zip(("message_count", "schema_count", "channel_count", "attachment_count",
                                        "metadata_count", "chunk_count", "message_start_time", "message_end_time"),
                                       fields, strict=True))  # fmt: skip
        elif op == 0x0C:  # Metadata
            name, o = _string(body, 0)
            into.metadata[name] = _string_map(body, o)[0]


def mcap_file(bag: Path) -> McapFile:
    """The one .mcap file of a bag, read from its specification: magic, records, magic."""
    (path,) = bag.glob("*.mcap")
    raw = path.read_bytes()
    magic = b"\x89MCAP0\r\n"
    assert raw[:8] == magic and raw[-8:] == magic, f"{path} is no complete MCAP file"
    parsed = McapFile()
    _records(memoryview(raw)[8:-8], parsed)
    return parsed


def _information(bag: Path) -> dict:
    return yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]


def _string_bag(path: Path, count: int) -> Path:
    data = [b"\x00\x01\x00\x00" + struct.pack("<I", 6) + b"hello\x00"] * count
    return write_messages(path, {"/a": "std_msgs/msg/String"}, [("/a", i, d) for i, d in enumerate(data)])


def test_the_bag_names_the_ros_distribution_not_rosbags(tmp_path: Path) -> None:
    """metadata.yaml and the copy in the MCAP file said `ros_distro: rosbags`."""
    bag = _string_bag(tmp_path / "bag", 3)
    distro = os.environ.get("ROS_DISTRO") or "kilted"
    assert _information(bag)["ros_distro"] == distro
    embedded = yaml.safe_load(mcap_file(bag).metadata["rosbag2"]["serialized_metadata"])
    assert embedded["ros_distro"] == distro and embedded["message_count"] == 3
    reader = Reader(bag)
    reader.open()
    assert reader.ros_distro == distro and reader.message_count == 3
    reader.close()


def test_an_empty_bag_starts_at_zero_with_zero_duration(tmp_path: Path) -> None:
    """An empty bag started at INT64_MAX (the year 2262 to `ros2 bag info`); the MCAP spec says 0."""
    bag = _string_bag(tmp_path / "bag", 0)
    info = _information(bag)
    assert info["message_count"] == 0
    for times in (info, info["files"][0]):
        assert times["starting_time"]["nanoseconds_since_epoch"] == 0 and times["duration"]["nanoseconds"] == 0
    mcap = mcap_file(bag)
    assert mcap.statistics["message_count"] == 0 and mcap.statistics["message_start_time"] == 0
    assert all(c["message_start_time"] == 0 for c in mcap.chunks)
    embedded = yaml.safe_load(mcap.metadata["rosbag2"]["serialized_metadata"])
    assert embedded["starting_time"]["nanoseconds_since_epoch"] == 0
    assert list(read_messages(bag)) == []


def test_zstd_chunks_are_smaller_and_give_back_every_byte(tmp_path: Path) -> None:
    """Chunks were never compressed (about 3.9 GB a minute at 640x480, 30 Hz); `compression="zstd"`
    compresses every chunk, which both readers decompress to the bytes written."""
    color = [_messages(i)[0] for i in range(60)]
    from rclpy.serialization import serialize_message

    data = [serialize_message(m) for m in color]
    sizes = {}
    for compression in ("none", "zstd"):
        writer = BagWriter(tmp_path / compression, compression)
        writer.add_topic("/camera/color", "sensor_msgs/msg/Image")
        for i, d in enumerate(data):
            writer.write("/camera/color", 1000 + i, d)
        writer.close()
        mcap = mcap_file(writer.path)
        assert {c["compression"] for c in mcap.chunks} == {"zstd" if compression == "zstd" else ""}
        assert [m[2] for m in mcap.messages] == data
        assert [m.data for m in read_messages(writer.path)] == data
        sizes[compression] = (writer.path / f"{compression}.mcap").stat().st_size
    assert sizes["zstd"] < sizes["none"] / 5, sizes
    with pytest.raises(BagError, match="unknown bag compression 'lz4': choose one of none, zstd"):
        BagWriter(tmp_path / "lz4", "lz4")


@pytest.mark.ros
def test_recorded_topics_carry_the_qos_their_publishers_offered(tmp_path: Path, ros_env: dict[str, str]) -> None:
    """`offered_qos_profiles` was empty for every topic; it holds each publisher's profile (here a
    reliable volatile camera and a latched topic), in metadata.yaml, in the MCAP channels and as
    rosbags reads them; `record_demo --compression zstd` writes zstd chunks."""
    out = tmp_path / "bag"
    with TopicProbe(ros_env) as probe:
        latched = probe.node.create_publisher(String, "/latched", LATCHED_QOS)
        latched.publish(String(data="home"))
        color = probe.node.create_publisher(type(_messages(0)[0]), "/camera/color", OBSERVATION_QOS)
        recorder = _record_demo(ros_env, str(out), "--topics", "/camera/color", "/latched", "--compression", "zstd")
        try:
            subscribed = probe.spin_until(
                lambda: color.get_subscription_count() > 0 and latched.get_subscription_count() > 0, 60.0
            )
            assert subscribed, "the recorder never subscribed"
            for i in range(10):
                color.publish(_messages(i)[0])
                probe.spin_until(lambda: False, 1 / 30)
            probe.spin_until(lambda: False, 0.5)
            recorder.send_signal(signal.SIGINT)
            log, _ = recorder.communicate(timeout=60)
        finally:
            if recorder.poll() is None:
                recorder.kill()
    assert recorder.returncode == 0, log
    expected = {"/camera/color": ("reliable", "volatile"), "/latched": ("reliable", "transient_local")}
    topics = {t["topic_metadata"]["name"]: t for t in _information(out)["topics_with_message_count"]}
    assert set(topics) == set(expected) and topics["/camera/color"]["message_count"] == 10, log
    for topic, (reliability, durability) in expected.items():
        (profile,) = topics[topic]["topic_metadata"]["offered_qos_profiles"]
        assert (profile["reliability"], profile["durability"]) == (reliability, durability), profile
        assert profile["deadline"] == profile["lifespan"] == RMW_INFINITE and profile["liveliness"] == "automatic"
    mcap = mcap_file(out)
    for channel in mcap.channels.values():
        assert yaml.safe_load(channel["metadata"]["offered_qos_profiles"]) == [
            topics[channel["topic"]]["topic_metadata"]["offered_qos_profiles"][0]
        ]
    assert {c["compression"] for c in mcap.chunks} == {"zstd"}
    reader = Reader(out)
    reader.open()
    read = {c.topic: c.ext.offered_qos_profiles for c in reader.connections}  # type: ignore[union-attr]
    reader.close()
    assert {t: (q[0].reliability.name.lower(), q[0].durability.name.lower()) for t, q in read.items()} == expected


def _compression_numbers(result: dict) -> list[str]:
    """docs/demonstrations.md's table and sentence of docs/results/bench_bag_compression.json (typed once)."""
    lines = [
        "| frames | compression | MB/s on disk at 30 Hz | GB per minute | ratio | CPU per frame | cores at 30 Hz "
        "| frames/s one core writes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        setting = "none" if r["compression"] == "none" else f"zstd level {r['zstd_level']}"
        lines.append(
            f"| {r['content']} | {setting} | {r['disk_mb_per_s_at_30hz']:.1f} | {r['disk_gb_per_min_at_30hz']:.2f} "
            f"| {r['ratio']:.2f} | {r['cpu_ms_per_frame']:.1f} ms | {r['cpu_cores_at_30hz']:.2f} "
            f"| {r['max_frames_per_s_one_core']:.0f} |"
        )
    none, zstd = result["dds"]
    over_dds = (
        f"{none['recorded_frames']} of {none['published_frames']} frames recorded without compression "
        f"({none['disk_mb']:.0f} MB, recorder {none['recorder_cpu_s']:.1f} CPU s), {zstd['recorded_frames']} of "
        f"{zstd['published_frames']} with zstd ({zstd['disk_mb']:.0f} MB, {zstd['recorder_cpu_s']:.1f} CPU s), "
        f"{none['dropped_by_recorder']} and {zstd['dropped_by_recorder']} dropped by the recorder"
    )
    return ["\n".join(lines), over_dds]


def test_the_compression_numbers_in_the_docs_are_the_measured_ones() -> None:
    result = json.loads((REPO / "docs" / "results" / "bench_bag_compression.json").read_text())
    docs = (REPO / "docs" / "demonstrations.md").read_text()
    table, over_dds = _compression_numbers(result)
    assert table in docs
    assert over_dds in " ".join(docs.split())
