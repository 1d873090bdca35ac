"""Calibrated min-max normalisers for the flow-matching targets (appendix D).

Per-step position deltas and next-keypose offsets differ by an order of magnitude (one control
step vs. a whole sub-fold), so each gets its own normaliser mapping its calibrated per-axis range
to [-1, 1]. The statistics travel with the checkpoint as JSON; they are non-persistent buffers so
they follow `.to(device)` without being duplicated into the safetensors weights.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from instant_fold_core.errors import InvalidInputError

#: Smallest half-range (metres) a calibrated axis may have: a motionless axis must not divide by 0.
MIN_HALF_RANGE_M = 1e-3


class NormalizerError(InvalidInputError):
    """Normaliser statistics are missing, malformed or not calibrated."""


class MinMaxNormalizer(nn.Module):
    """Maps each of `dim` axes from its calibrated [low, high] to [-1, 1] (and back)."""

    def __init__(self, dim: int = 3) -> None:
        super().__init__()
        self.dim = dim
        self.register_buffer("low", -torch.ones(dim), persistent=False)
        self.register_buffer("high", torch.ones(dim), persistent=False)
        self.calibrated = False

    def calibrate(self, values: np.ndarray | torch.Tensor, margin: float = 0.05) -> MinMaxNormalizer:
        """Fit [low, high] per axis on `values[..., dim]`, widened by `margin` of the range."""
        data = torch.as_tensor(np.asarray(values), dtype=torch.float64).reshape(-1, self.dim)
        if data.shape[0] == 0:
            raise NormalizerError("calibrate: no values")
        if not torch.isfinite(data).all():
            raise NormalizerError("calibrate: values contain NaN or infinity")
        low, high = data.min(0).values, data.max(0).values
        centre = (low + high) / 2
        half = ((high - low) / 2 * (1 + margin)).clamp_min(MIN_HALF_RANGE_M)
        self.set_range(centre - half, centre + half)
        return self

    def set_range(self, low: torch.Tensor, high: torch.Tensor) -> None:
        low = torch.as_tensor(low, dtype=torch.float32)
        high = torch.as_tensor(high, dtype=torch.float32)
        if low.shape != (self.dim,) or high.shape != (self.dim,):
            raise NormalizerError(f"range: expected shape ({self.dim},), got {tuple(low.shape)}, {tuple(high.shape)}")
        if not (torch.isfinite(low).all() and torch.isfinite(high).all()):  # else every prediction is NaN
            raise NormalizerError(f"range: low and high must be finite, got {low.tolist()}, {high.tolist()}")
        if not (high > low).all():
            raise NormalizerError("range: every high must exceed its low")
        self.low.copy_(low.to(self.low.device))
        self.high.copy_(high.to(self.high.device))
        self.calibrated = True

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        low, high = self.low.to(x.dtype), self.high.to(x.dtype)
        return 2 * (x - low) / (high - low) - 1

    def unnormalize(self, y: torch.Tensor) -> torch.Tensor:
        low, high = self.low.to(y.dtype), self.high.to(y.dtype)
        return (y + 1) / 2 * (high - low) + low

    def to_dict(self) -> dict[str, Any]:
        if not self.calibrated:
            raise NormalizerError("normaliser was never calibrated; calibrate it on training data first")
        return {"low": self.low.cpu().tolist(), "high": self.high.cpu().tolist()}

    def load_dict(self, data: dict[str, Any], name: str) -> None:
        try:
            low, high = torch.tensor(data["low"]), torch.tensor(data["high"])
        except (KeyError, TypeError, ValueError) as exc:
            raise NormalizerError(f"{name}: expected {{'low': [...], 'high': [...]}} ({exc})") from exc
        try:
            self.set_range(low, high)
        except NormalizerError as exc:
            raise NormalizerError(f"{name}: {exc}") from exc


class ActionNormalizers(nn.Module):
    """The two normalisers of the policy: per-step trajectory deltas and next-keypose offsets."""

    def __init__(self) -> None:
        super().__init__()
        self.delta = MinMaxNormalizer(3)
        self.keypose = MinMaxNormalizer(3)

    @property
    def calibrated(self) -> bool:
        return self.delta.calibrated and self.keypose.calibrated

    def to_dict(self) -> dict[str, Any]:
        return {"delta": self.delta.to_dict(), "keypose": self.keypose.to_dict()}

    def load_dict(self, data: dict[str, Any]) -> None:
        for name in ("delta", "keypose"):
            if name not in data:
                raise NormalizerError(f"normalizers: missing '{name}' statistics")
            getattr(self, name).load_dict(data[name], f"normalizers.{name}")
