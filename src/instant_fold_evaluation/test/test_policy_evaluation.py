"""First-grasp rollouts and the evaluation CLI (real cpu-small policy, synthetic tokenised episodes)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from instant_fold_evaluation.evaluate_policy import main
from instant_fold_evaluation.offline import (
    demonstration_pairs,
    expert_first_grasp,
    first_close_frames,
    first_grasp_errors,
    first_moving_frame,
    probed_arms,
    rollout_first_grasp,
    summarize_grasps,
)
from instant_fold_learning.policy.configuration import preset
from instant_fold_learning.policy.data import PolicyDataError
from instant_fold_learning.policy.inference import PolicyRunner
from instant_fold_learning.policy.synthetic import MODES, synthetic_episodes
from instant_fold_learning.policy.training import CHECKPOINT_DIR, train


@pytest.fixture(scope="module")
def checkpoint(episodes, tmp_path_factory):
    cfg = preset("cpu-small")
    cfg.train.steps, cfg.train.batch_size, cfg.train.log_every, cfg.train.checkpoint_every = 4, 4, 4, 4
    out = tmp_path_factory.mktemp("run")
    train(cfg.validate(), episodes, out, echo=False)
    return out / CHECKPOINT_DIR


def test_expert_first_grasp_is_where_each_gripper_first_closes(episodes):
    e = episodes[0]
    frames = first_close_frames(e.arm_state)
    for arm, f in enumerate(frames):
        assert e.arm_state[f, arm, 3] < 0.5 and (e.arm_state[:f, arm, 3] >= 0.5).all()
        np.testing.assert_array_equal(expert_first_grasp(e)[arm], e.arm_state[f, arm, :3])
    gs = e.arm_state.copy()
    gs[..., 3] = 1.0
    assert first_close_frames(gs).tolist() == [-1, -1]
    assert 0 <= first_moving_frame(e) < frames.min()


def test_only_grasps_made_on_the_untouched_cloth_are_probed(episodes):
    """The probe holds the cloth at the first contact: an arm the expert closes only after the other
    arm's fold (a sequential fold) is not counted, as a miss or at all; one closing with it is."""
    e = dataclasses.replace(episodes[0], arm_state=episodes[0].arm_state.copy())
    frames = first_close_frames(e.arm_state)
    first = int(frames.min())
    e.arm_state[:, :, 3] = 1.0
    e.arm_state[first:, 0, 3] = 0.0
    e.arm_state[first + 2 :, 1, 3] = 0.0  # two-handed: closes with it
    assert probed_arms(e).tolist() == [True, True]
    e.arm_state[:, 1, 3] = 1.0
    e.arm_state[first + 40 :, 1, 3] = 0.0  # sequential: after the first arm's fold
    assert probed_arms(e).tolist() == [True, False]
    e.arm_state[:, 1, 3] = 1.0  # never closes
    assert probed_arms(e).tolist() == [True, False]
    results = [{"grasp_error_cm": [2.0, None], "probed": [True, False]}, {"grasp_error_cm": [None, 4.0]}]
    summary = summarize_grasps(results)
    assert summary["arms"] == 3 and summary["closed"] == pytest.approx(2 / 3) and summary["mean_error_cm"] == 3.0


def test_rollout_feeds_back_executed_targets_until_the_grippers_close(episodes, checkpoint):
    runner = PolicyRunner.from_checkpoint(checkpoint)
    demo = episodes[1]
    runner.load_demonstration(
        demo.cloth_positions[demo.keyframes], demo.cloth_features[demo.keyframes], demo.arm_state[demo.keyframes]
    )
    rollout = rollout_first_grasp(runner, episodes[0], max_frames=12, generator=torch.Generator().manual_seed(0))
    steps = runner.cfg.execute_steps
    assert rollout.path.shape[1:] == (2, 4) and rollout.path.shape[0] % steps == 0
    assert rollout.path.shape[0] <= 12 + steps - 1
    start = first_moving_frame(episodes[0])
    for arm in range(2):
        if rollout.frames[arm] >= 0:  # the recorded grasp is the first executed closed target
            k = rollout.frames[arm] - start - 1
            np.testing.assert_array_equal(rollout.grasp[arm], rollout.path[k, arm, :3])
            assert rollout.path[k, arm, 3] == 0 and (rollout.path[:k, arm, 3] == 1).all()
        else:
            assert np.isnan(rollout.grasp[arm]).all() and (rollout.path[:, arm, 3] == 1).all()
    contact = first_close_frames(episodes[0].arm_state).min()
    with pytest.raises(PolicyDataError, match="not before the first grasp"):
        rollout_first_grasp(runner, episodes[0], start=int(contact))


