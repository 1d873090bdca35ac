"""From pixels to cloth tokens: the one path for deployment and for the policy's training data.

The tokenizer node (the encoder on camera frames), the policy server and the closed-loop
evaluation call `tokenize_frame`; the policy's training data (`policy.tokenize_episodes`) calls
`tokenize_batch`, which `tokenize_frame` wraps, so training and deployment see the same tokens for
the same observation. The tokens leave as `instant_fold_core.tokens.TokenArrays`, the numpy
contract between processes, and are checked once where they cross a boundary, not here: by
`tokens_to_msg` where the tokenizer node sends them, by `tokens_from_msg` where the policy node
receives them, by the `PolicyRunner` where they enter the model.
"""

from __future__ import annotations

import numpy as np
import torch

from instant_fold_core.distortion import rectify
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_core.tokens import TokenArrays
from instant_fold_core.validation import check_array

from .modeling import ClothEncoder
from .preprocess import rgbd_tensors


def tokenize_frame(
    encoder: ClothEncoder, frame: RGBDFrame, mask: np.ndarray, deterministic: bool = True
) -> TokenArrays:
    """Run a `ClothEncoder` on one RGB-D frame and its cloth mask.

    `deterministic` starts farthest point sampling at a fixed pixel, so the same observation always
    gives the same tokens (what deployment wants; training uses random starts). A distorted frame
    is first resampled to the distortion-free camera with the same K, which is what the
    encoder's pinhole back-projection and feature sampling assume.
    """
    frame.validate()
    check_array("mask", mask, frame.depth.shape, np.bool_)
    color, depth, mask = rectify(frame.color, frame.depth, mask, frame.intrinsics, frame.distortion)
    positions, features, valid = tokenize_batch(
        encoder, color[None], depth[None], mask[None], frame.intrinsics, deterministic
    )
    return TokenArrays(positions[0], features[0], valid[0])


def tokenize_batch(
    encoder: ClothEncoder,
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
    device = next(encoder.parameters()).device
    with torch.inference_mode():
        out = encoder(*rgbd_tensors(color, depth, mask, intrinsics, device), deterministic=deterministic)
    return out.positions.float().cpu().numpy(), out.features.float().cpu().numpy(), out.valid.cpu().numpy()
