"""Demonstration capture on this CPU: recording throughput, hand-tracker latency, extraction accuracy.

- "writer": the bag writer alone (QueuedBagWriter), 640x480 RGB-D frames (rgb8 + 32FC1 +
  CameraInfo, serialized as over DDS) written as fast as it accepts them: sustained frames/s and MB/s.
- "dds": a publisher at 30 Hz and the recorder node in its own process over real DDS for
  `--seconds`: frames published, recorded, dropped.
- "hands": MediaPipe HandLandmarker (VIDEO mode, the bundle set-up builds) ms per 640x480
  frame. The frames hold no hands (none can be made here), so this times the palm-detection path;
  with tracked hands the landmark model runs instead of (not after) palm detection.
- "extraction" (with `--episode-npz` from a simulated fold: rgb, depth, mask, K, gs, fps):
  event frame and position errors against the simulator's grippers (stand-in tracker, see
  src/instant_fold_demo/test/sim_demo.py).

    OMP_NUM_THREADS=1 python benchmarks/bench_demo.py --out docs/results/bench_demo.json [--episode-npz ep.npz]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from instant_fold_core.rgbd import RGBDFrame
from instant_fold_demo.bag import QueuedBagWriter
from instant_fold_demo.hands import MediaPipeHandDetector, model_provenance

H, W = 480, 640
K = np.array([[600.0, 0, 320], [0, 600.0, 240], [0, 0, 1]], np.float32)


def camera_messages(n: int):
    from builtin_interfaces.msg import Time

    from instant_fold_ros.conversions import make_header, rgbd_to_msgs

    rng = np.random.default_rng(0)
    color = rng.integers(0, 255, (H, W, 3), dtype=np.uint8)
    depth = rng.uniform(0.6, 1.2, (H, W)).astype(np.float32)
    for i in range(n):
        header = make_header("camera_color_optical_frame", Time(sec=i, nanosec=0))
        yield i, rgbd_to_msgs(RGBDFrame(color, depth, K), header)


def bench_writer(frames: int) -> dict:
    from rclpy.serialization import serialize_message

    payloads = [[serialize_message(m) for m in msgs] for _, msgs in camera_messages(3)]
    topics = ("/camera/color", "/camera/depth", "/camera/camera_info")
    types = ("sensor_msgs/msg/Image", "sensor_msgs/msg/Image", "sensor_msgs/msg/CameraInfo")
    with tempfile.TemporaryDirectory() as tmp:
        writer = QueuedBagWriter(Path(tmp) / "bag")
        for topic, msgtype in zip(topics, types, strict=True):
            writer.add_topic(topic, msgtype)
        t0 = time.perf_counter()
        for i in range(frames):
            for topic, data in zip(topics, payloads[i % 3], strict=True):
                while not writer.put(topic, i * 33_333_333, data):
                    time.sleep(0.001)  # queue full: wait, so this measures what the disk sustains
        stats = writer.close()
        wall = time.perf_counter() - t0
    return {"frames": frames, "seconds": round(wall, 3), "frames_per_s": round(frames / wall, 1),
            "mb_per_s": round(stats.bytes / 1e6 / wall, 1), "mb_per_frame": round(stats.bytes / 1e6 / frames, 3)}  # fmt: skip


def bench_dds(seconds: float) -> dict:
    from sensor_msgs.msg import CameraInfo, Image

    from instant_fold_ros.domains import isolated_ros_env
    from instant_fold_ros.graph_spec import NodeSpec
    from instant_fold_ros.qos import OBSERVATION_QOS
    from instant_fold_ros.standins.process_runner import find_executable
    from instant_fold_ros.testing import TopicProbe

    with tempfile.TemporaryDirectory() as tmp, isolated_ros_env() as env, TopicProbe(env) as probe:
        pubs = [probe.node.create_publisher(t, n, OBSERVATION_QOS) for t, n in
                ((Image, "/camera/color"), (Image, "/camera/depth"), (CameraInfo, "/camera/camera_info"))]  # fmt: skip
        node = NodeSpec("recorder", "instant_fold_demo", "recorder_node")
        args = [*node.ros_arguments(), "-p", f"output:={tmp}/bag"]
        proc = subprocess.Popen([str(find_executable(node)), *args], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)  # fmt: skip
        probe.spin_until(lambda: all(p.get_subscription_count() for p in pubs), 60.0)
        messages = list(camera_messages(3))
        published = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            for pub, msg in zip(pubs, messages[published % 3][1], strict=True):
                pub.publish(msg)
            published += 1
            probe.spin_until(lambda: False, max(0.0, t0 + published / 30.0 - time.monotonic()))
        probe.spin_until(lambda: False, 1.0)
        proc.send_signal(signal.SIGINT)
        log, _ = proc.communicate(timeout=120)
    closed = re.search(r"closed .*?: ([\d.]+) s, ([\d.]+) MB, (\d+) messages \((\d+) dropped\), (\d+) received", log)
    if not closed:
        raise RuntimeError(log)
    return {"published_frames": published, "rate_hz": 30, "recorded_messages": int(closed[3]),
            "recorded_frames": int(closed[3]) // 3, "dropped": int(closed[4]), "received_messages": int(closed[5]),
            "recorded_mb": float(closed[2]), "recorded_seconds": float(closed[1])}  # fmt: skip


def bench_hands(frames: int) -> dict:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 255, (H, W, 3), dtype=np.uint8)
    with MediaPipeHandDetector() as detector:
        detector.detect(image, 0)
        t0 = time.perf_counter()
        for i in range(frames):
            detector.detect(image, 33 * (i + 1))
        ms = (time.perf_counter() - t0) / frames * 1000
    return {"frames": frames, "ms_per_frame": round(ms, 1), "image": "640x480, no hands (palm-detection path)",
            "model": model_provenance().get("source", "")}  # fmt: skip


def bench_extraction(npz: Path) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src/instant_fold_demo/test"))
    from sim_demo import SimMasks, episode_bag, gripper_hands, true_events

    from instant_fold_demo.extract import demonstration_from_bag

    d = np.load(npz)
    fps = float(d["fps"]) if "fps" in d else 20.0
    with tempfile.TemporaryDirectory() as tmp:
        bag = episode_bag(Path(tmp) / "bag", d["rgb"], d["depth"], d["K"], fps)
        t0 = time.perf_counter()
        _, report = demonstration_from_bag(bag, gripper_hands(d["gs"], d["K"], fps), SimMasks(d["mask"]))
        wall = time.perf_counter() - t0
    truth = true_events(d["gs"])
    found = report["events"]
    pairs = list(zip(found, truth, strict=False))
    return {
        "frames": len(d["rgb"]),
        "events_true": len(truth),
        "events_found": len(found),
        "kinds_match": [(e["arm"], e["kind"]) for e in found] == [(("left", "right")[a], k) for a, k, _, _ in truth],
        "frame_error_max": max(abs(e["frame"] - f) for e, (_, _, f, _) in pairs),
        "position_error_max_m": round(
            max(float(np.linalg.norm(np.array(e["position"]) - p)) for e, (_, _, _, p) in pairs), 4
        ),
        "position_error_mean_m": round(
            float(np.mean([np.linalg.norm(np.array(e["position"]) - p) for e, (_, _, _, p) in pairs])), 4
        ),
        "extraction_seconds": round(wall, 2),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--writer-frames", type=int, default=300)
    p.add_argument("--dds-seconds", type=float, default=10.0)
    p.add_argument("--hand-frames", type=int, default=50)
    p.add_argument("--episode-npz", type=Path, default=None)
    args = p.parse_args()
    result: dict = {"date": time.strftime("%Y-%m-%d"), "machine": "2-core development machine, shared with training",
                    "load_average_at_start": [round(x, 1) for x in os.getloadavg()]}  # fmt: skip
    result["writer"] = bench_writer(args.writer_frames)
    print(json.dumps(result["writer"]))
    result["dds"] = bench_dds(args.dds_seconds)
    print(json.dumps(result["dds"]))
    result["hands"] = bench_hands(args.hand_frames)
    print(json.dumps(result["hands"]))
    if args.episode_npz:
        result["extraction"] = bench_extraction(args.episode_npz)
        print(json.dumps(result["extraction"]))
    result["load_average_at_end"] = [round(x, 1) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