def test_evaluation_cli_reports_train_and_heldout(episodes, checkpoint, tmp_path, capsys):
    train_dir, held_dir = tmp_path / "train", tmp_path / "held"
    train_dir.mkdir()
    held_dir.mkdir()
    m = preset("cpu-small").model
    three = synthetic_episodes(1, tuple(MODES)[:2], 3, m.cloth_feature_dim, m.num_cloth_tokens)
    for i, e in enumerate(three):  # start state 2 of both modes is held out
        e.save((held_dir if i >= 4 else train_dir) / f"ep{i}.npz")
    out = tmp_path / "eval.json"
    args = ["--checkpoint", str(checkpoint), "--data", str(train_dir), "--heldout", str(held_dir)]
    shifts = ["--sensitivity-frames", "2", "--sensitivity-shifts-cm", "2", "4"]
    assert main([*args, "--samples", "8", "--max-frames", "8", *shifts, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    for split, n in (("train", 4), ("heldout", 2)):
        assert result[split]["episodes"] == n and result[split]["action_error_frames"] == 8
        assert np.isfinite(result[split]["action_error_cm"])
        # Every episode is rolled out with a demonstration of its garment and mode from another start.
        assert len(result[split]["first_grasp_episodes"]) == n
        # ... and probed for the keypose's arm sensitivity: 2 frames per arm and episode, 8 shifts.
        sensitivity = result[split]["arm_sensitivity"]
        assert sensitivity["shifts_m"] == [0.02, 0.04] and sensitivity["probes"] == 2 * 2 * n
        assert len(sensitivity["by_shift"]) == 8 and np.isfinite(sensitivity["slope_median"])
        # The preset's flow keypose head conditions its trajectory on no target: said, not probed.
        assert "takes no target" in result[split]["target_following"]["skipped"]
    printed = capsys.readouterr().out
    assert "heldout: 2 episodes" in printed and "keypose arm sensitivity" in printed
    no_probe = tmp_path / "no_probe.json"
    assert (
        main([*args, "--samples", "8", "--max-frames", "8", "--sensitivity-frames", "0", "--out", str(no_probe)]) == 0
    )
    assert "arm_sensitivity" not in json.loads(no_probe.read_text())["train"]
    assert main(["--checkpoint", str(tmp_path), "--data", str(train_dir)]) == 2


def test_a_language_policy_is_scored_on_the_same_queries_given_the_instruction(episodes, tmp_path):
    """The language baseline of the orderings (demonstration vs language) needs the same offline
    first-grasp rows: it is told each query's fold in words instead of being shown a demonstration."""
    cfg = preset("cpu-small")
    cfg.model.conditioning = "language"
    cfg.train.steps, cfg.train.batch_size, cfg.train.log_every, cfg.train.checkpoint_every = 4, 4, 4, 4
    train(cfg.validate(), episodes, tmp_path, echo=False)
    runner = PolicyRunner.from_checkpoint(tmp_path / CHECKPOINT_DIR)
    results = first_grasp_errors(runner, episodes, episodes, max_frames=8)
    assert [r["mode"] for r in results] == [e.meta["mode"] for e in episodes]
    assert runner.has_demonstration and all(len(r["grasp_error_cm"]) == 2 for r in results)


def test_a_query_can_be_shown_its_own_episode_as_the_demonstration(episodes, checkpoint):
    """`self` separates closed-loop drift from carrying the demonstration over to another layout: the
    same queries are rolled out, each with its own episode's keyframes."""
    runner = PolicyRunner.from_checkpoint(checkpoint)
    named = [dataclasses.replace(e, meta={**e.meta, "episode_name": f"ep{i}"}) for i, e in enumerate(episodes)]
    other = first_grasp_errors(runner, named, named, max_frames=8)
    own = first_grasp_errors(runner, named, named, max_frames=8, demo_source="self")
    assert [r["query"] for r in own] == [r["query"] for r in other]
    assert all(r["demo"] == r["query"] for r in own) and all(r["demo"] != r["query"] for r in other)
    with pytest.raises(PolicyDataError, match="demo_source"):
        first_grasp_errors(runner, episodes, episodes, demo_source="same")


def test_a_demonstration_of_another_variant_is_never_paired_with_a_query(episodes):
    """Offline first grasps pair a query with a demonstration of its own context only: left-first and
    right-first executions of one mode are different folds (the paper's contexts)."""
    same = [e for e in episodes if e.meta["mode"] == episodes[0].meta["mode"]]
    first, second = (dataclasses.replace(e, meta=dict(e.meta)) for e in same[:2])
    assert first.meta["garment_id"] == second.meta["garment_id"]
    assert demonstration_pairs([first], [first, second]) != []
    first.meta["variant"], second.meta["variant"] = "L", "R"
    assert demonstration_pairs([first], [first, second]) == []
