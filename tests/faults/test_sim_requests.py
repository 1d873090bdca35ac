"""Faults: one bad request to the simulator that hung it, teleported the grippers or killed it.

Each case failed before (issue "faults and bad input", item 6): `sim/step` with a huge end time
simulated frame after frame without end, a target 5 m away was accepted (the grippers jumped there,
past the controller's safety layer), and `sim/evaluate` into a folder that cannot be written raised
out of the service callback and ended the sim node (and with it the graph). Now each is refused
with a message, nothing moves, and the node keeps serving.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from instant_fold_sim.sim_world import SimWorld, SimWorldError


@pytest.fixture(scope="module")
def world() -> SimWorld:
    return SimWorld("proc:1", 11, "cpu-small")


def test_step_with_a_huge_end_time_is_refused(world: SimWorld) -> None:
    frames, state = world.frames, world.arm_state()
    with pytest.raises(SimWorldError, match="until"):
        world.step(state[:, :3], state[:, 3], until=world.sim_time + 1e9)
    assert world.frames == frames


def test_step_to_a_target_metres_away_is_refused(world: SimWorld) -> None:
    frames, state = world.frames, world.arm_state()
    target = state[:, :3].copy()
    target[1, 0] += 5.0
    with pytest.raises(SimWorldError, match=r"target: 5\.00 m"):
        world.step(target, state[:, 3], until=world.sim_time + 0.1)
    assert world.frames == frames
    np.testing.assert_array_equal(world.arm_state(), state)


@pytest.mark.ros
def test_sim_node_survives_bad_requests(tmp_path: Path, ros_env) -> None:
    """Over DDS: a huge step, an unwritable evaluation folder and one outside the node's `file_roots`
    get answers, and the node lives on."""
    from instant_fold_interfaces.srv import EvaluateFold, SimStep
    from instant_fold_ros.graph_spec import GraphSpec, NodeSpec
    from instant_fold_ros.standins.process_runner import ProcessRunner
    from instant_fold_ros.testing import TopicProbe

    params = tmp_path / "sim.yaml"
    params.write_text(
        f"sim:\n  ros__parameters:\n    garment: 'proc:1'\n    seed: 11\n    file_roots: ['{tmp_path}']\n"
    )
    graph = GraphSpec("sim", (NodeSpec("sim", "instant_fold_sim", "sim_node", parameters=(params,)),))
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    elsewhere = tmp_path.parent / f"{tmp_path.name}_elsewhere"
    observed: dict = {}
    log = io.StringIO()
    with TopicProbe(ros_env) as probe:
        runner = ProcessRunner(graph, env=ros_env, output=log)
        runner.start()
        try:
            now = probe.call(SimStep, "sim/step", SimStep.Request(until=-1.0), 120.0)
            assert now is not None, log.getvalue()
            request = SimStep.Request(target=now.state[:3] + now.state[4:7], openness=[1.0, 1.0], until=1e9)
            observed["huge"] = probe.call(SimStep, "sim/step", request, 60.0)
            request = EvaluateFold.Request(output_dir=str(blocker / "out"))
            observed["evaluate"] = probe.call(EvaluateFold, "sim/evaluate", request, 300.0)
            # item 9: a folder outside the node's file_roots is refused before anything is created
            request = EvaluateFold.Request(output_dir=str(elsewhere / "out"))
            observed["outside"] = probe.call(EvaluateFold, "sim/evaluate", request, 60.0)
            observed["after"] = probe.call(SimStep, "sim/step", SimStep.Request(until=-1.0), 30.0)
        finally:
            code = runner.shutdown()
    assert code == 0, log.getvalue()
    assert observed["huge"] is not None and not observed["huge"].success and "until" in observed["huge"].message
    assert observed["huge"].sim_time == now.sim_time
    assert observed["evaluate"] is not None, log.getvalue()
    assert not observed["evaluate"].success and str(blocker) in observed["evaluate"].message
    assert observed["outside"] is not None and not observed["outside"].success
    assert "not under the allowed folders" in observed["outside"].message and not elsewhere.exists()
    assert observed["after"] is not None and observed["after"].success
