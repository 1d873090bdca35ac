"""Configuration of the in-context flow-matching policy (model + training), as YAML-loadable dataclasses.

Two scales exist for every learned part: the paper's configuration (appendix C/D: width 384,
batch 64, horizon 4 in simulation / 8 on the real robot, 10 Euler steps) and `cpu-small`, which
trains for real on two CPU cores in minutes. The configuration is saved next to the weights so a
checkpoint always rebuilds the exact model that produced it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml

from instant_fold_core.config import ModelRecipe, Presets, check_numbers, load_file
from instant_fold_core.errors import ConfigError

#: Values of `PolicyConfig.demo_alignment`.
DEMO_ALIGNMENTS: tuple[str, ...] = ("none", "centroid", "registration")
#: Values of `PolicyConfig.keypose_head`.
KEYPOSE_HEADS: tuple[str, ...] = ("flow", "anchored")


@dataclass
class PolicyConfig:
    """Architecture of the policy (appendix C). Ablation switches mirror the paper's ablation table."""

    #: Feature dimension of the frozen cloth encoder's tokens (projected to `width` here); equals
    #: the encoder preset's `feature_dim` (encoder/configuration.py) so the two plug together.
    cloth_feature_dim: int = 256
    #: Cloth tokens per frame (FPS samples); every observation must carry exactly this many.
    num_cloth_tokens: int = 64
    width: int = 384
    num_heads: int = 8
    #: Feed-forward hidden size / width. 1.0 follows the 3D Diffuser/FlowMatch Actor transformers
    #: the decoder builds on (hidden size = width); the paper does not state it.
    mlp_ratio: float = 1.0
    #: Per-frame spatial self-attention layers of the context encoder (RoPE + 3D ALiBi).
    spatial_layers: int = 2
    #: Dense spatio-temporal self-attention layers of the context encoder (RoPE, no ALiBi).
    temporal_layers: int = 4
    num_summary_tokens: int = 4
    #: Cross-attention layers fusing the current scene with the demonstration context (the paper
    #: describes one cross-attention step and gives no count).
    fusion_layers: int = 1
    #: Trajectory horizon H (4 in simulation, 8 on the real robot).
    horizon: int = 4
    num_inference_steps: int = 10
    #: Standard deviation of the start noise the sampler integrates from (1: the distribution the
    #: flow was trained on). Below 1 the samples move towards the flow's dominant mode: less
    #: spread in where a grasp lands. Not in the paper: an inference-time choice, measured in
    #: docs/policy.md; saved with the weights like every model field.
    noise_scale: float = 1.0
    #: Receding horizon: how many of the H predicted actions the caller executes per query.
    execute_steps: int = 2
    #: RoPE wavelengths (metres) spanned geometrically by the per-axis frequencies.
    rope_min_wavelength_m: float = 0.01
    rope_max_wavelength_m: float = 4.0
    #: 3D ALiBi: bias = -slope_h * distance / length_scale, slopes 2^(-8h/heads) as in ALiBi.
    alibi_length_scale_m: float = 0.05
    keypose_loss_weight: float = 0.5
    # Ablations (paper's table): each False removes one component.
    use_context_encoder: bool = True
    use_proprio_in_context: bool = True
    use_keypose_aux: bool = True
    use_alibi: bool = True
    use_state_event_tokens: bool = True
    use_summary_tokens: bool = True
    #: "demo" (in-context, the paper's method) or "language" (the baseline told the fold in words,
    #: `policy/instruction.py`).
    conditioning: str = "demo"
    #: Language variant: word-embedding slots (the training instructions' words + padding must fit)
    #: and the most words an instruction may have.
    vocabulary_size: int = 96
    max_instruction_words: int = 40
    #: Where the demonstration sits relative to the current scene when the two meet (fusion
    #: cross-attention and the state-event tokens of the scene context). "none": both in the camera
    #: frame as they are, so relative attention across the two layouts sees arbitrary offsets.
    #: "centroid": the demonstration is translated so that the cloth centroid of its first keyframe
    #: lies on the current cloth centroid; a demonstrated grasp then sits near the same garment
    #: part of the current layout (up to the layouts' rotation). Not in the paper: a choice,
    #: measured in docs/policy.md. "registration": a rigid planar registration (rotation about the
    #: optical axis + shift, `instant_fold_core.registration`) of the first keyframe's cloth tokens
    #: onto the current ones, which also undoes the layouts' rotation.
    demo_alignment: str = "none"
    #: "registration": start angles of the registration (equally spaced over the full turn). More
    #: starts escape more of the local minima a folded, near-symmetric garment offers (measured in
    #: docs/registration.md); each costs one coarse ICP pass per query.
    registration_rotations: int = 8
    #: How the next grasp/place targets are predicted. "flow": the paper's keypose auxiliary, an
    #: offset from the current end-effector sampled with the trajectory. "anchored": each arm's next
    #: gripper-event position is read from the current cloth (a pointer over the cloth tokens'
    #: positions plus a bounded offset, `policy/anchor.py`), so it cannot move with the arm, and the
    #: trajectory branch is conditioned on it. Not in the paper: a choice, measured in docs/policy.md.
    keypose_head: str = "flow"
    #: Anchored head: largest offset from the pointed cloth point, in the image plane and along the
    #: optical axis (a place point hovers above the cloth; a grasp sits on it).
    anchor_offset_xy_m: float = 0.05
    anchor_offset_z_m: float = 0.12
    #: Anchored head: the pointed position is the weighted mean of the cloth tokens within this
    #: radius of the most likely one (a soft mean over all tokens would land between two candidates).
    anchor_window_m: float = 0.04
    #: Cloth-token content gets Fourier features of its position relative to the cloth centroid, and
    #: robot-state tokens their position relative to it (metric geometry attention can read out;
    #: rotary phases alone only compare positions). Not in the paper.
    cloth_geometry: bool = False
    #: Every robot-state token carries its arm's gripper-event count so far (the current scene's
    #: counted by the fold's runner, each demonstration keyframe's along the keyframes;
    #: `policy/progress.py`): the stage of the fold, where one observation leaves it ambiguous.
    #: Not in the paper: a choice, measured in docs/policy.md.
    event_progress: bool = False
    #: With `event_progress`: attention from the current scene to the demonstration keyframes (the
    #: fusion, and the anchored head's read of the state-event tokens) gets a learned bias per head
    #: by how many events each arm's count at a keyframe is ahead of its current one
    #: (`policy/progress.py`, `ProgressBias`). Not in the paper: a choice, measured in docs/policy.md.
    progress_bias: bool = False

    def validate(self) -> PolicyConfig:
        positive = (
            "cloth_feature_dim",
            "num_cloth_tokens",
            "width",
            "num_heads",
            "mlp_ratio",
            "horizon",
            "num_inference_steps",
            "execute_steps",
            "vocabulary_size",
            "max_instruction_words",
            "alibi_length_scale_m",  # divides distances: 0 makes every prediction NaN
            "anchor_offset_xy_m",
            "anchor_offset_z_m",
            "anchor_window_m",
            "registration_rotations",
        )
        layers = ("spatial_layers", "temporal_layers", "num_summary_tokens", "fusion_layers")
        check_numbers("model", self, positive, non_negative=("noise_scale", "keypose_loss_weight", *layers))
        if self.width % self.num_heads:
            raise ConfigError(f"model.width: {self.width} is not divisible by num_heads={self.num_heads}")
        if self.width // self.num_heads < 6:
            raise ConfigError("model.num_heads: head dimension must be >= 6 for 3D RoPE")
        if self.execute_steps > self.horizon:
            raise ConfigError(f"model.execute_steps: {self.execute_steps} exceeds horizon {self.horizon}")
        if self.demo_alignment not in DEMO_ALIGNMENTS:
            raise ConfigError(f"model.demo_alignment: expected one of {DEMO_ALIGNMENTS}, got {self.demo_alignment!r}")
        if self.keypose_head not in KEYPOSE_HEADS:
            raise ConfigError(f"model.keypose_head: expected one of {KEYPOSE_HEADS}, got {self.keypose_head!r}")
        if self.conditioning not in ("demo", "language"):
            raise ConfigError(f"model.conditioning: expected 'demo' or 'language', got {self.conditioning!r}")
        if self.use_summary_tokens and self.num_summary_tokens == 0:
            raise ConfigError("model.num_summary_tokens: must be > 0 when use_summary_tokens is set")
        if not 0 < self.rope_min_wavelength_m < self.rope_max_wavelength_m:
            raise ConfigError("model.rope_min_wavelength_m: need 0 < min < rope_max_wavelength_m")
        if self.progress_bias and not (self.event_progress and self.conditioning == "demo"):
            raise ConfigError(
                "model.progress_bias: needs model.event_progress and a demonstration (conditioning: demo)"
            )
        return self

    @property
    def flow_keypose(self) -> bool:
        """Whether the keypose is sampled by the flow (the paper's auxiliary) rather than anchored."""
        return self.use_keypose_aux and self.keypose_head == "flow"

    @property
    def num_action_tokens(self) -> int:
        """2 keypose tokens (when the flow samples them) + 2H trajectory tokens."""
        return (2 if self.flow_keypose else 0) + 2 * self.horizon


