"""The in-context flow-matching policy (paper section "In-Context Policy Learning", appendix C).

The forward computation is split along what changes when, because that is what makes inference
fast:
  1. `encode_context(demo)`: once per demonstration (context encoder, summary and state-event
     tokens);
  2. `prepare_scene(obs, context)`: once per query (current scene fused with the context by
     cross-attention, scene-context keys/values for every decoder block, proprio conditioning);
  3. `velocity(scene, z, t)`: once per Euler step (only the action branch).
Training calls all three for every sample (`compute_loss`), so the cached and uncached paths
are the same code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from instant_fold_core.checkpoint import CheckpointError, load_checkpoint, read_json, save_checkpoint
from instant_fold_core.errors import ConfigError
from instant_fold_core.registration import register_planar
from instant_fold_learning.policy.anchor import AnchorHead, AnchorOutput, anchor_losses
from instant_fold_learning.policy.attention import Block, KeyValue, Rope3D
from instant_fold_learning.policy.configuration import InstantFoldPolicyConfig, PolicyConfig
from instant_fold_learning.policy.context_encoder import (
    ContextEncoder,
    SceneTokenizer,
    StateEventEncoder,
    SummaryTokens,
    masked_centroid,
)
from instant_fold_learning.policy.data import ActionTargets, DemoTokens, ObservationTokens, PolicyBatch
from instant_fold_learning.policy.decoder import ActionDenoiser, DecoderOutput, TargetCondition
from instant_fold_learning.policy.instruction import PAD, InstructionError, Vocabulary
from instant_fold_learning.policy.normalization import ActionNormalizers, NormalizerError
from instant_fold_learning.policy.progress import ProgressBias, event_counts

#: Point maps between the current scene's and the demonstration's frames ([B, L, 3] -> [B, L, 3]).
PointMap = Callable[[torch.Tensor], torch.Tensor]
#: The anchored head's losses (summed, then weighted by `keypose_loss_weight`).
ANCHOR_LOSSES = ("anchor_pointer", "anchor_position", "anchor_openness", "anchor_home", "anchor_remaining")

NORMALIZERS_FILE = "normalizers"
MODES_FILE = "modes"
VOCABULARY_FILE = "vocabulary"


def euler_times(steps: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The Euler schedule t_i = 1 - i / steps, i = 0..steps-1 (from noise at t = 1 towards data)."""
    return 1.0 - torch.arange(steps, device=device, dtype=dtype) / steps


@dataclass
class DemoContext:
    """Encoded demonstration: context tokens (+ summary tokens) and state-event tokens, with masks."""

    tokens: torch.Tensor
    positions: torch.Tensor
    valid: torch.Tensor
    event_tokens: torch.Tensor | None
    event_positions: torch.Tensor | None
    event_valid: torch.Tensor | None
    #: Keys/values of the context for each fusion layer; empty with `demo_alignment =
    #: "registration"`, whose keys are rotated by the registered positions at every query.
    fusion_kv: list[KeyValue]
    #: [B, 3] cloth centroid of the first keyframe (`model.demo_alignment = "centroid"`), else None.
    anchor: torch.Tensor | None = None
    #: The first keyframe's cloth tokens: positions [B, N, 3], features [B, N, D], validity [B, N]
    #: (`model.demo_alignment = "registration"`: registered onto every query's cloth), else None.
    first_cloth: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
    #: Each keyframe's arms' event counts [B, K, 2] (`model.progress_bias`), else None; `tokens`
    #: then holds `keyframe_tokens` tokens per keyframe in keyframe order, then the summary tokens.
    counts: torch.Tensor | None = None
    keyframe_tokens: int = 0

    def select(self, index: torch.Tensor) -> DemoContext:
        """Row `index[b]` for every b: the encoded demonstration of each sample of a batch whose
        samples share demonstrations (`PolicyBatch.demo_index`)."""

        def pick(x: torch.Tensor | None) -> torch.Tensor | None:
            return None if x is None else x.index_select(0, index)

        return DemoContext(
            self.tokens.index_select(0, index),
            self.positions.index_select(0, index),
            self.valid.index_select(0, index),
            pick(self.event_tokens),
            pick(self.event_positions),
            pick(self.event_valid),
            [
                KeyValue(kv.k.index_select(0, index), kv.v.index_select(0, index), kv.bias.index_select(0, index))
                for kv in self.fusion_kv
            ],
            pick(self.anchor),
            None if self.first_cloth is None else tuple(x.index_select(0, index) for x in self.first_cloth),
            pick(self.counts),
            self.keyframe_tokens,
        )


