"""Encoder pretraining: a run logs and checkpoints, resumes exactly (old layout too), fails clearly
(DDP under torchrun: instant_fold_learning's test_trainer_cli)."""

import dataclasses
import json
import re
from pathlib import Path

import pytest
import torch

from instant_fold_core.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from instant_fold_core.errors import ConfigError
from instant_fold_learning.encoder import ClothEncoder
from instant_fold_learning.encoder.synthetic import synthetic_dataset
from instant_fold_learning.encoder.training import PretrainConfig, PretrainModel, pretrain, restore
from instant_fold_learning.pretrain_encoder import main
from instant_fold_learning.trainer import LOG_FILE, TRAIN_STATE_DIR, read_log


def tiny_config(steps: int) -> PretrainConfig:
    cfg = PretrainConfig.load("cpu-small")
    cfg.encoder = dataclasses.replace(
        cfg.encoder,
        image_size=48,
        num_tokens=32,
        backbone_kwargs={"embed_dim": 48, "depth": 4, "num_heads": 2, "patch_size": 8},
    )
    cfg.train = dataclasses.replace(cfg.train, steps=steps, checkpoint_every=2, log_every=1, max_frames=4)
    return cfg


@pytest.fixture(scope="module")
def episodes():
    return synthetic_dataset(num_cloths=2, trajectories=2, frames=5, image_size=48)


def weights(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def test_zero_steps_save_the_weights_training_starts_from(episodes, tmp_path):
    """`train.steps` 0 is the untrained-encoder row: the encoder pretraining would start from
    (seeded), saved where a trained one goes, every weight as built."""
    cfg = tiny_config(0)
    summary = pretrain(episodes, cfg, tmp_path / "zero", echo=False)
    assert summary["history"] == [] and [r["event"] for r in read_log(tmp_path / "zero" / LOG_FILE)] == ["start", "end"]
    torch.manual_seed(cfg.train.seed)
    initial = PretrainModel(cfg.encoder, cfg.train).encoder.state_dict()
    saved = ClothEncoder.from_pretrained(tmp_path / "zero" / "encoder").state_dict()
    assert saved.keys() == initial.keys() and all(torch.equal(saved[k], initial[k]) for k in saved)
    trained = pretrain(episodes, tiny_config(1), tmp_path / "one", echo=False)
    assert trained["history"] and not all(
        torch.equal(v, initial[k])
        for k, v in ClothEncoder.from_pretrained(tmp_path / "one" / "encoder").state_dict().items()
    )
    with pytest.raises(ConfigError, match="holds a run at step 1"):  # never the trained weights called untrained
        pretrain(episodes, cfg, tmp_path / "one", resume=True, echo=False)


def test_run_logs_checkpoints_and_resumes_exactly(episodes, tmp_path):
    full = pretrain(episodes, tiny_config(3), tmp_path / "full", echo=False)
    assert [r["step"] for r in full["history"]] == [1, 2, 3]
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in full["history"])
    logged = read_log(tmp_path / "full" / LOG_FILE)
    assert [r["event"] for r in logged] == ["start", "train", "train", "train", "end"]
    assert [r["step"] for r in logged[1:4]] == [1, 2, 3] and {"same", "cross", "tau", "lr"} <= set(logged[1])
    tok = ClothEncoder.from_pretrained(tmp_path / "full" / "encoder")
    assert not any("head" in k for k in tok.state_dict())
    assert (
        ClothEncoder.from_pretrained(tmp_path / "full" / TRAIN_STATE_DIR).state_dict().keys() == tok.state_dict().keys()
    )

    # an interrupted run (stopped after step 2, where its train state was saved) resumes exactly
    two = pretrain(episodes, tiny_config(3), tmp_path / "split", echo=False, stop_at=2)
    assert two["start_step"] == 0
    first = weights(tmp_path / "split" / TRAIN_STATE_DIR)
    with pytest.raises(CheckpointError, match="--resume"):
        pretrain(episodes, tiny_config(3), tmp_path / "split", echo=False)
    resumed = pretrain(episodes, tiny_config(3), tmp_path / "split", resume=True, echo=False)
    assert resumed["start_step"] == 2 and [r["step"] for r in resumed["history"]] == [3]
    a = weights(tmp_path / "full" / TRAIN_STATE_DIR)
    b = weights(tmp_path / "split" / TRAIN_STATE_DIR)
    assert a.keys() == b.keys()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a), "resumed run diverged from the full run"
    # training changed the trainable weights
    assert not torch.allclose(first["model.head.net.0.weight"], a["model.head.net.0.weight"])


def test_a_run_in_the_old_checkpoints_layout_resumes(episodes, tmp_path):
    """Runs written before the shared scaffold kept `checkpoints/step_N/` with unprefixed model
    tensors and `optimizer.*` moments; `--resume` continues them."""
    cfg = tiny_config(2)
    pretrain(episodes, cfg, tmp_path / "new", echo=False)
    tensors, config = load_checkpoint(tmp_path / "new" / TRAIN_STATE_DIR)
    old = {k.replace("model.", "", 1).replace("optim.", "optimizer.", 1): v for k, v in tensors.items()}
    state = json.loads((tmp_path / "new" / TRAIN_STATE_DIR / "train_state.json").read_text())
    save_checkpoint(tmp_path / "old" / "checkpoints" / "step_2", old, config, {"train_state": state})
    model = PretrainModel(cfg.encoder, cfg.train)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
    assert restore(tmp_path / "old", model, opt) == 2
    expected = {k[len("model.") :]: v for k, v in tensors.items() if k.startswith("model.")}
    assert all(torch.equal(model.state_dict()[k], v) for k, v in expected.items())


