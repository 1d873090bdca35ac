"""The shared training scaffold: one schedule, one train-state layout, no run overwritten."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
import torch

from instant_fold_core.checkpoint import CheckpointError
from instant_fold_learning.policy.configuration import preset
from instant_fold_learning.policy.training import policy_learning_rate
from instant_fold_learning.trainer import (
    TRAIN_STATE_DIR,
    check_new_run,
    learning_rate,
    read_train_state,
    save_train_state,
)


def test_schedule_warms_up_then_decays_to_its_floor() -> None:
    lr = [learning_rate(s, 1e-3, steps=100, warmup_steps=10, min_ratio=0.05) for s in range(120)]
    assert lr[0] == pytest.approx(1e-4) and lr[9] == pytest.approx(1e-3)
    assert all(a >= b for a, b in itertools.pairwise(lr[9:]))
    assert lr[100] == lr[119] == pytest.approx(5e-5)


def test_policy_schedule_is_the_one_it_had() -> None:
    """The policy's rates are bit-identical to its former own schedule (runs resume unchanged)."""
    cfg = preset("cpu-small")
    tr = cfg.train

    def former(step: int) -> float:
        if step < tr.warmup_steps:
            return tr.lr * (step + 1) / tr.warmup_steps
        progress = (step - tr.warmup_steps) / max(1, tr.steps - tr.warmup_steps)
        return tr.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))

    assert all(policy_learning_rate(cfg, s) == former(s) for s in range(tr.steps + 5))


def test_train_state_round_trip_and_run_guard(tmp_path: Path) -> None:
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    extra = {"ema.weight": torch.zeros(2, 3)}
    save_train_state(tmp_path, 7, model, optimizer, {"kind": "demo"}, extra, {"stats": {"a": 1}})
    state = read_train_state(tmp_path / TRAIN_STATE_DIR)
    assert state.step == 7 and state.config == {"kind": "demo"} and state.json("stats") == {"a": 1}
    assert set(state.tensors) == {"model.weight", "model.bias", "ema.weight"} | {
        f"optim.0.{n}" for n in ("step", "exp_avg", "exp_avg_sq")
    } | {f"optim.1.{n}" for n in ("step", "exp_avg", "exp_avg_sq")}
    copy = torch.nn.Linear(3, 2)
    copy_optimizer = torch.optim.AdamW(copy.parameters(), lr=0.1)
    assert state.restore(copy, copy_optimizer) == 7
    assert torch.equal(copy.weight, model.weight) and torch.equal(state.prefixed("ema.")["weight"], extra["ema.weight"])
    with pytest.raises(CheckpointError, match="do not match"):
        state.restore(torch.nn.Linear(4, 2), copy_optimizer)
    with pytest.raises(CheckpointError, match="pass --resume"):
        check_new_run(tmp_path, resume=False, outputs=())
    check_new_run(tmp_path, resume=True, outputs=())
    check_new_run(tmp_path / "fresh", resume=False, outputs=("checkpoint",))
