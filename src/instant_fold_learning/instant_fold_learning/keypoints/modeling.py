"""The keypoint detector: one pointer per named keypoint over a frame's cloth tokens.

Each keypoint's query reads the tokens (features + their geometry relative to the cloth) and
points at one of them; the keypoint is the windowed mean of the tokens around the likeliest one
plus a bounded offset, as the policy's cloth-anchored head reads its targets
(`policy/anchor.py`): a prediction can only lie on, or a few centimetres off, the cloth it sees.
Visibility (whether the keypoint's particle is seen by the camera, e.g. not under a folded layer)
is predicted too, so a caller knows which keypoints to trust.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from instant_fold_core.checkpoint import CheckpointError, load_checkpoint, load_strict, save_checkpoint
from instant_fold_core.dataset.schema import KEYPOINT_NAMES
from instant_fold_core.errors import ConfigError
from instant_fold_core.tokens import TokenArrays
from instant_fold_learning.keypoints.configuration import KeypointDetectorConfig
from instant_fold_learning.policy.anchor import nearest_token, windowed_mean
from instant_fold_learning.policy.attention import Block, Rope3D, mlp
from instant_fold_learning.policy.context_encoder import FourierGeometry, masked_centroid

#: `config.json` "kind" of a keypoint detector checkpoint.
KIND = "keypoint_detector"


@dataclass
class Keypoints:
    """A detector's prediction on one frame (`KeypointDetector.predict`): positions [K, 3] (camera
    frame) and visibility probabilities [K]."""

    positions: np.ndarray
    visible: np.ndarray


@dataclass
class KeypointOutput:
    """logits [B, K, N] over the tokens per keypoint (padding at -inf), position [B, K, 3] (camera
    frame), visible_logit [B, K]."""

    logits: torch.Tensor
    position: torch.Tensor
    visible_logit: torch.Tensor


class KeypointDetector(nn.Module):
    """Cloth tokens -> the `KEYPOINT_NAMES` keypoints (see the module's docstring)."""

    def __init__(self, config: KeypointDetectorConfig) -> None:
        super().__init__()
        self.config = config.validate()
        m = config.model
        w = m.width
        rope = Rope3D(w // m.num_heads, m.rope_min_wavelength_m, m.rope_max_wavelength_m)
        self.embed = nn.Linear(m.cloth_feature_dim, w)
        self.geometry = FourierGeometry(w)
        self.blocks = nn.ModuleList(Block(w, m.num_heads, m.mlp_ratio, rope) for _ in range(m.layers))
        self.queries = nn.Parameter(torch.randn(len(KEYPOINT_NAMES), w) * 0.02)
        self.read = Block(w, m.num_heads, m.mlp_ratio, rope, cross=True)
        self.query_proj = nn.Linear(w, w)
        self.key_proj = nn.Linear(w, w)
        self.offset = mlp(2 * w, 1.0, 3)
        self.visible = mlp(w, 1.0, 1)
        self.bound: torch.Tensor
        self.register_buffer("bound", torch.tensor([m.offset_xy_m, m.offset_xy_m, m.offset_z_m]), persistent=False)

    def forward(self, positions: torch.Tensor, features: torch.Tensor, valid: torch.Tensor) -> KeypointOutput:
        """positions [B, N, 3] (camera frame, m), features [B, N, D], valid [B, N] (bool)."""
        positions = positions.float()
        centroid = masked_centroid(positions, valid)
        x = self.embed(features.float()) + self.geometry(positions - centroid[:, None])
        for block in self.blocks:
            x = block(x, positions, valid)
        b, k = x.shape[0], self.queries.shape[0]
        q_pos = centroid[:, None].expand(b, k, 3)
        ones = torch.ones(b, k, dtype=torch.bool, device=x.device)
        h = self.read(self.queries[None].expand(b, -1, -1), q_pos, ones, self.read.context_kv(x, positions, valid))
        logits = torch.einsum("bkw,bnw->bkn", self.query_proj(h), self.key_proj(x)) / math.sqrt(x.shape[-1])
        logits = logits.masked_fill(~valid[:, None], float("-inf"))
        point = windowed_mean(logits, positions, self.config.model.window_m)
        pooled = torch.einsum("bkn,bnw->bkw", logits.softmax(-1), x)
        offset = torch.tanh(self.offset(torch.cat((h, pooled), -1))) * self.bound
        return KeypointOutput(logits, point + offset, self.visible(h)[..., 0])

    @torch.no_grad()
    def predict(self, tokens: TokenArrays) -> Keypoints:
        """One frame's tokens -> its keypoints (camera frame) and their visibility probabilities."""
        m = self.config.model
        tokens.validate(m.num_cloth_tokens, m.cloth_feature_dim)
        device = self.queries.device
        out = self(
            torch.as_tensor(tokens.positions, dtype=torch.float32, device=device)[None],
            torch.as_tensor(tokens.features, dtype=torch.float32, device=device)[None],
            torch.as_tensor(tokens.valid, device=device)[None],
        )
        return Keypoints(
            out.position[0].double().cpu().numpy(), torch.sigmoid(out.visible_logit[0]).double().cpu().numpy()
        )

    def save_pretrained(self, directory: str | Path) -> Path:
        return save_checkpoint(directory, self.state_dict(), {"kind": KIND, **self.config.to_dict()})

    @classmethod
    def from_pretrained(cls, directory: str | Path, device: str | torch.device = "cpu") -> KeypointDetector:
        """Rebuild a detector from `save_pretrained` output; `CheckpointError` when it is not one."""
        tensors, config = load_checkpoint(directory, device)
        if config.get("kind") != KIND:
            raise CheckpointError(f"checkpoint {directory}: config.json does not describe a keypoint detector")
        try:
            model = cls(KeypointDetectorConfig.from_dict({k: v for k, v in config.items() if k != "kind"}))
        except ConfigError as exc:
            raise CheckpointError(f"checkpoint {directory}: invalid config.json ({exc})") from exc
        load_strict(model, tensors, directory)
        return model.to(device).eval()


def keypoint_losses(
    out: KeypointOutput,
    positions: torch.Tensor,
    valid: torch.Tensor,
    keypoints: torch.Tensor,
    visible: torch.Tensor,
    scale_m: float = 0.05,
) -> dict[str, torch.Tensor]:
    """Over the visible keypoints (`visible` [B, K]; a hidden one lies under a layer the tokens do
    not show): pointer cross-entropy towards the valid token nearest the keypoint in x, y, and
    smooth-L1 of the position in units of `scale_m`; over all keypoints the visibility BCE."""
    w = visible.float()
    count = w.sum().clamp_min(1.0)
    target = nearest_token(keypoints, positions, valid)
    ce = F.cross_entropy(out.logits.flatten(0, 1), target.flatten(), reduction="none").view_as(w)
    distance = F.smooth_l1_loss(out.position / scale_m, keypoints.float() / scale_m, reduction="none").sum(-1)
    return {
        "pointer": (ce * w).sum() / count,
        "position": (distance * w).sum() / count,
        "visible": F.binary_cross_entropy_with_logits(out.visible_logit, w),
    }
