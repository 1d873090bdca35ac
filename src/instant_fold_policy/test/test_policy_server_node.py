"""The policy server node over DDS: services, the execute-fold action (step limit, cancel), commands."""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
import pytest
from action_msgs.msg import GoalStatus
from policy_fixtures import HOME, cloth_frame, make_demonstration
from rclpy.action import ActionClient

from instant_fold_core.checkpoint import checkpoint_id
from instant_fold_interfaces.action import ExecuteFold
from instant_fold_interfaces.msg import ActionChunk, ClothTokens, DualArmState
from instant_fold_interfaces.srv import LoadDemonstration, PredictActionChunk
from instant_fold_learning.encoder.modeling import ClothEncoder
from instant_fold_learning.encoder.tokenize import tokenize_frame
from instant_fold_learning.testing import untrained_checkpoints
from instant_fold_ros.conversions import (
    action_chunk_from_msg,
    dual_arm_state_to_msg,
    home_pose_to_msg,
    make_header,
    tokens_to_msg,
)
from instant_fold_ros.graph_spec import GraphSpec, NodeSpec
from instant_fold_ros.qos import LATCHED_QOS
from instant_fold_ros.standins.process_runner import ProcessRunner
from instant_fold_ros.testing import TopicProbe

pytestmark = pytest.mark.ros


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("server")
    policy_dir, encoder_dir = untrained_checkpoints(root)
    demo_path = make_demonstration().save(root / "demo.safetensors")
    params = root / "server.yaml"
    params.write_text(
        "policy_server:\n  ros__parameters:\n"
        f"    policy_checkpoint: '{policy_dir}'\n    encoder_checkpoint: '{encoder_dir}'\n"
        f"    demonstration: '{demo_path}'\n    device: cpu\n    step_duration: 0.02\n    file_roots: ['{root}']\n"
        "    fold:\n      observation_timeout_s: 30.0\n"
    )
    encoder = ClothEncoder.from_pretrained(encoder_dir)
    tokens = tokenize_frame(encoder, *cloth_frame())
    return {
        "params": params,
        "tokens": tokens,
        "encoder_id": checkpoint_id(encoder_dir),
        "demo": demo_path,
        "missing": root / "missing.safetensors",
    }


def _observation_publisher(probe: TopicProbe, setup: dict, until: Callable[[], bool] = lambda: False):
    """Publish fresh cloth tokens and the home arm state at 20 Hz from the probe (until `until()`)."""
    tokens_pub = probe.node.create_publisher(ClothTokens, "cloth/tokens", 10)
    state_pub = probe.node.create_publisher(DualArmState, "arms/state", 10)

    def publish() -> None:
        if until():
            return
        header = make_header("camera_color_optical_frame", probe.node.get_clock().now().to_msg())
        tokens_pub.publish(tokens_to_msg(*setup["tokens"], header=header, encoder_id=setup["encoder_id"]))
        state_pub.publish(dual_arm_state_to_msg(HOME, header))

    probe.node.create_timer(0.05, publish)


def _run(setup: dict, ros_env: dict[str, str], body, overrides: tuple = ()) -> str:
    graph = GraphSpec(
        "policy",
        (
            NodeSpec(
                "policy_server", "instant_fold_policy", "policy_server_node", parameters=(setup["params"], *overrides)
            ),
        ),
    )
    out = io.StringIO()
    with TopicProbe(ros_env) as probe:
        runner = ProcessRunner(graph, env=ros_env, output=out)
        runner.start()
        try:
            body(probe)
        finally:
            assert runner.shutdown() == 0, out.getvalue()
    return out.getvalue()


def _goal(
    probe: TopicProbe,
    client: ActionClient,
    goal: ExecuteFold.Goal,
    feedback: list,
    cancel_after: int = 0,
    while_running: Callable[[], None] | None = None,
):
    """Run `goal` to its result; with `cancel_after`, cancel it after that many feedbacks, having
    first called `while_running` (requests a running fold must refuse)."""
    assert probe.spin_until(lambda: client.server_is_ready(), 60.0)
    future = client.send_goal_async(goal, feedback_callback=lambda f: feedback.append(f.feedback))
    assert probe.spin_until(future.done, 30.0)
    handle = future.result()
    assert handle.accepted
    if cancel_after:
        probe.spin_until(lambda: len(feedback) >= cancel_after, 60.0)
        if while_running is not None:
            while_running()
        handle.cancel_goal_async()
    result = handle.get_result_async()
    assert probe.spin_until(result.done, 120.0)
    return result.result().result


