"""Benchmark the dual-arm control loop: tick rate and jitter, idle and under CPU load, per robot.

Runs `ControlLoop.tick` (what `controller_node`'s timer calls) over the real drivers of each
robot, driven either by an rclpy timer on a single-threaded executor (`ros`: what the node does,
on an isolated, localhost-only ROS domain) or by a plain Python loop sleeping to the next period
(`python`: the same without the executor):
- `dobot`: two DobotDrivers against two protocol-faithful loopback Dobot controllers (real TCP
  sockets); the ServoP stream rate is measured from the servers' receive timestamps;
- `franka`: two FrankaDrivers against the franky stand-in, whose gripper state reads block for
  0.1 s as on hardware (franky issue #35) and whose gripper commands wait for the previous one.
A fresh DELTA chunk arrives every `steps x step_duration` (a slow circle in the camera frame) and
the grippers close and open every second, so the gripper paths are busy during the run.

"Under load" starts `--load` busy-loop processes (one per core by default) for the case's
duration; they stop by themselves. Everything else shares one interpreter (the loopback servers
too), so the numbers are a pessimistic bound for the node on the same CPU.

Usage: python benchmarks/bench_control.py [--duration 10] [--control-rate 100] [--servo-rate 50]
                                          [--robots dobot franka] [--timers ros python] [--load N]
                                          [--out outputs/bench_control.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from instant_fold_control.config import RobotConfig, find_robot_config, load_robot_config, parse_robot_config
from instant_fold_control.control_loop import ControlLoop
from instant_fold_control.controller import DualArmController
from instant_fold_control.drivers import make_robot_drivers
from instant_fold_control.drivers.base import RobotDrivers
from instant_fold_control.drivers.franka import FrankaDriver, FrankaParams, import_franky
from instant_fold_control.testing.dobot_server import LoopbackDobotServer
from instant_fold_control.testing.franky_standin import GRIPPER_READ_S, FrankyStandIn
from instant_fold_core.contracts import ActionChunk, ChunkRepresentation
from instant_fold_ros.domains import isolated_ros_env

HORIZON, STEPS, STEP_DURATION = 8, 4, 0.05  # paper (real robot): execute 4 of 8
RADIUS, PERIOD = 0.05, 4.0  # circle of 5 cm in 4 s per arm
START = np.array([[-0.2, 0.0, 0.8], [0.2, 0.0, 0.8]])  # camera frame


def _stats_ms(values_s: np.ndarray) -> dict[str, float]:
    ms = np.asarray(values_s) * 1e3
    return {
        "mean": float(ms.mean()),
        "p50": float(np.percentile(ms, 50)),
        "p95": float(np.percentile(ms, 95)),
        "p99": float(np.percentile(ms, 99)),
        "max": float(ms.max()),
    }


def _circle_chunk(start: np.ndarray, t: float) -> ActionChunk:
    """DELTA steps along a circle in the image plane (opposite phase per arm); grippers toggle each second."""
    times = t + STEP_DURATION * np.arange(HORIZON + 1)
    phase = 2 * np.pi * times / PERIOD
    offsets = RADIUS * np.stack([np.cos(phase), np.sin(phase), np.zeros_like(phase)], axis=1)
    path = np.stack([start[0] + offsets, start[1] - offsets], axis=1)  # [H+1, 2, 3]
    openness = np.repeat((np.floor(times[1:]) % 2)[:, None], 2, axis=1)
    return ActionChunk(np.diff(path, axis=0), openness, STEPS, STEP_DURATION, ChunkRepresentation.DELTA)


def _busy(until: float) -> None:
    """One core's worth of load until `until` (time.monotonic)."""
    while time.monotonic() < until:
        pass


