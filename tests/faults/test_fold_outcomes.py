"""Faults: failed folds reported as successes, and a bad demonstration that killed the policy server.

Each case failed before (issue "faults and bad input", items 4 and 6): a demonstration file whose
metadata JSON is not an object raised AttributeError out of `load_demonstration`, which killed the
policy server from `LoadDemonstration` (no answer) and, from an `ExecuteFold` goal, ended the goal
with rclpy's default result, outcome 0 = "completed"; a demonstration without grasps or releases
"completed" at once with 0 queries; and the main job exited 0 whatever the outcome. Now the file is
refused with a message, the fold is aborted with a reason, and an aborted fold exits non-zero.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from instant_fold import sim_fold
from instant_fold_core.contracts import FoldOutcome, KeyframeEvent
from instant_fold_core.demonstration import DemonstrationError, load_demonstration
from instant_fold_policy.fold_loop import Finish, FoldLoop, FoldLoopConfig
from instant_fold_ros.bringup_share import models_dir

DEMO = (models_dir() / sim_fold.DEFAULT_DEMO).resolve()  # the source file behind a --symlink-install
HOME = np.array([[-0.25, 0.05, 0.9], [0.25, 0.05, 0.9]])


def _with_metadata(tmp_path: Path, metadata: str) -> Path:
    """The bundled demonstration's arrays under another metadata string."""
    path = tmp_path / "bad_metadata.safetensors"
    save_file(load_file(str(DEMO)), str(path), metadata={"instant_fold_demonstration": metadata})
    return path


def _without_events(tmp_path: Path) -> Path:
    """The bundled demonstration with every grasp and release turned into a plain motion keyframe."""
    demo = load_demonstration(DEMO)
    demo.events[np.isin(demo.events, (KeyframeEvent.GRASP, KeyframeEvent.RELEASE))] = KeyframeEvent.MOTION
    return demo.save(tmp_path / "no_events.safetensors")


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ("[1, 2]", "not a JSON object"),
        ('"a string"', "not a JSON object"),
        ('{"format_version": 1, "name": 3}', "'name' is not a str"),
        ('{"format_version": 1, "meta": [1]}', "'meta' is not a dict"),
    ],
)
def test_demonstration_metadata_of_the_wrong_type_is_refused(tmp_path: Path, metadata: str, message: str) -> None:
    with pytest.raises(DemonstrationError, match=message):
        load_demonstration(_with_metadata(tmp_path, metadata))


def test_a_demonstration_without_gripper_events_aborts_the_fold() -> None:
    loop: FoldLoop[str] = FoldLoop(FoldLoopConfig(), HOME, expected_events=0)
    decision = loop.next(0.0)
    assert isinstance(decision, Finish) and decision.outcome == FoldOutcome.ABORTED
    assert "no grasp or release" in decision.message and loop.step == 0


def test_an_aborted_goal_never_reads_as_completed() -> None:
    from action_msgs.msg import GoalStatus

    assert sim_fold.fold_outcome(GoalStatus.STATUS_ABORTED, 0) == "aborted"  # rclpy's default result after an error
    assert sim_fold.fold_outcome(GoalStatus.STATUS_SUCCEEDED, 0) == "completed"
    assert sim_fold.fold_outcome(GoalStatus.STATUS_ABORTED, 1) == "step_limit"
    assert sim_fold.fold_outcome(GoalStatus.STATUS_CANCELED, 2) == "canceled"


@pytest.mark.ros
def test_policy_server_answers_bad_demonstrations_and_aborts_their_folds(tmp_path: Path, ros_env) -> None:
    """Over DDS: the server answers a bad `LoadDemonstration`, stays up, and aborts goals whose
    demonstration is unreadable or performs no gripper event (instead of "completed, 0 queries")."""
    from policy_server_rig import policy_server_rig
    from rclpy.action import ActionClient

    from instant_fold_interfaces.action import ExecuteFold
    from instant_fold_interfaces.srv import LoadDemonstration
    from instant_fold_ros.standins.process_runner import ProcessRunner
    from instant_fold_ros.testing import TopicProbe

    graph = policy_server_rig(tmp_path, [tmp_path, DEMO.parent]).graph
    bad, no_events = _with_metadata(tmp_path, "[1, 2]"), _without_events(tmp_path)
    observed: dict = {}
    log = io.StringIO()
    with TopicProbe(ros_env) as probe:
        runner = ProcessRunner(graph, env=ros_env, output=log)
        runner.start()
        try:
            request = LoadDemonstration.Request(path=str(bad))
            observed["bad_load"] = probe.call(LoadDemonstration, "policy/load_demonstration", request, 60.0)
            request = LoadDemonstration.Request(path=str(DEMO))
            observed["load"] = probe.call(LoadDemonstration, "policy/load_demonstration", request, 60.0)
            client = ActionClient(probe.node, ExecuteFold, "policy/execute_fold")
            assert probe.spin_until(client.server_is_ready, 30.0)
            for name, path in (("bad_goal", bad), ("no_events_goal", no_events)):
                sent = client.send_goal_async(ExecuteFold.Goal(demonstration_path=str(path)))
                assert probe.spin_until(sent.done, 30.0)
                result = sent.result().get_result_async()
                assert probe.spin_until(result.done, 60.0), log.getvalue()
                observed[name] = result.result()
        finally:
            code = runner.shutdown()
    assert code == 0, log.getvalue()  # the server was alive to the end and stopped cleanly
    assert observed["bad_load"] is not None, log.getvalue()
    assert not observed["bad_load"].success and "not a JSON object" in observed["bad_load"].message
    assert observed["load"].success
    for name, reason in (("bad_goal", "not a JSON object"), ("no_events_goal", "no grasp or release")):
        answer = observed[name]
        assert answer.result.outcome == ExecuteFold.Result.OUTCOME_ABORTED, (name, answer.result.message)
        assert (
            reason in answer.result.message and sim_fold.fold_outcome(answer.status, answer.result.outcome) == "aborted"
        )


@pytest.mark.slow
@pytest.mark.ros
def test_main_job_exits_non_zero_when_the_fold_is_aborted(tmp_path: Path, ros_env, monkeypatch, capsys) -> None:
    for key, value in ros_env.items():
        monkeypatch.setenv(key, value)
    out = tmp_path / "run"
    code = sim_fold.main(["--demo", str(_without_events(tmp_path)), "--no-evaluate", "--out", str(out)])
    assert code == sim_fold.EXIT_FOLD_FAILED
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["fold"]["outcome"] == "aborted" and metrics["fold"]["policy_queries"] == 0
    assert "no grasp or release" in capsys.readouterr().err
