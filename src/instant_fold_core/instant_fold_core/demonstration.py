"""Demonstrations: the keyframes that prompt the in-context policy, and their file format.

A demonstration is what the policy conditions on (paper, "Context Keyframes"): K keyframes, each
an RGB-D observation of the cloth (with its mask) and the dual-arm keypose with per-arm gripper
events. It comes from a simulated episode (`from_episode`) or a recorded human demonstration.

File format: one `.safetensors` file (arrays) whose header metadata holds the JSON description
(name, mode, language description, event names) — portable, memory-mappable and never unpickled.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import load_file, save_file

from instant_fold_core.contracts import KeyframeEvent, gripper_closed
from instant_fold_core.dataset.schema import Episode
from instant_fold_core.errors import InvalidInputError
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_core.validation import ValidationError, check_array

FORMAT_VERSION = 1


class DemonstrationError(InvalidInputError):
    """A demonstration (or its file) is malformed; the message says what and where."""


@dataclass
class Demonstration:
    """K context keyframes.

    Attributes:
        color: uint8 [K, H, W, 3]; depth: float32 [K, H, W] metres (0 invalid); mask: bool [K, H, W].
        intrinsics: float32 [3, 3] of the images.
        keypose: float32 [K, 2, 4] (x, y, z, openness) per arm (left, right), camera frame.
        events: uint8 [K, 2] `KeyframeEvent` per arm.
        frame_index: int32 [K] index of each keyframe in its source recording.
    """

    color: np.ndarray
    depth: np.ndarray
    mask: np.ndarray
    intrinsics: np.ndarray
    keypose: np.ndarray
    events: np.ndarray
    frame_index: np.ndarray
    name: str = ""
    mode: str = ""
    description: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def num_keyframes(self) -> int:
        return int(self.color.shape[0])

    def validate(self) -> Demonstration:
        try:
            check_array("color", self.color, (None, None, None, 3), np.uint8)
            k, h, w = self.color.shape[:3]
            if k == 0:
                raise ValidationError("color: a demonstration needs at least one keyframe")
            check_array("depth", self.depth, (k, h, w), np.float32)
            check_array("mask", self.mask, (k, h, w), np.bool_)
            check_array("intrinsics", self.intrinsics, (3, 3), np.float32)
            check_array("keypose", self.keypose, (k, 2, 4), np.float32)
            check_array("events", self.events, (k, 2), np.uint8)
            check_array("frame_index", self.frame_index, (k,), np.int32)
        except ValidationError as exc:
            raise DemonstrationError(f"demonstration {self.name!r}: {exc}") from None
        if (self.events > max(KeyframeEvent)).any():
            raise DemonstrationError(f"demonstration {self.name!r}: events: unknown event value")
        for i in range(k):
            if not self.mask[i].any():
                raise DemonstrationError(f"demonstration {self.name!r}: keyframe {i}: empty cloth mask")
            if not (self.depth[i][self.mask[i]] > 0).any():
                raise DemonstrationError(f"demonstration {self.name!r}: keyframe {i}: no valid depth on the cloth")
        return self

    def fingerprint(self) -> str:
        """SHA-256 of the arrays a policy is conditioned on (not name, mode or notes): equal for
        the same demonstration loaded twice, so a server can skip encoding it again."""
        digest = hashlib.sha256()
        for name in _ARRAYS:
            array = np.ascontiguousarray(getattr(self, name))
            digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
            digest.update(array.tobytes())
        return digest.hexdigest()

    def frame(self, i: int) -> RGBDFrame:
        """Keyframe i as an RGB-D frame (for the cloth encoder)."""
        return RGBDFrame(self.color[i], self.depth[i], self.intrinsics, frame_number=int(self.frame_index[i]))

    def save(self, path: str | Path) -> Path:
        self.validate()
        path = Path(path)
        arrays = {name: np.ascontiguousarray(getattr(self, name)) for name in _ARRAYS}
        header = {"format_version": FORMAT_VERSION, "name": self.name, "mode": self.mode,
                  "description": self.description, "meta": self.meta}  # fmt: skip
        tmp = path.with_name(path.name + ".tmp")
        save_file(arrays, str(tmp), metadata={"instant_fold_demonstration": json.dumps(header)})
        tmp.replace(path)
        return path


_ARRAYS = ("color", "depth", "mask", "intrinsics", "keypose", "events", "frame_index")


def image_frames(demo: Demonstration) -> list[int]:
    """The recording frame whose image each keyframe shows: `instant_fold_demo.extract` records
    them in `meta["image_frames"]` (a grasp shows the cloth before the hand came), else the
    keyframe's own frame."""
    shown = demo.meta.get("image_frames")
    if isinstance(shown, list) and len(shown) == demo.num_keyframes and all(isinstance(f, int) for f in shown):
        return shown
    return [int(f) for f in demo.frame_index]


