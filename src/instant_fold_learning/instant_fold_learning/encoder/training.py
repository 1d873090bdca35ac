"""Temporal contrastive pretraining of the cloth encoder (paper section 3.1 + appendix B).

One step: strict PK batch -> augment (colour, gripper occlusion) -> tokens -> contrastive head ->
same-cloth loss per cloth pool (or batch-global) and cross-cloth keypoint loss ->
1/2 same + 1/2 cross -> AdamW. Runs single-process or under torchrun (DDP; gloo on CPU, NCCL on
GPU), with bf16 autocast on GPU, a train state that resumes exactly and a JSONL log: the shared
scaffold of `instant_fold_learning.trainer`. Its CLI is `instant_fold_learning.pretrain_encoder`
(`python -m instant_fold_learning.pretrain_encoder`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from instant_fold_core.checkpoint import CheckpointError
from instant_fold_core.config import Presets, check_numbers, load_file
from instant_fold_core.dataset.schema import Episode
from instant_fold_core.errors import ConfigError
from instant_fold_core.geometry import backproject_depth, project_points
from instant_fold_learning.trainer import (
    MODEL_PREFIX,
    OPTIM_PREFIX,
    TRAIN_STATE_DIR,
    RunLog,
    TrainState,
    check_finite_loss,
    check_new_run,
    init_distributed,
    learning_rate,
    read_train_state,
    save_train_state,
)

from . import losses
from .augment import ColorJitter, occlude_with_grippers, random_gripper_centers
from .configuration import EncoderConfig, preset
from .data import EpisodeSource, PKSampler, PretrainDataset, TrajectoryBatch
from .modeling import ClothEncoder, ContrastiveHead

PRETRAIN_KIND = "encoder_pretraining"
#: The deployable output of a run: the encoder the policy side loads.
ENCODER_DIR = "encoder"


@dataclass
class TrainingConfig:
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
    occlusion_radius_m: float = 0.03
    random_occluders: int = 1
    amp: bool = True
    seed: int = 0
    log_every: int = 10
    checkpoint_every: int = 1000

    def __post_init__(self) -> None:
        self.curriculum = tuple(self.curriculum)

    def validate(self) -> TrainingConfig:
        """Check every field (the policy's `TrainingConfig.validate` does the same for its trainer)."""
        if self.denominator not in ("cloth", "batch"):
            raise ConfigError(f"train.denominator: expected 'cloth' or 'batch', got {self.denominator!r}")
        check_numbers(
            "train",
            self,
            positive=(
                *("clothes_per_batch", "trajectories_per_cloth", "max_frames"),
                *("lr", "sigma", "tau_start", "tau_end", "keypoint_radius"),
                *("loss_block", "log_every", "checkpoint_every"),
            ),
            non_negative=(
                *("steps", "weight_decay", "warmup_steps", "grad_clip", "same_weight", "cross_weight", "motion_dist"),
                *("occlusion_radius_m", "random_occluders"),
            ),
            unit_interval=("min_lr_ratio", "motion_frac", "occlusion_prob"),
        )
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class PretrainConfig:
    """Encoder + training configuration, saved with every checkpoint."""

    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    train: TrainingConfig = field(default_factory=TrainingConfig)

    def validate(self) -> PretrainConfig:
        self.train.validate()
        return self

    def to_dict(self) -> dict[str, Any]:
        return {"encoder": self.encoder.to_dict(), "train": self.train.to_dict()}

    @classmethod
    def load(cls, spec: str) -> PretrainConfig:
        """A preset name (`paper`, `cpu-small`) or a YAML file with `encoder:` / `train:` sections,
        optionally starting from `preset: NAME`."""
        if spec in PRESETS:
            return PRESETS.get(spec).validate()
        if not Path(spec).is_file():
            raise ConfigError(f"config: {spec!r} is neither a preset {list(PRESETS)} nor a YAML file")
        return load_file(spec, PRESETS, cls).validate()


def _cpu_small() -> PretrainConfig:
    # 2 cloths x 2 trajectories, a few hundred steps: trainable on two CPU cores.
    train = TrainingConfig(
        steps=300,
        clothes_per_batch=2,
        trajectories_per_cloth=2,
        max_frames=8,
        lr=1e-3,
        warmup_steps=20,
        checkpoint_every=100,
        log_every=10,
        loss_block=1024,
    )
    return PretrainConfig(preset("cpu-small"), train)


#: Encoder + pretraining hyper-parameters by name (what `--config NAME` selects): `paper` (P=12
#: cloths x K=8 trajectories, 15 frames) and `cpu-small`; each pairs the encoder preset of its name.
PRESETS: Presets[PretrainConfig] = Presets("encoder pretraining")
PRESETS.register("paper", PretrainConfig)
PRESETS.register("cpu-small", _cpu_small)


class PretrainModel(nn.Module):
    """Encoder + contrastive head; forward computes the pretraining losses of a batch."""

    def __init__(self, encoder: EncoderConfig, training: TrainingConfig) -> None:
        super().__init__()
        self.encoder = ClothEncoder(encoder)
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
                aug = occlude_with_grippers(rgb, depth, mask, batch.intrinsics, centers, cfg.occlusion_radius_m)
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
            tokens = self.encoder(batch.rgb, batch.depth, batch.mask, batch.intrinsics, generator=generator)
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


def temperature(step: int, cfg: TrainingConfig) -> float:
    if not cfg.anneal_temperature:
        return cfg.tau_end
    return losses.annealed_temperature(step, cfg.steps, cfg.tau_start, cfg.tau_end)


# ----------------------------------------------------------------------------- train state


def restore(out: Path, model: PretrainModel, optimizer: torch.optim.Optimizer) -> int:
    """Continue from `<out>/train_state` (or the latest `checkpoints/step_N/` of a run written
    before the shared scaffold); returns the step to continue from, 0 when there is nothing."""
    if (out / TRAIN_STATE_DIR).is_dir():
        state = read_train_state(out / TRAIN_STATE_DIR)
    elif (legacy := _legacy_train_state(out)) is not None:
        state = legacy
    else:
        return 0
    if state.config.get("kind") != PRETRAIN_KIND:
        raise CheckpointError(f"checkpoint {state.directory}: not an encoder pretraining checkpoint")
    return state.restore(model, optimizer)


def _legacy_train_state(out: Path) -> TrainState | None:
    """The latest `checkpoints/step_N/` of an older run (model tensors unprefixed, AdamW moments as
    `optimizer.<param>.<name>`), renamed into the shared layout, or None."""
    steps = sorted((out / "checkpoints").glob("step_*"), key=lambda p: int(p.name.split("_")[1]))
    if not steps:
        return None
    state = read_train_state(steps[-1])
    state.tensors = {
        (OPTIM_PREFIX + k[len("optimizer.") :] if k.startswith("optimizer.") else MODEL_PREFIX + k): v
        for k, v in state.tensors.items()
    }
    return state


# ----------------------------------------------------------------------------- loop


def pretrain(
    episodes: Sequence[Episode] | EpisodeSource,
    config: PretrainConfig,
    out: str | Path,
    device: str = "auto",
    resume: bool = False,
    echo: bool = True,
    stop_at: int | None = None,
) -> dict[str, Any]:
    """Train the encoder on `episodes`; writes `train_state/`, `log.jsonl` and `encoder/` (the
    deployable encoder) to `out`. `resume`: continue the run in `out`. `stop_at` ends this run
    early at that step (after saving the train state), as a preempted job would; the schedules
    still follow `train.steps`. `train.steps` 0 saves the weights training would start from (seeded
    by `train.seed`): the paper's untrained-encoder ablation, from the same command. Returns a summary."""
    out = Path(out)
    tcfg = config.validate().train
    check_new_run(out, resume, (ENCODER_DIR, "checkpoints"))
    where, device = init_distributed(device)
    torch.manual_seed(tcfg.seed)
    data = PretrainDataset(episodes, config.encoder.image_size, tcfg.motion_dist, tcfg.motion_frac, tcfg.max_frames)
    sampler = PKSampler(data.trajectories, tcfg.clothes_per_batch, tcfg.trajectories_per_cloth, tcfg.seed)
    model = PretrainModel(config.encoder, tcfg).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=tcfg.lr, weight_decay=tcfg.weight_decay)
    start = restore(out, model, optimizer) if resume else 0
    if start > tcfg.steps:  # e.g. `steps: 0` (the untrained encoder) over a trained run: never its weights
        raise ConfigError(f"train.steps {tcfg.steps}: {out} holds a run at step {start} already (choose another --out)")
    runner = DistributedDataParallel(model) if where.world_size > 1 else model
    log = RunLog(out, where, "encoder", echo)
    log.write({"event": "start", "config": config.encoder.name, "world_size": where.world_size, "start_step": start})
    history: list[dict[str, Any]] = []
    tokens_seen, t0 = 0, time.perf_counter()
    end = min(tcfg.steps, stop_at) if stop_at else tcfg.steps
    for step in range(start, end):
        batch = data.batch(sampler.batch(step * where.world_size + where.rank)).to(device)
        gen = torch.Generator().manual_seed(tcfg.seed * 1_000_003 + step * 131 + where.rank)
        tau = temperature(step, tcfg)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, tcfg.lr, tcfg.steps, tcfg.warmup_steps, tcfg.min_lr_ratio)
        out_step = runner(batch, tau, gen)
        check_finite_loss(out_step["loss"], step)
        optimizer.zero_grad(set_to_none=True)
        out_step["loss"].backward()
        if tcfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, tcfg.grad_clip)
        optimizer.step()
        tokens_seen += int(out_step["tokens"])
        done = step + 1
        record = {
            "event": "train",
            "step": done,
            "loss": float(out_step["loss"].detach()),
            "same": float(out_step["same"]),
            "cross": float(out_step["cross"]),
            "tau": tau,
            "lr": optimizer.param_groups[0]["lr"],
            "tokens_per_s": tokens_seen * where.world_size / (time.perf_counter() - t0),
            # since this run's first step: the difference of two records is their steps' wall time
            "elapsed_s": time.perf_counter() - t0,
        }
        history.append(record)
        if step % tcfg.log_every == 0 or done in (tcfg.steps, end):
            log.write(
                record,
                f"step {done}: loss {record['loss']:.4f} same {record['same']:.4f} cross {record['cross']:.4f} "
                f"tau {tau:.3f} lr {record['lr']:.2e} {record['tokens_per_s']:.0f} tokens/s",
            )
        if where.is_main and (done % tcfg.checkpoint_every == 0 or done in (tcfg.steps, end)):
            save_train_state(out, done, model, optimizer, {"kind": PRETRAIN_KIND, **config.to_dict()})
    if where.is_main:
        model.encoder.save_pretrained(out / ENCODER_DIR)
        log.write({"event": "end", "step": max(start, end), **({"loss": history[-1]["loss"]} if history else {})})
    if where.world_size > 1:
        dist.barrier()
    return {"history": history, "start_step": start, "rank": where.rank, "world_size": where.world_size}