def _config(robot: str, arms_driver: list[dict[str, Any]]) -> RobotConfig:
    """The shipped robot config with its arms' driver entries replaced (loopback / stand-in)."""
    nominal = load_robot_config(find_robot_config(robot))
    raw: dict[str, Any] = {"driver": nominal.driver, "camera_frame": nominal.camera_frame, "arms": {}}
    s = nominal.safety
    raw["safety"] = {
        "workspace_min": s.workspace_min.tolist(),
        "workspace_max": s.workspace_max.tolist(),
        "max_speed": s.max_speed,
        "min_gripper_distance": s.min_gripper_distance,
        "watchdog_timeout": s.watchdog_timeout,
        "max_chunk_age": s.max_chunk_age,
    }
    for arm, driver in zip(nominal.arms, arms_driver, strict=True):
        raw["arms"][arm.name] = {
            "base_frame": arm.base_frame,
            "base_from_camera": {"matrix": arm.extrinsics.base_from_camera.tolist()},
            "driver": driver,
        }
    return parse_robot_config(raw, name=f"bench-{robot}")


def _dobot(servo_rate: float) -> tuple[RobotConfig, RobotDrivers, list[LoopbackDobotServer]]:
    nominal = load_robot_config(find_robot_config("dobot"))
    servers = []
    for arm, cam in zip(nominal.arms, START, strict=True):
        base_mm = arm.extrinsics.to_base(cam) * 1000.0
        servers.append(LoopbackDobotServer(initial_pose=[*base_mm.tolist(), 180.0, 0.0, 0.0]).start())
    # 50 Hz is the most a firmware before 4.6.0 accepts; faster streams need firmware_version >= 4.6.0.
    firmware = {"firmware_version": "4.6.5"} if servo_rate > 50.0 else {}
    config = _config("dobot", [s.driver_params() | {"servo_rate_hz": servo_rate} | firmware for s in servers])
    return config, make_robot_drivers(config), servers


def _franka() -> tuple[RobotConfig, RobotDrivers, FrankyStandIn]:
    nominal = load_robot_config(find_robot_config("franka"))
    standin = FrankyStandIn(import_franky(), gripper_read_s=GRIPPER_READ_S)
    config = _config("franka", [dict(arm.driver) for arm in nominal.arms])
    drivers = [
        FrankaDriver(arm.name, FrankaParams.from_mapping(arm.name, arm.driver), franky=standin) for arm in config.arms
    ]
    return config, RobotDrivers(drivers[0], drivers[1]), standin


def _python_timer(tick: Callable[[], None], period: float, duration: float) -> None:
    """Call `tick` every `period` s for `duration` s, sleeping in between (no burst after a late tick)."""
    next_tick = start = time.monotonic()
    while time.monotonic() < start + duration:
        tick()
        next_tick += period
        delay = next_tick - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            next_tick = time.monotonic()


