"""The one conversion of uint8 RGB-D observations into the cloth encoder's input tensors.

Deployment (`encoder.tokenize.tokenize_frame`, behind the tokenizer node and the policy server), policy-data
tokenisation (`policy/tokenize_episodes`) and encoder pretraining (`encoder/data`) all call
`rgbd_tensors`, so the network sees the same numbers for the same pixels in training and at
deployment: written twice, a change to one copy (a scale, a channel order) would be a silent
train/deploy skew.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from instant_fold_core.validation import ValidationError


class RGBDTensors(NamedTuple):
    """A batch of B observations as the encoder takes them."""

    rgb: torch.Tensor  # [B, 3, H, W] float32 in [0, 1]
    depth: torch.Tensor  # [B, H, W] metres, as given
    mask: torch.Tensor  # [B, H, W] bool, True = cloth
    intrinsics: torch.Tensor  # [B, 3, 3]


def rgbd_tensors(
    color: np.ndarray,
    depth: np.ndarray,
    mask: np.ndarray,
    intrinsics: np.ndarray,
    device: torch.device | str = "cpu",
) -> RGBDTensors:
    """uint8 colour [B, H, W, 3], depth [B, H, W], mask [B, H, W] and K ([3, 3] shared by the batch, or
    [B, 3, 3]) -> tensors on `device`: colour channels first, scaled to [0, 1]; the rest unchanged."""
    if color.dtype != np.uint8 or color.ndim != 4 or color.shape[-1] != 3:
        raise ValidationError(f"color: expected uint8 [B, H, W, 3], got {color.dtype} {list(color.shape)}")
    rgb = torch.from_numpy(color).to(device).permute(0, 3, 1, 2).float().div(255.0)
    k = torch.from_numpy(intrinsics).to(device)
    if k.ndim == 2:
        k = k.expand(rgb.shape[0], 3, 3)
    return RGBDTensors(rgb, torch.from_numpy(depth).to(device), torch.from_numpy(mask).to(device), k)
