"""safetensors + JSON checkpoints: exact round trip, clear errors for missing/corrupt files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from instant_fold_core.checkpoint import CheckpointError, load_checkpoint, read_json, save_checkpoint


def _save(tmp_path: Path) -> tuple[Path, dict[str, torch.Tensor]]:
    tensors = {"w": torch.randn(4, 3), "b": torch.arange(5, dtype=torch.int64), "h": torch.randn(2).half()}
    path = save_checkpoint(tmp_path / "ckpt", tensors, {"width": 8}, extras={"normalizer": {"min": [0.0]}})
    return path, tensors


def test_round_trip_is_exact(tmp_path: Path) -> None:
    path, tensors = _save(tmp_path)
    loaded, config = load_checkpoint(path)
    assert config == {"width": 8}
    assert set(loaded) == set(tensors)
    for key, value in tensors.items():
        assert loaded[key].dtype == value.dtype and torch.equal(loaded[key], value)
    assert read_json(path, "normalizer") == {"min": [0.0]}
    assert not list(path.glob("*.tmp")), "atomic writes leave no temporary files"


def test_missing_pieces_are_named(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no such directory"):
        load_checkpoint(tmp_path / "absent")
    path, _ = _save(tmp_path)
    (path / "config.json").unlink()
    with pytest.raises(CheckpointError, match=r"missing config\.json"):
        load_checkpoint(path)
    (path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"missing model\.safetensors"):
        load_checkpoint(path)
    with pytest.raises(CheckpointError, match=r"missing stats\.json"):
        read_json(path, "stats")


def test_corrupt_files_are_reported(tmp_path: Path) -> None:
    path, _ = _save(tmp_path)
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:40])
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(path)
    (path / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        read_json(path, "config")
    (path / "config.json").write_text(json.dumps([1, 2]))
    with pytest.raises(CheckpointError, match="JSON object"):
        read_json(path, "config")


def test_checkpoint_id_is_stable_and_config_and_weight_sensitive(tmp_path: Path) -> None:
    from instant_fold_core.checkpoint import checkpoint_id

    a = save_checkpoint(tmp_path / "a", {"w": torch.zeros(1)}, {"width": 8, "depth": 2})
    a2 = save_checkpoint(tmp_path / "a2", {"w": torch.zeros(1)}, {"depth": 2, "width": 8})
    b = save_checkpoint(tmp_path / "b", {"w": torch.ones(1)}, {"depth": 2, "width": 8})
    c = save_checkpoint(tmp_path / "c", {"w": torch.zeros(1)}, {"width": 16, "depth": 2})
    assert checkpoint_id(a) == checkpoint_id(a2)  # key order does not matter
    assert len({checkpoint_id(a), checkpoint_id(b), checkpoint_id(c)}) == 3  # other weights, other config
    assert len(checkpoint_id(a)) == 12
    d = Path(save_checkpoint(tmp_path / "d", {"w": torch.zeros(1)}, {"width": 8}))
    next(d.glob("*.safetensors")).unlink()
    with pytest.raises(CheckpointError, match="missing model.safetensors"):
        checkpoint_id(d)
