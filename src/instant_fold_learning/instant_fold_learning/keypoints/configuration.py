"""Configuration of the keypoint detector (model and training), with the two scales every learned
part has: `paper` (the paper's encoder features, D = 256, at the policy's width 384) and
`cpu-small` (the cpu-small encoder's D = 64, width 64: trains in minutes on one core)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from instant_fold_core.config import ModelRecipe, Presets, check_numbers
from instant_fold_core.errors import ConfigError


@dataclass
class KeypointConfig:
    """The detector: token embedding (features + Fourier geometry relative to the cloth centroid),
    `layers` self-attention blocks with rotary positions, one query per keypoint that points at a
    token (windowed mean of the tokens within `window_m` of the likeliest) plus a bounded offset."""

    cloth_feature_dim: int = 256
    num_cloth_tokens: int = 64
    width: int = 384
    num_heads: int = 6
    layers: int = 4
    mlp_ratio: float = 4.0
    rope_min_wavelength_m: float = 0.04
    rope_max_wavelength_m: float = 1.0
    window_m: float = 0.04
    offset_xy_m: float = 0.05
    offset_z_m: float = 0.05

    def validate(self) -> KeypointConfig:
        check_numbers(
            "keypoints.model",
            self,
            positive=(
                *("cloth_feature_dim", "num_cloth_tokens", "width", "num_heads", "layers", "mlp_ratio"),
                *("rope_min_wavelength_m", "window_m", "offset_xy_m", "offset_z_m"),
            ),
        )
        if self.width % self.num_heads or (self.width // self.num_heads) < 6:
            raise ConfigError(
                f"keypoints.model: width {self.width} must split into num_heads {self.num_heads} heads of >= 6"
            )
        if self.rope_max_wavelength_m <= self.rope_min_wavelength_m:
            raise ConfigError("keypoints.model: rope_max_wavelength_m must exceed rope_min_wavelength_m")
        return self


@dataclass
class KeypointTrainingConfig:
    """Training on the frames of tokenised simulated episodes (every `frame_stride`-th frame), with
    the policy's SE(2) augmentation (tokens and keypoints moved together)."""

    steps: int = 4000
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.0
    warmup_steps: int = 50
    frame_stride: int = 2
    se2_prob: float = 0.5
    se2_rotation_deg: float = 20.0
    se2_translation_m: float = 0.05
    #: Each token of a training frame is left out with this probability (an arm over the cloth, a
    #: coarser segmentation: the detector must not lean on any one token).
    token_dropout: float = 0.0
    seed: int = 0
    log_every: int = 100
    checkpoint_every: int = 1000

    def validate(self) -> KeypointTrainingConfig:
        check_numbers(
            "keypoints.train",
            self,
            positive=("steps", "batch_size", "lr", "frame_stride", "log_every", "checkpoint_every"),
            non_negative=("weight_decay", "warmup_steps", "se2_rotation_deg", "se2_translation_m"),
            unit_interval=("se2_prob", "token_dropout"),
        )
        if self.token_dropout >= 1:
            raise ConfigError("keypoints.train.token_dropout: must be < 1 (a frame keeps some tokens)")
        return self


@dataclass
class KeypointDetectorConfig(ModelRecipe):
    """What `KeypointDetector.save_pretrained` writes to `config.json` (and rebuilds from)."""

    what: ClassVar[str] = "keypoint detector config"
    name: str = "custom"
    model: KeypointConfig = field(default_factory=KeypointConfig)
    train: KeypointTrainingConfig = field(default_factory=KeypointTrainingConfig)


def _cpu_small() -> KeypointDetectorConfig:
    return KeypointDetectorConfig(
        name="cpu-small",
        model=KeypointConfig(cloth_feature_dim=64, width=64, num_heads=2, layers=2, mlp_ratio=2.0),
        # Token dropout and weight decay: chosen on the held-out starts (docs/registration.md,
        # "Grasps carried by keypoints", docs/results/keypoint_detector_recipes.json).
        train=KeypointTrainingConfig(token_dropout=0.15, weight_decay=0.05),
    ).validate()


#: Named configurations: `paper` and `cpu-small`.
PRESETS: Presets[KeypointDetectorConfig] = Presets("keypoint detector")
PRESETS.register("paper", lambda: KeypointDetectorConfig(name="paper").validate())
PRESETS.register("cpu-small", _cpu_small)
