"""Episode store on zarr: one group per episode, self-describing, crash-safe.

Layout (zarr v3, local directory):

    <store>/zarr.json                      root attrs: format, version, array spec
    <store>/episodes/<name>/zarr.json      attrs: {"meta": Episode.meta, "complete": true}
    <store>/episodes/<name>/<field>/...    one array per `Episode` field, chunked per frame

An episode is written into a hidden temporary group and renamed into place only when every
array and its metadata are on disk, so a crash never leaves a half-written episode under a
real name, and a finished episode is never touched again (resume = skip existing names).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np

try:
    import zarr
    from zarr.codecs import BloscCodec
except ImportError as exc:  # zarr 3 needs Python >= 3.11
    raise ImportError(
        "episode stores need zarr 3, which needs Python >= 3.11 (the online graph runs without it)"
    ) from exc

from instant_fold_core.errors import ArtifactError

from .schema import ARM_NAMES, ARM_STATE_FIELDS, KEYPOINT_NAMES, Episode, EpisodeError

FORMAT = "instant_fold_episodes"
VERSION = 1
ARRAY_FIELDS = (
    "rgb",
    "depth",
    "mask",
    "intrinsics",
    "extrinsics",
    "arm_state",
    "action",
    "particles",
    "particle_visible",
    "keypoints",
    "keypoint_particle_ids",
    "keyframes",
)
#: Episode fields stored under another array name: the arm state kept the name it had when the
#: format (version 1) was fixed, so existing stores stay readable.
STORED_AS = {"arm_state": "gripper_state"}
#: Fields with a leading time axis: chunked one frame per chunk for cheap random frame access.
PER_FRAME = {"rgb", "depth", "mask", "arm_state", "action", "particles", "particle_visible", "keypoints"}
#: Episode attribute: every chunk file was written (zeros too), so a missing one is a loss.
ALL_CHUNKS = "all_chunks_written"


class StoreError(ArtifactError):
    """The store is missing, not an episode store, or an episode in it is corrupt."""


def _jsonable(obj: Any) -> Any:
    """Recursively convert numpy scalars/arrays and tuples so metadata is plain JSON."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


