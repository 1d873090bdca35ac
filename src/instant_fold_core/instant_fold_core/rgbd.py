"""One RGB-D observation as arrays: what cameras (RealSense, playback, simulator) produce and what
segmentation and the cloth encoder consume."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from instant_fold_core.distortion import NO_DISTORTION, Distortion
from instant_fold_core.validation import ValidationError, check_array


@dataclass(frozen=True)
class RGBDFrame:
    """Colour and depth aligned to it, with the colour camera's intrinsics.

    Attributes:
        color: uint8 [H, W, 3], RGB.
        depth: float32 [H, W], metres along the optical axis; 0 marks invalid pixels.
        intrinsics: float32 [3, 3] pinhole matrix K of both images.
        distortion: the lens distortion of both images (RealSense colour streams may have one).
        stamp_ns: capture time in nanoseconds (device or simulation clock).
        frame_number: the source's frame counter.
    """

    color: np.ndarray
    depth: np.ndarray
    intrinsics: np.ndarray
    stamp_ns: int = 0
    frame_number: int = 0
    distortion: Distortion = NO_DISTORTION

    def validate(self) -> RGBDFrame:
        """Check shapes, dtypes and values; raise `ValidationError` naming the field."""
        check_array("RGBDFrame.color", self.color, (None, None, 3), np.uint8)
        h, w = self.color.shape[:2]
        check_array("RGBDFrame.depth", self.depth, (h, w), np.float32)
        check_array("RGBDFrame.intrinsics", self.intrinsics, (3, 3), np.float32)
        if (self.depth < 0).any():
            raise ValidationError("RGBDFrame.depth: negative values (use 0 for invalid pixels)")
        k = self.intrinsics
        if k[0, 0] <= 0 or k[1, 1] <= 0 or k[2, 2] != 1:
            raise ValidationError(f"RGBDFrame.intrinsics: not a pinhole matrix: {k.ravel().tolist()}")
        return self
