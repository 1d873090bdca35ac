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

from instant_fold.graph import GraphSpec, NodeSpec
from instant_fold.runner import ProcessRunner
from instant_fold_control.config import parse_robot_config
from instant_fold_control.testing.dobot_server import LoopbackDobotServer

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


def test_bad_commands_never_reach_the_robot(tmp_path: Path, ros_env: dict[str, str], robot_dict) -> None:
    robot = robot_dict(watchdog_timeout=0.5)
    config = parse_robot_config(robot)
    lo, hi = config.safety.workspace_min, config.safety.workspace_max
    nan_step = [[LEFT, RIGHT], [[np.nan, 0.0, 0.8], RIGHT], [LEFT, RIGHT], [LEFT, RIGHT]]
    deep = [-0.2, 0.05, 1.5]  # 0.57 m below the workspace floor (into the table)
    out_of_box = [[[-0.2, 0.05, 0.85], RIGHT], [deep, RIGHT], [deep, RIGHT], [deep, RIGHT]]
    chunks = [
        {"positions": nan_step, "openness": [[1, 1]] * 4, "representation": 0, "steps_to_execute": 4},
        {"positions": out_of_box, "openness": [[1, 1]] * 4, "representation": 0, "steps_to_execute": 4},
    ]
    for c, delay in zip(chunks, (0.5, 0.5), strict=True):
        c |= {"step_duration": 0.1, "delay_s": delay}
    chunks_path, report_path = tmp_path / "chunks.json", tmp_path / "report.json"
    chunks_path.write_text(json.dumps(chunks))

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
                    str(chunks_path),
                    str(report_path),
                ],
                env=ros_env,
                capture_output=True,
                text=True,
                timeout=60,
            )
        finally:
            runner.request_stop()
            code = runner.wait()
        log = out.getvalue()
        assert probe.returncode == 0, probe.stdout + probe.stderr + log
        assert code == 0, log

        left_cam = _servo_positions_in_camera(left, config.arm("left").extrinsics)
        right_cam = _servo_positions_in_camera(right, config.arm("right").extrinsics)
    assert len(left_cam) > 50 and len(right_cam) > 50, log
    for positions in (left_cam, right_cam):
        assert (positions >= lo - 1e-6).all() and (positions <= hi + 1e-6).all()
    # the clamped target (on the workspace floor) was reached, and nothing went past it
    assert left_cam[:, 2].max() == pytest.approx(hi[2], abs=1e-6)
    assert np.allclose(left_cam[-1], [-0.2, 0.05, hi[2]], atol=1e-5)
    assert np.allclose(right_cam, RIGHT, atol=1e-6)  # the right arm was never asked to move
    assert "safety:refused_nonfinite" in log and "NaN" in log, log
    assert "safety:clamped" in log and "outside workspace" in log, log
    assert "safety:watchdog_hold" in log, log  # the stand-in policy went silent afterwards

    report = json.loads(report_path.read_text())
    stamps = np.array([s["t"] for s in report["states"]])
    assert np.median(np.diff(stamps)) < 1 / 30  # arms/state at >= 30 Hz
    final = np.array(report["states"][-1]["state"])
    assert np.allclose(final[0, :3], [-0.2, 0.05, hi[2]], atol=1e-4)  # feedback -> camera frame
    assert np.allclose(final[1, :3], RIGHT, atol=1e-4)


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
