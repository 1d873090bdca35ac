"""Temporal contrastive pretraining of the cloth tokenizer (paper section 3.1 + appendix B).

One step: strict PK batch -> augment (colour, gripper occlusion) -> tokens -> contrastive head ->
same-cloth loss per cloth pool (or batch-global) and cross-cloth keypoint loss ->
1/2 same + 1/2 cross -> AdamW. Runs single-process or under torchrun (DDP; gloo on CPU, NCCL on
GPU), with bf16 autocast on GPU, safetensors checkpoints that resume exactly, a progress bar
and a JSONL loss log. `main(argv)` is the CLI (`python -m instant_fold_training.pretrain_encoder`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from instant_fold_core.config import Presets, load_file
from instant_fold_core.errors import ConfigError

from ..checkpoint import CheckpointError, load_checkpoint, read_json, save_checkpoint
from ..dataset.schema import Episode
from ..device import resolve_device
from ..geometry import backproject_depth, project_points
from . import losses
from .augment import ColorJitter, occlude_with_grippers, random_gripper_centers
from .configuration import EncoderConfig, preset
from .data import PKSampler, PretrainDataset, TrajectoryBatch
from .modeling import ClothTokenizer, ContrastiveHead, load_strict

PRETRAIN_KIND = "encoder_pretraining"


@dataclass
class TrainConfig:
    """Pretraining hyper-parameters (paper values where it states them; choices in docs/encoder.md)."""

    steps: int = 20000
    clothes_per_batch: int = 12  # P
    trajectories_per_cloth: int = 8  # K
    max_frames: int = 15
    motion_dist: float = 0.02
    motion_frac: float = 0.15
    lr: float = 2e-4
    weight_decay: float = 0.05
    warmup_steps: int = 500
    min_lr_ratio: float = 0.05
    grad_clip: float = 1.0
    sigma: float = 0.01
    tau_start: float = 0.2
    tau_end: float = 0.07
    anneal_temperature: bool = True
    same_weight: float = 0.5
    cross_weight: float = 0.5
    curriculum: tuple[float, float, float] = losses.CURRICULUM_WEIGHTS
    keypoint_radius: float = 0.05
    denominator: str = "cloth"  # "cloth" (paper) or "batch" (global, via the blockwise loss)
    loss_block: int = 4096
    color_jitter: bool = True
    occlusion_prob: float = 0.5
    occlusion_radius: float = 0.03
    random_occluders: int = 1
    amp: bool = True
    seed: int = 0
    log_every: int = 10
    save_every: int = 1000

    def __post_init__(self) -> None:
        self.curriculum = tuple(self.curriculum)
        if self.denominator not in ("cloth", "batch"):
            raise ConfigError(f"denominator: expected 'cloth' or 'batch', got {self.denominator!r}")
        for name in ("steps", "clothes_per_batch", "trajectories_per_cloth", "max_frames"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name}: must be >= 1, got {getattr(self, name)}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class PretrainConfig:
    """Encoder + training configuration, saved with every checkpoint."""

    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    training: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        return {"encoder": self.encoder.to_dict(), "training": self.training.to_dict()}

    @classmethod
    def load(cls, spec: str) -> PretrainConfig:
        """A preset name (`paper`, `cpu-small`) or a YAML file with `encoder:` / `training:` sections,
        optionally starting from `preset: NAME`."""
        if spec in PRESETS:
            return PRESETS.get(spec)
        if not Path(spec).is_file():
            raise ConfigError(f"config: {spec!r} is neither a preset {list(PRESETS)} nor a YAML file")
        return load_file(spec, PRESETS, cls)


def _cpu_small() -> PretrainConfig:
    # 2 cloths x 2 trajectories, a few hundred steps: trainable on two CPU cores.
    training = TrainConfig(
        steps=300,
        clothes_per_batch=2,
        trajectories_per_cloth=2,
        max_frames=8,
        lr=1e-3,
        warmup_steps=20,
        save_every=100,
        log_every=10,
        loss_block=1024,
    )
    return PretrainConfig(preset("cpu-small"), training)


#: Encoder + pretraining hyper-parameters by name (what `--config NAME` selects): `paper` (P=12
#: cloths x K=8 trajectories, 15 frames) and `cpu-small`; each pairs the encoder preset of its name.
PRESETS: Presets[PretrainConfig] = Presets("encoder pretraining")
PRESETS.register("paper", PretrainConfig)
PRESETS.register("cpu-small", _cpu_small)


class PretrainModel(nn.Module):
    """Tokenizer + contrastive head; forward computes the pretraining losses of a batch."""

    def __init__(self, encoder: EncoderConfig, training: TrainConfig) -> None:
        super().__init__()
        self.tokenizer = ClothTokenizer(encoder)
        self.head = ContrastiveHead(encoder.feature_dim, encoder.head_dim)
        self.training_config = training
        self.jitter = ColorJitter()

    def augment(self, batch: TrajectoryBatch, generator: torch.Generator) -> tuple[TrajectoryBatch, torch.Tensor]:
        """Colour jitter and gripper occlusion; returns the batch and occluded pixels [F,S,S]."""
        cfg = self.training_config
        rgb, depth, mask = batch.rgb, batch.depth, batch.mask
        if cfg.color_jitter:
            rgb = self.jitter(rgb, generator)
        covered = torch.zeros_like(mask)
        if cfg.occlusion_prob > 0:
            chosen = torch.rand(rgb.shape[0], generator=generator).to(rgb.device) < cfg.occlusion_prob
            if chosen.any():
                points, valid = backproject_depth(depth, mask, batch.intrinsics)
                centers = batch.gripper
                if cfg.random_occluders > 0:
                    extra = random_gripper_centers(points, valid, cfg.random_occluders, generator=generator)
                    centers = torch.cat([centers, extra], dim=1)
                # the recorded grippers plus random ones hovering over the cloth
                aug = occlude_with_grippers(rgb, depth, mask, batch.intrinsics, centers, cfg.occlusion_radius)
                keep = chosen & (aug[2].flatten(1).sum(1) > 0)
                sel = keep[:, None, None]
                rgb = torch.where(sel[:, None], aug[0], rgb)
                depth, mask, covered = torch.where(sel, aug[1], depth), torch.where(sel, aug[2], mask), aug[3] & sel
        return dataclasses.replace(batch, rgb=rgb, depth=depth, mask=mask), covered

    def forward(self, batch: TrajectoryBatch, tau: float, generator: torch.Generator) -> dict[str, torch.Tensor]:
        cfg = self.training_config
        batch, covered = self.augment(batch, generator)
        use_amp = cfg.amp and batch.rgb.is_cuda
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp):
            tokens = self.tokenizer(batch.rgb, batch.depth, batch.mask, batch.intrinsics, generator=generator)
            z = self.head(tokens.features)
        z = z.float()
        same = self._same_cloth(batch, covered, tokens.positions, z, tokens.valid, tau)
        cross = self._cross_cloth(batch, covered, tokens.positions, z, tokens.valid, tau)
        total = cfg.same_weight * same + cfg.cross_weight * cross
        return {"loss": total, "same": same.detach(), "cross": cross.detach(), "tokens": tokens.valid.sum().detach()}

    def _visible_after_occlusion(
        self,
        batch: TrajectoryBatch,
        covered: torch.Tensor,
        frames: torch.Tensor,
        points: torch.Tensor,
        visible: torch.Tensor,
    ) -> torch.Tensor:
        """Particles/keypoints under a painted gripper are no longer visible."""
        size = covered.shape[-1]
        uv = project_points(points, batch.intrinsics[frames]).round().long().clamp(0, size - 1)
        hidden = covered[frames][torch.arange(len(frames), device=uv.device)[:, None], uv[..., 1], uv[..., 0]]
        return visible & ~hidden

    def _same_cloth(self, batch, covered, pos, z, valid, tau) -> torch.Tensor:
        cfg = self.training_config
        pools, offset = [], 0
        for c in torch.unique(batch.cloth).tolist():
            trajs = torch.unique(batch.trajectory[batch.cloth == c]).tolist()
            frames = torch.nonzero(batch.cloth == c)[:, 0]
            ppos = torch.cat([batch.particles[t] for t in trajs])
            pvis = self._visible_after_occlusion(
                batch, covered, frames, ppos, torch.cat([batch.particle_visible[t] for t in trajs])
            )
            pools.append(
                losses.same_cloth_positives(
                    pos[frames], z[frames], ppos, pvis, cfg.sigma, valid[frames], particle_offset=offset
                )
            )
            offset += ppos.shape[1]
        if cfg.denominator == "batch":
            return losses.batch_global_same_cloth_loss(pools, tau, "blockwise", cfg.loss_block)
        return torch.stack(
            [
                losses.soft_supcon(
                    p["z"], p["valid"], p["positive_sum"], p["positive_weight"], tau, "blockwise", cfg.loss_block
                )
                for p in pools
            ]
        ).mean()

    def _cross_cloth(self, batch, covered, pos, z, valid, tau) -> torch.Tensor:
        cfg = self.training_config
        frames = torch.arange(pos.shape[0], device=pos.device)
        kp_vis = self._visible_after_occlusion(batch, covered, frames, batch.keypoints, batch.keypoint_visible)
        feat, ok = losses.keypoint_features(pos, z, valid, batch.keypoints, kp_vis, cfg.keypoint_radius)
        f, k = ok.shape
        labels = torch.arange(k, device=pos.device).expand(f, k)
        return losses.cross_cloth_keypoint_loss(
            feat.reshape(f * k, -1),
            ok.reshape(-1),
            labels.reshape(-1),
            batch.cloth[:, None].expand(f, k).reshape(-1),
            batch.trajectory[:, None].expand(f, k).reshape(-1),
            tau,
            cfg.curriculum,
        )


def lr_factor(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up, then cosine decay to `min_lr_ratio`."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    t = (step - cfg.warmup_steps) / max(cfg.steps - cfg.warmup_steps, 1)
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(t, 1.0)))


def temperature(step: int, cfg: TrainConfig) -> float:
    if not cfg.anneal_temperature:
        return cfg.tau_end
    return losses.annealed_temperature(step, cfg.steps, cfg.tau_start, cfg.tau_end)


# ----------------------------------------------------------------------------- checkpoints


def save_training_checkpoint(
    directory: Path, step: int, model: PretrainModel, optimizer: torch.optim.Optimizer, config: PretrainConfig
) -> Path:
    """Model (tokenizer + head), AdamW moments and the step, as safetensors + JSON."""
    tensors = {k: v for k, v in model.state_dict().items()}
    state = optimizer.state_dict()
    for pid, entries in state["state"].items():
        for name, value in entries.items():
            tensors[f"optimizer.{pid}.{name}"] = torch.as_tensor(value)
    meta = {"step": step, "param_groups": state["param_groups"]}
    return save_checkpoint(
        directory, tensors, {"kind": PRETRAIN_KIND, **config.to_dict()}, extras={"train_state": meta}
    )


def load_training_checkpoint(directory: Path, model: PretrainModel, optimizer: torch.optim.Optimizer) -> int:
    """Restore model and optimizer from `save_training_checkpoint`; returns the next step."""
    tensors, config = load_checkpoint(directory)
    if config.get("kind") != PRETRAIN_KIND:
        raise CheckpointError(f"checkpoint {directory}: not an encoder pretraining checkpoint")
    meta = read_json(directory, "train_state")
    if "step" not in meta or "param_groups" not in meta:
        raise CheckpointError(f"checkpoint {directory}: train_state.json lacks step/param_groups")
    model_tensors = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    load_strict(model, model_tensors, directory)
    opt_state: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        if key.startswith("optimizer."):
            _, pid, name = key.split(".", 2)
            opt_state.setdefault(int(pid), {})[name] = value
    try:
        optimizer.load_state_dict({"state": opt_state, "param_groups": meta["param_groups"]})
    except (ValueError, KeyError) as exc:
        raise CheckpointError(f"checkpoint {directory}: optimizer state does not match the model ({exc})") from exc
    return int(meta["step"])


def latest_checkpoint(output: Path) -> Path | None:
    ckpts = sorted((output / "checkpoints").glob("step_*"), key=lambda p: int(p.name.split("_")[1]))
    return ckpts[-1] if ckpts else None


# ----------------------------------------------------------------------------- loop


def _distributed() -> tuple[int, int]:
    """(rank, world size); initialises the process group under torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return (dist.get_rank(), world) if world > 1 else (0, 1)


