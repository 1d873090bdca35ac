"""Faults: damaged or mistyped files that gave tracebacks instead of messages.

Each case failed before (issue "faults and bad input", item 8): a truncated tokenised episode
(`.npz`) raised `zipfile.BadZipFile` out of `train_policy`; a tokenizer `config.json` with a value of
the wrong type (a string for a number, a number for a list) raised TypeError deep in the model;
`evaluate_policy --samples 0` divided by zero. Now each is refused with a message naming the file
or the field, and the CLIs exit 2.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from instant_fold_core.checkpoint import CheckpointError
from instant_fold_evaluation import evaluate_policy
from instant_fold_learning import train_policy
from instant_fold_learning.encoder.modeling import ClothEncoder
from instant_fold_learning.policy import training as policy_training
from instant_fold_learning.policy.configuration import preset
from instant_fold_learning.policy.data import PolicyDataError, TokenizedEpisode
from instant_fold_learning.policy.modeling import InstantFoldPolicy
from instant_fold_learning.policy.synthetic import synthetic_episodes
from instant_fold_learning.testing import untrained_checkpoints
from instant_fold_ros.bringup_share import models_dir


@pytest.fixture(scope="module")
def episodes_dir(tmp_path_factory) -> Path:
    """Two synthetic tokenised episodes of the cpu-small policy's token shape."""
    cfg = preset("cpu-small")
    out = tmp_path_factory.mktemp("episodes")
    modes = ("right_over_left",)
    for i, episode in enumerate(
        synthetic_episodes(1, modes, 2, cfg.model.cloth_feature_dim, cfg.model.num_cloth_tokens)
    ):
        episode.save(out / f"e{i}.npz")
    return out


def test_a_truncated_episode_is_named_not_a_traceback(episodes_dir: Path, tmp_path: Path, capsys) -> None:
    data = tmp_path / "data"
    data.mkdir()
    whole = (episodes_dir / "e0.npz").read_bytes()
    (data / "cut.npz").write_bytes(whole[: len(whole) // 2])  # a copy that stopped half-way
    with pytest.raises(PolicyDataError, match=r"cut\.npz: not a readable tokenised episode"):
        TokenizedEpisode.load(data / "cut.npz")
    out = tmp_path / "run"
    assert train_policy.main(["--data", str(data), "--steps", "1", "--out", str(out), "--device", "cpu"]) == 2
    assert "cut.npz" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("field", "value"),
    [("layers", 3), ("near", "0.1"), ("image_size", "96"), ("freeze_backbone", "no"), ("num_tokens", 64.5)],
)
def test_tokenizer_config_of_the_wrong_type_is_refused(tmp_path: Path, field: str, value) -> None:
    _, encoder_dir = untrained_checkpoints(tmp_path)
    config_path = encoder_dir / "config.json"
    config = json.loads(config_path.read_text())
    config["encoder"][field] = value
    config_path.write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=rf"invalid config\.json \(encoder\.{field}: expected"):
        ClothEncoder.from_pretrained(encoder_dir)


def test_evaluate_policy_with_no_frame_to_sample_says_so(episodes_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    args = ["--data", str(episodes_dir), "--steps", "1", "--out", str(out), "--device", "cpu"]
    assert train_policy.main(args) == 0
    checkpoint = out / policy_training.CHECKPOINT_DIR
    args = ["--checkpoint", str(checkpoint), "--data", str(episodes_dir), "--samples", "0"]
    assert evaluate_policy.main(args) == 2
    assert "--samples: must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("modes", ['{"sleeves_down__bottom_up": "two"}', "[2, 16]", '{"a": null}'])
def test_a_policy_modes_file_edited_into_nonsense_is_named(tmp_path, modes):
    """modes.json (mode name -> id) that is not such a mapping: a checkpoint error naming it, not a traceback."""
    ckpt = tmp_path / "policy"
    shutil.copytree(models_dir() / "policy", ckpt)
    (ckpt / "modes.json").write_text(modes)
    with pytest.raises(CheckpointError, match="modes.json"):
        InstantFoldPolicy.from_pretrained(ckpt)
