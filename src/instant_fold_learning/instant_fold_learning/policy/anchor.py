"""Cloth-anchored grasp/place targets: a pointer over the current cloth tokens plus a bounded offset.

Why: with the paper's keypose auxiliary the next keypose is an offset from the current
end-effector, and a policy trained on expert states learns "an offset from where the arm is": the
predicted grasp moves with the arm (measured 0.6 of an arm shift), so closed-loop errors compound.
Here each arm's next gripper-event position is read from the cloth itself: attention weights of a
per-hand query over the current cloth tokens pick a point of the cloth (the weighted mean of the
tokens near the most likely one), and a small offset, bounded per axis (a grasp sits on the cloth,
a place hovers above it), is added. The arm state still tells the head which step of the fold it is
at (through the scene tokens), but it cannot move the target by more than the offset bound away
from the cloth point it chose. Not in the paper (docs/policy.md, "Cloth-anchored targets").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from instant_fold_learning.policy.attention import Block, Rope3D, mlp
from instant_fold_learning.policy.configuration import PolicyConfig

#: Unit of the home head's offset from the arm (the arms end a fold up to ~0.5 m from home).
HOME_SCALE_M = 0.1


@dataclass
class AnchorOutput:
    """logits [B, 2, N] over the cloth tokens per arm (padding at -inf), position [B, 2, 3] the
    anchored next-event target (camera frame), openness_logit [B, 2] the gripper after the event,
    remaining_logit [B, 2] whether the arm has an event left, home [B, 2, 3] where an arm whose
    work is done goes (the episode's end pose)."""

    logits: torch.Tensor
    position: torch.Tensor
    openness_logit: torch.Tensor
    remaining_logit: torch.Tensor
    home: torch.Tensor

    @property
    def remaining(self) -> torch.Tensor:
        """bool [B, 2]: the arms predicted to have an event left."""
        return self.remaining_logit > 0

    @property
    def target(self) -> torch.Tensor:
        """[B, 2, 3] each arm's next target: its anchored event, or home once it has none left."""
        return torch.where(self.remaining[..., None], self.position, self.home)


class AnchorHead(nn.Module):
    """Two hand queries cross-attend to the fused scene (cloth, robot and state-event tokens), then
    point at one cloth token each; the target is that point plus a bounded learned offset."""

    def __init__(self, cfg: PolicyConfig, rope: Rope3D) -> None:
        super().__init__()
        w = cfg.width
        self.queries = nn.Parameter(torch.randn(2, w) * 0.02)
        self.read = Block(w, cfg.num_heads, cfg.mlp_ratio, rope, cross=True)
        self.query_proj = nn.Linear(w, w)
        self.key_proj = nn.Linear(w, w)
        self.offset = mlp(2 * w, 1.0, 3)
        self.openness = mlp(w, 1.0, 1)
        self.remaining = mlp(w, 1.0, 1)
        # Home is a robot pose, not a cloth point: an offset from the arm (in HOME_SCALE_M units).
        self.home = mlp(w, 1.0, 3)
        self.window_m = cfg.anchor_window_m
        bound = [cfg.anchor_offset_xy_m, cfg.anchor_offset_xy_m, cfg.anchor_offset_z_m]
        self.register_buffer("bound", torch.tensor(bound), persistent=False)

    def forward(
        self,
        context: torch.Tensor,
        context_pos: torch.Tensor,
        context_valid: torch.Tensor,
        cloth: torch.Tensor,
        cloth_pos: torch.Tensor,
        cloth_valid: torch.Tensor,
        robot: torch.Tensor,
        arm_xyz: torch.Tensor,
        centroid: torch.Tensor,
        read_bias: torch.Tensor | None = None,
    ) -> AnchorOutput:
        """context [B, L, W] (the decoder's scene context) with positions/validity; cloth [B, N, W]
        the fused cloth tokens at cloth_pos [B, N, 3]; robot [B, 2, W] the current robot-state
        tokens (which hand, how far the fold is) and arm_xyz [B, 2, 3] their positions; centroid
        [B, 3] the cloth centroid, where the queries sit so that relative attention does not favour
        cloth near the arm; `read_bias` an additive attention mask [B, heads, 1, L] on the context
        (`model.progress_bias`)."""
        b = cloth.shape[0]
        q = self.queries.to(cloth.dtype)[None] + robot
        q_pos = centroid[:, None].expand(b, 2, 3).to(cloth_pos.dtype)
        ones = torch.ones(b, 2, dtype=torch.bool, device=cloth.device)
        h = self.read(q, q_pos, ones, self.read.context_kv(context, context_pos, context_valid), read_bias)
        logits = torch.einsum("bhw,bnw->bhn", self.query_proj(h), self.key_proj(cloth)) / math.sqrt(cloth.shape[-1])
        logits = logits.float().masked_fill(~cloth_valid[:, None], float("-inf"))
        point = windowed_mean(logits, cloth_pos.float(), self.window_m)
        weights = logits.softmax(-1).to(cloth.dtype)
        pooled = torch.einsum("bhn,bnw->bhw", weights, cloth)
        offset = torch.tanh(self.offset(torch.cat((h, pooled), -1)).float()) * self.bound
        home = arm_xyz.float() + self.home(h).float() * HOME_SCALE_M
        return AnchorOutput(
            logits, point + offset, self.openness(h)[..., 0].float(), self.remaining(h)[..., 0].float(), home
        )


def windowed_mean(logits: torch.Tensor, positions: torch.Tensor, radius: float) -> torch.Tensor:
    """[B, 2, N] logits, [B, N, 3] positions -> [B, 2, 3]: the softmax-weighted mean of the tokens
    within `radius` of the most likely token (the window is chosen without gradient; the weights
    inside it keep theirs)."""
    best = logits.argmax(-1)  # [B, 2]
    centre = torch.gather(positions, 1, best[..., None].expand(-1, -1, 3))  # [B, 2, 3]
    near = torch.cdist(centre, positions) <= radius  # [B, 2, N]; the best token is always near
    weights = logits.masked_fill(~near, float("-inf")).softmax(-1)
    return torch.einsum("bhn,bnc->bhc", weights, positions)


def nearest_token(target: torch.Tensor, cloth_pos: torch.Tensor, cloth_valid: torch.Tensor) -> torch.Tensor:
    """[B, H, 3] targets, [B, N, 3] token positions, [B, N] validity -> [B, H]: the valid token
    nearest each target in the image plane (x, y), what a pointer over the tokens is taught."""
    xy = torch.cdist(target[..., :2].float(), cloth_pos[..., :2].float())  # [B, H, N]
    return xy.masked_fill(~cloth_valid[:, None], float("inf")).argmin(-1)


def anchor_losses(
    out: AnchorOutput,
    cloth_pos: torch.Tensor,
    cloth_valid: torch.Tensor,
    target: torch.Tensor,
    openness: torch.Tensor,
    valid: torch.Tensor,
    scale_m: float = 0.05,
) -> dict[str, torch.Tensor]:
    """Losses of the anchored head. Over the arms that have an event left (`valid` [B, 2]): pointer
    cross-entropy towards the valid cloth token nearest to the target (in the image plane: a place
    hovers above the cloth it lands on), smooth-L1 of the target position in units of `scale_m`,
    and the openness BCE; over the others, smooth-L1 of the home head against `target` (there the
    episode's end pose). Each is a mean over its arms (0 when there is none); whether an arm has
    an event left is the caller's BCE."""
    nearest = nearest_token(target, cloth_pos, cloth_valid)
    w = valid.float()
    count, done = w.sum().clamp_min(1.0), (1 - w).sum().clamp_min(1.0)
    ce = F.cross_entropy(out.logits.flatten(0, 1), nearest.flatten(), reduction="none").view_as(w)

    def distance(x: torch.Tensor) -> torch.Tensor:
        return F.smooth_l1_loss(x / scale_m, target.float() / scale_m, reduction="none").sum(-1)

    bce = F.binary_cross_entropy_with_logits(out.openness_logit, openness.float(), reduction="none")
    return {
        "anchor_pointer": (ce * w).sum() / count,
        "anchor_position": (distance(out.position) * w).sum() / count,
        "anchor_openness": (bce * w).sum() / count,
        "anchor_home": (distance(out.home) * (1 - w)).sum() / done,
    }
