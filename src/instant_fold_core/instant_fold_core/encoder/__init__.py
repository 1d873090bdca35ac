"""Deformation-aware cloth encoder: tokenizer (DINOv3 + LoRA + projection) and its pretraining."""

from .configuration import ConfigError, EncoderConfig, preset
from .modeling import (
    ClothTokenizer,
    ClothTokens,
    ContrastiveHead,
    ProjectionModule,
    TokenGeometry,
    token_geometry,
)

__all__ = [
    "ClothTokenizer",
    "ClothTokens",
    "ConfigError",
    "ContrastiveHead",
    "EncoderConfig",
    "ProjectionModule",
    "TokenGeometry",
    "preset",
    "token_geometry",
]
