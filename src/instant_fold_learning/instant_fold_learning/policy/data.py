"""Samples and batches of the policy, and how they are cut from tokenised episodes.

The policy never sees images: a frozen cloth encoder (outside the policy) turns every frame
into N cloth tokens (camera-frame positions, features, validity). A `TokenizedEpisode` is an
`Episode` whose frames have been tokenised; a `PolicySample` is one training example cut from it:
the keyframes of a context demonstration (another episode of the same garment and mode), the
current observation, and the targets (H per-step deltas + gripper openness per arm, and the
offset to the next keypose).
"""

from __future__ import annotations

import dataclasses
import json
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from instant_fold_core.contracts import gripper_closed
from instant_fold_core.dataset.schema import KEYPOINT_NAMES, Episode
from instant_fold_core.errors import InvalidInputError

#: A numpy array or a torch tensor of openness or flags (`approaching_grasp` reads either).
Flags = TypeVar("Flags", np.ndarray, torch.Tensor)


class PolicyDataError(InvalidInputError):
    """Policy data violates its contract; the message names the field."""


def _to(obj: Any, device: torch.device | str, dtype: torch.dtype | None = None) -> Any:
    """Move every tensor field of a dataclass (floating ones cast to `dtype` if given)."""
    values = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if isinstance(v, torch.Tensor):
            v = v.to(device, dtype=dtype if (dtype is not None and v.is_floating_point()) else None)
        values[f.name] = v
    return type(obj)(**values)


@dataclass
class DemoTokens:
    """Context keyframes of one demonstration per batch element, padded to K frames.

    cloth_positions [B, K, N, 3], cloth_features [B, K, N, D], cloth_valid bool [B, K, N],
    arm_state [B, K, 2, 4], frame_mask bool [B, K] (False = padding), instruction long [B, L]
    (word ids of the language variant's instruction, 0 = padding; L = 0 for demonstrations).
    """

    cloth_positions: torch.Tensor
    cloth_features: torch.Tensor
    cloth_valid: torch.Tensor
    arm_state: torch.Tensor
    frame_mask: torch.Tensor
    instruction: torch.Tensor

    def to(self, device: torch.device | str, dtype: torch.dtype | None = None) -> DemoTokens:
        return _to(self, device, dtype)


