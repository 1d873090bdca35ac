"""The in-process rollout is the graph's rollout: same start, demonstration and policy, same fold."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from test_fold_recording_hosts import check_main_job_recording

from instant_fold.sim_fold import DEFAULT_DEMO
from instant_fold.sim_fold import main as sim_fold_main
from instant_fold_core.compute_threads import machine_record
from instant_fold_core.contracts import FoldOutcome
from instant_fold_core.demonstration import load_demonstration
from instant_fold_evaluation.closed_loop import POLICY_ERRORS, load_condition, not_run, run_rollout
from instant_fold_evaluation.oracle_bank import Context
from instant_fold_learning.policy.instruction import Vocabulary
from instant_fold_learning.policy.modeling import InstantFoldPolicy
from instant_fold_policy.server import PolicyServer
from instant_fold_ros.bringup_share import models_dir
from instant_fold_sim.programs import instruction
from instant_fold_sim.sim_world import SimWorld

MODELS = models_dir()
SEED = 1469361038825727794  # the main job's start: k = 3 of proc_00001, never trained on
QUERIES = 4


def in_process(max_steps: int = QUERIES):
    server = PolicyServer.from_checkpoints(MODELS / "policy", MODELS / "encoder", "cpu", seed=0)
    load_condition(server, load_demonstration(MODELS / DEFAULT_DEMO), "")
    world = SimWorld("proc:1", SEED, "cpu-small", record=False)
    start = world.arm_state()
    return start, world, run_rollout(world, server, max_steps)


def test_in_process_rollout_runs_the_fold_loop_in_lockstep() -> None:
    start, world, result = in_process()
    assert result.outcome == FoldOutcome.STEP_LIMIT and result.queries == QUERIES
    assert result.frames == world.frames == 2 * QUERIES  # k = 2 executed steps of one frame per query
    assert result.record.frames == 2 * QUERIES
    moved = np.linalg.norm(world.arm_state()[:, :3] - start[:, :3], axis=1)
    assert (moved > 1e-3).all()  # the policy moved both arms
    # Repeatable: the sampler is reseeded with the demonstration, the simulation is deterministic.
    _, _, again = in_process()
    assert np.array_equal(again.record.final_keypoints, result.record.final_keypoints)


@pytest.mark.ros
def test_in_process_and_graph_rollouts_end_in_the_same_state(
    tmp_path: Path, ros_env: dict[str, str], monkeypatch
) -> None:
    for key, value in ros_env.items():
        monkeypatch.setenv(key, value)
    out = tmp_path / "graph"
    args = ["--max-steps", str(QUERIES), "--seed", str(SEED), "--out", str(out), "--bank", str(tmp_path / "no_bank")]
    assert sim_fold_main([*args, "--rrd"]) == 0  # recorded: the recording must not change the fold
    metrics = json.loads((out / "metrics.json").read_text())
    check_main_job_recording(out, metrics)
    graph_record = metrics["sim"]["record"]
    assert metrics["fold"]["policy_queries"] == QUERIES and metrics["sim"]["frames"] == 2 * QUERIES
    assert metrics["machine"] == machine_record()  # what the numbers also depend on
    _, _, result = in_process()
    graph_final = np.asarray(graph_record["final_keypoints"])
    # Same code, same inputs: the transport (DDS messages) only rounds the arm state to float32,
    # which the in-process host does too, so the two folds end in the same state.
    np.testing.assert_allclose(result.record.final_keypoints, graph_final, atol=1e-6)
    assert [e["grasp_frame"] for e in graph_record["episodes"]] == [e.grasp_frame for e in result.record.episodes]


def language_checkpoint(directory: Path, contexts: list[Context]) -> Path:
    """The default policy's architecture and normalisers, told folds in words (random weights); its
    vocabulary is the words of the instructions of `contexts`."""
    policy, cfg = InstantFoldPolicy.from_pretrained(MODELS / "policy")
    cfg.model = dataclasses.replace(cfg.model, conditioning="language").validate()
    language = InstantFoldPolicy(cfg.model)
    language.normalizers.load_dict(policy.normalizers.to_dict())
    language.vocabulary = Vocabulary.of(instruction(c.mode, c.variant) for c in contexts)
    return language.save_pretrained(directory, cfg)


def test_a_language_policy_folds_what_it_can_read_and_cannot_start_the_others(tmp_path: Path) -> None:
    checkpoint = language_checkpoint(tmp_path / "language", [Context("sleeves_down__bottom_up", "S")])
    server = PolicyServer.from_checkpoints(checkpoint, MODELS / "encoder", "cpu", seed=0)
    world = SimWorld("proc:1", SEED, "cpu-small", record=False)
    load_condition(server, None, Context("sleeves_down__bottom_up", "S"))
    assert run_rollout(world, server, 2).queries == 2
    # A fold said in words it never learned: the rollout does not start, the garment stays as it was.
    other = SimWorld("proc:1", SEED, "cpu-small", record=False)
    with pytest.raises(POLICY_ERRORS, match=r"never learned: \[.*'diagonally'"):
        load_condition(server, None, Context("sleeves_diagonal__bottom_up", "R"))
    result = not_run(other, "unknown mode")
    assert result.outcome == FoldOutcome.ABORTED and result.queries == 0 and result.record.episodes == ()
    np.testing.assert_array_equal(result.record.final_keypoints, other.init.start_keypoints)
    assert result.record.fold_rate == 0.0
