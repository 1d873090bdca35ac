"""Policy training: rectified flow + gripper BCE, EMA, DDP (torchrun), mixed precision, resumable.

Run on one process or under torchrun (gloo on CPU, NCCL on GPU):

    python -m instant_fold_learning.train_policy --config cpu-small --synthetic 2 --out runs/policy
    torchrun --nproc_per_node 2 -m instant_fold_learning.train_policy --config paper --data tokens/ --out runs/p

Every random draw of a step comes from a generator seeded by (seed, step, rank), so a resumed run
continues exactly as an uninterrupted one would. `<out>/checkpoint` holds the deployable policy
(EMA weights + config + normalisers); `<out>/train_state` (the shared layout of
`instant_fold_learning.trainer`, plus `ema.*` weights and `normalizers.json`) holds what resuming needs,
`<out>/log.jsonl` the log.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from instant_fold_core.plotting import save_figure
from instant_fold_learning.policy.configuration import InstantFoldPolicyConfig, TrainingConfig
from instant_fold_learning.policy.data import (
    ActionTargets,
    PolicyDataError,
    TokenizedEpisode,
    approaching_grasp,
    collate,
    straight_approach,
)
from instant_fold_learning.policy.dataset import PolicyDataset
from instant_fold_learning.policy.decoder import TargetCondition
from instant_fold_learning.policy.inference import absolute_actions, sample_cached
from instant_fold_learning.policy.instruction import Vocabulary
from instant_fold_learning.policy.modeling import InstantFoldPolicy, policy_summary
from instant_fold_learning.policy.synthetic import MODES, synthetic_episodes
from instant_fold_learning.trainer import (
    TRAIN_STATE_DIR,
    RunLog,
    check_finite_loss,
    check_new_run,
    init_distributed,
    learning_rate,
    read_log,
    read_train_state,
    save_train_state,
)

#: The deployable policy of a run (what the policy server loads).
CHECKPOINT_DIR = "checkpoint"
#: The cosine schedule's floor, as a fraction of `train.lr`.
MIN_LR_RATIO = 0.1


def step_generators(seed: int, step: int, rank: int) -> tuple[np.random.Generator, torch.Generator]:
    """Per-(step, rank) generators: data sampling/augmentation (numpy) and flow noise/time (torch)."""
    rng = np.random.default_rng([seed, step, rank])
    gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
    return rng, gen


def policy_learning_rate(cfg: InstantFoldPolicyConfig, step: int) -> float:
    """The shared schedule with the policy's floor: cosine decay to 10 % of the base rate (the
    paper does not specify)."""
    tr = cfg.train
    return learning_rate(step, tr.lr, tr.steps, tr.warmup_steps, MIN_LR_RATIO)


class EMA:
    """Exponential moving average of the weights (used for evaluation and deployment)."""

    def __init__(self, model: torch.nn.Module, decay: float) -> None:
        self.decay = decay
        self.state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    @torch.no_grad()
    def update(self, model: torch.nn.Module, step: int) -> None:
        decay = min(self.decay, (1 + step) / (10 + step))  # warm-up so early EMA is not the random init
        for k, v in model.state_dict().items():
            if v.is_floating_point():
                self.state[k].lerp_(v.detach(), 1 - decay)
            else:
                self.state[k].copy_(v)


def save_run_state(
    out: Path,
    cfg: InstantFoldPolicyConfig,
    policy: InstantFoldPolicy,
    ema: EMA,
    optimizer: torch.optim.Optimizer,
    step: int,
) -> None:
    """The shared train state plus the EMA weights (`ema.*`) and the normalisers."""
    save_train_state(
        out,
        step,
        policy,
        optimizer,
        cfg.to_dict(),
        tensors={f"ema.{k}": v for k, v in ema.state.items()},
        extras={"normalizers": policy.normalizers.to_dict()},
    )


def restore_run_state(out: Path, policy: InstantFoldPolicy, ema: EMA, optimizer: torch.optim.Optimizer) -> int:
    """Restore `save_run_state`; returns the step to continue from."""
    state = read_train_state(out / TRAIN_STATE_DIR)
    policy.normalizers.load_dict(state.json("normalizers"))
    step = state.restore(policy, optimizer)
    device = next(policy.parameters()).device
    ema.state = {k: v.to(device) for k, v in state.prefixed("ema.").items()}
    return step


@torch.no_grad()
def action_error(policy: InstantFoldPolicy, dataset: PolicyDataset, indices: list[int], seed: int = 0) -> float:
    """Mean distance (m) between sampled absolute position targets and the expert's, over `indices`."""
    rng, gen = step_generators(seed, 0, 0)
    device = next(policy.parameters()).device
    batch = collate([dataset.sample(i, rng, augment=False) for i in indices]).to(device)
    was_training = policy.training
    policy.eval()
    sampled = sample_cached(policy, batch.obs, policy.encode_context(batch.demo), gen)
    pred, _, _ = absolute_actions(policy, sampled, batch.obs.arm_state)
    policy.train(was_training)
    truth = batch.obs.arm_state[:, None, :, :3] + torch.cumsum(batch.target.traj_delta, 1)
    return float((pred - truth).norm(dim=-1).mean())


