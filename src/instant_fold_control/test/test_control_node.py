"""controller_node over real DDS, as a separate process, driving two loopback Dobot controllers.

A stand-in policy (another process) sends a chunk with a NaN step and a chunk with steps
outside the workspace, then goes silent. Nothing non-finite or outside the workspace may reach
the (protocol-faithful) robot controllers; the clamped target is reached; the watchdog holds.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from instant_fold_control.config import parse_robot_config
from instant_fold_control.testing.dobot_server import LoopbackDobotServer
from instant_fold_ros.graph_spec import GraphSpec, NodeSpec
from instant_fold_ros.standins.process_runner import ProcessRunner

pytestmark = pytest.mark.ros

LEFT, RIGHT = [-0.2, 0.0, 0.8], [0.2, 0.0, 0.8]  # start positions, camera frame (m)
BASE_POSE_MM = [400.0, 0.0, 150.0, 180.0, 0.0, 0.0]  # both start poses in their base frames (see conftest)


def _write_config(tmp_path: Path, robot: dict[str, Any], servers: list[LoopbackDobotServer] | list[dict]) -> Path:
    for arm, server in zip(("left", "right"), servers, strict=True):
        params = server.driver_params() if isinstance(server, LoopbackDobotServer) else server
        robot["arms"][arm]["driver"] = params | {"servo_rate_hz": 50.0, "connect_timeout_s": 1.0}
    robot_path = tmp_path / "robot.yaml"
    robot_path.write_text(yaml.safe_dump(robot))
    params = tmp_path / "control.yaml"
    params.write_text(
        yaml.safe_dump(
            {"controller_node": {"ros__parameters": {"robot_config": str(robot_path), "control_rate_hz": 100.0}}}
        )
    )
    return params


def _controller(params: Path, env: dict[str, str], out: io.StringIO) -> ProcessRunner:
    node = NodeSpec("controller_node", "instant_fold_control", "controller_node", parameters=(params,))
    return ProcessRunner(GraphSpec("control_test", (node,)), env=env, output=out, sigint_grace=5.0)


def _servo_positions_in_camera(server: LoopbackDobotServer, extrinsics) -> np.ndarray:
    mm = np.array([[float(a) for a in c.args[:6]] for c in server.recorded("ServoP")])
    assert np.isfinite(mm).all()
    return extrinsics.to_camera(mm[:, :3] / 1000.0)


def _chunk(positions: list, step_duration: float = 0.1) -> dict[str, Any]:
    h = len(positions)
    return {
        "positions": positions,
        "openness": [[1, 1]] * h,
        "representation": 0,
        "steps_to_execute": h,
        "step_duration": step_duration,
    }


def test_bad_commands_never_reach_the_robot(tmp_path: Path, ros_env: dict[str, str], robot_dict) -> None:
    """NaN and out-of-workspace chunks, a producer going silent, e-stop and reset, over DDS."""
    watchdog = 0.5
    robot = robot_dict(watchdog_timeout=watchdog)
    config = parse_robot_config(robot)
    lo, hi = config.safety.workspace_min, config.safety.workspace_max
    deep = [-0.2, 0.05, 1.5]  # 0.57 m below the workspace floor (into the table)
    far_right = [0.2, 0.2, 0.8]
    script = [
        {"delay_s": 0.5, "chunk": _chunk([[LEFT, RIGHT], [[np.nan, 0.0, 0.8], RIGHT], [LEFT, RIGHT]])},
        {"delay_s": 0.3, "chunk": _chunk([[[-0.2, 0.05, 0.85], RIGHT], [deep, RIGHT], [deep, RIGHT], [deep, RIGHT]])},
        # a 4 s move whose producer then goes silent: the watchdog must stop it after 0.5 s
        {"delay_s": 1.0, "chunk": _chunk([[[-0.2, 0.05, hi[2]], far_right]], step_duration=4.0)},
        {"delay_s": 1.5, "call": "control/estop"},
        {"delay_s": 0.3, "chunk": _chunk([[[-0.2, 0.05, hi[2]], far_right]])},  # refused: e-stop latched
        {"delay_s": 0.3, "call": "control/reset"},
        {"delay_s": 0.3, "chunk": _chunk([[[-0.2, 0.05, hi[2]], [0.2, 0.06, 0.8]]], step_duration=0.2)},
    ]
    script_path, report_path = tmp_path / "script.json", tmp_path / "report.json"
    script_path.write_text(json.dumps(script))

    with (
        LoopbackDobotServer(initial_pose=BASE_POSE_MM) as left,
        LoopbackDobotServer(initial_pose=BASE_POSE_MM) as right,
    ):
        out = io.StringIO()
        runner = _controller(_write_config(tmp_path, robot, [left, right]), ros_env, out)
        runner.start()
        try:
            probe = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "instant_fold_control.testing.command_probe",
                    str(script_path),
                    str(report_path),
                ],
                env=ros_env,
                capture_output=True,
                text=True,
                timeout=90,
            )
        finally:
            runner.request_stop()
            code = runner.wait()
        log = out.getvalue()
        assert probe.returncode == 0, probe.stdout + probe.stderr + log
        assert code == 0, log
        servo = {
            name: (
                np.array([c.time for c in server.recorded("ServoP")]),
                _servo_positions_in_camera(server, config.arm(name).extrinsics),
            )
            for name, server in (("left", left), ("right", right))
        }
        stops = {name: [c.time for c in server.recorded("Stop")] for name, server in (("left", left), ("right", right))}
    report = json.loads(report_path.read_text())
    actions = report["actions"]
    t_long, t_estop, t_reset = actions[2]["t"], actions[3]["t"], actions[5]["t"]

    # nothing non-finite (checked when parsing) and nothing outside the workspace reached a robot
    for times, positions in servo.values():
        assert len(times) > 100, log
        assert (positions >= lo - 1e-6).all() and (positions <= hi + 1e-6).all()
    left_p = servo["left"][1]
    right_t, right_p = servo["right"]
    # the out-of-workspace target was clamped onto the floor of the box, and reached
    assert left_p[:, 2].max() == pytest.approx(hi[2], abs=1e-6)
    assert np.allclose(left_p[-1], [-0.2, 0.05, hi[2]], atol=1e-5)
    assert "safety:refused_nonfinite" in log and "NaN" in log, log
    assert "safety:clamped" in log and "outside workspace" in log, log

    # watchdog: the long move stopped within the watchdog time (+ one stream ramp), far from its goal
    before_estop = (right_t > t_long) & (right_t < t_estop)
    y = right_p[before_estop, 1]
    moving = np.flatnonzero(np.abs(np.diff(y)) > 1e-7)
    last_motion = right_t[before_estop][moving.max() + 1]
    assert last_motion - t_long < watchdog + 0.25, (last_motion - t_long, log)
    assert 0.005 < y[-1] < 0.05
    assert "safety:watchdog_hold" in log, log

    # e-stop: both arms stopped (Stop() sent, streaming halted) and chunks refused until reset
    assert actions[3]["success"] and actions[5]["success"]
    for name, (times, _) in servo.items():
        assert any(t_estop < s < t_reset for s in stops[name]), name
        assert not ((times > t_estop + 0.1) & (times < t_reset)).any(), name
    assert "safety:refused_estop" in log, log
    # after reset the next chunk is executed
    assert np.allclose(right_p[-1], [0.2, 0.06, 0.8], atol=1e-5)

    stamps = np.array([s["t"] for s in report["states"]])
    assert np.median(np.diff(stamps)) < 1 / 30  # arms/state at >= 30 Hz
    final = np.array(report["states"][-1]["state"])
    assert np.allclose(final[:, :3], [[-0.2, 0.05, hi[2]], [0.2, 0.06, 0.8]], atol=1e-4)  # feedback -> camera frame


def test_unreachable_robot_ends_the_node_with_a_clear_error(
    tmp_path: Path, ros_env: dict[str, str], robot_dict
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    closed = {"host": "127.0.0.1", "dashboard_port": port, "feedback_port": port}
    out = io.StringIO()
    runner = _controller(_write_config(tmp_path, robot_dict(), [closed, closed]), ros_env, out)
    runner.start()
    assert runner.wait() == 1, out.getvalue()
    assert f"cannot reach the Dobot dashboard port at 127.0.0.1:{port}" in out.getvalue()