def test_services_and_a_fold_to_the_step_limit(setup: dict, ros_env: dict[str, str]) -> None:
    observed: dict = {}

    def body(probe: TopicProbe) -> None:
        commands = probe.subscribe(ActionChunk, "arms/command")
        _observation_publisher(probe, setup)
        header = make_header("camera_color_optical_frame")
        # Published once, before the server has subscribed: the latched sample still reaches it.
        home = probe.node.create_publisher(DualArmState, "arms/home", LATCHED_QOS)
        home.publish(home_pose_to_msg(HOME[:, :3].astype(np.float64), header))
        request = PredictActionChunk.Request(
            tokens=tokens_to_msg(*setup["tokens"], header=header), state=dual_arm_state_to_msg(HOME, header)
        )
        observed["predict"] = probe.call(PredictActionChunk, "policy/predict_action_chunk", request, 60.0)
        bad = request.tokens
        bad.features[0] = float("nan")
        observed["bad_predict"] = probe.call(PredictActionChunk, "policy/predict_action_chunk", request)
        observed["bad_load"] = probe.call(
            LoadDemonstration, "policy/load_demonstration", LoadDemonstration.Request(path=str(setup["missing"]))
        )
        observed["load"] = probe.call(
            LoadDemonstration, "policy/load_demonstration", LoadDemonstration.Request(path=str(setup["demo"]))
        )
        feedback: list = []
        client = ActionClient(probe.node, ExecuteFold, "policy/execute_fold")
        observed["result"] = _goal(probe, client, ExecuteFold.Goal(max_steps=3), feedback)
        probe.spin_until(lambda: len(commands) >= 3, 5.0)
        observed["feedback"], observed["commands"] = feedback, list(commands)

    log = _run(setup, ros_env, body)
    predict = observed["predict"]
    assert predict is not None and predict.success, log
    chunk = action_chunk_from_msg(predict.chunk)
    assert chunk.representation == ActionChunk.ABSOLUTE and chunk.positions.shape[1:] == (2, 3)
    assert not observed["bad_predict"].success and "NaN" in observed["bad_predict"].message
    assert not observed["bad_load"].success and "does not exist" in observed["bad_load"].message
    assert observed["load"].success and observed["load"].num_keyframes == 3
    result = observed["result"]
    assert result.outcome == ExecuteFold.Result.OUTCOME_STEP_LIMIT and result.steps == 3, (result.message, log)
    steps = [f.step for f in observed["feedback"] if f.phase in (3, 4)]
    assert steps == [0, 1, 2]
    assert len(observed["commands"]) == 3
    assert all(np.isfinite(action_chunk_from_msg(c).positions).all() for c in observed["commands"])
    assert f"home pose (camera frame): {np.round(HOME[:, :3].astype(np.float64), 4).tolist()}" in log


def test_cancel_makes_the_arms_hold(setup: dict, ros_env: dict[str, str]) -> None:
    observed: dict = {}

    def body(probe: TopicProbe) -> None:
        commands = probe.subscribe(ActionChunk, "arms/command")
        _observation_publisher(probe, setup)
        client = ActionClient(probe.node, ExecuteFold, "policy/execute_fold")
        feedback: list = []

        def while_running() -> None:
            second = client.send_goal_async(ExecuteFold.Goal(max_steps=1000))
            assert probe.spin_until(second.done, 30.0)
            observed["second"] = second.result().accepted
            load = LoadDemonstration.Request(path=str(setup["demo"]))
            observed["load"] = probe.call(LoadDemonstration, "policy/load_demonstration", load)

        observed["result"] = _goal(
            probe, client, ExecuteFold.Goal(max_steps=1000), feedback, cancel_after=2, while_running=while_running
        )
        probe.spin_until(lambda: False, 1.0)
        observed["commands"] = list(commands)

    log = _run(setup, ros_env, body)
    assert observed["result"].outcome == ExecuteFold.Result.OUTCOME_CANCELED, log
    assert observed["second"] is False  # one fold at a time
    # nor a new demonstration under a running fold
    assert not observed["load"].success and "a fold is running" in observed["load"].message, log
    hold = action_chunk_from_msg(observed["commands"][-1])
    assert hold.representation == ActionChunk.ABSOLUTE and hold.steps_to_execute == 1
    np.testing.assert_allclose(hold.positions[0], HOME[:, :3])
    np.testing.assert_allclose(hold.openness[0], HOME[:, 3])


