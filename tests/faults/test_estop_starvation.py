"""Faults: one huge chunk starved the e-stop.

Before (issue "faults and bad input", item 3): a 50,000-step chunk with every step outside the
workspace made the controller log each clamped step (one line per step and arm) from its only
thread; `control/estop` and `control/reset` did not answer for more than 50 s and the watchdog
stalled. Now a chunk longer than `safety.max_chunk_steps` is refused whole with one line, the
safety log is rate-limited (counted, summarised), and the e-stop and reset services have a thread
of their own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from instant_fold_control.config import DEFAULT_MAX_CHUNK_STEPS, load_robot_config, parse_robot_config
from instant_fold_control.controller import DualArmController
from instant_fold_control.safety import LOG_BURST, LogLimiter
from instant_fold_core.contracts import ActionChunk, ChunkRepresentation
from instant_fold_core.errors import ConfigError
from instant_fold_ros.bringup_share import config_dir

ROBOTS = config_dir() / "robots"
DEEP = [[-0.2, 0.0, 1.5], [0.2, 0.0, 1.5]]  # both grippers 0.57 m below the workspace floor (into the table)


def _chunk_spec(steps: int) -> dict:
    return {
        "positions": [DEEP] * steps,
        "openness": [[1, 1]] * steps,
        "representation": ChunkRepresentation.ABSOLUTE,
        "steps_to_execute": steps,
        "step_duration": 0.01,
    }


def _controller(logs: list[str], clock: list[float]) -> DualArmController:
    robot = load_robot_config(ROBOTS / "dobot.yaml")
    controller = DualArmController(robot, lambda _level, text: logs.append(text))
    controller.safety._limiter = LogLimiter(clock=lambda: clock[0])
    home = np.array([[-0.2, 0.0, 0.8], [0.2, 0.0, 0.8]])
    base = tuple(arm.extrinsics.to_base(p) for arm, p in zip(robot.arms, home, strict=True))
    controller.update_measurement((base[0], base[1]), np.ones(2), 0.0)
    controller.step(0.0)
    return controller


def test_a_chunk_longer_than_the_bound_is_refused_in_one_line() -> None:
    logs: list[str] = []
    controller = _controller(logs, [0.0])
    spec = _chunk_spec(50_000)
    chunk = ActionChunk(np.array(spec["positions"]), np.ones((50_000, 2)), 50_000, 0.01)
    assert not controller.submit_chunk(chunk, 0.0, 0.0)
    assert controller.safety.counts["refused_long"] == 1 and controller.safety.counts["clamped"] == 0
    assert logs == ["[safety:refused_long #1] chunk refused: 50000 steps, more than safety.max_chunk_steps (64)"]


def test_every_robot_config_bounds_chunks_above_the_policy_horizons() -> None:
    for path in sorted(ROBOTS.glob("*.yaml")):
        assert load_robot_config(path).safety.max_chunk_steps == DEFAULT_MAX_CHUNK_STEPS >= 8, path


@pytest.mark.parametrize("value", [0, -3, 2.5, True, "64"])
def test_a_bad_chunk_bound_is_a_config_error(value) -> None:
    data = {
        "driver": "dobot",
        "camera_frame": "c",
        "safety": {
            "workspace_min": [-1, -1, 0],
            "workspace_max": [1, 1, 1],
            "max_speed": 1,
            "min_gripper_distance": 0.1,
            "watchdog_timeout": 0.5,
            "max_chunk_age": 1,
            "max_chunk_steps": value,
        },
        "arms": {arm: {"base_frame": arm, "base_from_camera": {"translation": [0, 0, 0]}} for arm in ("left", "right")},
    }
    with pytest.raises(ConfigError, match="safety.max_chunk_steps"):
        parse_robot_config(data)


def test_the_safety_log_is_rate_limited_and_counted() -> None:
    """1,000 out-of-workspace chunks in one second: every clamped step counted, LOG_BURST lines."""
    logs: list[str] = []
    clock = [0.0]
    controller = _controller(logs, clock)
    chunk = ActionChunk(np.array([DEEP] * 60), np.ones((60, 2)), 60, 0.01)
    for i in range(1000):
        clock[0] = i / 1000
        controller.submit_chunk(chunk, 0.0, 0.0)
    assert controller.safety.counts["clamped"] == 1000 * 60 * 2
    assert len(logs) == LOG_BURST and all("120 waypoint(s) outside workspace" in line for line in logs)
    assert controller.safety.take_suppressed() == {"clamped": 1000 - LOG_BURST}
    assert controller.safety.take_suppressed() == {}
    clock[0] = 11.0  # the next window logs again
    controller.submit_chunk(chunk, 0.0, 0.0)
    assert len(logs) == LOG_BURST + 1 and logs[-1].startswith(f"[safety:clamped #{1001 * 120}]")


@pytest.mark.ros
def test_the_estop_answers_while_a_huge_chunk_arrives(tmp_path: Path, ros_env: dict[str, str]) -> None:
    """Over DDS, on two loopback Dobots: a 50,000-step chunk outside the workspace, then e-stop and
    reset right after it, then 20 out-of-workspace chunks within the bound in quick succession."""
    from loopback_controller import run_script

    script = [
        {"delay_s": 0.3, "chunk": _chunk_spec(50_000)},
        {"delay_s": 0.2, "call": "control/estop"},
        {"delay_s": 0.0, "call": "control/reset"},
        *({"delay_s": 0.02, "chunk": _chunk_spec(60)} for _ in range(20)),
        {"delay_s": 0.2, "call": "control/estop"},
    ]
    run = run_script(tmp_path, ros_env, script, probe_timeout_s=30.0)
    assert run.probe_code == 0 and run.node_code == 0 and run.report is not None, run.describe()
    calls = [a for a in run.report["actions"] if "call" in a]
    assert [c["success"] for c in calls] == [True, True, True], calls
    for call in calls:
        assert call["answered_t"] - call["t"] < 3.0, call
    safety_lines = [line for line in run.log.splitlines() if "[safety:" in line]
    assert sum("safety:refused_long" in line for line in safety_lines) == 1, run.log
    assert sum("safety:clamped" in line for line in safety_lines) <= LOG_BURST, run.log
    assert len(safety_lines) <= 2 * LOG_BURST + 3, run.log
