"""Table-plane segmentation finds the cloth and only the cloth; impossible frames raise clearly."""

from __future__ import annotations

import numpy as np
import pytest
from perception_scenes import table_scene

from instant_fold_core.rgbd import RGBDFrame
from instant_fold_core.validation import ValidationError
from instant_fold_perception.segmentation import SegmentationError
from instant_fold_perception.segmentation.plane import PlaneSegmenter, fit_plane


def iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / (a | b).sum())


def test_plane_fit_recovers_a_known_plane() -> None:
    rng = np.random.default_rng(1)
    normal = np.array([0.1, -0.2, -1.0]) / np.linalg.norm([0.1, -0.2, -1.0])
    points = rng.normal(size=(2000, 3))
    points -= np.outer(points @ normal + 0.9, normal)  # project onto n . p = -0.9
    points[:300] += rng.uniform(0.05, 0.3, (300, 1)) * -normal  # 15 % outliers above
    plane = fit_plane(points, 0.004, 64, rng)
    np.testing.assert_allclose(plane[:3], normal, atol=1e-6)
    np.testing.assert_allclose(plane[3], -0.9, atol=1e-6)


@pytest.mark.parametrize("tilt_deg", [0.0, 8.0, 20.0])
def test_cloth_is_segmented_and_the_gripper_is_not(tilt_deg: float) -> None:
    frame, truth = table_scene(tilt_deg=tilt_deg)
    mask = PlaneSegmenter().segment(frame)
    assert mask.dtype == bool and mask.shape == truth.shape
    assert iou(mask, truth) > 0.95


def test_folded_cloth_stacked_higher_is_still_cloth() -> None:
    frame, truth = table_scene(cloth_height=0.03)
    assert iou(PlaneSegmenter().segment(frame), truth) > 0.95


def test_bad_frames_raise_clear_errors() -> None:
    frame, _ = table_scene(with_gripper=False)
    empty_table = RGBDFrame(frame.color, table_scene(cloth_height=0.0, with_gripper=False)[0].depth, frame.intrinsics)
    with pytest.raises(SegmentationError, match="nothing lies on the table|largest blob"):
        PlaneSegmenter().segment(empty_table)
    no_depth = RGBDFrame(frame.color, np.zeros_like(frame.depth), frame.intrinsics)
    with pytest.raises(SegmentationError, match="too few valid pixels"):
        PlaneSegmenter().segment(no_depth)
    nan_depth = frame.depth.copy()
    nan_depth[3, 3] = np.nan
    with pytest.raises(ValidationError, match=r"RGBDFrame\.depth: contains 1 NaN"):
        PlaneSegmenter().segment(RGBDFrame(frame.color, nan_depth, frame.intrinsics))
    with pytest.raises(ValidationError, match=r"RGBDFrame\.color: expected dtype uint8"):
        PlaneSegmenter().segment(RGBDFrame(frame.color.astype(np.float32), frame.depth, frame.intrinsics))
