"""Deformation-aware cloth encoder: tokenizer (DINOv3 + LoRA + projection) and its pretraining."""

from .configuration import EncoderConfig, preset
from .modeling import (
    ClothTokenizer,
    ContrastiveHead,
    ProjectionModule,
    TokenBatch,
    TokenGeometry,
    token_geometry,
)

__all__ = [
    "ClothTokenizer",
    "ContrastiveHead",
    "EncoderConfig",
    "ProjectionModule",
    "TokenBatch",
    "TokenGeometry",
    "preset",
    "token_geometry",
]