def load_demonstration(path: str | Path) -> Demonstration:
    """Read and validate a demonstration file, with clear errors for missing/corrupt files."""
    path = Path(path)
    if not path.is_file():
        raise DemonstrationError(f"demonstration file {path} does not exist")
    try:
        arrays = load_file(str(path))
        with safe_open(str(path), framework="numpy") as handle:
            metadata = handle.metadata() or {}
        header = json.loads(metadata["instant_fold_demonstration"])
    except (SafetensorError, OSError, KeyError, json.JSONDecodeError) as exc:
        raise DemonstrationError(f"demonstration file {path} is not a valid demonstration ({exc})") from exc
    if not isinstance(header, dict):
        raise DemonstrationError(f"demonstration file {path}: metadata is {type(header).__name__}, not a JSON object")
    for key, kind in (("name", str), ("mode", str), ("description", str), ("meta", dict)):
        if not isinstance(header.get(key, kind()), kind):
            raise DemonstrationError(f"demonstration file {path}: metadata {key!r} is not a {kind.__name__}")
    missing = [name for name in _ARRAYS if name not in arrays]
    if missing:
        raise DemonstrationError(f"demonstration file {path}: missing arrays {missing}")
    if header.get("format_version") != FORMAT_VERSION:
        raise DemonstrationError(f"demonstration file {path}: unsupported format {header.get('format_version')}")
    return Demonstration(
        **{name: arrays[name] for name in _ARRAYS},
        name=header.get("name", ""),
        mode=header.get("mode", ""),
        description=header.get("description", ""),
        meta=header.get("meta", {}),
    ).validate()


def from_episode(episode: Episode, name: str = "") -> Demonstration:
    """The keyframes of a simulated episode as a demonstration.

    Per-arm events are derived from the gripper openness in the frames around each keyframe
    (t - 1 to t + 1): closing -> GRASP, opening -> RELEASE; the last keyframe is TERMINAL; other keyframes are MOTION transitions.
    """
    episode.validate()
    kf = episode.keyframes
    if kf.size == 0:
        raise DemonstrationError("episode has no keyframes")
    openness = episode.arm_state[:, :, 3]
    before = openness[np.maximum(kf - 1, 0)]
    after = openness[np.minimum(kf + 1, episode.num_frames - 1)]
    events = np.full((kf.size, 2), KeyframeEvent.MOTION, np.uint8)
    closed_before, closed_after = gripper_closed(before), gripper_closed(after)
    events[~closed_before & closed_after] = KeyframeEvent.GRASP
    events[closed_before & ~closed_after] = KeyframeEvent.RELEASE
    events[-1] = KeyframeEvent.TERMINAL
    meta = episode.meta
    return Demonstration(
        color=episode.rgb[kf],
        depth=episode.depth[kf],
        mask=episode.mask[kf],
        intrinsics=episode.intrinsics,
        keypose=episode.arm_state[kf],
        events=events,
        frame_index=kf.astype(np.int32),
        name=name or str(meta.get("episode_id", "")),
        mode=str(meta.get("mode", "")),
        description=str(meta.get("description", "")),
        meta={k: meta[k] for k in ("garment_id", "variant", "seed") if k in meta},
    ).validate()