def test_a_fold_waits_for_the_controller_to_listen(setup: dict, ros_env: dict[str, str], tmp_path) -> None:
    """A chunk published before the controller's subscription is matched would be dropped (the
    arms never move): the first one waits for the node publishing `arms/state` to subscribe to
    `arms/command`, and the fold is aborted with the reason when it never does."""
    wait = tmp_path / "wait.yaml"
    wait.write_text("policy_server:\n  ros__parameters:\n    controller_wait_s: 2.0\n")
    observed: dict = {}

    def body(probe: TopicProbe) -> None:
        _observation_publisher(probe, setup)  # the probe is the controller: it publishes arms/state
        client = ActionClient(probe.node, ExecuteFold, "policy/execute_fold")
        observed["alone"] = _goal(probe, client, ExecuteFold.Goal(max_steps=3), [])
        feedback: list = []
        assert probe.spin_until(lambda: client.server_is_ready(), 60.0)
        sent = client.send_goal_async(ExecuteFold.Goal(max_steps=3), feedback_callback=feedback.append)
        assert probe.spin_until(sent.done, 30.0) and sent.result().accepted
        probe.spin_until(lambda: False, 0.5)  # the fold has its first chunk and waits
        commands = probe.subscribe(ActionChunk, "arms/command")  # the controller joins late
        result = sent.result().get_result_async()
        assert probe.spin_until(result.done, 120.0)
        probe.spin_until(lambda: len(commands) >= 3, 5.0)
        observed["late"], observed["commands"] = result.result().result, list(commands)

    log = _run(setup, ros_env, body, overrides=(wait,))
    alone = observed["alone"]
    assert alone.outcome == ExecuteFold.Result.OUTCOME_ABORTED, (alone.message, log)
    assert "does not listen after 2 s" in alone.message and "subscribes to /arms/command" in alone.message, (
        alone.message
    )
    late = observed["late"]
    assert late.outcome == ExecuteFold.Result.OUTCOME_STEP_LIMIT and late.steps == 3, (late.message, log)
    assert len(observed["commands"]) == 3, log  # the first chunk included


def test_ctrl_c_stops_the_server_while_a_fold_waits_for_observations(setup: dict, ros_env: dict[str, str]) -> None:
    """A fold waiting for observations that never come (a stopped camera, a simulator whose clock
    stands still) must not keep the process alive past Ctrl-C: the node ends it and exits cleanly."""
    observed: dict = {}

    def body(probe: TopicProbe) -> None:
        commands = probe.subscribe(ActionChunk, "arms/command")
        _observation_publisher(probe, setup, until=lambda: bool(commands))  # the camera stops after one chunk
        client = ActionClient(probe.node, ExecuteFold, "policy/execute_fold")
        assert probe.spin_until(lambda: client.server_is_ready(), 60.0)
        feedback: list = []
        sent = client.send_goal_async(ExecuteFold.Goal(max_steps=1000), feedback_callback=feedback.append)
        assert probe.spin_until(sent.done, 30.0) and sent.result().accepted
        assert probe.spin_until(lambda: bool(commands), 30.0)
        probe.spin_until(lambda: False, 1.0)  # the fold now waits (observation timeout: 30 s)
        # From the goal status topic: a result request left pending at the server's shutdown would
        # only add rclpy's own shutdown noise ("Failed to take result").
        observed["waiting"] = sent.result().status == GoalStatus.STATUS_EXECUTING and len(commands) == 1

    log = _run(setup, ros_env, body)  # its runner sends SIGINT, then SIGTERM after a grace, then kills
    assert observed["waiting"], log
    assert "did not stop" not in log and "Traceback" not in log, log


def test_a_controller_wait_that_is_not_finite_seconds_stops_the_node(
    setup: dict, ros_env: dict[str, str], tmp_path
) -> None:
    """NaN would make the first chunk wait forever for a missing controller: refused at start."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("policy_server:\n  ros__parameters:\n    controller_wait_s: .nan\n")
    graph = GraphSpec(
        "policy",
        (NodeSpec("policy_server", "instant_fold_policy", "policy_server_node", parameters=(setup["params"], bad)),),
    )
    out = io.StringIO()
    runner = ProcessRunner(graph, env=ros_env, output=out)
    runner.start()
    assert runner.wait() != 0
    assert "controller_wait_s: expected a finite number >= 0 (seconds), got nan" in out.getvalue(), out.getvalue()