#: Key of the mode-id table size of older configs (language variant told mode ids).
LEGACY_MODES = "num_modes"

#: Values of `TrainingConfig.frames`.
FRAME_SELECTIONS: tuple[str, ...] = ("all", "moving")
#: Values of `TrainingConfig.recovery_mode`.
RECOVERY_MODES: tuple[str, ...] = ("rejoin", "to_target")


@dataclass
class TrainingConfig:
    """Optimisation and augmentation (appendix D/E). Choices the paper leaves open are documented."""

    batch_size: int = 64
    steps: int = 225_000
    lr: float = 1e-4
    weight_decay: float = 1e-4
    warmup_steps: int = 1000
    grad_clip: float = 1.0
    ema_decay: float = 0.999
    #: Probability of perturbing the current gripper positions and relabelling a recovery chunk.
    recovery_prob: float = 0.0
    recovery_noise_m: float = 0.03
    #: "rejoin": the perturbed arm fades back onto the expert's path within the chunk (appendix E).
    #: "to_target": an arm approaching its next grasp (gripper open, moving) is instead displaced by
    #: `recovery_drift_m` (uniform within that distance) and its chunk relabelled as a straight move
    #: to the true grasp at the expert's pace (at least `recovery_min_speed_m`/step), the size of the
    #: drifts a closed loop produces; other arms keep "rejoin". Not in the paper.
    recovery_mode: str = "rejoin"
    recovery_drift_m: float = 0.15
    recovery_min_speed_m: float = 0.01
    #: Anchored head: probability that the trajectory branch is conditioned on the true next-event
    #: target (jittered by `anchor_teacher_noise_m`) instead of the head's own (detached) prediction.
    anchor_teacher_prob: float = 0.5
    anchor_teacher_noise_m: float = 0.01
    #: Anchored head: an arm on its way to its next grasp (moving, not waiting for its turn) in a
    #: teacher-forced sample gets its target moved by up to this distance in the image plane (uniform
    #: over the disc) and its chunk relabelled as a straight move to the moved target at the
    #: expert's pace (at least `recovery_min_speed_m` per step). Without it the target the trajectory is conditioned on always
    #: agrees with the scene, and the trajectory learns to follow it only in part (docs/policy.md,
    #: "Target following", where 0.1 m is measured and rejected). 0 turns it off. Not in the paper.
    anchor_teacher_shift_m: float = 0.0
    #: Probability of occluding the current observation's cloth tokens around the grippers.
    occlusion_prob: float = 0.0
    occlusion_radius_m: float = 0.03
    #: Flow-matching draws (t, noise) per sample and step. They share the demonstration encoding and
    #: scene fusion (most of a step's cost), so more draws cut the variance of the flow loss cheaply.
    noise_samples: int = 1
    #: Which frames are training samples. "all"; or "moving": frames from which an arm moves or its
    #: gripper changes towards the next frame. "moving" drops hold frames (arms waiting for the cloth
    #: to settle) except the last of each hold: during a hold one frame looks like the next, but the
    #: chunk depends on how long the wait has lasted, which no single frame shows (docs/policy.md).
    frames: str = "all"
    #: Keep every s-th of the selected frames. Episodes are recorded at 20 fps, so neighbouring frames
    #: are near-duplicates; a stride spreads a fixed step budget over more distinct layouts per epoch.
    frame_stride: int = 1
    #: Sampling weight of the decision frames, those before an episode's first gripper event, relative
    #: to 1 for every other frame. From one start state the modes differ only until the first grasp
    #: (afterwards the cloth shows which fold is under way), so only these frames teach the policy to
    #: read its demonstration; they are ~18 % of the default models' frames. 1: uniform sampling.
    decision_weight: float = 1.0
    #: Demonstrations per batch (global, like `batch_size`: under torchrun each rank draws its share,
    #: rounded up). 0: every sample draws its own context demonstration. G > 0: the batch
    #: holds G demonstrations, each the context of about batch_size / G samples of its garment and mode,
    #: so the context encoder (most of a CPU step) runs G times instead of batch_size times.
    demos_per_batch: int = 0
    #: Probability of an SE(2) augmentation about the camera's optical axis: the current cloth token
    #: positions, arm state, chunk and keypose rotate by U(+-se2_rotation_deg) and shift by
    #: U(+-se2_translation_m) in the image plane together; the demonstration gets its own draw (it
    #: comes from another layout anyway). Token features are kept (docs/policy.md: what that costs).
    #: Frames after an episode's last gripper event (the return home, a fixed pose of the robot) are
    #: never transformed.
    se2_prob: float = 0.0
    se2_rotation_deg: float = 20.0
    se2_translation_m: float = 0.05
    #: Mixed precision (bf16 autocast) when training on CUDA.
    amp: bool = True
    seed: int = 0
    log_every: int = 50
    checkpoint_every: int = 5000

    def validate(self) -> TrainingConfig:
        check_numbers(
            "train",
            self,
            positive=(
                *("batch_size", "steps", "log_every", "checkpoint_every", "noise_samples", "frame_stride"),
                *("lr", "decision_weight"),
            ),
            non_negative=(
                *("demos_per_batch", "se2_rotation_deg", "se2_translation_m", "recovery_drift_m"),
                *("recovery_min_speed_m", "anchor_teacher_noise_m", "anchor_teacher_shift_m"),
                *("weight_decay", "warmup_steps"),
                *("grad_clip", "recovery_noise_m", "occlusion_radius_m"),
            ),
            unit_interval=("recovery_prob", "occlusion_prob", "ema_decay", "se2_prob", "anchor_teacher_prob"),
        )
        if self.recovery_mode not in RECOVERY_MODES:
            raise ConfigError(f"train.recovery_mode: expected one of {RECOVERY_MODES}, got {self.recovery_mode!r}")
        if self.frames not in FRAME_SELECTIONS:
            raise ConfigError(f"train.frames: expected one of {FRAME_SELECTIONS}, got {self.frames!r}")
        return self