def _ros_timer(tick: Callable[[], None], period: float, duration: float) -> None:
    """Call `tick` from an rclpy timer for `duration` s, as controller_node does (own context and domain)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    with isolated_ros_env() as env:
        os.environ.update(env)
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=int(env["ROS_DOMAIN_ID"]))
        try:
            node = rclpy.create_node("bench_control", context=context)
            executor = SingleThreadedExecutor(context=context)
            executor.add_node(node)
            node.create_timer(period, tick)
            end = time.monotonic() + duration
            while time.monotonic() < end:
                executor.spin_once(timeout_sec=0.1)
            node.destroy_node()
        finally:
            rclpy.shutdown(context=context)


TIMERS = {"ros": _ros_timer, "python": _python_timer}


def run_case(
    robot: str, timer: str, duration: float, control_rate: float, servo_rate: float, load: int
) -> dict[str, Any]:
    """One case: `robot` ticked by `timer` at `control_rate` for `duration` s with `load` busy processes."""
    servers: list[LoopbackDobotServer] = []
    standin: FrankyStandIn | None = None
    if robot == "dobot":
        config, drivers, servers = _dobot(servo_rate)
    else:
        config, drivers, standin = _franka()
    events: list[str] = []

    def log(level: str, text: str) -> None:
        if level != "debug":
            events.append(text)

    controller = DualArmController(config, log)
    for driver in drivers.arms:
        driver.connect()
    if standin is not None:
        for arm, cam in zip(config.arms, START, strict=True):
            standin.robots[arm.driver["host"]].position = arm.extrinsics.to_base(cam)
    loop = ControlLoop(controller, drivers, 1.0 / control_rate, log)
    period = 1.0 / control_rate
    ctx = multiprocessing.get_context("fork")
    t0 = time.monotonic()
    workers = [ctx.Process(target=_busy, args=(t0 + duration + 3.0,), daemon=True) for _ in range(load)]
    for w in workers:
        w.start()
    ticks: list[float] = []
    costs: list[float] = []
    servo_start = [len(s.recorded("ServoP")) for s in servers]
    next_chunk = t0

    def tick() -> None:
        nonlocal next_chunk
        now = time.monotonic()
        ticks.append(now)
        if now >= next_chunk and (state := controller.state()) is not None:
            controller.submit_chunk(_circle_chunk(state[:, :3], now - t0), now, now)
            next_chunk += STEPS * STEP_DURATION
        loop.tick()
        costs.append(time.monotonic() - now)

    try:
        loop.read()
        TIMERS[timer](tick, period, duration)
    finally:
        for w in workers:
            w.join(timeout=duration + 5.0)
            if w.is_alive():
                w.terminate()
        drivers.close()
        for server in servers:
            server.stop()
    intervals = np.diff(ticks)
    result: dict[str, Any] = {
        "robot": robot,
        "timer": timer,
        "load_processes": load,
        "requested_rate_hz": control_rate,
        "rate_hz": float(len(intervals) / (ticks[-1] - ticks[0])),
        "tick_interval_ms": _stats_ms(intervals),
        "jitter_ms": _stats_ms(np.abs(intervals - period)),
        "late_ticks_over_1_5_periods": int((intervals > 1.5 * period).sum()),
        "tick_cost_ms": _stats_ms(np.asarray(costs)),
        "estopped": controller.estopped,
        "events": events[:5],
        "safety_events": {k: v for k, v in controller.safety.counts.items() if v},
    }
    if standin is not None:
        result["gripper_commands"] = sum(len(g.commands) for g in standin.grippers.values())
        result["gripper_read_s"] = GRIPPER_READ_S
    if servers:
        servo: dict[str, Any] = {"requested_rate_hz": servo_rate}
        for arm, server, first in zip(("left", "right"), servers, servo_start, strict=True):
            times = np.array([c.time for c in server.recorded("ServoP")[first:]])
            gaps = np.diff(times)
            servo[arm] = {
                "commands": len(times),
                "rate_hz": float((len(times) - 1) / (times[-1] - times[0])),
                "interval_ms": _stats_ms(gaps),
                "late_over_1_5_periods": int((gaps > 1.5 / servo_rate).sum()),
            }
        result["dobot_servo_p"] = servo
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--control-rate", type=float, default=100.0)
    parser.add_argument("--servo-rate", type=float, default=50.0)
    parser.add_argument("--robots", nargs="+", choices=("dobot", "franka"), default=["dobot", "franka"])
    parser.add_argument("--timers", nargs="+", choices=tuple(TIMERS), default=list(TIMERS))
    parser.add_argument("--load", type=int, default=os.cpu_count() or 1, help="busy processes in the loaded case")
    parser.add_argument("--out", type=Path, default=Path("outputs/bench_control.json"))
    args = parser.parse_args()
    cases = [
        run_case(robot, timer, args.duration, args.control_rate, args.servo_rate, load)
        for robot in args.robots
        for timer in args.timers
        for load in (0, args.load)
    ]
    result = {
        "benchmark": "control",
        "host": {"machine": platform.machine(), "python": platform.python_version(), "cpus": os.cpu_count()},
        "date": time.strftime("%Y-%m-%d"),
        "duration_s": args.duration,
        "cases": cases,
    }
    text = json.dumps(result, indent=2)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
