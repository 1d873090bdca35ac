"""Hand tracking: depth lifting (median window, invalid depth), arm assignment by image position,
pinch, and the MediaPipe backend with the model bundle set-up packs from mediapipe==0.10.21."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from instant_fold_demo.hands import (
    INDEX_TIP,
    MIDDLE_MCP,
    THUMB_TIP,
    WRIST,
    HandDetection,
    HandTrackingError,
    MediaPipeHandDetector,
    assign_arms,
    backproject,
    default_model_path,
    depth_at,
    hand_state,
    model_provenance,
    project,
)

K = np.array([[200.0, 0, 64], [0, 200.0, 48], [0, 0, 1]], np.float32)


def hand(center: tuple[float, float], pinch_px: float, score: float = 0.9) -> HandDetection:
    lm = np.tile(np.asarray(center, np.float32), (21, 1))
    lm[WRIST] += (0, 40)
    lm[MIDDLE_MCP] += (0, 0)  # hand size: 40 px
    lm[THUMB_TIP] += (-pinch_px / 2, -10)
    lm[INDEX_TIP] += (pinch_px / 2, -10)
    return HandDetection(lm, score)


def test_depth_is_a_median_of_valid_pixels_and_nan_without_any() -> None:
    depth = np.full((20, 20), 1.0, np.float32)
    depth[10, 10] = 5.0  # a flying pixel
    depth[9, 9] = 0.0  # a missing one
    depth[11, 11] = np.nan
    assert depth_at(depth, 10, 10, window=5) == 1.0
    depth[:] = 0
    assert np.isnan(depth_at(depth, 10, 10))
    assert np.isnan(depth_at(np.ones((4, 4), np.float32), 50, 50))  # outside the image
    mask = np.zeros((4, 4), bool)
    mask[0, 0] = True
    ramp = np.arange(16, dtype=np.float32).reshape(4, 4) + 1
    assert depth_at(ramp, 1, 1, window=3, mask=mask) == 1.0


def test_hand_state_grasp_point_and_pinch() -> None:
    depth = np.full((96, 128), 0.8, np.float32)
    state = hand_state(hand((60, 40), pinch_px=8), depth, K)
    assert state.grasp_px.tolist() == [60, 30]
    assert state.pinch == pytest.approx(8 / 40)
    assert np.allclose(state.grasp_point, backproject(60, 30, 0.8, K))
    assert np.allclose(project(state.grasp_point, K), state.grasp_px)
    assert np.isnan(hand_state(hand((60, 40), 8), np.zeros_like(depth), K).grasp_point).all()


def test_arms_are_assigned_by_image_position_not_label() -> None:
    left, right = hand((20, 40), 5), hand((100, 40), 5)
    assert assign_arms([right, left], 128) == [left, right]
    assert assign_arms([right, left], 128, mirror=True) == [right, left]
    assert assign_arms([right], 128) == [None, right]
    assert assign_arms([left], 128) == [left, None]
    weak = hand((60, 40), 5, score=0.1)
    assert assign_arms([weak, right, left], 128) == [left, right]
    assert assign_arms([], 128) == [None, None]
    crossed = hand((70, 40), 5)  # the left hand, past the image centre
    assert assign_arms([crossed], 128, previous=(left.landmarks, None)) == [crossed, None]
    assert assign_arms([crossed], 128, previous=(left.landmarks, right.landmarks)) == [None, crossed]


def test_mediapipe_bundle_loads_and_runs_offline() -> None:
    """The bundle set-up built loads in the installed mediapipe and runs on an image without hands
    (finding none). Detection quality on real hands is not tested here: no image of real hands
    can be made or fetched on this machine (docs/demonstrations.md)."""
    assert default_model_path().is_file(), "run scripts/bootstrap.sh"
    assert model_provenance()["source"].startswith("mediapipe==0.10.21")
    rng = np.random.default_rng(0)
    image = np.full((240, 320, 3), 200, np.uint8)
    image[60:180, 80:240] = rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)
    with MediaPipeHandDetector() as detector:
        assert detector.detect(image, 0) == []
        assert detector.detect(image, 33) == []


def test_missing_or_broken_model_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(HandTrackingError, match="run scripts/bootstrap.sh"):
        MediaPipeHandDetector(tmp_path / "missing.task")
    broken = tmp_path / "broken.task"
    broken.write_bytes(b"not a bundle")
    with pytest.raises(HandTrackingError, match="does not load"):
        MediaPipeHandDetector(broken)
