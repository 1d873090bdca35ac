"""Deformation-aware cloth encoder (DINOv3 + LoRA + projection: frame + mask -> cloth tokens) and its pretraining."""

from .configuration import EncoderConfig, preset
from .modeling import (
    ClothEncoder,
    ContrastiveHead,
    ProjectionModule,
    TokenBatch,
    TokenGeometry,
    token_geometry,
)

__all__ = [
    "ClothEncoder",
    "ContrastiveHead",
    "EncoderConfig",
    "ProjectionModule",
    "TokenBatch",
    "TokenGeometry",
    "preset",
    "token_geometry",
]
