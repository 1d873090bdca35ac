"""Cloth encoder: masked RGB-D + intrinsics -> N cloth tokens (3D position, D-dim feature).

Pipeline (paper, "Deformable Representation"): centre-crop/resize, back-project masked depth to
camera-frame points, FPS to N points, project them back to pixels, bilinearly sample the
multi-layer backbone feature map there, and map the samples through the projection module.
The contrastive head lives here too but is used (and saved) only by pretraining.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from instant_fold_core.checkpoint import CheckpointError, load_checkpoint, load_strict, save_checkpoint
from instant_fold_core.errors import ConfigError
from instant_fold_core.geometry import (
    GeometryError,
    backproject_depth,
    center_crop_resize,
    farthest_point_sampling,
    gather_points,
    project_points,
    sample_features,
)

from .backbone import MultiLayerBackbone
from .configuration import EncoderConfig

#: `kind` of a saved encoder's config.json. Encoders saved before the encoder had one name (the
#: same model was then the "cloth tokenizer") say `cloth_tokenizer`: read as the same format.
ENCODER_KIND = "cloth_encoder"
READABLE_KINDS = (ENCODER_KIND, "cloth_tokenizer", "encoder_pretraining")


@dataclass
class TokenBatch:
    """Cloth tokens of a batch: positions [B,N,3] (camera frame, m), features [B,N,D],
    valid [B,N] (False for padding slots when a frame has fewer cloth points than N)."""

    positions: torch.Tensor
    features: torch.Tensor
    valid: torch.Tensor


@dataclass
class TokenGeometry:
    """Backbone-free part of tokenization: sampled points, their pixels and validity."""

    positions: torch.Tensor
    pixels: torch.Tensor
    valid: torch.Tensor


def validate_observation(rgb: torch.Tensor, depth: torch.Tensor, mask: torch.Tensor, intrinsics: torch.Tensor) -> None:
    """Raise `GeometryError` naming the field for wrong shapes, dtypes or non-finite values."""
    if rgb.ndim != 4 or rgb.shape[1] != 3 or not rgb.is_floating_point():
        raise GeometryError(f"rgb: expected float [B, 3, H, W] in [0, 1], got {rgb.dtype} {tuple(rgb.shape)}")
    b, _, h, w = rgb.shape
    if depth.shape != (b, h, w) or not depth.is_floating_point():
        raise GeometryError(f"depth: expected float [{b}, {h}, {w}] metres, got {depth.dtype} {tuple(depth.shape)}")
    if mask.shape != (b, h, w) or mask.dtype != torch.bool:
        raise GeometryError(f"mask: expected bool [{b}, {h}, {w}], got {mask.dtype} {tuple(mask.shape)}")
    if intrinsics.shape != (b, 3, 3):
        raise GeometryError(f"intrinsics: expected [{b}, 3, 3], got {tuple(intrinsics.shape)}")
    if not torch.isfinite(rgb).all():
        raise GeometryError("rgb: contains NaN or infinite values")
    if torch.isnan(depth).any():
        raise GeometryError("depth: contains NaN (use 0 for invalid pixels)")


def token_geometry(
    depth: torch.Tensor,
    mask: torch.Tensor,
    intrinsics: torch.Tensor,
    num_tokens: int,
    near: float,
    far: float,
    deterministic: bool = False,
    generator: torch.Generator | None = None,
) -> TokenGeometry:
    """Back-project, FPS-sample `num_tokens` cloth points and project them to pixels.

    FPS starts at a random cloth point (training-time variety), or at the first valid pixel in
    raster order when `deterministic` (evaluation, reproducible tokens)."""
    points, valid = backproject_depth(depth, mask, intrinsics, near, far)
    counts = valid.sum(dim=1)
    if (counts == 0).any():
        bad = torch.nonzero(counts == 0)[:, 0].tolist()
        raise GeometryError(f"mask: batch element(s) {bad} have no cloth pixel with valid depth in [{near}, {far}] m")
    start = valid.to(torch.uint8).argmax(dim=1) if deterministic else None
    index = farthest_point_sampling(points, num_tokens, start=start, valid=valid, generator=generator)
    positions = gather_points(points, index)
    slots = torch.arange(num_tokens, device=depth.device)[None, :]
    return TokenGeometry(positions, project_points(positions, intrinsics), slots < counts[:, None])


class ProjectionModule(nn.Module):
    """Maps aggregated multi-layer backbone features to the D-dim cloth-token feature."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(in_dim), nn.Linear(in_dim, hidden), nn.GELU(), nn.Linear(hidden, out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class ContrastiveHead(nn.Module):
    """Pretraining-only MLP on top of cloth-token features (discarded afterwards)."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, in_dim), nn.GELU(), nn.Linear(in_dim, out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class ClothEncoder(nn.Module):
    """Masked RGB-D observation -> `TokenBatch` (what the policy consumes)."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.backbone = MultiLayerBackbone(config)
        self.projection = ProjectionModule(self.backbone.out_channels, config.projection_hidden, config.feature_dim)
        self.register_buffer("image_mean", torch.tensor(config.image_mean).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("image_std", torch.tensor(config.image_std).view(1, 3, 1, 1), persistent=False)

    @property
    def feature_dim(self) -> int:
        return self.config.feature_dim

    @property
    def num_tokens(self) -> int:
        return self.config.num_tokens

    def feature_map(self, rgb: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Aggregated backbone features [B, C, h, w] of square, resized images."""
        if self.config.mask_rgb:
            rgb = rgb * mask[:, None].to(rgb.dtype)
        return self.backbone((rgb - self.image_mean) / self.image_std)

    def forward(
        self,
        rgb: torch.Tensor,
        depth: torch.Tensor,
        mask: torch.Tensor,
        intrinsics: torch.Tensor,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
    ) -> TokenBatch:
        """Tokenize a batch: rgb float [B,3,H,W] in [0,1], depth [B,H,W] m (0 invalid), mask bool
        [B,H,W], intrinsics [B,3,3]. FPS starts at a random cloth point unless `deterministic`."""
        validate_observation(rgb, depth, mask, intrinsics)
        size = self.config.image_size
        rgb, depth, mask, k = center_crop_resize(rgb, depth, mask, intrinsics.to(rgb.device), size)
        geo = token_geometry(
            depth, mask, k, self.config.num_tokens, self.config.near, self.config.far, deterministic, generator
        )
        fmap = self.feature_map(rgb, mask)
        features = self.projection(sample_features(fmap, geo.pixels, (size, size)).float())
        return TokenBatch(geo.positions, features, geo.valid)

    def save_pretrained(self, directory: str | Path) -> Path:
        """Write weights + config (no contrastive head) as an encoder checkpoint."""
        config = {"kind": ENCODER_KIND, "encoder": {**self.config.to_dict(), "backbone_checkpoint": None}}
        return save_checkpoint(directory, self.state_dict(), config)

    @classmethod
    def from_pretrained(cls, directory: str | Path, device: str | torch.device = "cpu") -> ClothEncoder:
        """Rebuild an encoder from `save_pretrained` output (or a pretraining checkpoint)."""
        tensors, config = load_checkpoint(directory, device)
        if config.get("kind") not in READABLE_KINDS or not isinstance(config.get("encoder"), dict):
            raise CheckpointError(f"checkpoint {directory}: config.json does not describe a cloth encoder")
        try:
            model = cls(EncoderConfig.from_dict({**config["encoder"], "backbone_checkpoint": None}))
        except ConfigError as exc:
            raise CheckpointError(f"checkpoint {directory}: invalid config.json ({exc})") from exc
        # A pretraining train state holds the encoder as `model.encoder.*` next to the head and the
        # optimizer (`model.tokenizer.*` before the encoder had one name, `tokenizer.*` before the
        # shared training scaffold).
        for prefix in ("model.encoder.", "model.tokenizer.", "tokenizer."):
            if any(k.startswith(prefix) for k in tensors):
                tensors = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
                break
        load_strict(model, tensors, directory)
        return model.to(device).eval()
