"""Encoder pretraining: a run logs and checkpoints, resumes exactly, fails clearly, runs DDP."""

import dataclasses
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from instant_fold_core.checkpoint import CheckpointError
from instant_fold_core.encoder import ClothTokenizer
from instant_fold_core.encoder.synthetic import synthetic_dataset
from instant_fold_core.encoder.training import (
    PretrainConfig,
    PretrainModel,
    load_training_checkpoint,
    main,
    pretrain,
)


def tiny_config(steps: int) -> PretrainConfig:
    cfg = PretrainConfig.load("cpu-small")
    cfg.encoder = dataclasses.replace(
        cfg.encoder,
        image_size=48,
        num_tokens=32,
        backbone_kwargs={"embed_dim": 48, "depth": 4, "num_heads": 2, "patch_size": 8},
    )
    cfg.training = dataclasses.replace(cfg.training, steps=steps, save_every=2, log_every=1, max_frames=4)
    return cfg


@pytest.fixture(scope="module")
def episodes():
    return synthetic_dataset(num_cloths=2, trajectories=2, frames=5, image_size=48)


def weights(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def test_run_logs_checkpoints_and_resumes_exactly(episodes, tmp_path):
    full = pretrain(episodes, tiny_config(3), tmp_path / "full", progress=False)
    assert [r["step"] for r in full["history"]] == [0, 1, 2]
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in full["history"])
    logged = [json.loads(line) for line in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged] == [0, 1, 2] and {"same", "cross", "tau", "lr"} <= set(logged[0])
    assert (tmp_path / "full" / "checkpoints" / "step_2").is_dir()
    assert (tmp_path / "full" / "checkpoints" / "step_3").is_dir()
    tok = ClothTokenizer.from_pretrained(tmp_path / "full" / "tokenizer")
    assert not any("head" in k for k in tok.state_dict())

    # an interrupted run: only the step-2 checkpoint survives, training resumes from it
    import shutil

    shutil.copytree(tmp_path / "full" / "checkpoints" / "step_2", tmp_path / "split" / "checkpoints" / "step_2")
    resumed = pretrain(episodes, tiny_config(3), tmp_path / "split", resume="auto", progress=False)
    assert resumed["start_step"] == 2 and [r["step"] for r in resumed["history"]] == [2]
    a = weights(tmp_path / "full" / "checkpoints" / "step_3")
    b = weights(tmp_path / "split" / "checkpoints" / "step_3")
    assert a.keys() == b.keys()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a), "resumed run diverged from the full run"
    # training changed the trainable weights
    first = weights(tmp_path / "full" / "checkpoints" / "step_2")
    assert not torch.allclose(first["head.net.0.weight"], a["head.net.0.weight"])


def test_corrupt_or_mismatched_training_checkpoints_fail_clearly(episodes, tmp_path):
    cfg = tiny_config(2)
    pretrain(episodes, cfg, tmp_path, progress=False)
    ckpt = tmp_path / "checkpoints" / "step_2"
    model = PretrainModel(cfg.encoder, cfg.training)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
    assert load_training_checkpoint(ckpt, model, opt) == 2
    (ckpt / "train_state.json").unlink()
    with pytest.raises(CheckpointError, match="train_state.json"):
        load_training_checkpoint(ckpt, model, opt)
    data = (ckpt / "model.safetensors").read_bytes()
    (ckpt / "model.safetensors").write_bytes(data[:100])
    with pytest.raises(CheckpointError, match="corrupt"):
        load_training_checkpoint(ckpt, model, opt)
    other = dataclasses.replace(cfg.encoder, feature_dim=16)
    pretrain(episodes, PretrainConfig(other, cfg.training), tmp_path / "other", progress=False)
    with pytest.raises(CheckpointError, match="do not match"):
        load_training_checkpoint(tmp_path / "other" / "checkpoints" / "step_2", model, opt)
    with pytest.raises(CheckpointError, match="not an encoder pretraining"):
        load_training_checkpoint(tmp_path / "tokenizer", model, opt)


def test_cli_requires_data_and_runs_on_synthetic_episodes(tmp_path, capsys):
    with pytest.raises(SystemExit, match="no training data"):
        main(["--output", str(tmp_path / "x")])
    cfg_path = tmp_path / "cfg.yaml"
    import yaml

    small = tiny_config(2)
    cfg_path.write_text(
        yaml.safe_dump(
            {
                "preset": "cpu-small",
                "encoder": {"image_size": 48, "num_tokens": 32, "backbone_kwargs": small.encoder.backbone_kwargs},
                "training": {"max_frames": 4},
            }
        )
    )
    assert (
        main(
            [
                "--config",
                str(cfg_path),
                "--output",
                str(tmp_path / "run"),
                "--synthetic",
                "2",
                "2",
                "4",
                "--steps",
                "2",
                "--no-progress",
            ]
        )
        == 0
    )
    assert "tokenizer saved" in capsys.readouterr().out
    assert (tmp_path / "run" / "tokenizer" / "model.safetensors").is_file()


