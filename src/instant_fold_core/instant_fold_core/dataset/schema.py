"""The in-memory contract for one recorded episode (simulated rollout or processed demonstration).

Every producer (the Newton data generator, the demonstration pipeline) fills an `Episode`, and
every consumer (encoder pretraining, policy training, viewers, metrics) reads one, so the
array layout is fixed here once. All geometry is in the camera optical frame (x right, y down,
z forward, metres), the paper's shared frame for both arms.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from instant_fold_core.validation import ValidationError, check_array

#: Semantic keypoints of a top garment, in the order used by every `keypoints` array.
KEYPOINT_NAMES: tuple[str, ...] = (
    "top_left",
    "top_right",
    "bottom_left",
    "bottom_right",
    "left_shoulder",
    "right_shoulder",
    "center",
)

#: Arm order of every per-arm array (index 0 = left, 1 = right).
ARM_NAMES: tuple[str, ...] = ("left", "right")

#: Per-arm state/action layout: Cartesian position (m, camera frame) + gripper openness.
ARM_STATE_FIELDS: tuple[str, ...] = ("x", "y", "z", "openness")

#: `Episode.meta` keys every simulated episode carries and the trainers read: the cloth identity
#: (`garment_id`, grouping same-cloth trajectories and context demonstrations), its `split`
#: ("train" | "heldout"), the folding `mode` name and `mode_id`, the execution `variant`, the
#: episode `seed` and the mode's language `description`.
META_KEYS: tuple[str, ...] = ("garment_id", "split", "mode", "mode_id", "variant", "seed", "description")


def folding_context(meta: dict[str, Any]) -> str:
    """The folding context of an episode's `meta`: `mode/variant` (the paper's context: a mode and
    its execution order), or the mode alone for episodes that carry no variant (demonstrations
    recorded without one). Context demonstrations are drawn within a garment's context: a
    demonstration of another variant (left-first instead of right-first) shows another fold."""
    variant = meta.get("variant")
    return f"{meta['mode']}/{variant}" if variant else str(meta["mode"])


#: Openness convention: 1.0 = open, 0.0 = closed (binary in the paper).
GRIPPER_OPEN = 1.0
GRIPPER_CLOSED = 0.0


class EpisodeError(ValidationError):
    """An episode violates the schema; the message names the offending field."""


@dataclass
class Episode:
    """One episode of T frames.

    Attributes:
        rgb: uint8 [T, H, W, 3] colour images.
        depth: float32 [T, H, W] depth along the optical axis in metres; 0 marks invalid pixels.
        mask: bool [T, H, W] cloth segmentation.
        intrinsics: float32 [3, 3] pinhole matrix K of the (square) images.
        extrinsics: float32 [4, 4] pose of the camera in the world (T_world_camera).
        arm_state: float32 [T, 2, 4] measured (x, y, z, openness) per arm at each frame.
        action: float32 [T, 2, 4] absolute target (x, y, z, openness) per arm commanded at
            each frame (reached at frame t + 1).
        particles: float32 [T, M, 3] simulator particle positions (M <= 2000), or an empty
            [T, 0, 3] array for real demonstrations.
        particle_visible: bool [T, M] whether each particle is visible from the camera.
        keypoints: float32 [T, 7, 3] semantic keypoints in `KEYPOINT_NAMES` order.
        keypoint_particle_ids: int32 [7] particle id tracked for each keypoint (-1 if unknown).
        keyframes: int32 [K] increasing frame indices of the context keyframes.
        meta: JSON-serialisable metadata (mode, variant, garment id and split, seeds,
            randomisation values, solver config, ...).
    """

    rgb: np.ndarray
    depth: np.ndarray
    mask: np.ndarray
    intrinsics: np.ndarray
    extrinsics: np.ndarray
    arm_state: np.ndarray
    action: np.ndarray
    particles: np.ndarray
    particle_visible: np.ndarray
    keypoints: np.ndarray
    keypoint_particle_ids: np.ndarray
    keyframes: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def num_frames(self) -> int:
        return int(self.rgb.shape[0])

    def validate(self) -> Episode:
        """Check every array's dtype, shape and finiteness; raise `EpisodeError` naming the field."""
        try:
            check_array("rgb", self.rgb, (None, None, None, 3), np.uint8)
            check_array("particles", self.particles, (None, None, 3), np.float32)
        except ValidationError as exc:
            raise EpisodeError(str(exc)) from None
        t, h, w = self.rgb.shape[:3]
        m = self.particles.shape[1]
        expected: dict[str, tuple[tuple[int | None, ...], Any]] = {
            "rgb": ((t, h, w, 3), np.uint8),
            "depth": ((t, h, w), np.float32),
            "mask": ((t, h, w), np.bool_),
            "intrinsics": ((3, 3), np.float32),
            "extrinsics": ((4, 4), np.float32),
            "arm_state": ((t, 2, 4), np.float32),
            "action": ((t, 2, 4), np.float32),
            "particles": ((t, m, 3), np.float32),
            "particle_visible": ((t, m), np.bool_),
            "keypoints": ((t, len(KEYPOINT_NAMES), 3), np.float32),
            "keypoint_particle_ids": ((len(KEYPOINT_NAMES),), np.int32),
            "keyframes": ((None,), np.int32),
        }
        for name, (shape, dtype) in expected.items():
            try:
                check_array(name, getattr(self, name), shape, dtype)
            except ValidationError as exc:
                raise EpisodeError(str(exc)) from None
        if self.keyframes.size and (
            np.any(np.diff(self.keyframes) <= 0) or self.keyframes[0] < 0 or self.keyframes[-1] >= t
        ):
            raise EpisodeError(f"keyframes: must be strictly increasing indices in [0, {t}), got {self.keyframes}")
        if (self.depth < 0).any():
            raise EpisodeError("depth: negative values (use 0 for invalid pixels)")
        return self
