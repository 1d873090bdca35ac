"""Both trainer commands under torchrun (two CPU processes, gloo), by their one module path."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from instant_fold_learning.encoder import ClothEncoder
from instant_fold_learning.policy.modeling import InstantFoldPolicy
from instant_fold_learning.policy.training import CHECKPOINT_DIR
from instant_fold_learning.testing import ANCHORED
from instant_fold_learning.trainer import LOG_FILE, read_log


def torchrun(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`torchrun --nproc_per_node 2 -m module args` on CPU; a free port, as other test sessions may
    share the machine."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", port]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [*cmd, "-m", module, *args, "--device", "cpu"], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_pretrain_encoder_ddp(tmp_path: Path) -> None:
    cfg_path = tmp_path / "cfg.yaml"
    backbone = {"embed_dim": 48, "depth": 4, "num_heads": 2, "patch_size": 8}
    cfg_path.write_text(
        yaml.safe_dump(
            {
                "preset": "cpu-small",
                "encoder": {"image_size": 48, "num_tokens": 32, "backbone_kwargs": backbone},
                "train": {"max_frames": 4, "log_every": 1},
            }
        )
    )
    out = tmp_path / "ddp"
    args = ["--config", str(cfg_path), "--out", str(out), "--synthetic", "4", "2", "4", "--steps", "2"]
    proc = torchrun("instant_fold_learning.pretrain_encoder", *args)
    assert "steps 0->2" in proc.stdout
    records = read_log(out / LOG_FILE)
    assert records[0]["event"] == "start" and records[0]["world_size"] == 2
    assert [r["step"] for r in records if r["event"] == "train"] == [1, 2]
    ClothEncoder.from_pretrained(out / "encoder")


#: The cpu-folds recipe's policy model (config/pipelines/cpu-folds.yaml) with the progress bias: every
#: parameter of the anchored head and of the bias takes part in each step, as DDP requires.
ANCHORED_WITH_PROGRESS = {**ANCHORED, "event_progress": True, "progress_bias": True}


@pytest.mark.parametrize("model", [{}, ANCHORED_WITH_PROGRESS], ids=["cpu-small", "anchored with progress bias"])
def test_train_policy_ddp(tmp_path: Path, model: dict) -> None:
    config = tmp_path / "policy.yaml"
    config.write_text(yaml.safe_dump({"preset": "cpu-small", "model": model}))
    out = tmp_path / "ddp"
    args = ["--config", str(config), "--synthetic", "1", "--steps", "3", "--batch-size", "4", "--out", str(out)]
    torchrun("instant_fold_learning.train_policy", *args)
    records = read_log(out / LOG_FILE)
    assert records[0]["world_size"] == 2
    end = records[-1]
    assert end["event"] == "end" and end["ranks_in_sync"] is True and end["world_size"] == 2
    policy, _ = InstantFoldPolicy.from_pretrained(out / CHECKPOINT_DIR)
    assert all(getattr(policy.cfg, key) == value for key, value in model.items())
