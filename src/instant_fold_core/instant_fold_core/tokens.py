"""Cloth tokens as numpy arrays: what crosses process boundaries between tokenizer and policy."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from instant_fold_core.distortion import rectify
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_core.validation import ValidationError, check_array


class TokenArrays(NamedTuple):
    """N cloth tokens: positions [N, 3] (m, camera frame), features [N, D], valid [N] (bool)."""

    positions: np.ndarray
    features: np.ndarray
    valid: np.ndarray

    def validate(self, num_tokens: int | None = None, feature_dim: int | None = None) -> TokenArrays:
        """Check shapes/dtypes/finiteness (and N, D when given); at least one token must be valid."""
        check_array("tokens.positions", self.positions, (num_tokens, 3))
        n = self.positions.shape[0]
        check_array("tokens.features", self.features, (n, feature_dim))
        check_array("tokens.valid", self.valid, (n,), np.bool_)
        if not self.valid.any():
            raise ValidationError("tokens.valid: no valid token")
        return self


def tokenize_frame(tokenizer, frame: RGBDFrame, mask: np.ndarray, deterministic: bool = True) -> TokenArrays:
    """Run a `ClothTokenizer` on one RGB-D frame and its cloth mask.

    `deterministic` starts farthest point sampling at a fixed pixel, so the same observation always
    gives the same tokens (what deployment wants; training uses random starts). A distorted frame
    is first resampled to the distortion-free camera with the same K, which is what the
    tokenizer's pinhole back-projection and feature sampling assume.
    """
    frame.validate()
    check_array("mask", mask, frame.depth.shape, np.bool_)
    color, depth, mask = rectify(frame.color, frame.depth, mask, frame.intrinsics, frame.distortion)
    positions, features, valid = tokenize_batch(
        tokenizer, color[None], depth[None], mask[None], frame.intrinsics, deterministic
    )
    return TokenArrays(positions[0], features[0], valid[0]).validate()


def tokenize_batch(
    tokenizer,
    color: np.ndarray,
    depth: np.ndarray,
    mask: np.ndarray,
    intrinsics: np.ndarray,
    deterministic: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cloth tokens (positions [B, N, 3], features [B, N, D], valid [B, N]) of B undistorted frames.

    The one path from pixels to tokens for deployment (`tokenize_frame`) and policy training data
    (`policy.tokenize_episodes`); the arrays are those of `encoder.preprocess.rgbd_tensors`.
    """
    import torch

    from instant_fold_core.encoder.preprocess import rgbd_tensors

    device = next(tokenizer.parameters()).device
    with torch.inference_mode():
        out = tokenizer(*rgbd_tensors(color, depth, mask, intrinsics, device), deterministic=deterministic)
    return out.positions.float().cpu().numpy(), out.features.float().cpu().numpy(), out.valid.cpu().numpy()
