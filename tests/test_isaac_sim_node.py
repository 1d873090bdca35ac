"""The ROS-side adapter of the Isaac Lab bridge over real DDS and real sockets: the sim node with
`sim_backend:=newton_stand_in` (the bridge with the project's Newton scene behind it, a stand-in
for the Isaac Lab process, which needs its own environment) publishes the camera topics and
serves the lockstep `sim/step` and `sim/evaluate` exactly as with the embedded scene.
"""

from __future__ import annotations

import io
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest

from instant_fold.fold_graph import FoldOptions, build_fold_graph, parameters_yaml
from instant_fold_ros.graph_spec import GraphSpec
from instant_fold_ros.standins.process_runner import ProcessRunner
from instant_fold_ros.testing import TopicProbe
from instant_fold_sim.sim_world import SimWorld

pytestmark = pytest.mark.ros

GARMENT, SEED = "proc:1", 5


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").is_file() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def _start_sim_node(tmp_path: Path, ros_env: dict[str, str], log: io.StringIO) -> ProcessRunner:
    """The sim node exactly as the fold graph starts it with sim_backend:=newton_stand_in."""
    graph, params = build_fold_graph(
        FoldOptions(robot="sim", garment=GARMENT, seed=str(SEED), sim_backend="newton_stand_in")
    )
    assert params["sim"]["backend"] == "newton_stand_in"
    params_file = tmp_path / "params.yaml"
    params_file.write_text(parameters_yaml(params))
    runner = ProcessRunner(
        GraphSpec("sim", tuple(n for n in graph.nodes if n.name == "sim")), [params_file], env=ros_env, output=log
    )
    runner.start()
    return runner


def test_sim_node_with_the_bridge_serves_camera_and_lockstep(tmp_path: Path, ros_env: dict[str, str]) -> None:
    from sensor_msgs.msg import CameraInfo, Image

    from instant_fold_interfaces.msg import DualArmState
    from instant_fold_interfaces.srv import SimStep
    from instant_fold_ros.conversions import home_pose_from_msg
    from instant_fold_ros.qos import LATCHED_QOS

    log = io.StringIO()
    runner = _start_sim_node(tmp_path, ros_env, log)
    local = SimWorld(GARMENT, SEED, "cpu-small", record=False)
    try:
        with TopicProbe(ros_env) as probe:
            color = probe.subscribe(Image, "camera/color")
            depth = probe.subscribe(Image, "camera/depth")
            info = probe.subscribe(CameraInfo, "camera/camera_info")
            mask = probe.subscribe(Image, "cloth/mask")
            home = probe.subscribe(DualArmState, "arms/home", LATCHED_QOS)
            assert probe.spin_until(lambda: color and depth and info and mask and home, 120), log.getvalue()
            assert "a stand-in" in log.getvalue()  # the node says what it is running
            first = color[-1]
            assert (first.header.stamp.sec, first.header.stamp.nanosec) == (0, 0)
            assert first.encoding == "rgb8" and depth[-1].encoding == "32FC1" and mask[-1].encoding == "mono8"
            assert np.allclose(np.asarray(info[-1].k).reshape(3, 3), local.camera.intrinsics)
            assert len(home) == 1 and np.allclose(home_pose_from_msg(home[0]), local.home())  # published once, latched
            obs = local.observe()
            got = np.frombuffer(bytes(mask[-1].data), np.uint8).reshape(obs.mask.shape) > 0
            assert (got != obs.mask).mean() < 0.01  # the same start state, rendered behind the bridge

            def step(target: np.ndarray, openness: np.ndarray, until: float) -> SimStep.Response:
                answer = probe.call(
                    SimStep,
                    "sim/step",
                    SimStep.Request(target=target.ravel().tolist(), openness=openness.tolist(), until=until),
                    timeout_s=60,
                )
                assert answer is not None, log.getvalue()
                return answer

            read = step(np.zeros((2, 3)), np.ones(2), -1.0)
            assert read.success and read.sim_time == 0.0
            assert np.allclose(np.asarray(read.state).reshape(2, 4), local.arm_state())
            target = local.arm_state()[:, :3] + np.array([[0.05, 0.0, 0.0], [0.0, 0.05, 0.0]])
            moved = step(target, np.ones(2), 0.2)
            local.step(target, np.ones(2), 0.2)
            assert moved.success and moved.sim_time == pytest.approx(0.2)
            assert np.allclose(np.asarray(moved.state).reshape(2, 4), local.arm_state(), atol=1e-9)
            stamp_ns = round(0.2 * 1e9)
            assert probe.spin_until(
                lambda: any(m.header.stamp.sec * 10**9 + m.header.stamp.nanosec == stamp_ns for m in color), 30
            ), "the stepped frame is published with its simulated time"
            # a refused command is answered, not fatal
            far = step(target + 5.0, np.ones(2), 0.25)
            assert not far.success and "at most" in far.message

            # the simulator process dies: the node answers with the reason and keeps running
            pid = int(re.search(r"newton_stand_in on cpu \(pid (\d+)\)", log.getvalue()).group(1))
            os.kill(pid, 9)
            dead = step(target, np.ones(2), 0.25)
            assert not dead.success and "newton_stand_in simulator" in dead.message, dead.message
    finally:
        runner.shutdown()
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


@pytest.mark.slow
def test_sim_node_evaluates_the_bridged_cloth_with_the_same_oracle(tmp_path: Path, ros_env: dict[str, str]) -> None:
    import json

    from instant_fold_interfaces.srv import EvaluateFold

    log = io.StringIO()
    runner = _start_sim_node(tmp_path, ros_env, log)
    try:
        with TopicProbe(ros_env) as probe:
            answer = probe.call(EvaluateFold, "sim/evaluate", EvaluateFold.Request(), timeout_s=300)
            assert answer is not None and answer.success, log.getvalue()
    finally:
        runner.shutdown()
    metrics = json.loads(answer.metrics_json)
    expected = SimWorld(GARMENT, SEED, "cpu-small", record=False).evaluate("sleeves_down__bottom_up", "S")
    assert metrics["keypoint_error_max"] == pytest.approx(expected["keypoint_error_max"], abs=1e-3)
    assert metrics["start_error_max"] == pytest.approx(expected["start_error_max"], abs=1e-3)
    assert "record" in metrics  # what the oracle-bank (paper) metrics score