def test_corrupt_or_mismatched_training_checkpoints_fail_clearly(episodes, tmp_path):
    cfg = tiny_config(2)
    pretrain(episodes, cfg, tmp_path, echo=False)
    ckpt = tmp_path / TRAIN_STATE_DIR
    model = PretrainModel(cfg.encoder, cfg.train)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
    assert restore(tmp_path, model, opt) == 2
    state = (ckpt / "train_state.json").read_bytes()
    (ckpt / "train_state.json").unlink()
    with pytest.raises(CheckpointError, match="train_state.json"):
        restore(tmp_path, model, opt)
    (ckpt / "train_state.json").write_bytes(state)
    data = (ckpt / "model.safetensors").read_bytes()
    (ckpt / "model.safetensors").write_bytes(data[:100])
    with pytest.raises(CheckpointError, match="corrupt"):
        restore(tmp_path, model, opt)
    other = dataclasses.replace(cfg.encoder, feature_dim=16)
    pretrain(episodes, PretrainConfig(other, cfg.train), tmp_path / "other", echo=False)
    with pytest.raises(CheckpointError, match="do not match"):
        restore(tmp_path / "other", model, opt)
    (tmp_path / "other" / TRAIN_STATE_DIR / "config.json").write_text('{"kind": "cloth_encoder"}')
    with pytest.raises(CheckpointError, match="not an encoder pretraining"):
        restore(tmp_path / "other", model, opt)


def test_cli_requires_data_and_runs_on_synthetic_episodes(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "x")]) == 2
    assert "pretrain_encoder: no training data" in capsys.readouterr().err
    cfg_path = tmp_path / "cfg.yaml"
    import yaml

    small = tiny_config(2)
    cfg_path.write_text(
        yaml.safe_dump(
            {
                "preset": "cpu-small",
                "encoder": {"image_size": 48, "num_tokens": 32, "backbone_kwargs": small.encoder.backbone_kwargs},
                "train": {"max_frames": 4},
            }
        )
    )
    assert (
        main(
            [
                "--config",
                str(cfg_path),
                "--out",
                str(tmp_path / "run"),
                "--synthetic",
                "2",
                "2",
                "4",
                "--steps",
                "2",
            ]
        )
        == 0
    )
    assert "encoder saved" in capsys.readouterr().out
    assert (tmp_path / "run" / "encoder" / "model.safetensors").is_file()


@pytest.mark.slow
def test_cpu_small_pretraining_lowers_the_loss_and_improves_pck5_on_heldout_cloths(tmp_path):
    """A few minutes of cpu-small pretraining on synthetic cloths beats the untrained encoder."""
    from instant_fold_core.checkpoint import load_strict
    from instant_fold_learning.encoder.data import PKSampler, PretrainDataset
    from instant_fold_learning.encoder.probe import correspondence_probe
    from instant_fold_learning.trainer import read_train_state

    config = PretrainConfig.load("cpu-small")
    config.train.steps = 200
    train = synthetic_dataset(6, 3, 8, config.encoder.image_size)
    heldout = synthetic_dataset(3, 2, 8, config.encoder.image_size, first_cloth=1000)
    torch.manual_seed(config.train.seed)
    initial = PretrainModel(config.encoder, config.train).eval()
    pretrain(train, config, tmp_path, echo=False)
    trained = PretrainModel(config.encoder, config.train).eval()
    load_strict(trained, read_train_state(tmp_path / TRAIN_STATE_DIR).prefixed("model."), tmp_path)

    # the same-cloth loss on a fixed batch at a fixed temperature, without augmentation
    quiet = dataclasses.replace(config.train, color_jitter=False, occlusion_prob=0.0)
    initial.training_config = trained.training_config = quiet
    data = PretrainDataset(train, config.encoder.image_size, max_frames=quiet.max_frames)
    batch = data.batch(PKSampler(data.trajectories, 2, 2, seed=99).batch(0))
    with torch.no_grad():
        before = initial(batch, 0.1, torch.Generator().manual_seed(0))["same"]
        after = trained(batch, 0.1, torch.Generator().manual_seed(0))["same"]
    assert after < before - 0.3, (before, after)

    probe_before = correspondence_probe(initial.encoder, heldout, max_pairs=150)
    probe_after = correspondence_probe(trained.encoder, heldout, max_pairs=150)
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
                "train": {"max_frames": 4, "clothes_per_batch": 1, "trajectories_per_cloth": 2},
            }
        )
    )
    args = ["--config", str(cfg_path), "--data", str(tmp_path / "store"), "--steps", "1"]
    assert main([*args, "--out", str(tmp_path / "run")]) == 0
    assert "encoder saved" in capsys.readouterr().out
    assert main([*args, "--out", str(tmp_path / "run2"), "--split", "validation"]) == 2
    assert "no episode of split 'validation'" in capsys.readouterr().err
    assert main([*args, "--out", str(tmp_path / "run3"), "--data", str(tmp_path / "missing")]) == 2
    assert re.search(r"pretrain_encoder: .*missing", capsys.readouterr().err)
    # images are read per batch: a damaged image chunk found mid-run is a clear error, not a traceback
    for chunk in (tmp_path / "store" / "episodes").glob("ep*/rgb/c/*/0/0/0"):
        chunk.write_bytes(b"not a chunk")
    assert main([*args, "--out", str(tmp_path / "run4")]) == 2
    assert re.search(r"pretrain_encoder: .*episode 'ep[01]' is corrupt", capsys.readouterr().err)
