"""Pretraining data: motion filtering, strict PK sampling and per-batch frame loading.

Episodes come as a `Sequence[Episode]` held in memory (synthetic data, tests) or as an
`EpisodeSource` that reads from disk (`StoreEpisodes`, what the CLI trains on): only the particle
arrays are read up front (for the motion filter), and each batch reads just its kept frames. Why:
reading a whole store eagerly grew with the store (a 336-episode store of 16 folds peaked at
23 GB and was killed on the 24 GB development machine); a batch holds P x K x 15 frames.
An episode's kept frames never change (the motion filter picks them once), so they are kept,
preprocessed, up to a memory budget (`cache_bytes`): 600 steps read each episode of a 448-episode
store about 40 times, and once the store outgrew the page cache every step waited on the disk
(about 10 s a step at a quarter of a core, against 0.8 s).
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import torch

from instant_fold_core.dataset.filtering import motion_filter
from instant_fold_core.dataset.schema import Episode
from instant_fold_core.geometry import center_crop_resize
from instant_fold_core.validation import ValidationError

from .preprocess import rgbd_tensors

if TYPE_CHECKING:
    from instant_fold_core.dataset.zarr_store import EpisodeStore


class DataError(ValidationError):
    """The pretraining data cannot form batches; the message says why."""


@dataclass
class TrajectoryBatch:
    """The frames of one batch, stacked, with per-frame bookkeeping.

    rgb [F,3,S,S] float, depth [F,S,S], mask [F,S,S], intrinsics [F,3,3], gripper [F,2,3] and
    per frame: cloth index, trajectory index (unique in the batch); particle arrays stay lists
    per trajectory because the particle count differs between cloths.
    """

    rgb: torch.Tensor
    depth: torch.Tensor
    mask: torch.Tensor
    intrinsics: torch.Tensor
    gripper: torch.Tensor
    cloth: torch.Tensor
    trajectory: torch.Tensor
    particles: list[torch.Tensor]
    particle_visible: list[torch.Tensor]
    keypoints: torch.Tensor
    keypoint_visible: torch.Tensor

    def to(self, device: torch.device | str) -> TrajectoryBatch:
        moved = {
            k: (v.to(device) if isinstance(v, torch.Tensor) else [x.to(device) for x in v])
            for k, v in self.__dict__.items()
        }
        return TrajectoryBatch(**moved)


def load_frames(episode: Episode, frames: np.ndarray, image_size: int) -> dict[str, torch.Tensor]:
    """Tensors of the selected frames, centre-cropped and resized to the network input size."""
    n = len(frames)
    rgb, depth, mask, k = center_crop_resize(
        *rgbd_tensors(episode.rgb[frames], episode.depth[frames], episode.mask[frames], episode.intrinsics), image_size
    )
    ids = torch.from_numpy(episode.keypoint_particle_ids.astype(np.int64))
    vis = torch.from_numpy(episode.particle_visible[frames])
    kp_vis = torch.where(ids >= 0, vis[:, ids.clamp_min(0)], torch.ones(n, len(ids), dtype=torch.bool))
    return {
        "rgb": rgb,
        "depth": depth,
        "mask": mask,
        "intrinsics": k,
        "gripper": torch.from_numpy(episode.arm_state[frames, :, :3]),
        "particles": torch.from_numpy(episode.particles[frames]),
        "particle_visible": vis,
        "keypoints": torch.from_numpy(episode.keypoints[frames]),
        "keypoint_visible": kp_vis,
    }


@runtime_checkable
class EpisodeSource(Protocol):
    """Episodes read piecewise: what pretraining needs of each, without holding its images."""

    def __len__(self) -> int: ...

    def meta(self, index: int) -> dict[str, Any]: ...

    def particles(self, index: int) -> np.ndarray:
        """float [T,M,3]: the whole trajectory's particles (for the motion filter)."""
        ...

    def read_frames(self, index: int, frames: np.ndarray) -> tuple[Episode, np.ndarray]:
        """An episode holding at least `frames`, and where those frames are in it."""
        ...


class EpisodeList:
    """An `EpisodeSource` over episodes already in memory."""

    def __init__(self, episodes: Sequence[Episode]) -> None:
        self.episodes = episodes

    def __len__(self) -> int:
        return len(self.episodes)

    def meta(self, index: int) -> dict[str, Any]:
        return self.episodes[index].meta

    def particles(self, index: int) -> np.ndarray:
        return self.episodes[index].particles

    def read_frames(self, index: int, frames: np.ndarray) -> tuple[Episode, np.ndarray]:
        return self.episodes[index], frames


class StoreEpisodes:
    """An `EpisodeSource` over named episodes of an episode store: particles for the filter,
    then only the frames a batch needs (images are the bulk of a store)."""

    def __init__(self, store: EpisodeStore, names: Sequence[str]) -> None:
        self.store, self.names = store, list(names)

    def __len__(self) -> int:
        return len(self.names)

    def meta(self, index: int) -> dict[str, Any]:
        return self.store.meta(self.names[index])

    def particles(self, index: int) -> np.ndarray:
        return self.store.read_array(self.names[index], "particles")

    def read_frames(self, index: int, frames: np.ndarray) -> tuple[Episode, np.ndarray]:
        return self.store.read(self.names[index], frames), np.arange(len(frames))