def checked_vocabulary(dataset: PolicyDataset, cfg: InstantFoldPolicyConfig) -> Vocabulary:
    """The training instructions' vocabulary, refused when the language variant's tables cannot hold it."""
    longest = max(len(ids) for ids in dataset.instruction_ids)
    if len(dataset.vocabulary) + 1 > cfg.model.vocabulary_size or longest > cfg.model.max_instruction_words:
        raise PolicyDataError(
            f"instructions: {len(dataset.vocabulary)} words (+ padding) and up to {longest} per instruction; "
            f"model.vocabulary_size={cfg.model.vocabulary_size}, max_instruction_words="
            f"{cfg.model.max_instruction_words}"
        )
    return dataset.vocabulary


def load_episodes(data: str | None, synthetic: int | None, cfg: InstantFoldPolicyConfig) -> list[TokenizedEpisode]:
    """Tokenised episodes from a directory of .npz files, or synthetic folding episodes."""
    if synthetic:
        return synthetic_episodes(
            synthetic, tuple(MODES)[:2], 2, cfg.model.cloth_feature_dim, cfg.model.num_cloth_tokens
        )
    if not data:
        raise PolicyDataError("no training data: pass --data DIR (tokenised .npz episodes) or --synthetic N")
    files = sorted(Path(data).glob("*.npz"))
    if not files:
        raise PolicyDataError(f"--data {data}: no .npz tokenised episodes found")
    return [TokenizedEpisode.load(f) for f in files]


