"""benchmarks/bench_start_deformation.py's rigid-fit residual: zero for a rigidly moved point set,
the known value for a non-rigid one, and never a reflection (pure numpy, no simulator)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from script_module import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script(Path("benchmarks/bench_start_deformation.py"))


def _rotate(points: np.ndarray, degrees: float) -> np.ndarray:
    a = np.radians(degrees)
    return points @ np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]).T


def test_a_rigid_motion_leaves_no_residual_and_is_recovered(bench) -> None:
    points = np.random.default_rng(0).uniform(-1, 1, (50, 2))
    moved = _rotate(points, 37.0) + np.array([0.3, -1.2])
    residual, angle = bench.rigid_residuals(points, moved)
    assert residual.max() < 1e-12
    assert angle == pytest.approx(37.0)


def test_a_non_rigid_change_leaves_its_known_residual(bench) -> None:
    # Two points pulled apart symmetrically by 2d (and rotated, shifted): the best rigid map puts
    # each d off, whatever the pose.
    square = np.array([[-1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    stretched = square.copy()
    stretched[:2, 0] *= 1.5  # x = -1.5, 1.5: each end 0.5 out
    moved = _rotate(stretched, -20.0) + np.array([2.0, 1.0])
    residual, angle = bench.rigid_residuals(square, moved)
    np.testing.assert_allclose(residual, [0.5, 0.5, 0.0, 0.0], atol=1e-12)
    assert angle == pytest.approx(-20.0)


def test_a_mirror_image_is_not_fit_by_a_reflection(bench) -> None:
    points = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
    mirrored = points * [-1.0, 1.0]
    rotation, _ = bench.rigid_fit(points, mirrored)
    assert np.linalg.det(rotation) == pytest.approx(1.0)
    residual, _ = bench.rigid_residuals(points, mirrored)
    assert residual.max() > 0.1
