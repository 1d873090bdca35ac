"""Low-rank adapters (LoRA) for linear layers of a frozen backbone."""

from __future__ import annotations

import math

import torch
from torch import nn


class LoRALinear(nn.Module):
    """y = base(x) + (alpha / r) * B(A(x)); B starts at zero so the wrapped layer is unchanged."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float) -> None:
        super().__init__()
        self.base = base
        self.lora_a = nn.Linear(base.in_features, rank, bias=False)
        self.lora_b = nn.Linear(rank, base.out_features, bias=False)
        nn.init.kaiming_uniform_(self.lora_a.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_b.weight)
        self.scaling = alpha / rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.lora_b(self.lora_a(x)) * self.scaling


def apply_lora(blocks: nn.ModuleList, last: int, targets: tuple[str, ...], rank: int, alpha: float) -> int:
    """Wrap `attn.<target>` linears of the last `last` blocks with LoRA; returns how many."""
    count = 0
    for block in list(blocks)[-last:] if last > 0 else []:
        for name in targets:
            layer = getattr(block.attn, name, None)
            if not isinstance(layer, nn.Linear):
                raise ValueError(f"lora_targets: block has no linear attn.{name} (is qkv fused?)")
            setattr(block.attn, name, LoRALinear(layer, rank, alpha))
            count += 1
    return count
