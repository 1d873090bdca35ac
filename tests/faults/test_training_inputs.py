"""Faults: training and generation inputs that used to lose data or train nothing silently.

Each case failed before (issue "faults and bad input", item 5): a second `train_policy` into a run
folder overwrote its checkpoint and resume state, `--steps 0` / `--batch-size 0` were ignored,
`pretrain_encoder --steps -1` exited 0 with an untrained model, `generate --episodes-per 0` exited 0
with an empty store. Now each is refused with a message naming the argument, and nothing is written.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from instant_fold_learning import pretrain_encoder, train_policy
from instant_fold_learning.policy import training as policy_training
from instant_fold_sim import generate


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


@pytest.mark.parametrize(("flag", "field"), [("--steps", "train.steps"), ("--batch-size", "train.batch_size")])
def test_train_policy_refuses_zero_overrides(tmp_path, capsys, flag, field):
    out = tmp_path / "run"
    assert train_policy.main(["--synthetic", "1", flag, "0", "--out", str(out), "--device", "cpu"]) == 2
    assert field in capsys.readouterr().err
    assert not (out / policy_training.CHECKPOINT_DIR).exists()


def test_train_policy_never_overwrites_a_run_without_resume(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["--synthetic", "1", "--steps", "2", "--out", str(out), "--device", "cpu"]
    assert train_policy.main(args) == 0
    before = _digest(out)
    assert any(name.startswith(policy_training.TRAIN_STATE_DIR) for name in before)
    assert train_policy.main(args) == 2
    assert "--resume" in capsys.readouterr().err
    assert _digest(out) == before
    assert train_policy.main([*args, "--resume"]) == 0  # continuing it stays possible


def test_pretrain_encoder_refuses_negative_steps(tmp_path, capsys):
    """0 steps is the untrained encoder (test_pretrain); fewer is refused before anything is written."""
    out = tmp_path / "enc"
    assert pretrain_encoder.main(["--synthetic", "2", "2", "2", "--steps", "-1", "--out", str(out)]) == 2
    assert "train.steps: must be >= 0, got -1" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("count", ["0", "-3"])
def test_generate_refuses_no_episodes(tmp_path, capsys, count):
    store = tmp_path / "store.zarr"
    with pytest.raises(SystemExit) as exc:
        generate.main(["--out", str(store), "--garments", "proc:0", "--episodes-per", count])
    assert exc.value.code == 2
    assert "--episodes-per must be at least 1" in capsys.readouterr().err
    assert not store.exists()
