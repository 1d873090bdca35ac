"""Device selection shared by trainers, nodes and benchmarks: GPU when present, CPU always."""

from __future__ import annotations

import torch

from instant_fold_core.errors import ConfigError


def resolve_device(device: str = "auto") -> torch.device:
    """`auto` -> cuda when available, else cpu; anything else is taken as given (`cpu`, `cuda:1`).

    A name torch does not know, or CUDA where there is none, is a ConfigError (a `--device` or
    `device` parameter to fix), not torch's RuntimeError from deep inside a run."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError as exc:
        raise ConfigError(f"device {device!r}: not a torch device (auto, cpu, cuda, cuda:1)") from exc
    if resolved.type not in ("cpu", "cuda"):
        raise ConfigError(f"device {device!r}: only cpu and cuda devices are supported")
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} requested but CUDA is not available (use 'auto' or 'cpu')")
    if resolved.type == "cuda" and (resolved.index or 0) >= torch.cuda.device_count():
        raise ConfigError(f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return resolved
