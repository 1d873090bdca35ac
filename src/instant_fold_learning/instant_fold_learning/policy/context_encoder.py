"""Shared tokenisation, the context encoder, summary tokens and the state-event branch (appendix C)."""

from __future__ import annotations

import math

import torch
from torch import nn

from instant_fold_learning.policy.attention import Block, Rope3D, alibi_slopes, sinusoidal
from instant_fold_learning.policy.configuration import PolicyConfig
from instant_fold_learning.policy.progress import MAX_EVENT_COUNT


def masked_centroid(positions: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Mean of the valid positions: [B, L, 3], [B, L] -> [B, 3] (0 where no position is valid)."""
    w = valid.to(positions.dtype)[..., None]
    return (positions * w).sum(-2) / w.sum(-2).clamp_min(1)


class SceneTokenizer(nn.Module):
    """Projects cloth tokens to the policy width and embeds robot states (x, y, z, g) with hand identity.

    Shared by the demonstration keyframes and the current observation, so both live in one
    embedding space; the same state encoder also feeds the proprioceptive AdaLN signal. With
    `cfg.cloth_geometry`, positions enter the content too, relative to the frame's cloth centroid:
    Fourier features for cloth tokens, the offset itself for robot states (so content carries
    metric geometry that attention can read out, invariant to where the garment lies).
    """

    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        w = cfg.width
        self.cloth_proj = nn.Sequential(nn.LayerNorm(cfg.cloth_feature_dim), nn.Linear(cfg.cloth_feature_dim, w))
        self.state_encoder = nn.Sequential(nn.Linear(4, w), nn.GELU(approximate="tanh"), nn.Linear(w, w))
        self.hand = nn.Embedding(2, w)
        self.kind = nn.Embedding(2, w)  # 0 = cloth token, 1 = robot-state token
        self.geometry = FourierGeometry(w) if cfg.cloth_geometry else None
        self.progress = nn.Embedding(MAX_EVENT_COUNT + 1, w) if cfg.event_progress else None

    def robot(
        self, state: torch.Tensor, origin: torch.Tensor | None = None, counts: torch.Tensor | None = None
    ) -> torch.Tensor:
        """[..., 2, 4] arm states -> [..., 2, W] robot-state tokens; with cloth geometry the
        positions are taken relative to `origin` [..., 3] (the cloth centroid; ignored without);
        with event progress `counts` [..., 2] are the arms' gripper events so far (required)."""
        if self.geometry is not None:
            assert origin is not None, "cloth geometry needs the cloth centroid"
            state = torch.cat((state[..., :3] - origin[..., None, :], state[..., 3:]), -1)
        tokens = self.state_encoder(state) + self.hand.weight + self.kind.weight[1]
        if self.progress is not None:
            if counts is None:
                raise ValueError("model.event_progress: the robot state needs its arms' event counts")
            tokens = tokens + self.progress(counts.clamp(0, MAX_EVENT_COUNT))
        return tokens

    def scene(
        self,
        positions: torch.Tensor,
        features: torch.Tensor,
        valid: torch.Tensor,
        state: torch.Tensor | None,
        counts: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Tokens, positions and validity of cloth (+ robot-state, when `state` is given, with the
        arms' event `counts` under event progress) tokens."""
        tokens = self.cloth_proj(features) + self.kind.weight[0]
        origin = masked_centroid(positions, valid) if self.geometry is not None else None
        if origin is not None:
            tokens = tokens + self.geometry(positions - origin[..., None, :]).to(tokens.dtype)
        if state is None:
            return tokens, positions, valid
        robot_valid = torch.ones((*valid.shape[:-1], 2), dtype=torch.bool, device=valid.device)
        return (
            torch.cat((tokens, self.robot(state, origin, counts)), -2),
            torch.cat((positions, state[..., :3]), -2),
            torch.cat((valid, robot_valid), -1),
        )


class FourierGeometry(nn.Module):
    """Random-free Fourier features of 3D offsets (wavelengths 2 cm to 1 m, the garment's scales,
    geometric) projected to the width."""

    def __init__(self, width: int, bands: int = 6, min_wavelength_m: float = 0.02, max_wavelength_m: float = 1.0):
        super().__init__()
        wavelengths = torch.logspace(math.log10(min_wavelength_m), math.log10(max_wavelength_m), bands)
        self.register_buffer("omega", 2 * math.pi / wavelengths, persistent=False)
        self.proj = nn.Linear(3 * 2 * bands, width)

    def forward(self, offsets: torch.Tensor) -> torch.Tensor:
        ang = (offsets.float()[..., None] * self.omega).flatten(-2)
        return self.proj(torch.cat((ang.cos(), ang.sin()), -1))


class ContextEncoder(nn.Module):
    """Per-frame spatial layers (RoPE + 3D ALiBi), temporal embedding, dense spatio-temporal layers.

    With 0 layers (the "w/o context encoder" ablation) only the temporal embedding remains, so
    the decoder attends to the raw projected demonstration tokens.
    """

    def __init__(self, cfg: PolicyConfig, rope: Rope3D) -> None:
        super().__init__()
        enabled = cfg.use_context_encoder
        self.width = cfg.width
        self.use_alibi = cfg.use_alibi
        self.alibi_scale = cfg.alibi_length_scale_m

        def stack(n: int) -> nn.ModuleList:
            return nn.ModuleList(Block(cfg.width, cfg.num_heads, cfg.mlp_ratio, rope) for _ in range(n))

        self.spatial = stack(cfg.spatial_layers if enabled else 0)
        self.temporal = stack(cfg.temporal_layers if enabled else 0)
        self.register_buffer("slopes", alibi_slopes(cfg.num_heads), persistent=False)

    def forward(
        self, tokens: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """[B, K, L, *] keyframe tokens (valid already masked by frame padding) -> [B, K*L, *]."""
        b, k = tokens.shape[:2]
        x, p, v = tokens.flatten(0, 1), pos.flatten(0, 1), valid.flatten(0, 1)
        if self.spatial:
            bias = None
            if self.use_alibi:
                dist = torch.cdist(p.float(), p.float())[:, None]  # [B*K, 1, L, L]
                bias = -self.slopes[:, None, None] * dist / self.alibi_scale
            for block in self.spatial:
                x = block(x, p, v, distance_bias=bias)
        time = sinusoidal(torch.arange(k, device=x.device), self.width).to(x.dtype)
        x = (x.unflatten(0, (b, k)) + time[None, :, None]).flatten(1, 2)
        p, v = pos.flatten(1, 2), valid.flatten(1, 2)
        for block in self.temporal:
            x = block(x, p, v)
        return x, p, v


class SummaryTokens(nn.Module):
    """Learned queries cross-attending to the encoded demonstration: compact global mode tokens.

    They have no geometry of their own; they sit at the centroid of the valid context tokens so
    relative attention treats them as garment-level tokens.
    """

    def __init__(self, cfg: PolicyConfig, rope: Rope3D) -> None:
        super().__init__()
        self.queries = nn.Parameter(torch.randn(cfg.num_summary_tokens, cfg.width) * 0.02)
        self.block = Block(cfg.width, cfg.num_heads, cfg.mlp_ratio, rope, cross=True)

    def forward(
        self, tokens: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, s = tokens.shape[0], self.queries.shape[0]
        q_pos = masked_centroid(pos, valid)[:, None].expand(b, s, 3)
        q = self.queries.to(tokens.dtype).expand(b, s, -1)
        out = self.block(
            q,
            q_pos,
            torch.ones(b, s, dtype=torch.bool, device=tokens.device),
            self.block.context_kv(tokens, pos, valid),
        )
        return out, q_pos, torch.ones(b, s, dtype=torch.bool, device=tokens.device)


class StateEventEncoder(nn.Module):
    """State-event tokens: an MLP over each keyframe's arm state and its motion to the next keyframe.

    Kept outside the cloth-dominated context so sparse grasp/release events are not diluted;
    the motion input (state change to the next valid keyframe, 0 for the last) carries timing.
    """

    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.width = cfg.width
        self.mlp = nn.Sequential(nn.Linear(8, cfg.width), nn.GELU(approximate="tanh"), nn.Linear(cfg.width, cfg.width))
        self.hand = nn.Embedding(2, cfg.width)

    def forward(self, state: torch.Tensor, frame_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """state [B, K, 2, 4], frame_mask [B, K] -> tokens [B, 2K, W], positions, validity."""
        k = state.shape[1]
        has_next = frame_mask & torch.cat((frame_mask[:, 1:], torch.zeros_like(frame_mask[:, :1])), 1)
        motion = (torch.roll(state, -1, 1) - state) * has_next[..., None, None].to(state.dtype)
        time = sinusoidal(torch.arange(k, device=state.device), self.width).to(state.dtype)
        x = self.mlp(torch.cat((state, motion), -1)) + self.hand.weight + time[None, :, None]
        valid = frame_mask[..., None].expand(-1, -1, 2)
        return x.flatten(1, 2), state[..., :3].flatten(1, 2), valid.flatten(1, 2)