@dataclass
class InstantFoldPolicyConfig(ModelRecipe):
    """Full policy configuration: `model` rebuilds the network, `train` reproduces the run."""

    what: ClassVar[str] = "policy config"
    name: str = "paper"
    model: PolicyConfig = field(default_factory=PolicyConfig)
    train: TrainingConfig = field(default_factory=TrainingConfig)

    @classmethod
    def from_dict(cls, data: Any) -> InstantFoldPolicyConfig:
        """`ModelRecipe.from_dict`, for checkpoints of every version. Without a `name` the config is
        called "custom"."""
        model = data.get("model") if isinstance(data, dict) else None
        if isinstance(model, dict) and LEGACY_MODES in model:
            if model.get("conditioning") == "language":
                raise ConfigError(
                    f"policy config: model.{LEGACY_MODES} is a language variant told mode ids, which this "
                    "version replaced by instructions in words (docs/policy.md): retrain it"
                )
            # Demonstration-conditioned checkpoints saved it without using it (v5 and older).
            data = {**data, "model": {k: v for k, v in model.items() if k != LEGACY_MODES}}
        return super().from_dict({"name": "custom", **data} if isinstance(data, dict) else data)

    @classmethod
    def from_yaml(cls, path: str | Path) -> InstantFoldPolicyConfig:
        """A YAML file; with a top-level `preset: NAME` its `model`/`train` keys override that preset."""
        if not Path(path).is_file():
            raise ConfigError(f"policy config: no such file {path}")
        return load_file(path, PRESETS, lambda: cls(name="custom")).validate()

    def to_yaml(self, path: str | Path) -> None:
        Path(path).write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))