def as_tensor(a: np.ndarray, device: torch.device | str, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """An array on `device`, floating-point values in `dtype` (the runner's, e.g. bf16), integer and
    boolean ones as they are (ids and masks keep their meaning)."""
    t = torch.from_numpy(np.ascontiguousarray(a))
    return t.to(device, dtype if t.is_floating_point() else None)


def keyframe_tokens(
    cloth_positions: np.ndarray,
    cloth_features: np.ndarray,
    cloth_valid: np.ndarray,
    arm_state: np.ndarray,
    batch: int,
    device: torch.device | str,
    dtype: torch.dtype = torch.float32,
) -> DemoTokens:
    """The demonstration variant's context: K keyframes ([K, N, 3], [K, N, D], [K, N], [K, 2, 4])
    repeated for `batch` rows, all valid, no instruction."""

    def rows(a: np.ndarray) -> torch.Tensor:
        t = as_tensor(a, device, dtype)
        return t[None].expand(batch, *t.shape).contiguous()

    k = len(arm_state)
    return DemoTokens(
        rows(cloth_positions),
        rows(cloth_features),
        rows(cloth_valid),
        rows(arm_state),
        torch.ones(batch, k, dtype=torch.bool, device=device),
        torch.zeros(batch, 0, dtype=torch.long, device=device),
    )


def instruction_tokens(ids: np.ndarray, batch: int, device: torch.device | str) -> DemoTokens:
    """The language variant's context: an instruction's word ids [L] for `batch` rows, no keyframes."""
    empty = torch.zeros(batch, 0, device=device)
    words = torch.from_numpy(np.asarray(ids, np.int64)).to(device)[None].expand(batch, -1).contiguous()
    return DemoTokens(empty, empty, empty.bool(), empty, empty.bool(), words)


@dataclass
class ObservationTokens:
    """Current observation: cloth_positions [B, N, 3], cloth_features [B, N, D], cloth_valid [B, N],
    arm_state [B, 2, 4] (x, y, z, openness per arm, camera frame), event_count long [B, 2] (each
    arm's gripper events so far in the fold; what `model.event_progress` reads, None elsewhere)."""

    cloth_positions: torch.Tensor
    cloth_features: torch.Tensor
    cloth_valid: torch.Tensor
    arm_state: torch.Tensor
    event_count: torch.Tensor | None = None

    def to(self, device: torch.device | str, dtype: torch.dtype | None = None) -> ObservationTokens:
        return _to(self, device, dtype)


@dataclass
class ActionTargets:
    """Un-normalised targets: traj_delta [B, H, 2, 3] per-step position deltas (m), traj_gripper
    [B, H, 2] openness in {0, 1}, keypose_delta [B, 2, 3] offset from the current position to the
    next keypose, keypose_gripper [B, 2]; event_position [B, 2, 3] each arm's next gripper-event
    position (absolute, camera frame; the end pose once it has none left), event_openness [B, 2]
    its openness after the event, event_valid bool [B, 2] (False once an arm has no event left)."""

    traj_delta: torch.Tensor
    traj_gripper: torch.Tensor
    keypose_delta: torch.Tensor
    keypose_gripper: torch.Tensor
    event_position: torch.Tensor
    event_openness: torch.Tensor
    event_valid: torch.Tensor

    def to(self, device: torch.device | str, dtype: torch.dtype | None = None) -> ActionTargets:
        return _to(self, device, dtype)


@dataclass
class PolicyBatch:
    """demo holds G demonstrations; `demo_index` [B] maps each sample to its one (None: G = B, in order)."""

    demo: DemoTokens
    obs: ObservationTokens
    target: ActionTargets
    demo_index: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> PolicyBatch:
        index = None if self.demo_index is None else self.demo_index.to(device)
        return PolicyBatch(self.demo.to(device), self.obs.to(device), self.target.to(device), index)


@dataclass
class TokenizedEpisode:
    """An episode whose frames were tokenised by the frozen cloth encoder.

    cloth_positions float32 [T, N, 3], cloth_features float32 [T, N, D], cloth_valid bool [T, N],
    arm_state / action float32 [T, 2, 4] (as in `Episode`), keyframes int32 [K], and meta
    with at least `garment_id` and `mode` (optionally `variant`, `description` and `family`, which
    the language variant's instruction is made of, and `mode_id`). Simulated episodes also carry
    their semantic keypoints, float32 [T, 7, 3] (`KEYPOINT_NAMES` order, camera frame) and whether
    each is seen by the camera, bool [T, 7]: what the keypoint detector trains on
    (`instant_fold_learning.keypoints`); None for real demonstrations and older token files.
    """

    cloth_positions: np.ndarray
    cloth_features: np.ndarray
    cloth_valid: np.ndarray
    arm_state: np.ndarray
    action: np.ndarray
    keyframes: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)
    keypoints: np.ndarray | None = None
    keypoint_visible: np.ndarray | None = None

    @property
    def num_frames(self) -> int:
        return int(self.arm_state.shape[0])

    @classmethod
    def from_episode(
        cls, episode: Episode, positions: np.ndarray, features: np.ndarray, valid: np.ndarray
    ) -> TokenizedEpisode:
        """Attach per-frame cloth tokens ([T, N, 3], [T, N, D], [T, N]) to a validated `Episode`;
        its keypoints come along where the simulator tracked them (every keypoint's particle id
        known), with their visibility from the particles'."""
        episode.validate()
        ids = episode.keypoint_particle_ids
        tracked = ids.size > 0 and bool((ids >= 0).all()) and episode.particle_visible.shape[1] > int(ids.max())
        return cls(
            np.asarray(positions, np.float32),
            np.asarray(features, np.float32),
            np.asarray(valid, bool),
            episode.arm_state,
            episode.action,
            episode.keyframes,
            dict(episode.meta),
            episode.keypoints if tracked else None,
            episode.particle_visible[:, ids] if tracked else None,
        ).validate()

    def validate(self) -> TokenizedEpisode:
        t = self.num_frames
        n = self.cloth_positions.shape[1] if self.cloth_positions.ndim == 3 else -1
        checks = {
            "cloth_positions": (self.cloth_positions, (t, n, 3)),
            "cloth_features": (self.cloth_features, (t, n, self.cloth_features.shape[-1])),
            "cloth_valid": (self.cloth_valid, (t, n)),
            "arm_state": (self.arm_state, (t, 2, 4)),
            "action": (self.action, (t, 2, 4)),
        }
        if (self.keypoints is None) != (self.keypoint_visible is None):
            raise PolicyDataError("keypoints and keypoint_visible: both or neither")
        if self.keypoints is not None and self.keypoint_visible is not None:
            checks["keypoints"] = (self.keypoints, (t, len(KEYPOINT_NAMES), 3))
            checks["keypoint_visible"] = (self.keypoint_visible, (t, len(KEYPOINT_NAMES)))
            if self.keypoint_visible.dtype != np.bool_:
                raise PolicyDataError(f"keypoint_visible: expected bool, got {self.keypoint_visible.dtype}")
        for name, (arr, shape) in checks.items():
            if arr.shape != shape:
                raise PolicyDataError(f"{name}: expected shape {shape}, got {arr.shape}")
            if arr.dtype.kind == "f" and not np.isfinite(arr).all():
                raise PolicyDataError(f"{name}: contains NaN or infinite values")
        if self.cloth_valid.dtype != np.bool_:
            raise PolicyDataError(f"cloth_valid: expected bool, got {self.cloth_valid.dtype}")
        if not self.cloth_valid.any(-1).all():
            raise PolicyDataError("cloth_valid: a frame has no valid cloth token")
        kf = self.keyframes
        if kf.ndim != 1 or kf.size == 0 or np.any(np.diff(kf) <= 0) or kf[0] < 0 or kf[-1] >= t:
            raise PolicyDataError(f"keyframes: expected strictly increasing indices in [0, {t}), got {kf}")
        for key in ("garment_id", "mode"):
            if key not in self.meta:
                raise PolicyDataError(f"meta: missing '{key}'")
        return self

    def save(self, path: str | Path) -> None:
        """Write as a pickle-free .npz (meta as a JSON string)."""
        keypoints = (
            {} if self.keypoints is None else {"keypoints": self.keypoints, "keypoint_visible": self.keypoint_visible}
        )
        np.savez_compressed(
            path,
            cloth_positions=self.cloth_positions,
            cloth_features=self.cloth_features,
            cloth_valid=self.cloth_valid,
            gripper_state=self.arm_state,  # the array name of the .npz files written so far
            action=self.action,
            keyframes=self.keyframes,
            meta_json=np.array(json.dumps(self.meta)),
            **keypoints,
        )

    @classmethod
    def load(cls, path: str | Path) -> TokenizedEpisode:
        try:
            with np.load(path, allow_pickle=False) as f:
                arrays = {k: f[k] for k in f.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:  # truncated or corrupt
            raise PolicyDataError(f"{path}: not a readable tokenised episode ({exc})") from exc
        missing = {
            "cloth_positions",
            "cloth_features",
            "cloth_valid",
            "gripper_state",
            "action",
            "keyframes",
            "meta_json",
        } - set(arrays)
        if missing:
            raise PolicyDataError(f"{path}: missing arrays {sorted(missing)}")
        try:
            meta = json.loads(str(arrays.pop("meta_json")))
        except json.JSONDecodeError as exc:
            raise PolicyDataError(f"{path}: meta_json is not valid JSON ({exc})") from exc
        if not isinstance(meta, dict):
            raise PolicyDataError(f"{path}: meta_json must hold a JSON object")
        arrays["arm_state"] = arrays.pop("gripper_state")
        return cls(**arrays, meta=meta).validate()


@dataclass
class PolicySample:
    """One un-batched training example (numpy), see `DemoTokens`/`ObservationTokens`/`ActionTargets`."""

    demo_cloth_positions: np.ndarray  # [K, N, 3]
    demo_cloth_features: np.ndarray  # [K, N, D]
    demo_cloth_valid: np.ndarray  # [K, N]
    demo_arm_state: np.ndarray  # [K, 2, 4]
    cloth_positions: np.ndarray  # [N, 3]
    cloth_features: np.ndarray  # [N, D]
    cloth_valid: np.ndarray  # [N]
    arm_state: np.ndarray  # [2, 4]
    traj_delta: np.ndarray  # [H, 2, 3]
    traj_gripper: np.ndarray  # [H, 2]
    keypose_delta: np.ndarray  # [2, 3]
    keypose_gripper: np.ndarray  # [2]
    event_position: np.ndarray  # [2, 3]
    event_openness: np.ndarray  # [2]
    event_valid: np.ndarray  # [2] bool
    instruction: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # [L] word ids
    event_count: np.ndarray = field(default_factory=lambda: np.zeros(2, np.int64))  # [2] events so far


def pad_instructions(instructions: list[np.ndarray]) -> np.ndarray:
    """Word ids [B, L] of instructions of up to L words, padded with 0 (L = 0 when none has words)."""
    out = np.zeros((len(instructions), max((len(i) for i in instructions), default=0)), np.int64)
    for row, ids in zip(out, instructions, strict=True):
        row[: len(ids)] = ids
    return out


def chunk_targets(
    episode: TokenizedEpisode, t: int, horizon: int, state: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Targets of frame t: per-step deltas of the next H absolute action targets, and the next keypose.

    Deltas are a[t] - s[t], a[t+1] - a[t], ... (the chunk is executed from the current state);
    past the episode end the last action repeats (zero motion). The keypose is the measured
    state at the first keyframe after t (the last frame when none is left), as an offset
    from the current position. `state` overrides the measured state (recovery augmentation).
    """
    state = episode.arm_state[t] if state is None else state
    idx = np.minimum(np.arange(t, t + horizon), episode.num_frames - 1)
    targets = episode.action[idx]  # [H, 2, 4]
    prev = np.concatenate([state[None, :, :3], targets[:-1, :, :3]], 0)
    traj_delta = (targets[..., :3] - prev).astype(np.float32)
    later = episode.keyframes[episode.keyframes > t]
    kf = int(later[0]) if later.size else episode.num_frames - 1
    keypose = episode.arm_state[kf]
    keypose_delta = (keypose[:, :3] - state[:, :3]).astype(np.float32)
    return traj_delta, targets[..., 3].astype(np.float32), keypose_delta, keypose[:, 3].astype(np.float32)


@dataclass(frozen=True)
class EventTargets:
    """Each arm's next gripper event after a frame: position [2, 3], openness after it [2], valid [2]."""

    position: np.ndarray
    openness: np.ndarray
    valid: np.ndarray


def event_targets(arm_state: np.ndarray, events: list[np.ndarray], t: int) -> EventTargets:
    """The grasp/place targets of frame t: where each arm is at its first event after t (the measured
    state of that frame), what its gripper becomes, and whether it has one left; an arm with none
    left targets the episode's end pose (home). These are the anchored head's targets: a grasp lies
    on the cloth, a place above it."""
    position = arm_state[-1, :, :3].astype(np.float32)
    openness = arm_state[-1, :, 3].astype(np.float32)
    valid = np.zeros(len(events), bool)
    for a, frames in enumerate(events):
        later = frames[frames > t]
        if later.size:
            position[a], openness[a], valid[a] = arm_state[later[0], a, :3], arm_state[later[0], a, 3], True
    return EventTargets(position, openness, valid)


def approaching_grasp(open_now: Flags, chunk_openness: Flags, event_valid: Flags, event_openness: Flags) -> Flags:
    """Arms [..., 2] on their way to their next grasp: open now [..., 2], the next event a grasp
    (valid and closing, [..., 2]), the gripper open over the whole chunk [..., H, 2]. Numpy arrays of
    one sample (the dataset's recovery labels) or tensors of a batch (the teacher's shifted targets)."""
    stays_open = (~gripper_closed(chunk_openness)).all(-2)
    return event_valid & gripper_closed(event_openness) & ~gripper_closed(open_now) & stays_open


def straight_approach(start: torch.Tensor, goal: torch.Tensor, speed: torch.Tensor, horizon: int) -> torch.Tensor:
    """Per-step deltas [H, ..., 3] of a straight move from `start` [..., 3] towards `goal` [..., 3]
    at `speed` [...] metres per step, stopping there: the chunk label of an arm moved off the
    expert's path (a recovery) or sent to a moved target (the teacher's shift)."""
    to_go = goal - start
    distance = to_go.norm(dim=-1)
    steps = torch.arange(1, horizon + 1, dtype=start.dtype, device=start.device).reshape(-1, *[1] * distance.dim())
    reach = torch.minimum(speed * steps, distance)
    path = start + (to_go / distance.clamp_min(1e-9)[..., None]) * reach[..., None]
    return torch.diff(torch.cat((start[None], path)), dim=0)


def collate(samples: list[PolicySample], demo_owner: list[int] | None = None) -> PolicyBatch:
    """Stack samples, padding demonstrations to the longest keyframe count with a frame mask.

    With `demo_owner` (one group id per sample, ids 0..G-1), samples of a group share their
    demonstration: it is stacked once, from the group's first sample, and `demo_index` says which
    demonstration each sample uses.
    """
    if not samples:
        raise PolicyDataError("collate: empty list of samples")
    if demo_owner is None:
        holders = samples
    else:
        if len(demo_owner) != len(samples):
            raise PolicyDataError(f"collate: {len(demo_owner)} demo owners for {len(samples)} samples")
        first = {g: i for i, g in reversed(list(enumerate(demo_owner)))}
        if sorted(first) != list(range(len(first))):
            raise PolicyDataError(f"collate: demo owners must number groups 0..G-1, got {sorted(first)}")
        holders = [samples[first[g]] for g in range(len(first))]
    k_max = max(s.demo_arm_state.shape[0] for s in holders)

    def pad(arr: np.ndarray) -> np.ndarray:
        out = np.zeros((k_max, *arr.shape[1:]), arr.dtype)
        out[: arr.shape[0]] = arr
        return out

    def stack(name: str, of: list[PolicySample] = samples) -> torch.Tensor:
        return torch.from_numpy(np.stack([getattr(s, name) for s in of]))

    def stack_demo(name: str) -> torch.Tensor:
        return torch.from_numpy(np.stack([pad(getattr(s, name)) for s in holders]))

    frame_mask = torch.zeros(len(holders), k_max, dtype=torch.bool)
    for i, s in enumerate(holders):
        frame_mask[i, : s.demo_arm_state.shape[0]] = True
    demo = DemoTokens(
        stack_demo("demo_cloth_positions"),
        stack_demo("demo_cloth_features"),
        stack_demo("demo_cloth_valid"),
        stack_demo("demo_arm_state"),
        frame_mask,
        torch.from_numpy(pad_instructions([s.instruction for s in holders])),
    )
    obs = ObservationTokens(
        stack("cloth_positions"),
        stack("cloth_features"),
        stack("cloth_valid"),
        stack("arm_state"),
        stack("event_count"),
    )
    target = ActionTargets(
        *(
            stack(name)
            for name in (
                "traj_delta",
                "traj_gripper",
                "keypose_delta",
                "keypose_gripper",
                "event_position",
                "event_openness",
                "event_valid",
            )
        )
    )
    index = None if demo_owner is None else torch.tensor(demo_owner, dtype=torch.long)
    return PolicyBatch(demo, obs, target, index)