def train(
    cfg: InstantFoldPolicyConfig,
    episodes: list[TokenizedEpisode],
    out: str | Path,
    device: str = "auto",
    resume: bool = False,
    eval_samples: int = 32,
    echo: bool = True,
    stop_at: int | None = None,
) -> dict[str, Any]:
    """Train (or resume) a policy; returns a summary with the final losses and action errors.

    `stop_at` ends this run early at that step (after checkpointing), as a preempted job would;
    the learning-rate schedule still follows `cfg.train.steps`.
    """
    out = Path(out)
    cfg.validate()
    check_new_run(out, resume, (CHECKPOINT_DIR,))
    where, torch_device = init_distributed(device)
    tr = cfg.train
    # Batch size and demonstrations per batch are global: each rank draws its share.
    demos = -(-tr.demos_per_batch // where.world_size) if tr.demos_per_batch else 0
    dataset = PolicyDataset(
        episodes,
        cfg.model.horizon,
        dataclasses.replace(tr, demos_per_batch=demos),
        instructions=cfg.model.conditioning == "language",
    )
    n, d = episodes[0].cloth_features.shape[1:]
    if (n, d) != (cfg.model.num_cloth_tokens, cfg.model.cloth_feature_dim):
        raise PolicyDataError(
            f"cloth_features: data has N={n} tokens of D={d}, config expects "
            f"N={cfg.model.num_cloth_tokens}, D={cfg.model.cloth_feature_dim}"
        )
    torch.manual_seed(tr.seed)  # identical initial weights on every rank
    policy = InstantFoldPolicy(cfg.model)
    dataset.calibrate(policy.normalizers)
    policy.mode_ids = dataset.mode_ids
    if cfg.model.conditioning == "language":
        policy.vocabulary = checked_vocabulary(dataset, cfg)
    policy.to(torch_device)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=tr.lr, weight_decay=tr.weight_decay)
    ema = EMA(policy, tr.ema_decay)
    start = 0
    if resume and (out / TRAIN_STATE_DIR).is_dir():
        start = restore_run_state(out, policy, ema, optimizer)
    model = DistributedDataParallel(policy) if where.world_size > 1 else policy
    per_rank = max(1, tr.batch_size // where.world_size)
    eval_idx = list(np.random.default_rng(tr.seed).choice(len(dataset), min(eval_samples, len(dataset)), replace=False))
    use_amp = tr.amp and torch_device.type == "cuda"
    log = RunLog(out, where, "policy", echo)
    log.write(
        {
            "event": "start",
            "config": cfg.name,
            "parameters": policy_summary(policy),
            "world_size": where.world_size,
            "samples": len(dataset),
            "episodes": len(episodes),
            "start_step": start,
        }
    )
    history: dict[str, Any] = {"initial_action_error": action_error(policy, dataset, eval_idx)} if start == 0 else {}
    tic, losses = time.perf_counter(), None
    end = min(tr.steps, stop_at) if stop_at else tr.steps
    for step in range(start, end):
        rng, gen = step_generators(tr.seed, step, where.rank)
        batch = dataset.draw_batch(rng, per_rank).to(torch_device)
        for group in optimizer.param_groups:
            group["lr"] = policy_learning_rate(cfg, step)
        teacher = None
        if cfg.model.keypose_head == "anchored":
            teacher = teacher_condition(batch.target, tr, gen)
            teacher, shifted = shift_teacher_targets(batch.target, batch.obs.arm_state, teacher, tr, gen)
            batch = dataclasses.replace(batch, target=shifted)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp):
            losses = model(batch, generator=gen, repeats=tr.noise_samples, teacher=teacher)
        check_finite_loss(losses["loss"], step)
        optimizer.zero_grad(set_to_none=True)
        losses["loss"].backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), tr.grad_clip)
        optimizer.step()
        ema.update(policy, step)
        done = step + 1
        if where.is_main and (done % tr.log_every == 0 or done in (tr.steps, end)):
            record = {
                "event": "train",
                "step": done,
                "lr": policy_learning_rate(cfg, step),
                "grad_norm": float(grad_norm),
                "steps_per_s": tr.log_every / max(1e-9, time.perf_counter() - tic),
                **{k: float(v.detach()) for k, v in losses.items()},
            }
            if done % tr.checkpoint_every == 0 or done in (tr.steps, end):
                record["action_error_m"] = action_error(policy, dataset, eval_idx)
            log.write(record, _summary(record))
            tic = time.perf_counter()
        if done % tr.checkpoint_every == 0 or done in (tr.steps, end):
            if where.is_main:
                save_run_state(out, cfg, policy, ema, optimizer, done)
                policy.save_pretrained(out / CHECKPOINT_DIR, cfg, ema.state)
            if where.world_size > 1:
                dist.barrier()
    if where.world_size > 1:
        history["ranks_in_sync"] = ranks_in_sync(policy)
    if where.is_main and losses is not None:
        ema_policy, _ = InstantFoldPolicy.from_pretrained(out / CHECKPOINT_DIR, torch_device)
        history.update(
            {
                "final_loss": float(losses["loss"].detach()),
                "final_action_error": action_error(policy, dataset, eval_idx),
                "ema_action_error": action_error(ema_policy, dataset, eval_idx),
                "world_size": where.world_size,
            }
        )
        log.write({"event": "end", **history})
    return history


def teacher_condition(target: ActionTargets, tr: TrainingConfig, gen: torch.Generator) -> TargetCondition:
    """The anchored head's trajectory condition for a training batch: the true next-event targets,
    jittered by `anchor_teacher_noise_m`, on a `anchor_teacher_prob` share of the samples (the
    others are conditioned on the head's own prediction, as at inference)."""
    b = target.event_position.shape[0]
    jitter = torch.randn(target.event_position.shape, generator=gen) * tr.anchor_teacher_noise_m
    forced = torch.rand(b, generator=gen) < tr.anchor_teacher_prob
    device = target.event_position.device
    return TargetCondition(target.event_position + jitter.to(device), target.event_valid, forced.to(device))


#: An arm whose expert chunk moves less than this is waiting for its turn, not approaching.
APPROACH_MIN_MOVE_M = 0.02


