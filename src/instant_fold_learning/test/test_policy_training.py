"""Training tests: learning, in-context mode following, exact resume, the CLI (DDP under torchrun:
instant_fold_learning's test_trainer_cli)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from instant_fold_learning.policy.configuration import preset
from instant_fold_learning.policy.data import chunk_targets
from instant_fold_learning.policy.inference import PolicyRunner
from instant_fold_learning.policy.modeling import InstantFoldPolicy
from instant_fold_learning.policy.synthetic import MODES, synthetic_episodes
from instant_fold_learning.policy.training import CHECKPOINT_DIR, TRAIN_STATE_DIR, train
from instant_fold_learning.train_policy import main
from instant_fold_learning.trainer import LOG_FILE


def small(steps: int, **train_overrides):
    cfg = preset("cpu-small")
    cfg.train.steps = steps
    for key, value in train_overrides.items():
        setattr(cfg.train, key, value)
    return cfg.validate()


@pytest.fixture(scope="module")
def episodes():
    m = preset("cpu-small").model
    # One garment, two start states, each folded in two modes: g0/s0/A, g0/s0/B, g0/s1/A, g0/s1/B.
    return synthetic_episodes(1, tuple(MODES)[:2], 2, m.cloth_feature_dim, m.num_cloth_tokens)


def test_short_training_reduces_action_error(episodes, tmp_path):
    history = train(small(120, log_every=60, checkpoint_every=120), episodes, tmp_path, echo=False)
    assert history["final_action_error"] < 0.75 * history["initial_action_error"]
    records = [json.loads(line) for line in (tmp_path / LOG_FILE).read_text().splitlines()]
    losses = [r["loss"] for r in records if r["event"] == "train"]
    assert len(losses) == 2 and losses[-1] < 0.8 * 3.0  # initial loss ~ 1 (flow) + 0.69 x 1.5 (BCE)
    assert (tmp_path / CHECKPOINT_DIR / "model.safetensors").is_file()


def _mode_distances(runner: PolicyRunner, episodes, query_start: int, demo_start: int) -> np.ndarray:
    """[demo mode, expert mode] mean distance (m) of the predicted chunk at the shared start frame."""
    h = runner.cfg.horizon
    query = episodes[2 * query_start]  # frame 0 is identical for both modes of this start
    experts = [episodes[2 * query_start + m] for m in (0, 1)]
    out = np.zeros((2, 2))
    for m in (0, 1):
        demo = episodes[2 * demo_start + m]
        kf = demo.keyframes
        runner.load_demonstration(demo.cloth_positions[kf], demo.cloth_features[kf], demo.arm_state[kf])
        chunk = runner.predict(
            query.cloth_positions[0],
            query.cloth_features[0],
            query.arm_state[0],
            generator=torch.Generator().manual_seed(0),
        )
        for e, expert in enumerate(experts):
            truth = expert.arm_state[0, :, :3] + np.cumsum(chunk_targets(expert, 0, h)[0], 0)
            out[m, e] = np.linalg.norm(chunk.targets[..., :3] - truth, axis=-1).mean()
    return out


@pytest.mark.slow
def test_overfits_and_follows_the_demonstrated_mode(episodes, tmp_path):
    """cpu-small overfits 4 episodes (error / 10) and, from the same start state, follows the mode of
    whichever demonstration (of another start state) it is given."""
    history = train(small(900, log_every=100, checkpoint_every=300), episodes, tmp_path, echo=False)
    assert history["ema_action_error"] < 0.1 * history["initial_action_error"], history
    runner = PolicyRunner.from_checkpoint(tmp_path / CHECKPOINT_DIR)
    for query_start, demo_start in ((0, 1), (1, 0)):
        d = _mode_distances(runner, episodes, query_start, demo_start)
        # Row m: conditioned on a demo of mode m -> closest to mode m's expert chunk.
        assert d[0, 0] < d[0, 1] and d[1, 1] < d[1, 0], d
        assert d[0, 1] - d[0, 0] > 0.01 and d[1, 0] - d[1, 1] > 0.01, d


def test_resume_continues_exactly(episodes, tmp_path):
    cfg = small(6, log_every=3, checkpoint_every=3, batch_size=4)
    train(cfg, episodes, tmp_path / "straight", device="cpu", echo=False)
    train(cfg, episodes, tmp_path / "resumed", device="cpu", echo=False, stop_at=3)
    assert json.loads((tmp_path / "resumed" / TRAIN_STATE_DIR / "train_state.json").read_text())["step"] == 3
    history = train(cfg, episodes, tmp_path / "resumed", device="cpu", echo=False, resume=True)
    assert "initial_action_error" not in history  # it did not start over
    a = load_file(tmp_path / "straight" / TRAIN_STATE_DIR / "model.safetensors")
    b = load_file(tmp_path / "resumed" / TRAIN_STATE_DIR / "model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_cli_trains_and_writes_checkpoint_log_and_plot(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(
        [
            "--config",
            "cpu-small",
            "--synthetic",
            "1",
            "--steps",
            "4",
            "--batch-size",
            "4",
            "--out",
            str(out),
            "--device",
            "cpu",
            "--plot",
            str(tmp_path / "curves.png"),
        ]
    )
    assert rc == 0
    policy, cfg = InstantFoldPolicy.from_pretrained(out / CHECKPOINT_DIR)
    assert cfg.name == "cpu-small" and cfg.train.steps == 4 and policy.normalizers.calibrated
    assert (tmp_path / "curves.png").stat().st_size > 1000
    assert "[policy] step 4" in capsys.readouterr().out
    assert main(["--config", "cpu-small", "--out", str(tmp_path / "x"), "--data", str(tmp_path / "no")]) == 2
    assert main(["--config", "nope", "--out", str(tmp_path / "x"), "--synthetic", "1"]) == 2
    assert "neither a YAML file nor a policy preset" in capsys.readouterr().err


@pytest.mark.gpu
def test_gpu_mixed_precision_training_and_half_precision_inference(episodes, tmp_path):
    history = train(small(4, log_every=2, checkpoint_every=4, batch_size=4), episodes, tmp_path, device="cuda")
    assert np.isfinite(history["final_loss"])
    ep = episodes[0]
    kf = ep.keyframes
    for dtype in (torch.bfloat16, torch.float16):
        runner = PolicyRunner.from_checkpoint(tmp_path / CHECKPOINT_DIR, device="cuda", dtype=dtype)
        runner.load_demonstration(ep.cloth_positions[kf], ep.cloth_features[kf], ep.arm_state[kf])
        chunk = runner.predict(ep.cloth_positions[0], ep.cloth_features[0], ep.arm_state[0])
        assert np.isfinite(chunk.targets).all()


def test_anchored_training_relabels_shifted_targets_every_step(episodes, tmp_path, monkeypatch):
    """With `anchor_teacher_shift_m` the loop moves some approaching arms' targets in every step's
    teacher condition and trains on the relabelled chunks (the relabelling: test_policy_anchor)."""
    from instant_fold_learning.policy import training

    cfg = small(3, log_every=3, checkpoint_every=3, batch_size=16, anchor_teacher_shift_m=0.1)
    cfg.model.keypose_head, cfg.model.demo_alignment = "anchored", "registration"
    moved, shift = [], training.shift_teacher_targets

    def spy(target, arm_state, condition, tr, gen):
        shifted, relabelled = shift(target, arm_state, condition, tr, gen)
        moved.append(int(((shifted.position - condition.position).norm(dim=-1) > 0).sum()))
        return shifted, relabelled

    monkeypatch.setattr(training, "shift_teacher_targets", spy)
    history = train(cfg.validate(), episodes, tmp_path, echo=False)
    assert len(moved) == 3 and sum(moved) > 0 and np.isfinite(history["final_action_error"])