def test_ddp_with_two_cpu_processes(tmp_path):
    cfg_path = tmp_path / "cfg.yaml"
    import yaml

    small = tiny_config(2)
    cfg_path.write_text(
        yaml.safe_dump(
            {
                "preset": "cpu-small",
                "encoder": {"image_size": 48, "num_tokens": 32, "backbone_kwargs": small.encoder.backbone_kwargs},
                "training": {"max_frames": 4, "log_every": 1},
            }
        )
    )
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]),
    }
    with socket.socket() as sock:  # a free port: other test sessions may share the machine
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        port,
        "-m",
        "instant_fold_core.encoder.training",
        "--config",
        str(cfg_path),
        "--output",
        str(tmp_path / "ddp"),
        "--synthetic",
        "4",
        "2",
        "4",
        "--steps",
        "2",
        "--device",
        "cpu",
        "--no-progress",
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "steps 0->2" in proc.stdout
    records = [json.loads(x) for x in (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 1]
    ClothTokenizer.from_pretrained(tmp_path / "ddp" / "tokenizer")


@pytest.mark.slow
def test_cpu_small_pretraining_lowers_the_loss_and_improves_pck5_on_heldout_cloths(tmp_path):
    """A few minutes of cpu-small pretraining on synthetic cloths beats the untrained encoder."""
    from instant_fold_core.checkpoint import load_checkpoint
    from instant_fold_core.encoder.data import PKSampler, PretrainDataset
    from instant_fold_core.encoder.modeling import load_strict
    from instant_fold_core.encoder.probe import correspondence_probe

    config = PretrainConfig.load("cpu-small")
    config.training.steps = 200
    train = synthetic_dataset(6, 3, 8, config.encoder.image_size)
    heldout = synthetic_dataset(3, 2, 8, config.encoder.image_size, first_cloth=1000)
    torch.manual_seed(config.training.seed)
    initial = PretrainModel(config.encoder, config.training).eval()
    pretrain(train, config, tmp_path, progress=False)
    trained = PretrainModel(config.encoder, config.training).eval()
    tensors, _ = load_checkpoint(tmp_path / "checkpoints" / "step_200")
    load_strict(trained, {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}, tmp_path)

    # the same-cloth loss on a fixed batch at a fixed temperature, without augmentation
    quiet = dataclasses.replace(config.training, color_jitter=False, occlusion_prob=0.0)
    initial.training_config = trained.training_config = quiet
    data = PretrainDataset(train, config.encoder.image_size, max_frames=quiet.max_frames)
    batch = data.batch(PKSampler(data.trajectories, 2, 2, seed=99).batch(0))
    with torch.no_grad():
        before = initial(batch, 0.1, torch.Generator().manual_seed(0))["same"]
        after = trained(batch, 0.1, torch.Generator().manual_seed(0))["same"]
    assert after < before - 0.3, (before, after)

    probe_before = correspondence_probe(initial.tokenizer, heldout, max_pairs=150)
    probe_after = correspondence_probe(trained.tokenizer, heldout, max_pairs=150)
    for key in ("intra_trajectory", "cross_trajectory", "cross_cloth"):
        assert probe_after[key]["pck5"] > probe_before[key]["pck5"], (key, probe_before[key], probe_after[key])


def test_cli_reads_an_episode_store_by_split(tmp_path, capsys):
    """`--data` trains on the episodes of one garment split of a store written like the simulator's."""
    import yaml

    from instant_fold_core.dataset.zarr_store import EpisodeStore

    store = EpisodeStore(tmp_path / "store", mode="a")
    for i, episode in enumerate(synthetic_dataset(num_cloths=2, trajectories=2, frames=4, image_size=48)):
        episode.meta["split"] = "train" if i < 2 else "heldout"
        store.write(f"ep{i}", episode)
    small = tiny_config(2)
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(
        yaml.safe_dump(
            {
                "preset": "cpu-small",
                "encoder": {"image_size": 48, "num_tokens": 32, "backbone_kwargs": small.encoder.backbone_kwargs},
                "training": {"max_frames": 4, "clothes_per_batch": 1, "trajectories_per_cloth": 2},
            }
        )
    )
    args = ["--config", str(cfg_path), "--data", str(tmp_path / "store"), "--steps", "1", "--no-progress"]
    assert main([*args, "--output", str(tmp_path / "run")]) == 0
    assert "tokenizer saved" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no episode of split 'validation'"):
        main([*args, "--output", str(tmp_path / "run2"), "--split", "validation"])
    with pytest.raises(SystemExit, match="pretrain_encoder: .*missing"):
        main([*args, "--output", str(tmp_path / "run3"), "--data", str(tmp_path / "missing")])
