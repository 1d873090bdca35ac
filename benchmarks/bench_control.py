"""Benchmark the dual-arm controller: command rate and jitter, and the Dobot ServoP stream rate.

Runs the controller core with the real Dobot drivers against two protocol-faithful loopback
Dobot controllers (real TCP sockets), in one process, the way `controller_node` ticks them:
read both arms' feedback, feed the controller a fresh DELTA chunk every `steps x step_duration`
(a slow circle in the camera frame), step it, send the targets to the drivers. The drivers
stream ServoP on their own threads; rates and intervals of ServoP are measured from the server
side receive timestamps. Everything shares one interpreter (the loopback servers too), so the
numbers are a pessimistic bound for the node on the same CPU.

Usage: python benchmarks/bench_control.py [--duration 10] [--control-rate 100] [--servo-rate 50]
                                          [--out outputs/bench_control.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from instant_fold_control.chunk import DELTA, Chunk
from instant_fold_control.config import find_robot_config, load_robot_config, parse_robot_config
from instant_fold_control.controller import DualArmController, Mode
from instant_fold_control.drivers import make_robot_drivers
from instant_fold_control.testing.dobot_server import LoopbackDobotServer

HORIZON, STEPS, STEP_DURATION = 8, 4, 0.05  # paper (real robot): execute 4 of 8
RADIUS, PERIOD = 0.05, 4.0  # circle of 5 cm in 4 s per arm


def _stats_ms(intervals_s: np.ndarray) -> dict[str, float]:
    ms = intervals_s * 1e3
    return {
        "mean": float(ms.mean()),
        "std": float(ms.std()),
        "p50": float(np.percentile(ms, 50)),
        "p95": float(np.percentile(ms, 95)),
        "p99": float(np.percentile(ms, 99)),
        "max": float(ms.max()),
    }


def _circle_chunk(start: np.ndarray, t: float) -> Chunk:
    """DELTA steps that follow a circle in the image plane (x, y), opposite phase per arm."""
    times = t + STEP_DURATION * np.arange(HORIZON + 1)
    phase = 2 * np.pi * times / PERIOD
    offsets = RADIUS * np.stack([np.cos(phase), np.sin(phase), np.zeros_like(phase)], axis=1)
    path = np.stack([start[0] + offsets, start[1] - offsets], axis=1)  # [H+1, 2, 3]
    return Chunk(np.diff(path, axis=0), np.ones((HORIZON, 2)), DELTA, STEPS, STEP_DURATION)


def run(duration: float, control_rate: float, servo_rate: float) -> dict[str, Any]:
    nominal = load_robot_config(find_robot_config("dobot"))
    start = np.array([[-0.2, 0.0, 0.8], [0.2, 0.0, 0.8]])  # camera frame
    servers = []
    raw: dict[str, Any] = {"driver": "dobot", "camera_frame": nominal.camera_frame, "arms": {}}
    raw["safety"] = {
        "workspace_min": nominal.safety.workspace_min.tolist(),
        "workspace_max": nominal.safety.workspace_max.tolist(),
        "max_speed": nominal.safety.max_speed,
        "min_gripper_distance": nominal.safety.min_gripper_distance,
        "watchdog_timeout": nominal.safety.watchdog_timeout,
        "max_chunk_age": nominal.safety.max_chunk_age,
    }
    for arm, cam in zip(nominal.arms, start, strict=True):
        base_mm = arm.extrinsics.to_base(cam) * 1000.0
        server = LoopbackDobotServer(initial_pose=[*base_mm.tolist(), 180.0, 0.0, 0.0]).start()
        servers.append(server)
        t = arm.extrinsics.base_from_camera
        raw["arms"][arm.name] = {
            "base_frame": arm.base_frame,
            "base_from_camera": {"matrix": t.tolist()},
            "driver": server.driver_params() | {"servo_rate_hz": servo_rate},
        }
    robot = parse_robot_config(raw, name="bench")
    drivers = make_robot_drivers(robot)
    events: list[str] = []
    controller = DualArmController(robot, lambda level, text: events.append(text) if level != "debug" else None)
    for driver in drivers.arms:
        driver.connect()
    period = 1.0 / control_rate
    ticks, step_cost = [], []
    next_chunk = t0 = time.monotonic()
    next_tick = t0
    servo_start = [len(s.recorded("ServoP")) for s in servers]
    try:
        while (now := time.monotonic()) < t0 + duration:
            ticks.append(now)
            m = [d.read_state() for d in drivers.arms]
            controller.update_measurement((m[0].position, m[1].position), np.array([x.openness for x in m]), now)
            if now >= next_chunk:
                state = controller.state()
                assert state is not None
                controller.submit_chunk(_circle_chunk(state[:, :3], now - t0), now, now)
                next_chunk += STEPS * STEP_DURATION
            c0 = time.perf_counter()
            out = controller.step(now)
            step_cost.append(time.perf_counter() - c0)
            if out is not None and out.mode == Mode.TRACKING:
                for driver, target in zip(drivers.arms, out.base_positions, strict=True):
                    driver.command_cartesian(target)
            next_tick += period
            delay = next_tick - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_tick = time.monotonic()
    finally:
        drivers.close()
        for server in servers:
            server.stop()
    tick_intervals = np.diff(ticks)
    servo: dict[str, Any] = {}
    for arm, server, first in zip(("left", "right"), servers, servo_start, strict=True):
        times = np.array([c.time for c in server.recorded("ServoP")[first:]])
        intervals = np.diff(times)
        servo[arm] = {
            "commands": len(times),
            "rate_hz": float((len(times) - 1) / (times[-1] - times[0])),
            "interval_ms": _stats_ms(intervals),
            "late_over_1_5_periods": int((intervals > 1.5 / servo_rate).sum()),
        }
    return {
        "benchmark": "control",
        "host": {"machine": platform.machine(), "python": platform.python_version(), "cpus": os.cpu_count()},
        "duration_s": duration,
        "controller": {
            "requested_rate_hz": control_rate,
            "rate_hz": float(len(tick_intervals) / (ticks[-1] - ticks[0])),
            "tick_interval_ms": _stats_ms(tick_intervals),
            "jitter_ms_std": float(tick_intervals.std() * 1e3),
            "step_cost_us": {
                "p50": float(np.percentile(step_cost, 50) * 1e6),
                "p99": float(np.percentile(step_cost, 99) * 1e6),
            },
            "safety_events": {k: v for k, v in controller.safety.counts.items() if v},
        },
        "dobot_servo_p": {"requested_rate_hz": servo_rate, **servo},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--control-rate", type=float, default=100.0)
    parser.add_argument("--servo-rate", type=float, default=50.0)
    parser.add_argument("--out", type=Path, default=Path("outputs/bench_control.json"))
    args = parser.parse_args()
    result = run(args.duration, args.control_rate, args.servo_rate)
    text = json.dumps(result, indent=2)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
