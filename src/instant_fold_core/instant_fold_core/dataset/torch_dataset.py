"""PyTorch view of an episode store: one item per episode, optionally a frame subset.

`frames="all"` returns every frame, `"keyframes"` only the context keyframes, `"motion"` the
motion-filtered pretraining frames (2 cm / 15 %, at most 15). Items are dicts of tensors with
the `Episode` field names plus `meta` (the JSON metadata) and `frame_index` (which original
frames were selected), so trainers can build their own samples without touching zarr.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from .filtering import motion_filter
from .zarr_store import EpisodeStore

FRAME_MODES = ("all", "keyframes", "motion")


class EpisodeDataset(Dataset):
    """Episodes of a store, filtered by metadata (e.g. split, modes)."""

    def __init__(
        self,
        path: str | Path,
        frames: str = "all",
        split: str | None = None,
        modes: list[str] | None = None,
        where: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        if frames not in FRAME_MODES:
            raise ValueError(f"frames: expected one of {FRAME_MODES}, got {frames!r}")
        self.store = EpisodeStore(path, mode="r")
        self.frames = frames
        names = []
        for name in self.store.names():
            meta = self.store.meta(name)
            if split is not None and meta.get("garment", {}).get("split") != split:
                continue
            if modes is not None and meta.get("mode") not in modes:
                continue
            if where is not None and not where(meta):
                continue
            names.append(name)
        self.names = names

    def __len__(self) -> int:
        return len(self.names)

    def _select(self, name: str) -> np.ndarray | None:
        if self.frames == "all":
            return None
        if self.frames == "keyframes":
            return self.store.read_array(name, "keyframes").astype(np.int64)
        return motion_filter(self.store.read_array(name, "particles"))

    def __getitem__(self, index: int) -> dict[str, Any]:
        name = self.names[index]
        sel = self._select(name)
        ep = self.store.read(name, frames=sel)
        item: dict[str, Any] = {
            "rgb": torch.from_numpy(ep.rgb),
            "depth": torch.from_numpy(ep.depth),
            "mask": torch.from_numpy(ep.mask),
            "intrinsics": torch.from_numpy(ep.intrinsics),
            "extrinsics": torch.from_numpy(ep.extrinsics),
            "arm_state": torch.from_numpy(ep.arm_state),
            "action": torch.from_numpy(ep.action),
            "particles": torch.from_numpy(ep.particles),
            "particle_visible": torch.from_numpy(ep.particle_visible),
            "keypoints": torch.from_numpy(ep.keypoints),
            "keypoint_particle_ids": torch.from_numpy(ep.keypoint_particle_ids),
            "keyframes": torch.from_numpy(ep.keyframes),
            "frame_index": torch.from_numpy(np.arange(ep.num_frames) if sel is None else sel),
            "name": name,
            "meta": ep.meta,
        }
        return item
