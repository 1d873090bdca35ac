"""A demonstrated grasp carried to the same named part of the current cloth.

The rigid registration of a demonstration keyframe onto the current cloth (`register_planar`)
carries a grasp to where the demonstrator's cloth part would be had the garment moved rigidly. When
the grasp was at a named keypoint of the demonstration's cloth (within `match_m` of the detector's
prediction there), it is carried instead to that keypoint as the detector finds it on the current
cloth, plus the demonstrated offset from the keypoint turned by the registration's rotation; a
grasp away from every keypoint, or at one the detector does not see in both frames, keeps the rigid
mapping.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from instant_fold_core.registration import PlanarRigid
from instant_fold_core.tokens import TokenArrays
from instant_fold_learning.keypoints.modeling import KeypointDetector, Keypoints

#: A keypoint counts as seen when its predicted visibility exceeds this.
VISIBLE = 0.5

#: A demonstrated grasp this close (x, y) to a keypoint of the demonstration's cloth was at it: the
#: scripted folds grasp keypoints with up to ~2 cm of noise, the detector errs by ~2-3 cm (median).
DEFAULT_MATCH_M = 0.05

#: A keypoint carry that moves the grasp less than this from the registration's point is not taken:
#: where the registration is right, the detector's own centimetres of error are all it would add,
#: and a fold is sensitive to them at a corner (docs/registration.md, "Grasps carried by keypoints").
DEFAULT_MIN_SHIFT_M = 0.05


@dataclass
class KeypointMatch:
    """Which keypoint a demonstrated grasp was at (index into `KEYPOINT_NAMES`), the grasp's x, y
    distance from it on the demonstration's cloth, and where the grasp lands on the current one."""

    keypoint: int
    distance_m: float
    point_xy: np.ndarray


def carry_by_keypoint(
    demo: Keypoints, current: Keypoints, transform: PlanarRigid, point: np.ndarray, match_m: float
) -> KeypointMatch | None:
    """The demonstrated grasp `point` [3] carried from its keypoint on the demonstration's cloth
    (`demo`) to the same keypoint on the current one (`current`), or None when it was farther than
    `match_m` from every keypoint seen in both frames. `transform`: the registration of the
    demonstration's cloth onto the current one (one element), whose rotation turns the offset."""
    usable = (demo.visible > VISIBLE) & (current.visible > VISIBLE)
    distance = np.linalg.norm(demo.positions[:, :2] - np.asarray(point)[None, :2], axis=1)
    distance[~usable] = np.inf
    j = int(distance.argmin())
    if not distance[j] <= match_m:
        return None
    rotation = transform.rotation[0].double().numpy()
    offset = rotation @ (np.asarray(point)[:2] - demo.positions[j, :2])
    return KeypointMatch(j, float(distance[j]), current.positions[j, :2] + offset)


@dataclass
class KeypointCarrier:
    """A detector, the distance within which a demonstrated grasp is at a keypoint, and the least
    shift from the registration's point a carry must make to be taken (`keypoint_shift`)."""

    detector: KeypointDetector
    match_m: float = DEFAULT_MATCH_M
    min_shift_m: float = DEFAULT_MIN_SHIFT_M

    def carry(
        self, transform: PlanarRigid, demo_cloth: TokenArrays, cloth: TokenArrays, point: np.ndarray
    ) -> KeypointMatch | None:
        """`carry_by_keypoint` with the detector's predictions on both clouds of tokens."""
        return carry_by_keypoint(
            self.detector.predict(demo_cloth), self.detector.predict(cloth), transform, point, self.match_m
        )


def keypoint_shift(
    carrier: KeypointCarrier,
    transform: PlanarRigid,
    demo: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    k: int,
    arm: int,
    cloth: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> np.ndarray | None:
    """How far [2] (x, y) the keypoint carry moves `arm`'s grasp at demonstration keyframe `k`
    from where `transform` puts it (`replay.map_grasp`'s `shift_xy`), or None when the grasp was
    at no keypoint or the carry moves it less than `carrier.min_shift_m`. `demo`, `cloth`: as
    `replay.map_grasp` takes them."""
    point = demo[3][k, arm, :3]
    match = carrier.carry(transform, TokenArrays(demo[0][k], demo[1][k], demo[2][k]), TokenArrays(*cloth), point)
    if match is None:
        return None
    shift = match.point_xy - transform.apply_point(point)[:2]
    return shift if np.linalg.norm(shift) >= carrier.min_shift_m else None
