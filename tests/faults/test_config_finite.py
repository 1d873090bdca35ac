"""Faults: NaN and infinite config values, and runs that trained on a NaN loss (issue 29, item 6).

Before: `train.lr: .inf` or `model.keypose_loss_weight: .nan` trained on a NaN loss, wrote an
all-NaN checkpoint and exited 0; `train.lr: .nan` crashed with a torch traceback from AdamW; a
checkpoint whose config.json says `mlp_ratio: NaN` or `Infinity` raised a raw ValueError while the
model was built. Now every numeric config field must be finite (refused with the field's name,
before anything is trained or built), and a run whose loss turns non-finite stops with one line
and never writes a non-finite checkpoint.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch

from instant_fold_core.checkpoint import CheckpointError
from instant_fold_core.errors import ConfigError
from instant_fold_learning import train_policy
from instant_fold_learning.encoder import training as encoder_training
from instant_fold_learning.policy import training as policy_training
from instant_fold_learning.policy.configuration import PolicyConfig, TrainingConfig
from instant_fold_learning.policy.modeling import InstantFoldPolicy
from instant_fold_learning.trainer import TRAIN_STATE_DIR, TrainingDiverged, save_train_state
from instant_fold_ros.bringup_share import models_dir


def _train(tmp_path: Path, overrides: str, steps: int = 2) -> tuple[int, Path]:
    """`train_policy` on one synthetic garment with a cpu-small config and `overrides` (YAML lines)."""
    config = tmp_path / "config.yaml"
    config.write_text(f"preset: cpu-small\n{overrides}\n")
    out = tmp_path / "run"
    args = ["--config", str(config), "--synthetic", "1", "--steps", str(steps), "--out", str(out), "--device", "cpu"]
    return train_policy.main(args), out


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ("train: {lr: .inf}", "train.lr"),
        ("train: {lr: .nan}", "train.lr"),
        ("model: {keypose_loss_weight: .nan}", "model.keypose_loss_weight"),
        ("train: {weight_decay: -.inf}", "train.weight_decay"),
    ],
)
def test_non_finite_training_config_is_refused_before_training(tmp_path, capsys, overrides, field):
    code, out = _train(tmp_path, overrides)
    err = capsys.readouterr().err
    assert code == 2
    assert field in err and "finite" in err and len(err.strip().splitlines()) == 1
    assert not (out / policy_training.CHECKPOINT_DIR).exists()


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_checkpoint_config_with_a_non_finite_mlp_ratio_is_a_checkpoint_error(tmp_path, value):
    checkpoint = tmp_path / "policy"
    shutil.copytree(models_dir() / "policy", checkpoint)
    config = json.loads((checkpoint / "config.json").read_text())
    config["model"]["mlp_ratio"] = value
    (checkpoint / "config.json").write_text(json.dumps(config))  # NaN / Infinity, as Python's json writes them
    with pytest.raises(CheckpointError, match=r"model\.mlp_ratio: must be a finite number"):
        InstantFoldPolicy.from_pretrained(checkpoint)


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (PolicyConfig(mlp_ratio=math.nan), "model.mlp_ratio"),
        (PolicyConfig(rope_max_wavelength_m=math.inf), "model.rope_max_wavelength_m"),
        (TrainingConfig(grad_clip=math.inf), "train.grad_clip"),
        (TrainingConfig(lr=-1e-3), "train.lr"),
    ],
)
def test_policy_configs_built_in_code_are_checked_when_validated(config, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        config.validate()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"lr": math.nan}, "train.lr"),
        ({"tau_end": math.inf}, "train.tau_end"),
        ({"curriculum": (0.3, math.inf, 1.0)}, "train.curriculum"),
    ],
)
def test_encoder_training_configs_check_themselves(changes, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        encoder_training.TrainingConfig(**changes).validate()


def test_a_diverging_run_stops_with_one_line_and_saves_nothing(tmp_path, capsys):
    """A finite but absurd rate: the weights overflow after the first step and the loss turns NaN."""
    code, out = _train(tmp_path, "train: {lr: 1.0e+30, warmup_steps: 0}", steps=5)
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert "train_policy:" in err and "lower train.lr" in err and len(err.splitlines()) == 1
    assert not (out / policy_training.CHECKPOINT_DIR).exists()
    assert not (out / TRAIN_STATE_DIR).exists()


def test_a_non_finite_train_state_is_never_written(tmp_path):
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    save_train_state(tmp_path, 1, model, optimizer, {"kind": "test"})
    before = {p.name: p.read_bytes() for p in (tmp_path / TRAIN_STATE_DIR).iterdir()}
    with torch.no_grad():
        model.weight[0, 0] = math.nan
    with pytest.raises(TrainingDiverged, match="model.weight"):
        save_train_state(tmp_path, 2, model, optimizer, {"kind": "test"})
    assert {p.name: p.read_bytes() for p in (tmp_path / TRAIN_STATE_DIR).iterdir()} == before