def _paper_real() -> InstantFoldPolicyConfig:
    # Appendix E: horizon 8 (execute 4), 3 cm occlusion template, 30 % recovery perturbation.
    return InstantFoldPolicyConfig(
        name="paper-real",
        model=PolicyConfig(horizon=8, execute_steps=4),
        train=TrainingConfig(recovery_prob=0.3, occlusion_prob=0.5),
    ).validate()


def _cpu_small() -> InstantFoldPolicyConfig:
    return InstantFoldPolicyConfig(
        name="cpu-small",
        model=PolicyConfig(
            cloth_feature_dim=64,  # the cpu-small encoder's feature_dim
            num_cloth_tokens=64,
            width=64,
            num_heads=2,
            mlp_ratio=2.0,
            spatial_layers=1,
            temporal_layers=1,
            num_summary_tokens=2,
            fusion_layers=1,
            horizon=4,
        ),
        train=TrainingConfig(
            batch_size=16,
            steps=600,
            lr=2e-3,
            weight_decay=0.0,
            warmup_steps=30,
            ema_decay=0.9,
            log_every=25,
            checkpoint_every=200,
            recovery_prob=0.0,
            occlusion_prob=0.0,
        ),
    ).validate()


#: Named configurations: `paper` (simulation), `paper-real` (real robot) and `cpu-small`.
PRESETS: Presets[InstantFoldPolicyConfig] = Presets("policy")
PRESETS.register("paper", lambda: InstantFoldPolicyConfig(name="paper").validate())
PRESETS.register("paper-real", _paper_real)
PRESETS.register("cpu-small", _cpu_small)


def preset(name: str) -> InstantFoldPolicyConfig:
    """The policy preset `name` (a fresh copy)."""
    return PRESETS.get(name)


def load_config(name_or_path: str | Path) -> InstantFoldPolicyConfig:
    """A preset name or a YAML file path."""
    if str(name_or_path) in PRESETS:
        return preset(str(name_or_path))
    if not Path(name_or_path).is_file():
        raise ConfigError(f"{name_or_path!r} is neither a YAML file nor a policy preset {list(PRESETS)}")
    return InstantFoldPolicyConfig.from_yaml(name_or_path)
