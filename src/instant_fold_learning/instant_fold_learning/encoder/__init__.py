"""Deformation-aware cloth encoder: tokenizer (DINOv3 + LoRA + projection) and its pretraining."""

from .configuration import EncoderConfig, preset
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
    "ContrastiveHead",
    "EncoderConfig",
    "ProjectionModule",
    "TokenGeometry",
    "preset",
    "token_geometry",
]
