"""Extrinsics: parsing both config forms, camera <-> base round trips, the static-tf pose."""

from __future__ import annotations

import numpy as np
import pytest

from instant_fold_control.config import find_robot_config, load_robot_config
from instant_fold_control.transforms import Extrinsics, TransformError, matrix_to_quaternion, quaternion_to_matrix


def _random_quaternion(rng: np.random.Generator) -> np.ndarray:
    q = rng.standard_normal(4)
    return q / np.linalg.norm(q)


def test_quaternion_matrix_round_trip() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        q = _random_quaternion(rng)
        r = quaternion_to_matrix(q)
        assert np.allclose(r.T @ r, np.eye(3), atol=1e-12) and np.isclose(np.linalg.det(r), 1.0)
        back = matrix_to_quaternion(r)
        assert np.allclose(back, q if q[3] >= 0 else -q, atol=1e-9)


def test_camera_base_round_trip_and_inverse() -> None:
    rng = np.random.default_rng(1)
    ext = Extrinsics.from_config(
        "x", {"translation": rng.standard_normal(3).tolist(), "quaternion": _random_quaternion(rng).tolist()}
    )
    points = rng.uniform(-1, 1, size=(50, 3))
    assert np.allclose(ext.to_camera(ext.to_base(points)), points, atol=1e-12)
    assert np.allclose(ext.camera_from_base @ ext.base_from_camera, np.eye(4), atol=1e-12)
    # distances are preserved (rigid)
    assert np.allclose(
        np.linalg.norm(np.diff(ext.to_base(points), axis=0), axis=1), np.linalg.norm(np.diff(points, axis=0), axis=1)
    )


def test_matrix_and_quaternion_forms_agree_in_the_shipped_configs() -> None:
    """config/robots/dobot.yaml (quaternion form) and franka.yaml (matrix form) describe the same layout."""
    dobot = load_robot_config(find_robot_config("dobot"))
    franka = load_robot_config(find_robot_config("franka"))
    for a, b in zip(dobot.arms, franka.arms, strict=True):
        assert np.allclose(a.extrinsics.base_from_camera, b.extrinsics.base_from_camera)


def test_known_geometry_of_the_nominal_layout() -> None:
    """Left base sits 0.6 m left of the camera axis at table depth 0.95 m, z up (towards the camera)."""
    left = load_robot_config(find_robot_config("dobot")).arm("left").extrinsics
    assert np.allclose(left.to_base(np.array([-0.6, 0.0, 0.95])), 0.0)
    # 0.2 m above the table (towards the camera) is +0.2 m along the base's z axis
    assert np.allclose(left.to_base(np.array([-0.6, 0.0, 0.75])), [0.0, 0.0, 0.2])
    translation, quaternion = left.base_pose_in_camera()
    assert np.allclose(translation, [-0.6, 0.0, 0.95])
    assert np.allclose(quaternion_to_matrix(quaternion), left.camera_from_base[:3, :3])


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"translation": [0, 0, 0], "quaternion": [1, 1, 0, 0]}, "unit quaternion"),
        ({"translation": [0, 0], "quaternion": [0, 0, 0, 1]}, "arm.translation: expected shape (3,)"),
        ({"matrix": [[2, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]}, "not a rotation"),
        ({"matrix": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1]]}, "last row"),
        ({"matrix": np.eye(4).tolist(), "translation": [0, 0, 0]}, "not both"),
        ({"translation": [0, float("nan"), 0], "quaternion": [0, 0, 0, 1]}, "NaN"),
    ],
)
def test_bad_extrinsics_name_the_field(entry: dict, message: str) -> None:
    with pytest.raises(TransformError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Extrinsics.from_config("arm", entry)
