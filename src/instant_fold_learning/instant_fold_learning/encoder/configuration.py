"""Cloth-encoder configuration: the paper's DINOv3 ViT-S/16+ setup and a `cpu-small` variant.

Configs are plain dataclasses, loadable from YAML and saved as JSON next to the weights so a
checkpoint always rebuilds the exact model it was trained with.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from instant_fold_core.config import Presets, build, check_numbers
from instant_fold_core.errors import ConfigError

#: The only `backbone_kwargs` passed on to timm: the ViT's size, as numbers. timm's
#: `create_model` also takes `checkpoint_path`, `pretrained_cfg_overlay` and the like, which read
#: files or fetch from the network; a config (a checkpoint's config.json from anywhere) must not
#: reach them.
BACKBONE_KWARGS = ("embed_dim", "depth", "num_heads", "patch_size", "mlp_ratio", "img_size", "drop_path_rate")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass
class EncoderConfig:
    """Everything that defines the cloth encoder (backbone, adapters, projection, geometry).

    Attributes:
        backbone: timm model name (DINOv3 family, built with separate q/k/v projections); a
            plain registered name, never a `hf-hub:` or `local-dir:` source.
        backbone_kwargs: size overrides passed to timm (the cpu-small variant shrinks the ViT
            here): numbers, for the keys in BACKBONE_KWARGS only.
        backbone_checkpoint: optional local path of an official DINOv3 checkpoint (.pth or
            .safetensors) loaded before the adapters are added; None = random init.
        image_size: side of the square network input after centre crop + resize.
        layers: 1-indexed transformer blocks whose outputs are aggregated (paper: 3, 6, 9, 12).
        freeze_backbone: freeze backbone weights (paper); cpu-small trains them because a randomly
            initialised backbone has nothing worth keeping frozen.
        lora_rank, lora_alpha, lora_last_blocks, lora_targets: LoRA on the q and v projections
            of the last blocks.
        feature_dim: cloth-token feature size D after the projection module.
        projection_hidden: hidden width of the projection MLP.
        head_dim: output size of the contrastive head (pretraining only).
        num_tokens: N tokens per frame (FPS).
        near, far: depth range (m) of back-projected cloth points.
        mask_rgb: zero the background before the backbone (tokens then see cloth only, which
            removes the table/scene as a sim-to-real nuisance).
    """

    name: str = "paper"
    backbone: str = "vit_small_plus_patch16_dinov3"
    backbone_kwargs: dict[str, Any] = field(default_factory=dict)
    backbone_checkpoint: str | None = None
    image_size: int = 256
    layers: tuple[int, ...] = (3, 6, 9, 12)
    freeze_backbone: bool = True
    lora_rank: int = 32
    lora_alpha: float = 32.0
    lora_last_blocks: int = 4
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")
    feature_dim: int = 256
    projection_hidden: int = 512
    head_dim: int = 128
    num_tokens: int = 64
    near: float = 0.1
    far: float = 3.0
    mask_rgb: bool = True
    image_mean: tuple[float, float, float] = IMAGENET_MEAN
    image_std: tuple[float, float, float] = IMAGENET_STD

    def __post_init__(self) -> None:
        self.layers = tuple(int(x) for x in self.layers)
        self.lora_targets = tuple(self.lora_targets)
        self.image_mean = tuple(self.image_mean)
        self.image_std = tuple(self.image_std)
        for name in ("image_size", "feature_dim", "projection_hidden", "head_dim", "num_tokens"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name}: must be a positive integer, got {getattr(self, name)}")
        check_numbers("encoder", self)
        if not self.layers or min(self.layers) < 1:
            raise ConfigError(f"layers: expected 1-indexed block numbers, got {self.layers}")
        if not 0 < self.near < self.far:
            raise ConfigError(f"near/far: need 0 < near < far, got {self.near}, {self.far}")
        if self.lora_rank < 0:
            raise ConfigError(f"lora_rank: must be >= 0, got {self.lora_rank}")
        self._check_backbone()

    def _check_backbone(self) -> None:
        if not isinstance(self.backbone, str) or ":" in self.backbone or "/" in self.backbone:
            raise ConfigError(f"backbone: expected a timm model name (no source prefix or path), got {self.backbone!r}")
        unknown = sorted(set(self.backbone_kwargs) - set(BACKBONE_KWARGS))
        if unknown:
            raise ConfigError(f"backbone_kwargs: {unknown} not allowed (allowed: {', '.join(BACKBONE_KWARGS)})")
        for key, value in self.backbone_kwargs.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"backbone_kwargs.{key}: expected a number, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EncoderConfig:
        """From a checkpoint's `encoder` section or YAML; unknown or ill-typed keys are ConfigErrors."""
        return build(cls, data, "encoder")


def _cpu_small() -> EncoderConfig:
    return EncoderConfig(
        name="cpu-small",
        backbone_kwargs={"embed_dim": 96, "depth": 4, "num_heads": 3, "patch_size": 8},
        image_size=96,
        layers=(1, 2, 3, 4),
        freeze_backbone=False,
        lora_rank=8,
        lora_alpha=8.0,
        lora_last_blocks=2,
        feature_dim=64,
        projection_hidden=128,
        head_dim=64,
    )


#: Named configurations: `paper` (DINOv3 ViT-S/16+) and `cpu-small` (a 4-block, 96-wide ViT of
#: the same DINOv3 architecture with 8-pixel patches, trainable on two CPU cores).
PRESETS: Presets[EncoderConfig] = Presets("encoder")
PRESETS.register("paper", EncoderConfig)
PRESETS.register("cpu-small", _cpu_small)


def preset(name: str) -> EncoderConfig:
    """The encoder preset `name` (a fresh copy)."""
    return PRESETS.get(name)
