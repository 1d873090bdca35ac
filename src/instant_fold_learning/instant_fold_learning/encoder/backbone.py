"""DINOv3 backbone through timm: official-checkpoint loading, LoRA, multi-layer feature maps."""

from __future__ import annotations

import pickle
from pathlib import Path

import timm
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import nn

from instant_fold_core.checkpoint import CheckpointError

from .configuration import EncoderConfig
from .lora import apply_lora

#: Official DINOv3 entries with no counterpart in timm's model (pretraining-only or recomputed).
_SKIP_SUFFIXES = ("mask_token", ".bias_mask", "rope_embed.periods")
_SKIP_PREFIXES = ("local_cls_norm", "projectors.", "dino_head", "ibot_head")
_RENAMES = (
    ("storage_tokens", "reg_token"),
    (".ls1.gamma", ".gamma_1"),
    (".ls2.gamma", ".gamma_2"),
    (".mlp.w1.", ".mlp.fc1_g."),
    (".mlp.w2.", ".mlp.fc1_x."),
    (".mlp.w3.", ".mlp.fc2."),
)


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """Read an official checkpoint file (.pth via weights-only unpickling, or .safetensors)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"backbone_checkpoint: no such file {path}")
    try:
        if path.suffix == ".safetensors":
            return load_file(str(path))
        data = torch.load(path, map_location="cpu", weights_only=True)
    except (SafetensorError, pickle.UnpicklingError, RuntimeError, OSError, ValueError, EOFError) as exc:
        raise CheckpointError(f"backbone_checkpoint: {path} is unreadable or corrupt ({exc})") from exc
    for key in ("model", "teacher", "state_dict"):
        if isinstance(data, dict) and isinstance(data.get(key), dict):
            data = data[key]
    if not isinstance(data, dict) or not all(isinstance(v, torch.Tensor) for v in data.values()):
        raise CheckpointError(f"backbone_checkpoint: {path} does not hold a tensor state dict")
    return data


def convert_dinov3_state_dict(state: dict[str, torch.Tensor], model: nn.Module) -> dict[str, torch.Tensor]:
    """Map the official DINOv3 key layout onto timm's Eva with separate q/k/v projections.

    The fused `attn.qkv` is split into q/k/v; its bias is kept where the timm model has q/v biases
    and otherwise must be zero (the distilled ViT-S/16+ ships all-zero biases; k's is masked).
    """
    params = dict(model.named_parameters())
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key.endswith(_SKIP_SUFFIXES) or key.startswith(_SKIP_PREFIXES):
            continue
        for old, new in _RENAMES:
            key = key.replace(old, new)
        if key.endswith("attn.qkv.weight"):
            stem = key[: -len("qkv.weight")]
            for part, chunk in zip("qkv", value.chunk(3, dim=0), strict=True):
                out[f"{stem}{part}_proj.weight"] = chunk
        elif key.endswith("attn.qkv.bias"):
            stem = key[: -len("qkv.bias")]
            q, _, v = value.chunk(3, dim=0)
            for part, chunk in (("q", q), ("v", v)):
                name = f"{stem}{part}_proj.bias"
                if name in params:
                    out[name] = chunk
                elif chunk.abs().max() > 1e-6:
                    raise CheckpointError(
                        f"backbone_checkpoint: {key} has non-zero biases but the model has none; "
                        "use the '_qkvb' timm variant"
                    )
        else:
            out[key] = value
    return out


def load_official_weights(model: nn.Module, path: str | Path) -> None:
    """Load an official DINOv3 checkpoint into a (LoRA-free) timm model, strictly."""
    converted = convert_dinov3_state_dict(read_state_dict(path), model)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(converted))
    unexpected = sorted(set(converted) - set(expected))
    if missing or unexpected:
        raise CheckpointError(
            f"backbone_checkpoint: {path} does not match {type(model).__name__}: "
            f"missing {missing[:8]}, unexpected {unexpected[:8]}"
        )
    for key, value in converted.items():
        if value.shape != expected[key].shape:
            raise CheckpointError(
                f"backbone_checkpoint: {key} has shape {tuple(value.shape)}, model expects {tuple(expected[key].shape)}"
            )
    model.load_state_dict(converted, strict=True)


def create_timm_backbone(config: EncoderConfig) -> nn.Module:
    """A randomly initialised timm DINOv3-family ViT with separate q/k/v projections."""
    return timm.create_model(
        config.backbone, pretrained=False, num_classes=0, qkv_fused=False, **config.backbone_kwargs
    )


class MultiLayerBackbone(nn.Module):
    """Frozen (or trainable) ViT + LoRA that returns concatenated feature maps of chosen blocks.

    Each chosen block's patch tokens go through the final LayerNorm (so depths are on a common
    scale) and are concatenated channel-wise: [B, len(layers) * C, H/p, W/p].
    """

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.vit = create_timm_backbone(config)
        depth = len(self.vit.blocks)
        if max(config.layers) > depth:
            raise ValueError(f"layers: {config.layers} exceeds the backbone depth {depth}")
        if config.backbone_checkpoint:
            load_official_weights(self.vit, config.backbone_checkpoint)
        if config.freeze_backbone:
            self.vit.requires_grad_(False)
        if config.lora_rank > 0:
            apply_lora(
                self.vit.blocks, config.lora_last_blocks, config.lora_targets, config.lora_rank, config.lora_alpha
            )
        self.indices = [layer - 1 for layer in config.layers]
        self.out_channels = self.vit.embed_dim * len(self.indices)
        self.patch_size = int(self.vit.patch_embed.patch_size[0])

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        maps = self.vit.forward_intermediates(
            images, indices=self.indices, norm=True, output_fmt="NCHW", intermediates_only=True
        )
        return torch.cat(maps, dim=1)