class EpisodeStore:
    """Read/write episodes in a zarr directory store."""

    def __init__(self, path: str | Path, mode: str = "r") -> None:
        self.path = Path(path)
        if mode not in ("r", "a"):
            raise ValueError(f"mode: expected 'r' or 'a', got {mode!r}")
        self.mode = mode
        if mode == "a":
            root = zarr.open_group(str(self.path), mode="a")
            if "format" not in root.attrs:
                root.attrs.update(
                    {
                        "format": FORMAT,
                        "version": VERSION,
                        "fields": [STORED_AS.get(f, f) for f in ARRAY_FIELDS],
                        "keypoint_names": list(KEYPOINT_NAMES),
                        "arm_names": list(ARM_NAMES),
                        "arm_state_fields": list(ARM_STATE_FIELDS),
                        "frame": "camera_optical",
                        "units": "m",
                    }
                )
            (self.path / "episodes").mkdir(exist_ok=True)
        else:
            if not (self.path / "zarr.json").is_file():
                raise StoreError(f"{self.path}: not a zarr store (missing zarr.json)")
            root = zarr.open_group(str(self.path), mode="r")
        if root.attrs.get("format") != FORMAT:
            raise StoreError(f"{self.path}: not an episode store (format={root.attrs.get('format')!r})")
        self.attrs = dict(root.attrs)

    # ------------------------------------------------------------------ listing

    def names(self) -> list[str]:
        """Names of complete episodes, sorted."""
        ep_dir = self.path / "episodes"
        if not ep_dir.is_dir():
            return []
        return sorted(p.name for p in ep_dir.iterdir() if not p.name.startswith(".") and self._complete(p))

    def __contains__(self, name: str) -> bool:
        p = self.path / "episodes" / name
        return p.is_dir() and self._complete(p)

    def __len__(self) -> int:
        return len(self.names())

    @staticmethod
    def _complete(group_dir: Path) -> bool:
        try:
            attrs = json.loads((group_dir / "zarr.json").read_text()).get("attributes", {})
        except (OSError, json.JSONDecodeError):
            return False
        return bool(attrs.get("complete"))

    # ------------------------------------------------------------------ writing

    def write(self, name: str, episode: Episode) -> None:
        """Validate and write `episode` as `name` atomically; an existing name is an error."""
        if self.mode != "a":
            raise StoreError(f"{self.path}: opened read-only")
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"name: invalid episode name {name!r}")
        episode.validate()
        final = self.path / "episodes" / name
        if final.exists():
            raise StoreError(f"{self.path}: episode {name!r} already exists")
        tmp = self.path / "episodes" / f".tmp-{name}-{uuid.uuid4().hex[:8]}"
        try:
            group = zarr.open_group(str(tmp), mode="w")
            compressor = BloscCodec(cname="zstd", clevel=3, shuffle="bitshuffle")
            for field in ARRAY_FIELDS:
                arr = np.ascontiguousarray(getattr(episode, field))
                chunks = (1, *arr.shape[1:]) if field in PER_FRAME and arr.shape[0] > 0 else arr.shape
                chunks = tuple(max(1, c) for c in chunks)
                # Every chunk is written, zeros too: a chunk file missing on read is then a loss.
                z = group.create_array(
                    STORED_AS.get(field, field),
                    shape=arr.shape,
                    dtype=arr.dtype,
                    chunks=chunks,
                    compressors=[compressor],
                    config={"write_empty_chunks": True},
                )
                z[...] = arr
            group.attrs.update(
                {"meta": _jsonable(episode.meta), "num_frames": episode.num_frames, "complete": True, ALL_CHUNKS: True}
            )
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    def clean_partial(self) -> int:
        """Remove temporary groups left by crashed writers; returns how many were removed."""
        removed = 0
        for p in (self.path / "episodes").glob(".tmp-*"):
            shutil.rmtree(p, ignore_errors=True)
            removed += 1
        return removed

    # ------------------------------------------------------------------ reading

    def _group(self, name: str) -> zarr.Group:
        if name not in self:
            raise StoreError(f"{self.path}: no complete episode {name!r}")
        return zarr.open_group(str(self.path / "episodes" / name), mode="r")

    def _array(self, group: zarr.Group, name: str, field: str) -> zarr.Array:
        """`field` of episode `name`, refused if a chunk file is missing: zarr would read it back as
        zeros (a lost action chunk became a [0, 0, 0, 0] label). Stores written before every chunk
        was kept (no `ALL_CHUNKS` attribute) may lack all-zero chunks legitimately; not checked."""
        arr = group[STORED_AS.get(field, field)]
        assert isinstance(arr, zarr.Array)
        if group.attrs.get(ALL_CHUNKS) and arr.nchunks_initialized != arr.nchunks:
            raise StoreError(
                f"{self.path}: episode {name!r} is corrupt: {field} misses "
                f"{arr.nchunks - arr.nchunks_initialized} of {arr.nchunks} chunk files"
            )
        return arr

    def meta(self, name: str) -> dict[str, Any]:
        return dict(self._group(name).attrs["meta"])

    def read_array(self, name: str, field: str) -> np.ndarray:
        """One array of episode `name` (e.g. particles for the motion filter) without the images."""
        if field not in ARRAY_FIELDS:
            raise ValueError(f"field: expected one of {ARRAY_FIELDS}, got {field!r}")
        try:
            return self._array(self._group(name), name, field)[...]
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"{self.path}: episode {name!r} is corrupt ({exc})") from exc

    def read(self, name: str, frames: np.ndarray | None = None) -> Episode:
        """Episode `name` (optionally only `frames`, with keyframes re-indexed to them)."""
        group = self._group(name)
        data: dict[str, np.ndarray] = {}
        try:
            for field in ARRAY_FIELDS:
                arr = self._array(group, name, field)
                data[field] = (
                    arr[...]
                    if frames is None or field not in PER_FRAME
                    else arr.get_orthogonal_selection((np.asarray(frames),) + (slice(None),) * (arr.ndim - 1))
                )
        except StoreError:
            raise
        except Exception as exc:  # zarr raises several types for damaged chunks
            raise StoreError(f"{self.path}: episode {name!r} is corrupt ({exc})") from exc
        if frames is not None:
            frames = np.asarray(frames)
            keep = np.isin(frames, data["keyframes"])
            data["keyframes"] = np.flatnonzero(keep).astype(np.int32)
        episode = Episode(**data, meta=dict(group.attrs["meta"]))
        try:
            return episode.validate()
        except EpisodeError as exc:
            raise StoreError(f"{self.path}: episode {name!r} is invalid: {exc}") from exc