def pretrain(
    episodes: Sequence[Episode],
    config: PretrainConfig,
    output: str | Path,
    device: str | None = None,
    resume: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Train the encoder on `episodes`; writes checkpoints, `metrics.jsonl` and `tokenizer/` to
    `output`. `resume`: a checkpoint directory or "auto" (latest under output). Returns a summary."""
    rank, world = _distributed()
    tcfg = config.training
    device = resolve_device(device or "auto")
    if device.type == "cuda" and world > 1 and device.index is None:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.manual_seed(tcfg.seed)
    output = Path(output)
    data = PretrainDataset(episodes, config.encoder.image_size, tcfg.motion_dist, tcfg.motion_frac, tcfg.max_frames)
    sampler = PKSampler(data.trajectories, tcfg.clothes_per_batch, tcfg.trajectories_per_cloth, tcfg.seed)
    model = PretrainModel(config.encoder, tcfg).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=tcfg.lr, weight_decay=tcfg.weight_decay)
    start = 0
    if resume:
        path = latest_checkpoint(output) if resume == "auto" else Path(resume)
        if path is not None:
            start = load_training_checkpoint(path, model, optimizer)
    ddp = DistributedDataParallel(model) if world > 1 else None
    runner = ddp or model
    log = None
    if rank == 0:
        output.mkdir(parents=True, exist_ok=True)
        log = (output / "metrics.jsonl").open("a")
    history: list[dict[str, float]] = []
    bar = tqdm(range(start, tcfg.steps), disable=not progress or rank != 0, desc="pretrain encoder")
    tokens_seen, t0 = 0, time.perf_counter()
    for step in bar:
        batch = data.batch(sampler.batch(step * world + rank)).to(device)
        gen = torch.Generator().manual_seed(tcfg.seed * 1_000_003 + step * 131 + rank)
        tau = temperature(step, tcfg)
        for group in optimizer.param_groups:
            group["lr"] = tcfg.lr * lr_factor(step, tcfg)
        out = runner(batch, tau, gen)
        optimizer.zero_grad(set_to_none=True)
        out["loss"].backward()
        if tcfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, tcfg.grad_clip)
        optimizer.step()
        tokens_seen += int(out["tokens"])
        record = {
            "step": step,
            "loss": float(out["loss"].detach()),
            "same": float(out["same"]),
            "cross": float(out["cross"]),
            "tau": tau,
            "lr": optimizer.param_groups[0]["lr"],
            "tokens_per_s": tokens_seen * world / (time.perf_counter() - t0),
        }
        history.append(record)
        if log is not None and (step % tcfg.log_every == 0 or step == tcfg.steps - 1):
            log.write(json.dumps(record) + "\n")
            log.flush()
            bar.set_postfix(loss=f"{record['loss']:.3f}", tau=f"{tau:.3f}")
        last = step == tcfg.steps - 1
        if rank == 0 and ((step + 1) % tcfg.save_every == 0 or last):
            save_training_checkpoint(output / "checkpoints" / f"step_{step + 1}", step + 1, model, optimizer, config)
    if rank == 0:
        model.tokenizer.save_pretrained(output / "tokenizer")
        log.close()
    if world > 1:
        dist.barrier()
    return {"history": history, "start_step": start, "rank": rank, "world_size": world}


# ----------------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pretrain_encoder", description=__doc__.split("\n")[0])
    p.add_argument("--config", default="cpu-small", help="preset (paper, cpu-small) or YAML file")
    p.add_argument("--output", required=True, help="run directory (checkpoints, metrics.jsonl, tokenizer/)")
    data = p.add_mutually_exclusive_group()
    data.add_argument("--data", help="episode store written by `python -m instant_fold_sim.generate`")
    data.add_argument(
        "--synthetic",
        nargs=3,
        type=int,
        metavar=("CLOTHS", "TRAJECTORIES", "FRAMES"),
        help="train on generated synthetic cloth episodes instead of a dataset",
    )
    p.add_argument("--split", default="train", help="garment split of the store to train on (train, heldout, all)")
    p.add_argument("--steps", type=int, help="override training.steps")
    p.add_argument("--device", help="auto (default: cuda if available), cpu, cuda, cuda:1")
    p.add_argument("--resume", help="checkpoint directory or 'auto'")
    p.add_argument("--backbone-checkpoint", help="official DINOv3 weights (.pth/.safetensors)")
    p.add_argument("--no-progress", action="store_true")
    return p


def _store_episodes(path: str, split: str) -> list[Episode]:
    """The episodes of one garment split of a store (read eagerly: cpu-small-sized stores)."""
    from ..dataset.zarr_store import EpisodeStore, StoreError

    try:
        store = EpisodeStore(path)
        names = [n for n in store.names() if split == "all" or store.meta(n).get("split") == split]
    except StoreError as exc:
        raise SystemExit(f"pretrain_encoder: {exc}") from exc
    if not names:
        raise SystemExit(f"pretrain_encoder: store {path} has no episode of split {split!r}")
    return [store.read(n) for n in names]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        config = PretrainConfig.load(args.config)
        if args.steps is not None:  # replace() re-runs the checks that --steps must pass too
            config.training = dataclasses.replace(config.training, steps=args.steps)
    except ConfigError as exc:
        raise SystemExit(f"pretrain_encoder: {exc}") from exc
    if args.backbone_checkpoint:
        config.encoder.backbone_checkpoint = args.backbone_checkpoint
    if args.data:
        episodes = _store_episodes(args.data, args.split)
    elif not args.synthetic:
        raise SystemExit("no training data: pass --data STORE (or --synthetic CLOTHS TRAJECTORIES FRAMES)")
    else:
        from .synthetic import synthetic_dataset

        cloths, trajs, frames = args.synthetic
        episodes = synthetic_dataset(cloths, trajs, frames, config.encoder.image_size, seed=config.training.seed)
    summary = pretrain(episodes, config, args.output, args.device, args.resume, progress=not args.no_progress)
    if summary["rank"] == 0 and summary["history"]:
        first, last = summary["history"][0], summary["history"][-1]
        print(
            f"steps {summary['start_step']}->{last['step'] + 1}: loss {first['loss']:.4f} -> {last['loss']:.4f}, "
            f"{last['tokens_per_s']:.0f} tokens/s; tokenizer saved to {Path(args.output) / 'tokenizer'}"
        )
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
