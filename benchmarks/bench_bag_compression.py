"""MCAP chunk compression of the demonstration recorder: size on disk and CPU at 640x480 RGB-D, 30 Hz.

Why: uncompressed, a 640x480 RGB-D recording is about 3.9 GB a minute (issue 30); zstd chunks
make it smaller but cost the recorder CPU on the machine that also runs the camera. This writes
the same frames with the recorder's writer (`instant_fold_demo.bag.BagWriter`, synchronous, so
all the compression CPU is this process's) with no compression and zstd at level 1 (the
recorder's, the MCAP C++ writer's default) and 3 (the zstd default), and reports per setting:
MB on disk per recorded second at 30 Hz, the CPU (cores) writing 30 frames a second costs, the
most frames per second one core writes, and the compression ratio; the bag is read back and
checked message for message. Then ("dds") the recorder node in its own process over real DDS,
`compression` none and zstd, while a publisher sends camera-like frames at 30 Hz for
`--dds-seconds`: frames published and recorded, messages the recorder dropped, its CPU time.

Frame contents (compression depends on them; no camera is available here, so none is a camera's):
- "camera_like": a smooth table-and-cloth scene with sensor noise as a RealSense at 0.7 m gives
  it (colour: Gaussian, sigma 2 levels; depth: 1 mm steps, as the camera node converts its 16-bit
  millimetres to 32FC1 metres, sigma 1 mm, 2 % invalid pixels);
- "simulator": the same scene without noise (what the simulator renders: flat shading);
- "random": uniform random bytes, which no compressor shrinks: the cost of compressing for nothing.

    OMP_NUM_THREADS=1 nice -n 15 python benchmarks/bench_bag_compression.py --out docs/results/bench_bag_compression.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from builtin_interfaces.msg import Time
from rclpy.serialization import serialize_message

import instant_fold_demo.bag as bag_module
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_demo.bag import BagWriter, read_messages
from instant_fold_ros.conversions import make_header, rgbd_to_msgs

H, W, HZ = 480, 640, 30
K = np.array([[600.0, 0, 320], [0, 600.0, 240], [0, 0, 1]], np.float32)
TOPICS = {
    "/camera/color": "sensor_msgs/msg/Image",
    "/camera/depth": "sensor_msgs/msg/Image",
    "/camera/camera_info": "sensor_msgs/msg/CameraInfo",
}
#: The level the recorder process compresses with (`write_bag` changes this process's).
RECORDER_ZSTD_LEVEL = bag_module.ZSTD_LEVEL
#: Distinct frames generated per content (cycled): enough that no chunk repeats another's bytes.
DISTINCT = 8


def _scene(rng: np.random.Generator, noise: bool) -> tuple[np.ndarray, np.ndarray]:
    """A table (0.70 m, slight tilt, a wood-like colour ramp) with a shaded cloth ellipse on it."""
    v, u = np.mgrid[0:H, 0:W].astype(np.float32)
    depth = 0.70 + 0.00008 * (v - H / 2)
    color = np.stack([150 + 0.05 * u, 120 + 0.03 * v, 90 + 0.0 * u], -1)
    cx, cy = 320 + rng.uniform(-20, 20), 240 + rng.uniform(-20, 20)
    r2 = ((u - cx) / 190) ** 2 + ((v - cy) / 130) ** 2
    cloth = r2 < 1
    wrinkles = 0.004 * np.sin(u / 9.0 + rng.uniform(0, 6)) * np.cos(v / 13.0)
    depth = np.where(cloth, depth - 0.01 - wrinkles, depth)
    shade = 0.75 + 25 * wrinkles
    color = np.where(cloth[..., None], np.array([60, 90, 170], np.float32) * shade[..., None], color)
    if noise:
        color = color + rng.normal(0, 2.0, color.shape)
        depth = np.round((depth + rng.normal(0, 0.001, depth.shape)) * 1000) / 1000
        depth[rng.random(depth.shape) < 0.02] = 0.0
    else:
        depth = np.round(depth * 1000) / 1000
    return np.clip(color, 0, 255).astype(np.uint8), depth.astype(np.float32)


def _random(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.integers(0, 256, (H, W, 3), dtype=np.uint8), rng.uniform(0.6, 1.2, (H, W)).astype(np.float32)


CONTENTS: dict[str, Callable[[np.random.Generator], tuple[np.ndarray, np.ndarray]]] = {
    "camera_like": lambda rng: _scene(rng, noise=True),
    "simulator": lambda rng: _scene(rng, noise=False),
    "random": _random,
}


def payloads(content: str) -> list[list[bytes]]:
    """`DISTINCT` frames of `content`, each its colour, depth and CameraInfo CDR bytes."""
    rng = np.random.default_rng(0)
    frames = []
    for i in range(DISTINCT):
        color, depth = CONTENTS[content](rng)
        header = make_header("camera_color_optical_frame", Time(sec=i, nanosec=0))
        frames.append([serialize_message(m) for m in rgbd_to_msgs(RGBDFrame(color, depth, K), header)])
    return frames


def write_bag(path: Path, frames: list[list[bytes]], count: int, compression: str, level: int) -> dict:
    """Write `count` frames; wall and CPU seconds of the writing (this process, every thread)."""
    bag_module.ZSTD_LEVEL = level  # the level the writer's zstd chunks use
    wall0, cpu0 = time.perf_counter(), time.process_time()
    writer = BagWriter(path, compression)
    for topic, msgtype in TOPICS.items():
        writer.add_topic(topic, msgtype)
    for i in range(count):
        for topic, data in zip(TOPICS, frames[i % len(frames)], strict=True):
            writer.write(topic, i * 1_000_000_000 // HZ, data)
    writer.close()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    disk = sum(f.stat().st_size for f in path.iterdir())
    return {"wall_s": wall, "cpu_s": cpu, "disk_bytes": disk, "input_bytes": writer.stats.bytes}


def check_read_back(path: Path, frames: list[list[bytes]], count: int) -> None:
    """Every message comes back byte for byte (a compression that loses anything is no option)."""
    n = 0
    for n, message in enumerate(read_messages(path)):
        if message.data != frames[(n // 3) % len(frames)][list(TOPICS).index(message.topic)]:
            raise SystemExit(f"{path}: message {n} ({message.topic}) differs from what was written")
    if n + 1 != 3 * count:
        raise SystemExit(f"{path}: {n + 1} messages read back, {3 * count} written")


def record_over_dds(frames: list[list[bytes]], seconds: float, compression: str) -> dict:
    """The recorder process recording a 30 Hz publisher of `frames` for `seconds`, then SIGINT."""
    from instant_fold_ros.domains import isolated_ros_env
    from instant_fold_ros.graph_spec import NodeSpec
    from instant_fold_ros.qos import OBSERVATION_QOS
    from instant_fold_ros.standins.process_runner import find_executable
    from instant_fold_ros.testing import TopicProbe

    with tempfile.TemporaryDirectory() as tmp, isolated_ros_env() as env, TopicProbe(env) as probe:
        pubs = [
            probe.node.create_publisher(_message_class(msgtype), topic, OBSERVATION_QOS)
            for topic, msgtype in TOPICS.items()
        ]
        node = NodeSpec("recorder", "instant_fold_demo", "recorder_node")
        args = [*node.ros_arguments(), "-p", f"output:={tmp}/bag", "-p", f"compression:={compression}"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.Popen(
            [str(find_executable(node)), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        if not probe.spin_until(lambda: all(p.get_subscription_count() for p in pubs), 60.0):
            proc.kill()
            raise SystemExit(f"the recorder never subscribed: {proc.communicate()[0]}")
        published, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < seconds:
            for pub, data in zip(pubs, frames[published % len(frames)], strict=True):
                pub.publish(data)  # serialized bytes: rclpy publishes them as they are
            published += 1
            probe.spin_until(lambda: False, max(0.0, t0 + published / HZ - time.monotonic()))
        probe.spin_until(lambda: False, 1.0)
        proc.send_signal(signal.SIGINT)
        log, _ = proc.communicate(timeout=300)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        disk = sum(f.stat().st_size for f in (Path(tmp) / "bag").iterdir())
    closed = re.search(r"closed .*?: ([\d.]+) s, ([\d.]+) MB, (\d+) messages \((\d+) dropped\)", log)
    if proc.returncode != 0 or not closed:
        raise SystemExit(f"recorder failed:\n{log}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {
        "compression": compression,
        "zstd_level": RECORDER_ZSTD_LEVEL if compression == "zstd" else None,
        "seconds": seconds,
        "published_frames": published,
        "recorded_messages": int(closed[3]),
        "recorded_frames": int(closed[3]) // len(TOPICS),
        "dropped_by_recorder": int(closed[4]),
        "disk_mb": round(disk / 1e6, 1),
        "recorder_cpu_s": round(cpu, 2),
        "recorder_cores": round(cpu / seconds, 3),
    }


def _message_class(msgtype: str) -> type:
    from instant_fold_demo.recorder_node import message_class

    return message_class(msgtype)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0, help="recorded seconds per setting (30 frames each)")
    p.add_argument("--repeats", type=int, default=3, help="bags per setting; the median CPU and wall time count")
    p.add_argument("--dds-seconds", type=float, default=10.0, help="seconds of the 30 Hz recording over DDS (0: none)")
    p.add_argument(
        "--out", type=Path, default=None, help="JSON to write (e.g. docs/results/bench_bag_compression.json)"
    )
    args = p.parse_args()
    load = os.getloadavg()[0]
    count = round(args.seconds * HZ)
    settings = [("none", 0), ("zstd", 1), ("zstd", 3)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_bag_compression_") as tmp:
        for content in CONTENTS:
            frames = payloads(content)
            for compression, level in settings:
                name = compression if compression == "none" else f"zstd{level}"
                runs = []
                for repeat in range(args.repeats):
                    path = Path(tmp) / f"{content}_{name}_{repeat}"
                    runs.append(write_bag(path, frames, count, compression, level))
                    check_read_back(path, frames, count)
                    shutil.rmtree(path)
                m = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
                row = {
                    "content": content,
                    "compression": compression,
                    "zstd_level": level if compression == "zstd" else None,
                    "frames": count,
                    "repeats": args.repeats,
                    "cpu_ms_per_frame_each": [round(run["cpu_s"] / count * 1e3, 2) for run in runs],
                    "input_mb_per_s_at_30hz": round(m["input_bytes"] / count * HZ / 1e6, 2),
                    "disk_mb_per_s_at_30hz": round(m["disk_bytes"] / count * HZ / 1e6, 2),
                    "disk_gb_per_min_at_30hz": round(m["disk_bytes"] / count * HZ * 60 / 1e9, 3),
                    "ratio": round(m["input_bytes"] / m["disk_bytes"], 2),
                    "cpu_ms_per_frame": round(m["cpu_s"] / count * 1e3, 2),
                    "cpu_cores_at_30hz": round(m["cpu_s"] / count * HZ, 3),
                    "max_frames_per_s_one_core": round(count / m["cpu_s"], 1),
                    "wall_s": round(m["wall_s"], 2),
                }
                rows.append(row)
                print(json.dumps(row))
    dds = []
    if args.dds_seconds > 0:
        frames = payloads("camera_like")
        for compression in ("none", "zstd"):
            dds.append(record_over_dds(frames, args.dds_seconds, compression))
            print(json.dumps(dds[-1]))
    result = {
        "what": "the recorder's bag writer, 640x480 rgb8 + 32FC1 + CameraInfo per frame, written as fast as it "
        "goes; CPU and wall: medians of the repeats",
        "command": "OMP_NUM_THREADS=1 nice -n 15 python benchmarks/bench_bag_compression.py "
        f"--seconds {args.seconds:g} --repeats {args.repeats} --dds-seconds {args.dds_seconds:g} --out docs/results/bench_bag_compression.json",
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "load_average_1min_at_start": round(load, 2),
        "rows": rows,
        "dds": dds,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
