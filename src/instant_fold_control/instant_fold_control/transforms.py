"""Rigid transforms between the camera optical frame and each robot's base frame.

The policy sees and acts in the camera optical frame (the paper's shared frame for both arms);
each arm is commanded in its own base frame. The calibrated extrinsics of an arm are stored as
`base_from_camera`: the 4x4 matrix T with p_base = T @ [p_camera, 1]. Config files may give it
as a matrix or as translation + unit quaternion (x, y, z, w), whichever the calibration tool
produced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from instant_fold_core.errors import ConfigError

#: Largest tolerated deviation of R^T R from the identity (calibration files are rounded).
ORTHONORMAL_TOL = 1e-4


class TransformError(ConfigError):
    """Extrinsics are malformed; the message names the config field."""


def quaternion_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrix of a unit quaternion given as (x, y, z, w)."""
    x, y, z, w = (float(v) for v in q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def matrix_to_quaternion(r: np.ndarray) -> np.ndarray:
    """Unit quaternion (x, y, z, w) with w >= 0 of a rotation matrix (Shepperd's method)."""
    m = np.asarray(r, dtype=np.float64)
    trace = np.trace(m)
    if trace > 0:
        s = 2.0 * np.sqrt(trace + 1.0)
        q = [(m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, 0.25 * s]
    else:
        i = int(np.argmax(np.diag(m)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + m[i, i] - m[j, j] - m[k, k])
        q = [0.0, 0.0, 0.0, (m[k, j] - m[j, k]) / s]
        q[i] = 0.25 * s
        q[j] = (m[j, i] + m[i, j]) / s
        q[k] = (m[k, i] + m[i, k]) / s
    out = np.asarray(q)
    out /= np.linalg.norm(out)
    return -out if out[3] < 0 else out


@dataclass(frozen=True)
class Extrinsics:
    """Calibrated camera -> robot-base transform of one arm."""

    base_from_camera: np.ndarray  # 4x4, float64

    @classmethod
    def from_config(cls, name: str, entry: Any) -> Extrinsics:
        """Parse `{matrix: 4x4}` or `{translation: [3], quaternion: [x, y, z, w]}` (field `name`)."""
        if not isinstance(entry, Mapping):
            raise TransformError(f"{name}: expected a mapping with 'matrix' or 'translation' + 'quaternion'")
        if "matrix" in entry:
            if set(entry) != {"matrix"}:
                raise TransformError(f"{name}: give either 'matrix' or 'translation' + 'quaternion', not both")
            t = _float_array(f"{name}.matrix", entry["matrix"], (4, 4))
            if not np.allclose(t[3], [0, 0, 0, 1]):
                raise TransformError(f"{name}.matrix: last row must be [0, 0, 0, 1], got {t[3].tolist()}")
            if (
                not np.allclose(t[:3, :3].T @ t[:3, :3], np.eye(3), atol=ORTHONORMAL_TOL)
                or np.linalg.det(t[:3, :3]) < 0
            ):
                raise TransformError(f"{name}.matrix: upper-left 3x3 block is not a rotation")
            return cls(t)
        if set(entry) != {"translation", "quaternion"}:
            raise TransformError(
                f"{name}: expected keys 'translation' and 'quaternion' (x, y, z, w), got {sorted(entry)}"
            )
        translation = _float_array(f"{name}.translation", entry["translation"], (3,))
        q = _float_array(f"{name}.quaternion", entry["quaternion"], (4,))
        norm = np.linalg.norm(q)
        if abs(norm - 1.0) > 1e-3:
            raise TransformError(f"{name}.quaternion: must be a unit quaternion (x, y, z, w), norm is {norm:.6f}")
        t = np.eye(4)
        t[:3, :3] = quaternion_to_matrix(q / norm)
        t[:3, 3] = translation
        return cls(t)

    @property
    def camera_from_base(self) -> np.ndarray:
        r, p = self.base_from_camera[:3, :3], self.base_from_camera[:3, 3]
        inv = np.eye(4)
        inv[:3, :3] = r.T
        inv[:3, 3] = -r.T @ p
        return inv

    def to_base(self, points_camera: np.ndarray) -> np.ndarray:
        """Map points [..., 3] from the camera frame to the base frame."""
        return _apply(self.base_from_camera, points_camera)

    def to_camera(self, points_base: np.ndarray) -> np.ndarray:
        """Map points [..., 3] from the base frame to the camera frame."""
        return _apply(self.camera_from_base, points_base)

    def base_pose_in_camera(self) -> tuple[np.ndarray, np.ndarray]:
        """(translation, quaternion xyzw) of the base frame seen from the camera: the static tf
        camera -> base (tf's parent->child transform is the child's pose in the parent)."""
        t = self.camera_from_base
        return t[:3, 3].copy(), matrix_to_quaternion(t[:3, :3])


def _apply(t: np.ndarray, points: np.ndarray) -> np.ndarray:
    pts = np.asarray(points, dtype=np.float64)
    return pts @ t[:3, :3].T + t[:3, 3]


def _float_array(name: str, value: Any, shape: tuple[int, ...]) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TransformError(f"{name}: expected numbers, got {value!r}") from exc
    if arr.shape != shape:
        raise TransformError(f"{name}: expected shape {shape}, got {arr.shape}")
    if not np.isfinite(arr).all():
        raise TransformError(f"{name}: contains NaN or infinite values")
    return arr
