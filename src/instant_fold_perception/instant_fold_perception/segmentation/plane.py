"""Table-plane segmentation: fit the dominant plane, keep the largest blob lying on it.

For a garment on a table seen from above, the table is the dominant plane in the depth image and
the cloth is the largest connected region a few millimetres to a few centimetres above it (folds
stack up; the arms are higher still). Fast and weight-free; exact on simulated depth, and on a
real camera as good as its depth noise allows (thin flat cloth then needs SAM2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from instant_fold_core.distortion import NO_DISTORTION, Distortion
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_perception.segmentation import SegmentationError


@dataclass(frozen=True)
class PlaneSegmenterConfig:
    min_height: float = 0.003  # m above the table: below is table (depth noise, cloth edges)
    max_height: float = 0.15  # m above the table: above is arms / grippers / hands
    inlier_threshold: float = 0.004  # m, plane fit tolerance
    ransac_iterations: int = 64
    sample_points: int = 4000  # valid pixels used for the fit
    min_cloth_pixels: int = 50  # smaller blobs are reported as "no cloth"
    closing_iterations: int = 2  # morphological closing of the cloth mask (fills speckle holes)
    seed: int = 0


def backproject_all(depth: np.ndarray, k: np.ndarray, distortion: Distortion = NO_DISTORTION) -> np.ndarray:
    """Camera-frame points [H, W, 3] of every pixel (invalid pixels get z = 0), lens distortion undone."""
    rays = distortion.pixel_rays(k, *depth.shape).astype(np.float32)
    return np.stack([rays[..., 0] * depth, rays[..., 1] * depth, depth], axis=-1)


def fit_plane(points: np.ndarray, threshold: float, iterations: int, rng: np.random.Generator) -> np.ndarray:
    """RANSAC + least-squares plane (n, d) with |n| = 1, n . p = d, n pointing at the camera."""
    best_inliers = np.zeros(len(points), bool)
    for _ in range(iterations):
        a, b, c = points[rng.choice(len(points), 3, replace=False)]
        normal = np.cross(b - a, c - a)
        norm = np.linalg.norm(normal)
        if norm < 1e-9:
            continue
        normal /= norm
        inliers = np.abs(points @ normal - normal @ a) < threshold
        if inliers.sum() > best_inliers.sum():
            best_inliers = inliers
    if best_inliers.sum() < 3:
        raise SegmentationError("no table plane found in the depth image")
    inlier_points = points[best_inliers]
    centroid = inlier_points.mean(axis=0)
    _, _, vt = np.linalg.svd(inlier_points - centroid, full_matrices=False)
    normal = vt[-1]
    if normal @ centroid > 0:  # the camera (origin) must be on the positive side
        normal = -normal
    return np.append(normal, normal @ centroid)


class PlaneSegmenter:
    """`Segmenter` backend based on the table plane."""

    def __init__(self, config: PlaneSegmenterConfig | None = None) -> None:
        self.config = config or PlaneSegmenterConfig()
        self._rng = np.random.default_rng(self.config.seed)

    def segment(self, frame: RGBDFrame) -> np.ndarray:
        cfg = self.config
        frame.validate()
        valid = frame.depth > 0
        if valid.sum() < max(3, cfg.min_cloth_pixels):
            raise SegmentationError("depth image has too few valid pixels")
        points = backproject_all(frame.depth, frame.intrinsics, frame.distortion)
        valid_points = points[valid]
        sample = valid_points[
            self._rng.choice(len(valid_points), min(cfg.sample_points, len(valid_points)), replace=False)
        ]
        plane = fit_plane(sample.astype(np.float64), cfg.inlier_threshold, cfg.ransac_iterations, self._rng)
        # signed height above the table: n points to the camera's side and n . p = d on the table
        height = points @ plane[:3] - plane[3]
        candidate = valid & (height > cfg.min_height) & (height < cfg.max_height)
        labels, count = ndimage.label(candidate)
        if count == 0:
            raise SegmentationError("nothing lies on the table plane")
        sizes = ndimage.sum_labels(candidate, labels, index=np.arange(1, count + 1))
        largest = int(np.argmax(sizes)) + 1
        if sizes[largest - 1] < cfg.min_cloth_pixels:
            raise SegmentationError(
                f"largest blob on the table has {int(sizes[largest - 1])} pixels (< {cfg.min_cloth_pixels})"
            )
        mask = labels == largest
        if cfg.closing_iterations:
            mask = ndimage.binary_closing(mask, iterations=cfg.closing_iterations) & valid
            mask = ndimage.binary_fill_holes(mask)
        return mask
