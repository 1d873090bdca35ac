"""3D relative attention: RoPE on camera-frame positions, 3D ALiBi and the transformer blocks.

Cloth, robot-state and action tokens share the camera frame, so rotating queries and keys by
their 3D positions (RoPE, one third of the rotary frequencies per axis) makes every attention
logit depend only on relative positions. 3D ALiBi adds -slope * distance so the per-frame spatial
layers prefer nearby cloth-robot pairs. Keys/values are projected by a separate method so a
context that does not change across denoising steps can be projected once and reused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

#: cos/sin of RoPE angles, each [B, 1, L, rot_dim / 2]; computed once per set of positions.
Angles = tuple[torch.Tensor, torch.Tensor]


def key_bias(valid: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Additive key mask [B, 1, 1, L]: 0 on valid keys, -inf on padding.

    A sequence with no valid key at all (a padded keyframe) attends to everything instead, so its
    (discarded) outputs stay finite rather than NaN; sequences with a valid key are unaffected.
    """
    valid = valid | ~valid.any(-1, keepdim=True)
    bias = torch.zeros(valid.shape, dtype=dtype, device=valid.device).masked_fill(~valid, float("-inf"))
    return bias[:, None, None, :]


@dataclass
class KeyValue:
    """Projected keys (already rotated by RoPE) and values, [B, heads, L, head_dim], and the key mask
    as an additive bias [B, 1, 1, L]."""

    k: torch.Tensor
    v: torch.Tensor
    bias: torch.Tensor

    @staticmethod
    def cat(parts: list[KeyValue]) -> KeyValue:
        return KeyValue(
            torch.cat([p.k for p in parts], 2),
            torch.cat([p.v for p in parts], 2),
            torch.cat([p.bias for p in parts], 3),
        )


class Rope3D(nn.Module):
    """Rotary embedding of 3D positions: head_dim // 6 frequencies per axis, remaining dims pass through.

    Rotation pairs dimension i with i + rot_dim / 2 ("rotate half"); which dimensions are paired
    is immaterial because the projections before it are learned.
    """

    def __init__(self, head_dim: int, min_wavelength: float, max_wavelength: float) -> None:
        super().__init__()
        self.freqs_per_axis = head_dim // 6
        self.rot_dim = 6 * self.freqs_per_axis
        wavelengths = torch.logspace(
            math.log10(min_wavelength), math.log10(max_wavelength), self.freqs_per_axis, dtype=torch.float64
        )
        self.register_buffer("omega", (2 * math.pi / wavelengths).float(), persistent=False)

    def angles(self, pos: torch.Tensor, dtype: torch.dtype) -> Angles:
        """cos/sin of [B, L, 3] positions (angles computed in float32, returned in `dtype`)."""
        ang = (pos.float()[..., None] * self.omega).flatten(-2)[:, None]
        return ang.cos().to(dtype), ang.sin().to(dtype)

    def rotate(self, x: torch.Tensor, angles: Angles) -> torch.Tensor:
        cos, sin = angles
        half = self.rot_dim // 2
        x1, x2, rest = x[..., :half], x[..., half : self.rot_dim], x[..., self.rot_dim :]
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos, rest), -1)


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi's geometric head slopes 2^(-8h/n), h = 1..n: some heads local, some nearly global."""
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / num_heads) for h in range(num_heads)])


class Attention(nn.Module):
    """Multi-head attention whose keys/values can be projected ahead of time (`project_kv`)."""

    def __init__(self, width: int, num_heads: int, rope: Rope3D) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = width // num_heads
        self.q = nn.Linear(width, width)
        self.kv = nn.Linear(width, 2 * width)
        self.out = nn.Linear(width, width)
        self.rope = rope

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2)

    def project_kv(self, x: torch.Tensor, angles: Angles, valid: torch.Tensor | None) -> KeyValue:
        """Keys/values of tokens `x`; `valid` None means every token is a valid key."""
        k, v = self.kv(x).chunk(2, -1)
        if valid is None:
            bias = torch.zeros(x.shape[0], 1, 1, x.shape[1], dtype=x.dtype, device=x.device)
        else:
            bias = key_bias(valid, x.dtype)
        return KeyValue(self.rope.rotate(self._heads(k), angles), self._heads(v), bias)

    def forward(
        self, x: torch.Tensor, angles: Angles, kv: KeyValue, distance_bias: torch.Tensor | None = None
    ) -> torch.Tensor:
        q = self.rope.rotate(self._heads(self.q(x)), angles)
        bias = kv.bias if distance_bias is None else kv.bias + distance_bias.to(x.dtype)
        out = F.scaled_dot_product_attention(q, kv.k, kv.v, attn_mask=bias)
        return self.out(out.transpose(1, 2).flatten(-2))


