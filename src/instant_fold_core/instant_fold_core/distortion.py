"""Lens distortion as a RealSense camera reports it, and what back-projection needs from it.

RealSense streams carry a distortion model and five coefficients (k1, k2, p1, p2, k3) next to the
pinhole matrix; colour streams often report a non-zero model, and depth aligned to colour shares
the colour intrinsics. Ignoring it shifts back-projected points towards the image corners.

Two models are supported, with pyrealsense2 2.59.1's own conventions (checked against its
`rs2_deproject_pixel_to_point` / `rs2_project_point_to_pixel` in the tests):
- `brown_conrady`: OpenCV's forward model (ROS `plumb_bob`): tangential terms on the ideal point;
- `inverse_brown_conrady`: the same polynomial with the tangential terms evaluated on the
  radially scaled point (r^2 still from the ideal point).
In both, projection (ideal -> distorted) is closed form and back-projection inverts it with 10
fixed-point iterations, as the SDK does. Other SDK models (Kannala-Brandt, F-theta, modified
Brown-Conrady) are refused with a clear error rather than silently treated as pinhole.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from instant_fold_core.validation import ValidationError

MODELS = ("none", "brown_conrady", "inverse_brown_conrady")
UNDISTORT_ITERATIONS = 10


@dataclass(frozen=True)
class Distortion:
    """A distortion model and its coefficients (k1, k2, p1, p2, k3) on normalised image coordinates."""

    model: str = "none"
    coeffs: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValidationError(f"distortion model {self.model!r} is not supported (supported: {', '.join(MODELS)})")
        coeffs = tuple(float(c) for c in self.coeffs)
        if len(coeffs) != 5 or not np.isfinite(coeffs).all():
            raise ValidationError(
                f"distortion coefficients: expected 5 finite values (k1, k2, p1, p2, k3), got {coeffs}"
            )
        object.__setattr__(self, "coeffs", coeffs)

    @property
    def is_identity(self) -> bool:
        """True when pixels need no correction (no model, or all coefficients zero)."""
        return self.model == "none" or not any(self.coeffs)

    def distort(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ideal normalised coordinates -> distorted ones (projection)."""
        if self.is_identity:
            return x, y
        radial, dx, dy = self._terms(x, y)
        return x * radial + dx, y * radial + dy

    def undistort(self, xd: np.ndarray, yd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Distorted normalised coordinates -> ideal ones (back-projection), by fixed-point iteration."""
        if self.is_identity:
            return xd, yd
        x, y = xd, yd
        for _ in range(UNDISTORT_ITERATIONS):
            radial, dx, dy = self._terms(x, y)
            x, y = (xd - dx) / radial, (yd - dy) / radial
        return x, y

    def pixel_rays(self, k: np.ndarray, height: int, width: int) -> np.ndarray:
        """Ideal normalised coordinates [H, W, 2] of every pixel: a point at depth z is z * (x, y, 1)."""
        u, v = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
        x, y = self.undistort((u - k[0, 2]) / k[0, 0], (v - k[1, 2]) / k[1, 1])
        return np.stack([x, y], axis=-1)

    def _terms(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k1, k2, p1, p2, k3 = self.coeffs
        r2 = x * x + y * y
        radial = 1.0 + r2 * (k1 + r2 * (k2 + r2 * k3))
        tx, ty = (x * radial, y * radial) if self.model == "inverse_brown_conrady" else (x, y)
        dx = 2.0 * p1 * tx * ty + p2 * (r2 + 2.0 * tx * tx)
        dy = p1 * (r2 + 2.0 * ty * ty) + 2.0 * p2 * tx * ty
        return radial, dx, dy


#: A distortion-free camera (the default of frames and camera infos).
NO_DISTORTION = Distortion()


def rectify(
    color: np.ndarray, depth: np.ndarray, mask: np.ndarray, k: np.ndarray, distortion: Distortion
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Resample colour, depth and mask to the distortion-free camera with the same K.

    Nearest neighbour, so every depth value is a measured one (no blends across cloth edges);
    pixels whose source falls outside the image get depth 0 (invalid), mask False, colour 0.
    """
    if distortion.is_identity:
        return color, depth, mask
    h, w = depth.shape
    u, v = np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64))
    xd, yd = distortion.distort((u - k[0, 2]) / k[0, 0], (v - k[1, 2]) / k[1, 1])
    su = np.rint(xd * k[0, 0] + k[0, 2]).astype(np.int64)
    sv = np.rint(yd * k[1, 1] + k[1, 2]).astype(np.int64)
    inside = (su >= 0) & (su < w) & (sv >= 0) & (sv < h)
    su, sv = np.where(inside, su, 0), np.where(inside, sv, 0)
    return (
        np.where(inside[..., None], color[sv, su], 0).astype(color.dtype),
        np.where(inside, depth[sv, su], 0).astype(depth.dtype),
        inside & mask[sv, su],
    )