#: Preprocessed kept frames held between batches: about 2.4 MB an episode at cpu-small's 96 px.
CACHE_BYTES = 2 << 30


def _nbytes(part: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in part.values())


class PretrainDataset:
    """Index of trajectories by cloth identity (`meta["garment_id"]`) with their kept frames,
    the most recently used ones held preprocessed up to `cache_bytes` (0: none)."""

    def __init__(
        self,
        episodes: Sequence[Episode] | EpisodeSource,
        image_size: int,
        motion_dist: float = 0.02,
        motion_frac: float = 0.15,
        max_frames: int = 15,
        cache_bytes: int = CACHE_BYTES,
    ) -> None:
        self.source = episodes if isinstance(episodes, EpisodeSource) else EpisodeList(episodes)
        self.image_size = image_size
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[int, dict[str, torch.Tensor]] = OrderedDict()
        self._cached_bytes = 0
        self.frames: list[np.ndarray] = []
        by_cloth: dict[str, list[int]] = defaultdict(list)
        for i in range(len(self.source)):
            meta = self.source.meta(i)
            if "garment_id" not in meta:
                raise DataError(f"episode {i}: meta['garment_id'] (the cloth identity) is missing")
            self.frames.append(motion_filter(self.source.particles(i), motion_dist, motion_frac, max_frames))
            by_cloth[str(meta["garment_id"])].append(i)
        self.cloths = sorted(by_cloth)
        self.trajectories = [by_cloth[c] for c in self.cloths]

    def frames_of(self, index: int) -> dict[str, torch.Tensor]:
        """Trajectory `index`'s kept frames, preprocessed: from the cache, or read and cached."""
        part = self._cache.get(index)
        if part is not None:
            self._cache.move_to_end(index)
            return part
        part = load_frames(*self.source.read_frames(index, self.frames[index]), self.image_size)
        size = _nbytes(part)
        if size <= self.cache_bytes:
            while self._cached_bytes + size > self.cache_bytes:
                self._cached_bytes -= _nbytes(self._cache.popitem(last=False)[1])
            self._cache[index], self._cached_bytes = part, self._cached_bytes + size
        return part

    def batch(self, groups: list[list[int]]) -> TrajectoryBatch:
        """Stack the kept frames of `groups[p]` = trajectory indices of the p-th cloth."""
        parts, cloth, traj = [], [], []
        for p, group in enumerate(groups):
            for i in group:
                parts.append(self.frames_of(i))
                cloth += [p] * len(self.frames[i])
                traj += [len(parts) - 1] * len(self.frames[i])

        def cat(key: str) -> torch.Tensor:
            return torch.cat([x[key] for x in parts])

        return TrajectoryBatch(
            rgb=cat("rgb"),
            depth=cat("depth"),
            mask=cat("mask"),
            intrinsics=cat("intrinsics"),
            gripper=cat("gripper"),
            cloth=torch.tensor(cloth),
            trajectory=torch.tensor(traj),
            particles=[x["particles"].clone() for x in parts],  # cached: a batch gets its own
            particle_visible=[x["particle_visible"].clone() for x in parts],
            keypoints=cat("keypoints"),
            keypoint_visible=cat("keypoint_visible"),
        )


class PKSampler:
    """Strict PK sampling: every batch holds P distinct cloths with K distinct trajectories each.

    The plan of each epoch is a pure function of (seed, epoch), and batch `i` of the global
    sequence goes to rank `i % world_size`, so any step can be regenerated exactly on resume.
    Cloths with fewer than K trajectories cannot form a strict group and are left out.
    """

    def __init__(self, trajectories: list[list[int]], p: int, k: int, seed: int = 0) -> None:
        self.eligible = [t for t in trajectories if len(t) >= k]
        if len(self.eligible) < p:
            raise DataError(
                f"PK sampling needs {p} cloths with >= {k} trajectories each, found {len(self.eligible)} "
                f"(of {len(trajectories)} cloths)"
            )
        self.p, self.k, self.seed = p, k, seed
        self.per_epoch = len(self.eligible) // p
        self._epoch, self._plan = -1, []

    def _epoch_plan(self, epoch: int) -> list[list[list[int]]]:
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(len(self.eligible))
        groups = [sorted(rng.choice(self.eligible[c], self.k, replace=False).tolist()) for c in order]
        return [groups[i * self.p : (i + 1) * self.p] for i in range(self.per_epoch)]

    def batch(self, index: int) -> list[list[int]]:
        """Trajectory groups of global batch `index`."""
        epoch, pos = divmod(index, self.per_epoch)
        if epoch != self._epoch:
            self._epoch, self._plan = epoch, self._epoch_plan(epoch)
        return self._plan[pos]