def approaching_arms(target: ActionTargets, arm_state: torch.Tensor) -> torch.Tensor:
    """bool [B, 2]: arms on their way to their next grasp (`approaching_grasp`) whose expert chunk
    moves at least `APPROACH_MIN_MOVE_M` (an arm that waits while the other folds has a grasp ahead
    too, and must keep waiting)."""
    moving = target.traj_delta.sum(1).norm(dim=-1) >= APPROACH_MIN_MOVE_M
    approaching = approaching_grasp(arm_state[..., 3], target.traj_gripper, target.event_valid, target.event_openness)
    return approaching & moving


def shift_teacher_targets(
    target: ActionTargets,
    arm_state: torch.Tensor,
    condition: TargetCondition,
    tr: TrainingConfig,
    gen: torch.Generator,
) -> tuple[TargetCondition, ActionTargets]:
    """Teach the trajectory to follow the target it is conditioned on (`anchor_teacher_shift_m`):
    each approaching arm (`approaching_arms`) of a teacher-forced sample gets its condition moved by up to that distance
    in the image plane, and its chunk relabelled as a straight move from the current state to the
    moved target at the expert's pace (at least `recovery_min_speed_m` per step), stopping there.
    The anchored head's own labels (the true event positions) are left as they are: the head still
    learns where the cloth says the target is."""
    if tr.anchor_teacher_shift_m <= 0 or condition.forced is None:
        return condition, target
    b, horizon = target.traj_delta.shape[:2]
    arms = approaching_arms(target, arm_state) & condition.forced[:, None]
    angle = torch.rand((b, 2), generator=gen) * (2 * math.pi)
    radius = tr.anchor_teacher_shift_m * torch.rand((b, 2), generator=gen).sqrt()  # uniform over the disc
    device, dtype = condition.position.device, condition.position.dtype
    shift = torch.stack((radius * angle.cos(), radius * angle.sin(), torch.zeros_like(radius)), -1)
    position = condition.position + torch.where(arms[..., None], shift.to(device, dtype), 0.0)
    start = arm_state[..., :3].to(dtype)
    pace = target.traj_delta.norm(dim=-1).mean(1).clamp_min(tr.recovery_min_speed_m)  # [B, 2]
    deltas = straight_approach(start, position, pace, horizon).movedim(0, 1)  # [B, H, 2, 3]
    traj = torch.where(arms[:, None, :, None], deltas.to(target.traj_delta.dtype), target.traj_delta)
    return TargetCondition(position, condition.valid, condition.forced), dataclasses.replace(target, traj_delta=traj)


def ranks_in_sync(policy: InstantFoldPolicy) -> bool:
    """Whether every rank holds the same weights (DDP must keep them identical)."""
    flat = torch.cat([p.detach().flatten().double() for p in policy.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    return all(torch.equal(gathered[0], g) for g in gathered[1:])


def _summary(record: dict[str, Any]) -> str:
    """The printed line of a `train` record."""
    extra = f" action_err {record['action_error_m'] * 100:.2f} cm" if "action_error_m" in record else ""
    return (
        f"step {record['step']}: loss {record['loss']:.4f} flow {record['flow']:.4f} "
        f"gripper {record['gripper']:.4f} lr {record['lr']:.2e} {record['steps_per_s']:.1f} it/s{extra}"
    )


def plot_training_curves(log_path: str | Path, png_path: str | Path) -> Path:
    """Loss components and action error vs step, from a training log (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = read_log(Path(log_path))
    train = [r for r in records if r["event"] == "train"]
    if not train:
        raise PolicyDataError(f"{log_path}: no training records to plot")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    steps = [r["step"] for r in train]
    for key in ("loss", "flow", "gripper", "keypose_flow", "keypose_gripper", "anchor_pointer", "anchor_position"):
        if key in train[0]:
            axes[0].plot(steps, [r[key] for r in train], label=key)
    axes[0].set_yscale("log")
    axes[0].set_xlabel("step")
    axes[0].set_title("training losses")
    axes[0].legend()
    evals = [(r["step"], r["action_error_m"]) for r in train if "action_error_m" in r]
    evals += [(0, r["initial_action_error"]) for r in records if "initial_action_error" in r]
    evals.sort()
    axes[1].plot([s for s, _ in evals], [e * 100 for _, e in evals], marker="o")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("step")
    axes[1].set_ylabel("cm")
    axes[1].set_title("action error (sampled chunk vs expert, 10 Euler steps)")
    return save_figure(fig, png_path)
