"""check_array and the Episode schema name the offending field."""

from __future__ import annotations

import numpy as np
import pytest

from instant_fold_core.dataset.schema import KEYPOINT_NAMES, Episode, EpisodeError
from instant_fold_core.validation import ValidationError, check_array


def test_check_array_accepts_wildcards_and_rejects_mismatches() -> None:
    arr = np.zeros((5, 3), np.float32)
    assert check_array("x", arr, (None, 3), np.float32) is arr
    with pytest.raises(ValidationError, match=r"x: expected shape \(\*, 4\), got \(5, 3\)"):
        check_array("x", arr, (None, 4))
    with pytest.raises(ValidationError, match="x: expected dtype float64, got float32"):
        check_array("x", arr, (5, 3), np.float64)
    with pytest.raises(ValidationError, match="x: expected a numpy array, got list"):
        check_array("x", [[0.0] * 3] * 5, (5, 3))
    arr[2, 1] = np.nan
    with pytest.raises(ValidationError, match="x: contains 1 NaN"):
        check_array("x", arr, (5, 3))
    check_array("x", arr, (5, 3), finite=False)


def make_episode(t: int = 4, m: int = 10, h: int = 8) -> Episode:
    return Episode(
        rgb=np.zeros((t, h, h, 3), np.uint8),
        depth=np.ones((t, h, h), np.float32),
        mask=np.ones((t, h, h), bool),
        intrinsics=np.eye(3, dtype=np.float32),
        extrinsics=np.eye(4, dtype=np.float32),
        arm_state=np.zeros((t, 2, 4), np.float32),
        action=np.zeros((t, 2, 4), np.float32),
        particles=np.zeros((t, m, 3), np.float32),
        particle_visible=np.ones((t, m), bool),
        keypoints=np.zeros((t, len(KEYPOINT_NAMES), 3), np.float32),
        keypoint_particle_ids=np.arange(len(KEYPOINT_NAMES), dtype=np.int32),
        keyframes=np.array([0, t - 1], np.int32),
        meta={"mode": "test"},
    )


def test_valid_episode_passes() -> None:
    assert make_episode().validate().num_frames == 4
    real_demo = make_episode(m=0)  # a real demonstration has no particles
    real_demo.validate()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("depth", np.ones((4, 8, 7), np.float32), "depth: expected shape"),
        ("mask", np.ones((4, 8, 8), np.uint8), "mask: expected dtype bool"),
        ("arm_state", np.full((4, 2, 4), np.nan, np.float32), "arm_state: contains"),
        ("particle_visible", np.ones((4, 9), bool), "particle_visible: expected shape"),
        ("keyframes", np.array([2, 1], np.int32), "keyframes: must be strictly increasing"),
        ("keyframes", np.array([0, 4], np.int32), "keyframes: must be strictly increasing"),
        ("depth", -np.ones((4, 8, 8), np.float32), "depth: negative"),
        ("rgb", np.zeros((4, 8, 8), np.uint8), "rgb: expected shape"),
    ],
)
def test_invalid_episode_names_the_field(field: str, value: np.ndarray, message: str) -> None:
    episode = make_episode()
    setattr(episode, field, value)
    with pytest.raises(EpisodeError, match=message):
        episode.validate()