@dataclass
class SceneCache:
    """Everything the Euler steps of one query share: scene-context K/V, proprio signal, current xyz."""

    context_kv: list[KeyValue]
    proprio: torch.Tensor  # [B, W]
    current_xyz: torch.Tensor  # [B, 2, 3]
    #: AdaLN modulations per Euler step (one [B, 6W] per decoder block), when the schedule is known.
    schedule: list[list[torch.Tensor]] | None = None
    #: Anchored head: its prediction and the targets the trajectory branch is conditioned on.
    anchor: AnchorOutput | None = None
    target: TargetCondition | None = None

    def repeat(self, repeats: int) -> SceneCache:
        """Each batch element `repeats` times in a row (several noise draws per fused scene)."""
        if self.schedule is not None:
            raise ValueError("SceneCache.repeat: a scene with a precomputed Euler schedule is not repeated")

        def rep(x: torch.Tensor) -> torch.Tensor:
            return x.repeat_interleave(repeats, 0)

        kv = [KeyValue(rep(c.k), rep(c.v), rep(c.bias)) for c in self.context_kv]
        target = None if self.target is None else TargetCondition(rep(self.target.position), rep(self.target.valid))
        return SceneCache(kv, rep(self.proprio), rep(self.current_xyz), None, self.anchor, target)


