"""Cloth segmentation backends: `plane` (geometry only, no weights) and `sam2` (video tracking)."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from instant_fold_core.errors import InstantFoldError
from instant_fold_core.rgbd import RGBDFrame


class SegmentationError(InstantFoldError, RuntimeError):
    """A frame could not be segmented (no table plane, no cloth, invalid depth)."""


class Segmenter(Protocol):
    """A backend turns an RGB-D frame into a boolean cloth mask [H, W]."""

    def segment(self, frame: RGBDFrame) -> np.ndarray: ...
