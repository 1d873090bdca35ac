"""Device selection shared by trainers, nodes and benchmarks: GPU when present, CPU always."""

from __future__ import annotations

import torch


def resolve_device(device: str = "auto") -> torch.device:
    """`auto` -> cuda when available, else cpu; anything else is taken as given (`cpu`, `cuda:1`)."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} requested but CUDA is not available (use 'auto' or 'cpu')")
    return resolved