class InstantFoldPolicy(nn.Module):
    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.cfg = cfg.validate()
        head_dim = cfg.width // cfg.num_heads
        rope = Rope3D(head_dim, cfg.rope_min_wavelength_m, cfg.rope_max_wavelength_m)
        self.tokenizer = SceneTokenizer(cfg)
        demo = cfg.conditioning == "demo"
        self.context_encoder = ContextEncoder(cfg, rope) if demo else None
        use_summary = demo and cfg.use_context_encoder and cfg.use_summary_tokens
        self.summary = SummaryTokens(cfg, rope) if use_summary else None
        self.state_events = StateEventEncoder(cfg) if demo and cfg.use_state_event_tokens else None
        #: Language variant: one context token per instruction word (its embedding + its position's).
        self.word_embedding = nn.Embedding(cfg.vocabulary_size, cfg.width, padding_idx=PAD) if not demo else None
        self.word_position = nn.Embedding(cfg.max_instruction_words, cfg.width) if not demo else None
        self.fusion = nn.ModuleList(
            Block(cfg.width, cfg.num_heads, cfg.mlp_ratio, rope, cross=True) for _ in range(cfg.fusion_layers)
        )
        self.denoiser = ActionDenoiser(cfg, rope)
        anchored = cfg.keypose_head == "anchored"
        self.anchor = AnchorHead(cfg, rope) if anchored else None
        #: Anchored head: content of the two target tokens added to the decoder's scene context.
        self.target_tokens = nn.Parameter(torch.randn(2, cfg.width) * 0.02) if anchored else None
        #: `model.progress_bias`: one per fusion layer, and one for the anchored head's read of the
        #: state-event tokens (where it has them).
        self.fusion_progress = (
            nn.ModuleList(ProgressBias(cfg.num_heads) for _ in range(cfg.fusion_layers)) if cfg.progress_bias else None
        )
        read_events = cfg.progress_bias and anchored and cfg.use_state_event_tokens
        self.anchor_progress = ProgressBias(cfg.num_heads) if read_events else None
        self.normalizers = ActionNormalizers()
        #: Mode name -> id of the training data's modes (a record of what the policy trained on).
        self.mode_ids: dict[str, int] = {}
        #: Language variant: the training instructions' words, the only ones it reads.
        self.vocabulary: Vocabulary | None = None

    def instruction_ids(self, text: str) -> np.ndarray:
        """Word ids [L] of a fold said in words, for the language variant's context; InstructionError
        says why a text cannot be read (not a language policy, no vocabulary, unknown words)."""
        if self.cfg.conditioning != "language":
            raise InstructionError("policy is demonstration-conditioned: it reads demonstrations, not words")
        if self.vocabulary is None:
            raise InstructionError("policy has no vocabulary: it was not trained or loaded with one")
        return self.vocabulary.encode(text, self.cfg.max_instruction_words)

    # ------------------------------------------------------------------ stage 1: demonstration
    def encode_context(self, demo: DemoTokens) -> DemoContext:
        """Encode the context keyframes once; padded keyframes are masked out of every attention."""
        events: tuple[torch.Tensor | None, ...] = (None, None, None)
        counts, per_keyframe = None, 0
        if self.word_embedding is not None and self.word_position is not None:
            ids = demo.instruction
            if ids.shape[1] == 0 or not (ids != PAD).any(1).all():
                raise ValueError("encode_context: the language variant needs an instruction of at least one word")
            order = torch.arange(ids.shape[1], device=ids.device)
            tokens = self.word_embedding(ids) + self.word_position(order)[None]
            pos = torch.zeros(*ids.shape, 3, dtype=tokens.dtype, device=tokens.device)
            valid = ids != PAD
        else:
            state = demo.arm_state if self.cfg.use_proprio_in_context else None
            counts = event_counts(demo.arm_state) if state is not None and self.cfg.event_progress else None
            tokens, pos, valid = self.tokenizer.scene(
                demo.cloth_positions, demo.cloth_features, demo.cloth_valid, state, counts
            )
            per_keyframe = tokens.shape[2]
            tokens, pos, valid = self.context_encoder(tokens, pos, valid & demo.frame_mask[..., None])
            if self.summary is not None:
                s_tok, s_pos, s_valid = self.summary(tokens, pos, valid)
                tokens, pos = torch.cat((tokens, s_tok), 1), torch.cat((pos, s_pos), 1)
                valid = torch.cat((valid, s_valid), 1)
            if self.state_events is not None:
                events = self.state_events(demo.arm_state, demo.frame_mask)
        registration = self.cfg.demo_alignment == "registration" and self.word_embedding is None
        fusion_kv = [] if registration else [block.context_kv(tokens, pos, valid) for block in self.fusion]
        anchor, first = None, None
        if self.cfg.demo_alignment == "centroid" and self.word_embedding is None:
            anchor = masked_centroid(demo.cloth_positions[:, 0], demo.cloth_valid[:, 0])
        if registration:
            first = (demo.cloth_positions[:, 0], demo.cloth_features[:, 0], demo.cloth_valid[:, 0])
        progress = None
        if self.fusion_progress is not None:  # the content's counts, or (without arm states there) their own
            progress = counts if counts is not None else event_counts(demo.arm_state)
        return DemoContext(tokens, pos, valid, *events, fusion_kv, anchor, first, progress, per_keyframe)

    # ------------------------------------------------------------------ stage 2: query
    def prepare_scene(
        self,
        obs: ObservationTokens,
        context: DemoContext,
        steps: int | None = None,
        condition: TargetCondition | None = None,
        override: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> SceneCache:
        """Fuse the current scene with the demonstration context and project the scene-context K/V.

        With `steps`, the AdaLN modulations of the whole Euler schedule (t = 1, 1 - 1/steps, ...)
        are computed here in one batch instead of once per step. Anchored head: the targets are
        read from the fused scene here, once per query, and the trajectory branch is conditioned
        on them (or on `condition`, which training passes to teacher-force); `override`
        (position [B, 2, 3], mask [B, 2]) replaces the masked arms' targets by given grasp/place
        targets (inference: `TargetCondition.overridden`).
        """
        if override is not None and self.anchor is None:
            raise ValueError("prepare_scene: target overrides need the anchored keypose head")
        x, pos, valid = self.tokenizer.scene(
            obs.cloth_positions, obs.cloth_features, obs.cloth_valid, obs.arm_state, obs.event_count
        )
        centroid = masked_centroid(obs.cloth_positions, obs.cloth_valid)
        to_demo, to_scene = self._alignment(obs, context, centroid)
        # Fusion queries: the scene in the demonstration's frame (a translation, with the cached
        # context keys); registration instead rotates the demonstration's keys into the scene's
        # frame, since relative attention sees rotations. State-event tokens: the demonstration
        # in the scene's frame.
        fusion_kv = context.fusion_kv or [
            block.context_kv(context.tokens, to_scene(context.positions), context.valid) for block in self.fusion
        ]
        progress = self._progress_counts(context, obs)
        for block, kv, bias in zip(self.fusion, fusion_kv, self._fusion_bias(context, progress), strict=True):
            x = block(x, to_demo(pos), valid, kv, bias)
        n = obs.cloth_positions.shape[1]
        cloth, robot = x[:, :n], x[:, n:]
        read_bias = None
        if self.anchor_progress is not None and progress is not None:
            # The state-event tokens: two per keyframe (one per arm), after the scene's tokens.
            read_bias = self.anchor_progress.tokens(*progress, 2, x.shape[1], 0)
        if context.event_tokens is not None:
            x = torch.cat((x, context.event_tokens), 1)
            pos = torch.cat((pos, to_scene(context.event_positions)), 1)
            valid = torch.cat((valid, context.event_valid), 1)
        anchor, target = None, None
        if self.anchor is not None:
            anchor = self.anchor(
                x,
                pos,
                valid,
                cloth,
                obs.cloth_positions,
                obs.cloth_valid,
                robot,
                obs.arm_state[..., :3],
                centroid,
                read_bias,
            )
            target = TargetCondition(anchor.target.detach(), anchor.remaining)
            if condition is not None:
                position = condition.position
                if condition.forced is not None:
                    position = torch.where(condition.forced[:, None, None], position, target.position)
                target = TargetCondition(position, condition.valid)
            if override is not None:
                target = target.overridden(*override)
            b = x.shape[0]
            x = torch.cat((x, self.target_tokens.to(x.dtype).expand(b, -1, -1)), 1)
            pos = torch.cat((pos, target.position.to(pos.dtype)), 1)
            valid = torch.cat((valid, torch.ones_like(target.valid)), 1)
        proprio = self.denoiser.proprio_condition(self.tokenizer.robot(obs.arm_state, centroid, obs.event_count))
        scene = SceneCache(
            self.denoiser.context_kv(x, pos, valid), proprio, obs.arm_state[..., :3], None, anchor, target
        )
        if steps is not None:
            b = proprio.shape[0]
            ts = euler_times(steps, proprio.device, proprio.dtype).repeat_interleave(b)
            per_block = self.denoiser.modulations(ts, proprio.repeat(steps, 1))
            scene.schedule = [[m[i * b : (i + 1) * b] for m in per_block] for i in range(steps)]
        return scene

    def _progress_counts(
        self, context: DemoContext, obs: ObservationTokens
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(each keyframe's counts [B, K, 2], the scene's [B, 2]) for `model.progress_bias`, else None;
        ValueError when either is missing (a context encoded by another policy, an uncounted query)."""
        if self.fusion_progress is None:
            return None
        if context.counts is None or obs.event_count is None:
            raise ValueError("model.progress_bias: needs the keyframes' and the observation's event counts")
        return context.counts, obs.event_count

    def _fusion_bias(
        self, context: DemoContext, progress: tuple[torch.Tensor, torch.Tensor] | None
    ) -> list[torch.Tensor | None]:
        """Per fusion layer, the progress bias over the context's keyframe tokens (none on the summary
        tokens), or None for each without `model.progress_bias`."""
        if self.fusion_progress is None or progress is None:
            return [None] * len(self.fusion)
        after = context.tokens.shape[1] - progress[0].shape[1] * context.keyframe_tokens
        if after < 0:
            raise ValueError(f"model.progress_bias: {context.tokens.shape[1]} context tokens for the keyframes' counts")
        return [bias.tokens(*progress, context.keyframe_tokens, 0, after) for bias in self.fusion_progress]

    def _alignment(
        self, obs: ObservationTokens, context: DemoContext, centroid: torch.Tensor
    ) -> tuple[PointMap, PointMap]:
        """Maps of [B, L, 3] positions, per `model.demo_alignment`: (where the fusion queries sit,
        demonstration -> scene frame). Centroid moves the queries into the demonstration's frame
        (the cached keys stay); registration leaves them and moves the demonstration instead."""
        if context.anchor is not None:
            offset = (context.anchor - centroid)[:, None]
            return (lambda p: p + offset.to(p.dtype)), (lambda p: p - offset.to(p.dtype))
        if context.first_cloth is not None:
            positions, features, valid = context.first_cloth
            with torch.no_grad():
                rigid = register_planar(
                    positions.float(),
                    valid,
                    obs.cloth_positions.float(),
                    obs.cloth_valid,
                    features.float(),
                    obs.cloth_features.float(),
                    rotations=self.cfg.registration_rotations,
                )
            return (lambda p: p), (lambda p: rigid.apply(p.float()).to(p.dtype))
        return (lambda p: p), (lambda p: p)

    # ------------------------------------------------------------------ stage 3: Euler step
    def action_positions(
        self, scene: SceneCache, z_traj: torch.Tensor, z_keypose: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Absolute 3D positions the (noisy) action tokens stand for: current position + deltas."""
        cur = scene.current_xyz.to(z_traj.dtype)
        traj = cur[:, None] + torch.cumsum(self.normalizers.delta.unnormalize(z_traj), 1)
        keypose = None if z_keypose is None else cur + self.normalizers.keypose.unnormalize(z_keypose)
        return traj, keypose

    def velocity(
        self,
        scene: SceneCache,
        z_traj: torch.Tensor,
        z_keypose: torch.Tensor | None,
        t: torch.Tensor,
        step: int | None = None,
    ) -> DecoderOutput:
        """Velocity at time t; `step` selects the precomputed modulations of `scene.schedule`."""
        traj_pos, keypose_pos = self.action_positions(scene, z_traj, z_keypose)
        if step is not None and scene.schedule is not None:
            modulations = scene.schedule[step]
        else:
            modulations = self.denoiser.modulations(t, scene.proprio)
        return self.denoiser(z_traj, traj_pos, z_keypose, keypose_pos, modulations, scene.context_kv, scene.target)

    # ------------------------------------------------------------------ training
    def normalized_targets(self, target: ActionTargets) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.normalizers.calibrated:
            raise NormalizerError("policy normalisers are not calibrated; calibrate them on the training data")
        return self.normalizers.delta.normalize(target.traj_delta), self.normalizers.keypose.normalize(
            target.keypose_delta
        )

    def compute_loss(
        self,
        batch: PolicyBatch,
        t: torch.Tensor | None = None,
        noise: tuple[torch.Tensor, torch.Tensor] | None = None,
        generator: torch.Generator | None = None,
        repeats: int = 1,
        teacher: TargetCondition | None = None,
    ) -> dict[str, torch.Tensor]:
        """Rectified flow (z_t = (1-t) x + t eps, target eps - x) + gripper BCE, keypose auxiliary x weight.

        `repeats` draws of (t, noise) per sample share one demonstration encoding and scene fusion,
        the expensive part of a step, so the flow loss is averaged over more noise levels at little
        extra cost (`t` and `noise`, when given, then have B * repeats rows, sample-major). Anchored
        head: `teacher` is what the trajectory branch is conditioned on (None: the head's own
        prediction); its pointer, position, openness and remaining-event losses are added with
        `keypose_loss_weight`.
        """
        x_traj, x_kp = (x.repeat_interleave(repeats, 0) for x in self.normalized_targets(batch.target))
        traj_gripper, keypose_gripper = (
            x.repeat_interleave(repeats, 0) for x in (batch.target.traj_gripper, batch.target.keypose_gripper)
        )
        b = x_traj.shape[0]
        if t is None:
            t = torch.rand(b, generator=generator, device="cpu").to(x_traj.device)
        if noise is None:
            noise = (
                torch.randn(x_traj.shape, generator=generator).to(x_traj.device),
                torch.randn(x_kp.shape, generator=generator).to(x_kp.device),
            )
        eps_traj, eps_kp = noise
        z_traj = (1 - t[:, None, None, None]) * x_traj + t[:, None, None, None] * eps_traj
        z_kp = (1 - t[:, None, None]) * x_kp + t[:, None, None] * eps_kp
        context = self.encode_context(batch.demo)
        if batch.demo_index is not None:
            context = context.select(batch.demo_index)
        scene = self.prepare_scene(batch.obs, context, condition=teacher)
        if repeats > 1:
            scene = scene.repeat(repeats)
        out = self.velocity(scene, z_traj, z_kp if self.cfg.flow_keypose else None, t)
        losses = {
            "flow": F.mse_loss(out.traj_velocity.float(), (eps_traj - x_traj).float()),
            "gripper": F.binary_cross_entropy_with_logits(out.traj_gripper_logit.float(), traj_gripper.float()),
        }
        total = losses["flow"] + losses["gripper"]
        if scene.anchor is not None:
            target = batch.target
            losses.update(
                anchor_losses(
                    scene.anchor,
                    batch.obs.cloth_positions,
                    batch.obs.cloth_valid,
                    target.event_position,
                    target.event_openness,
                    target.event_valid,
                )
            )
            losses["anchor_remaining"] = F.binary_cross_entropy_with_logits(
                scene.anchor.remaining_logit, target.event_valid.float()
            )
            anchor_total = sum(losses[k] for k in ANCHOR_LOSSES)
            total = total + self.cfg.keypose_loss_weight * anchor_total
        if self.cfg.flow_keypose:
            losses["keypose_flow"] = F.mse_loss(out.keypose_velocity.float(), (eps_kp - x_kp).float())
            losses["keypose_gripper"] = F.binary_cross_entropy_with_logits(
                out.keypose_gripper_logit.float(), keypose_gripper.float()
            )
            total = total + self.cfg.keypose_loss_weight * (losses["keypose_flow"] + losses["keypose_gripper"])
        losses["loss"] = total
        return losses

    def forward(
        self,
        batch: PolicyBatch,
        t: torch.Tensor | None = None,
        noise: tuple[torch.Tensor, torch.Tensor] | None = None,
        generator: torch.Generator | None = None,
        repeats: int = 1,
        teacher: TargetCondition | None = None,
    ) -> dict[str, torch.Tensor]:
        """Training forward (what DDP wraps): the losses of `compute_loss`."""
        return self.compute_loss(batch, t, noise, generator, repeats, teacher)

    # ------------------------------------------------------------------ persistence
    def save_pretrained(
        self,
        directory: str | Path,
        config: InstantFoldPolicyConfig,
        state_dict: dict[str, torch.Tensor] | None = None,
    ) -> Path:
        """Weights (safetensors), the full config (JSON) and the normaliser statistics (JSON)."""
        if config.model != self.cfg:
            raise ConfigError("save_pretrained: config.model does not describe this policy")
        tensors = state_dict if state_dict is not None else self.state_dict()
        extras = {NORMALIZERS_FILE: self.normalizers.to_dict(), MODES_FILE: dict(self.mode_ids)}
        if self.cfg.conditioning == "language":
            if self.vocabulary is None:
                raise ConfigError("save_pretrained: a language-conditioned policy needs its vocabulary")
            extras[VOCABULARY_FILE] = self.vocabulary.to_dict()
        return save_checkpoint(directory, tensors, config.to_dict(), extras)

    @classmethod
    def from_pretrained(
        cls, directory: str | Path, device: str | torch.device = "cpu"
    ) -> tuple[InstantFoldPolicy, InstantFoldPolicyConfig]:
        tensors, config_dict = load_checkpoint(directory, device)
        try:
            config = InstantFoldPolicyConfig.from_dict(config_dict)
        except ConfigError as exc:
            raise CheckpointError(f"checkpoint {directory}: invalid config.json ({exc})") from exc
        policy = cls(config.model).to(device)
        try:
            policy.load_state_dict(tensors, strict=True)
        except RuntimeError as exc:
            raise CheckpointError(f"checkpoint {directory}: weights do not match the config ({exc})") from exc
        try:
            policy.normalizers.load_dict(read_json(directory, NORMALIZERS_FILE))
        except NormalizerError as exc:
            raise CheckpointError(f"checkpoint {directory}: {exc}") from exc
        if (Path(directory) / f"{MODES_FILE}.json").is_file():
            modes = read_json(directory, MODES_FILE)
            try:
                policy.mode_ids = {str(k): int(v) for k, v in modes.items()}
            except (AttributeError, TypeError, ValueError) as exc:
                raise CheckpointError(
                    f"checkpoint {directory}: {MODES_FILE}.json must map mode names to ids ({exc})"
                ) from exc
        if config.model.conditioning == "language":
            try:
                policy.vocabulary = Vocabulary.from_dict(read_json(directory, VOCABULARY_FILE))
            except InstructionError as exc:
                raise CheckpointError(f"checkpoint {directory}: {VOCABULARY_FILE}.json: {exc}") from exc
        return policy, config


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def policy_summary(policy: InstantFoldPolicy) -> dict[str, Any]:
    """Parameter counts per part (reported by the benchmark and the training log)."""
    parts = {name: parameter_count(child) for name, child in policy.named_children()}
    return {"total": parameter_count(policy), **{k: v for k, v in parts.items() if v}}