def mlp(width: int, ratio: float, out: int | None = None) -> nn.Sequential:
    hidden = int(width * ratio)
    return nn.Sequential(nn.Linear(width, hidden), nn.GELU(approximate="tanh"), nn.Linear(hidden, out or width))


class Block(nn.Module):
    """Pre-norm transformer block: attention of `x` to a context (itself or another set) + MLP."""

    def __init__(self, width: int, num_heads: int, mlp_ratio: float, rope: Rope3D, cross: bool = False) -> None:
        super().__init__()
        self.norm_q = nn.LayerNorm(width)
        self.norm_kv = nn.LayerNorm(width) if cross else None
        self.attn = Attention(width, num_heads, rope)
        self.norm_mlp = nn.LayerNorm(width)
        self.mlp = mlp(width, mlp_ratio)

    def context_kv(self, context: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor) -> KeyValue:
        """Keys/values of a cross-attention context; reusable while the context does not change."""
        assert self.norm_kv is not None, "context_kv needs a block built with cross=True"
        return self.attn.project_kv(self.norm_kv(context), self.attn.rope.angles(pos, context.dtype), valid)

    def forward(
        self,
        x: torch.Tensor,
        pos: torch.Tensor,
        valid: torch.Tensor,
        context_kv: KeyValue | None = None,
        distance_bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Self-attention when `context_kv` is None, else cross-attention to that context."""
        h = self.norm_q(x)
        angles = self.attn.rope.angles(pos, x.dtype)
        kv = self.attn.project_kv(h, angles, valid) if context_kv is None else context_kv
        x = x + self.attn(h, angles, kv, distance_bias)
        return x + self.mlp(self.norm_mlp(x))


class AdaBlock(nn.Module):
    """Decoder block with AdaLN-Zero conditioning (DiT) on the action tokens.

    Attention keys are `[scene context ; action tokens]` (`attend_self` and a context), the scene
    context only (cross-attention) or the action tokens only. The scene context is normalised
    by a plain LayerNorm, not the timestep-dependent AdaLN, so its keys/values do not depend on
    the denoising step and can be projected once per query (`context_kv`).
    """

    def __init__(
        self,
        width: int,
        num_heads: int,
        mlp_ratio: float,
        rope: Rope3D,
        attend_self: bool,
        uses_context: bool,
    ) -> None:
        super().__init__()
        self.attend_self = attend_self
        self.uses_context = uses_context
        self.norm_ctx = nn.LayerNorm(width) if uses_context else None
        self.norm1 = nn.LayerNorm(width, elementwise_affine=False)
        self.norm2 = nn.LayerNorm(width, elementwise_affine=False)
        self.attn = Attention(width, num_heads, rope)
        self.mlp = mlp(width, mlp_ratio)
        self.modulation = nn.Sequential(nn.SiLU(), nn.Linear(width, 6 * width))
        nn.init.zeros_(self.modulation[1].weight)
        nn.init.zeros_(self.modulation[1].bias)

    def context_kv(self, context: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor) -> KeyValue:
        assert self.norm_ctx is not None, "context_kv called on a block without context"
        return self.attn.project_kv(self.norm_ctx(context), self.attn.rope.angles(pos, context.dtype), valid)

    def forward(
        self, x: torch.Tensor, angles: Angles, modulation: torch.Tensor, context_kv: KeyValue | None
    ) -> torch.Tensor:
        """`modulation` = self.modulation(cond), [B, 6W]: precomputable for a known timestep schedule."""
        shift1, scale1, gate1, shift2, scale2, gate2 = modulation[:, None].chunk(6, -1)
        h = self.norm1(x) * (1 + scale1) + shift1
        parts = [context_kv] if self.uses_context else []
        if self.attend_self:
            parts.append(self.attn.project_kv(h, angles, None))
        kv = parts[0] if len(parts) == 1 else KeyValue.cat(parts)
        x = x + gate1 * self.attn(h, angles, kv)
        return x + gate2 * self.mlp(self.norm2(x) * (1 + scale2) + shift2)


def sinusoidal(values: torch.Tensor, dim: int, max_period: float = 10_000.0) -> torch.Tensor:
    """Transformer sinusoidal embedding of real values [...] -> [..., dim]."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=values.device, dtype=torch.float32) / half)
    ang = values.float()[..., None] * freqs
    emb = torch.cat((ang.cos(), ang.sin()), -1)
    return F.pad(emb, (0, dim - 2 * half))
