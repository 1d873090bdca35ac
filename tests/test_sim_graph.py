"""The fold graph with the simulator, over real DDS and separate processes.

sim node + tokenizer + policy server + controller (cpu-small models with random weights): the
execute-fold action completes; killing the policy server mid-fold freezes simulated time and
the arms (the controller holds, the simulation waits), and a restarted server folds on.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from instant_fold.fold_graph import FoldOptions, build_fold_graph, parameters_yaml
from instant_fold_core.contracts import KeyframeEvent
from instant_fold_core.demonstration import Demonstration
from instant_fold_learning.testing import untrained_checkpoints
from instant_fold_ros.graph_spec import GraphSpec
from instant_fold_ros.standins.process_runner import ProcessRunner
from instant_fold_ros.testing import TopicProbe
from instant_fold_sim.sim_world import SimWorld

pytestmark = pytest.mark.ros

GARMENT, SEED = "proc:1", 5
STEP = 0.05  # s per action step in sim
STEPS_PER_QUERY = 2  # cpu-small receding horizon


def demonstration(path: Path) -> Path:
    """Two keyframes of the start state: grasp the left sleeve tip, then home (terminal)."""
    world = SimWorld(GARMENT, SEED, "cpu-small")
    obs = world.observe()
    home = np.concatenate([world.home(), np.ones((2, 1))], axis=1).astype(np.float32)
    grasp = home.copy()
    grasp[0, :3], grasp[0, 3] = world.camera_from_world(world.keypoints_world()[:1])[0], 0.0
    demo = Demonstration(
        color=np.stack([obs.rgb, obs.rgb]),
        depth=np.stack([obs.depth, obs.depth]),
        mask=np.stack([obs.mask, obs.mask]),
        intrinsics=obs.intrinsics.astype(np.float32),
        keypose=np.stack([grasp, home]),
        events=np.array([[KeyframeEvent.GRASP, 0], [KeyframeEvent.TERMINAL] * 2], np.uint8),
        frame_index=np.array([0, 10], np.int32),
        name="sim-test",
    )
    return demo.save(path)


def test_sim_graph_folds_holds_when_the_policy_dies_and_resumes(tmp_path: Path, ros_env: dict[str, str]) -> None:
    from rclpy.action import ActionClient

    from instant_fold_interfaces.action import ExecuteFold
    from instant_fold_interfaces.srv import SimStep

    policy_dir, encoder_dir = untrained_checkpoints(tmp_path / "models")
    demo = demonstration(tmp_path / "demo.safetensors")
    graph, params = build_fold_graph(
        FoldOptions(robot="sim", checkpoint=str(policy_dir), encoder=str(encoder_dir), garment=GARMENT, seed=str(SEED))
    )
    params["policy_server"]["file_roots"] = [str(tmp_path)]
    params_file = tmp_path / "params.yaml"
    params_file.write_text(parameters_yaml(params))
    log = io.StringIO()
    policy_only = GraphSpec("policy", tuple(n for n in graph.nodes if n.name == "policy_server"))
    rest = GraphSpec("rest", tuple(n for n in graph.nodes if n.name != "policy_server"))
    runners = [ProcessRunner(rest, [params_file], env=ros_env, output=log)]
    runners[0].start()

    def start_policy() -> ProcessRunner:
        runner = ProcessRunner(policy_only, [params_file], env=ros_env, output=log, sigint_grace=3.0)
        runner.start()
        runners.append(runner)
        return runner

    policy = start_policy()
    try:
        with TopicProbe(ros_env) as probe:
            client = ActionClient(probe.node, ExecuteFold, "policy/execute_fold")

            def sim_state() -> tuple[float, np.ndarray]:
                answer = probe.call(SimStep, "sim/step", SimStep.Request(until=-1.0), timeout_s=60)
                assert answer is not None and answer.success, log.getvalue()
                return answer.sim_time, np.asarray(answer.state).reshape(2, 4)

            def fold(max_steps: int, feedback: list | None = None):
                assert probe.spin_until(client.server_is_ready, 180), log.getvalue()
                goal = ExecuteFold.Goal(demonstration_path=str(demo), max_steps=max_steps)
                # A killed server stays discovered until its DDS lease expires, and a request sent
                # before the new server matched is lost: send again until one is answered.
                for _ in range(6):
                    sent = client.send_goal_async(goal, feedback_callback=feedback.append if feedback else None)
                    if probe.spin_until(sent.done, 20):
                        break
                assert sent.done() and sent.result().accepted, log.getvalue()
                return sent.result()

            t0, _ = sim_state()
            handle = fold(3)
            result = handle.get_result_async()
            assert probe.spin_until(result.done, 180), log.getvalue()
            assert result.result().result.outcome == ExecuteFold.Result.OUTCOME_STEP_LIMIT, log.getvalue()
            assert result.result().result.steps == 3
            t1, _ = sim_state()
            # lockstep: three queries executed exactly two 0.05 s steps each, whatever the CPU did
            assert t1 - t0 == pytest.approx(3 * STEPS_PER_QUERY * STEP), (t0, t1)

            feedback: list = [None]
            fold(100, feedback)
            assert probe.spin_until(lambda: len(feedback) >= 4, 120), log.getvalue()
            policy.kill()
            # The chunk in flight finishes (its steps' time, at most one chunk of 2 x 0.05 s),
            # then simulated time and the arms stand still.
            t_kill, _ = sim_state()
            t_prev = t_kill
            for _ in range(20):
                probe.spin_until(lambda: False, 4.0)
                t_now, state_now = sim_state()
                if t_now == t_prev:
                    break
                t_prev = t_now
            assert t_now - t_kill <= STEPS_PER_QUERY * STEP + 1e-6, (t_kill, t_now)
            probe.spin_until(lambda: False, 4.0)
            t_later, state_later = sim_state()
            assert t_later == t_now and np.array_equal(state_later, state_now), ("the arms must hold", log.getvalue())

            start_policy()
            handle = fold(2)
            result = handle.get_result_async()
            assert probe.spin_until(result.done, 180), log.getvalue()
            assert result.result().result.steps == 2
            t_end, _ = sim_state()
            assert t_end - t_later == pytest.approx(2 * STEPS_PER_QUERY * STEP), "the restarted server folds on"
    finally:
        for runner in reversed(runners):
            runner.shutdown()
    assert "Traceback" not in log.getvalue(), log.getvalue()
