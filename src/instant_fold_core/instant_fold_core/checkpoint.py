"""Checkpoints as safetensors + JSON: nothing a user receives is ever unpickled.

A checkpoint is a directory holding `model.safetensors` (tensors), `config.json` (the
configuration that rebuilds the model) and optional named JSON side files (normaliser
statistics, training state). Loading validates everything up front so a missing or corrupt
checkpoint is a clear error instead of a half-built model.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from instant_fold_core.errors import ArtifactError

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"


class CheckpointError(ArtifactError):
    """A checkpoint is missing, incomplete or corrupt."""


def _atomic_write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(tmp, path)


def save_checkpoint(
    directory: str | Path,
    tensors: dict[str, torch.Tensor],
    config: dict[str, Any],
    extras: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """Write tensors, config and JSON extras (`extras[name]` -> `<name>.json`) atomically per file."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    contiguous = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    tmp = directory / (WEIGHTS_FILE + ".tmp")
    save_file(contiguous, str(tmp))
    os.replace(tmp, directory / WEIGHTS_FILE)
    _atomic_write_json(directory / CONFIG_FILE, config)
    for name, data in (extras or {}).items():
        _atomic_write_json(directory / f"{name}.json", data)
    return directory


def read_json(directory: str | Path, name: str) -> dict[str, Any]:
    """Read `<directory>/<name>.json`, raising `CheckpointError` if it is missing or malformed."""
    path = Path(directory) / f"{name}.json"
    if not path.is_file():
        raise CheckpointError(f"checkpoint {directory}: missing {path.name}")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"checkpoint {directory}: {path.name} is not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"checkpoint {directory}: {path.name} must hold a JSON object")
    return data


def checkpoint_id(directory: str | Path) -> str:
    """Short, stable identifier of a checkpoint: its configuration *and* its weights (e.g.
    `ClothTokens.encoder_id`), so consumers can tell whether tokens come from the very encoder
    they were trained with — two encoders of one configuration with other weights differ."""
    config = read_json(directory, Path(CONFIG_FILE).stem)
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode())
    weights = Path(directory) / WEIGHTS_FILE
    if not weights.is_file():
        raise CheckpointError(f"checkpoint {directory}: missing {WEIGHTS_FILE}")
    with open(weights, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:12]


def load_checkpoint(
    directory: str | Path, device: str | torch.device = "cpu"
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Return (tensors, config) of a checkpoint directory, with clear errors when it is unusable."""
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"checkpoint {directory}: no such directory")
    weights = directory / WEIGHTS_FILE
    if not weights.is_file():
        raise CheckpointError(f"checkpoint {directory}: missing {WEIGHTS_FILE}")
    config = read_json(directory, Path(CONFIG_FILE).stem)
    try:
        tensors = load_file(str(weights), device=str(device))
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {directory}: {WEIGHTS_FILE} is corrupt ({exc})") from exc
    return tensors, config


def load_strict(model: torch.nn.Module, tensors: dict[str, torch.Tensor], source: str | Path) -> None:
    """load_state_dict(strict) with a `CheckpointError` that lists mismatching keys and shapes."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    wrong = sorted(k for k in set(expected) & set(tensors) if expected[k].shape != tensors[k].shape)
    if missing or unexpected or wrong:
        raise CheckpointError(
            f"checkpoint {source}: weights do not match the model: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}, wrong shape {wrong[:5]}"
        )
    model.load_state_dict(tensors, strict=True)
