"""Semantic keypoints of a top by the paper's deterministic heuristic (appendix A).

On the canonical flattened mesh (x left->right, y hem->neck): corner keypoints are extrema of
linear functions of the particle coordinates, bottom corners come from the lowest hem band,
one shoulder is where the upper contour turns most sharply downwards into the sleeve, the
other is its mirror image, and the centre is the particle nearest the centroid of the
shoulders and bottom corners. The result is a particle id per keypoint, so keypoints are
tracked through a rollout by reading those particles.
"""

from __future__ import annotations

import numpy as np

from instant_fold_core.dataset.schema import KEYPOINT_NAMES
from instant_fold_core.errors import InvalidInputError


class KeypointError(InvalidInputError):
    """The heuristic found a degenerate keypoint layout (the garment should be discarded)."""


def _argext(xy: np.ndarray, candidates: np.ndarray, weights: tuple[float, float]) -> int:
    """Id (into the full mesh) of the candidate maximising weights . (x, y)."""
    score = xy[candidates] @ np.asarray(weights)
    return int(candidates[np.argmax(score)])


def _nearest(xyz: np.ndarray, target_xy: np.ndarray) -> int:
    """Particle nearest to `target_xy` in the plane, preferring the upper layer among ties."""
    d = np.linalg.norm(xyz[:, :2] - target_xy, axis=1)
    close = np.flatnonzero(d <= d.min() + 1e-3)
    return int(close[np.argmax(xyz[close, 2])])


def _spacing(xy: np.ndarray, sample: int = 200) -> float:
    """Median nearest-neighbour distance of a particle sample (the mesh resolution)."""
    idx = np.linspace(0, len(xy) - 1, min(sample, len(xy))).astype(int)
    d = np.linalg.norm(xy[idx, None, :] - xy[None, :, :], axis=2)
    d[d == 0] = np.inf
    return float(np.median(d.min(axis=1)))


def _left_shoulder(xy: np.ndarray, n_bins: int = 64) -> int:
    """Find the left shoulder as the knee of the upper contour between the neck and the sleeve tip.

    The upper contour (highest particle per column, walking from the centre line outwards)
    runs flat along the shoulder line and then drops along the sleeve's upper edge; the
    shoulder is where it changes most, i.e. the contour point highest above the chord from
    the contour's top to the sleeve tip. This knee test does not need slope thresholds, so it
    holds on coarse and fine meshes alike.
    """
    left = np.flatnonzero(xy[:, 0] < 0)
    x0 = xy[left, 0].min()
    centres = np.linspace(0.0, x0, n_bins)
    # Upper envelope: highest particle within a particle spacing of each sample column, so
    # columns that fall between mesh rows do not see a lower row as the contour.
    radius = max(_spacing(xy), abs(x0) / n_bins)
    top_id = np.empty(n_bins, dtype=np.int64)
    for b, xc in enumerate(centres):
        members = left[np.abs(xy[left, 0] - xc) <= radius]
        if members.size == 0:
            members = left[[np.argmin(np.abs(xy[left, 0] - xc))]]
        top_id[b] = members[np.argmax(xy[members, 1])]
    pts = xy[top_id]
    start = int(np.argmax(pts[:, 1]))
    a, b = pts[start], pts[-1]
    if b[0] >= a[0] - 1e-6:
        raise KeypointError("left_shoulder: no sleeve beyond the top of the contour")
    chord = a[1] + (pts[:, 0] - a[0]) * (b[1] - a[1]) / (b[0] - a[0])
    height = pts[:, 1] - chord
    height[: start + 1] = -np.inf
    height[-1] = -np.inf
    best = int(np.argmax(height))
    if not np.isfinite(height[best]) or height[best] <= 0:
        raise KeypointError("left_shoulder: the upper contour has no knee between neck and sleeve")
    return int(top_id[best])


def detect_keypoints(vertices: np.ndarray, hem_band: float = 0.06) -> np.ndarray:
    """Particle ids [7] in `KEYPOINT_NAMES` order for a canonical garment mesh [N, 3]."""
    xyz = np.asarray(vertices, dtype=np.float64)
    if xyz.ndim != 2 or xyz.shape[1] != 3 or len(xyz) < 16:
        raise KeypointError(f"vertices: expected [N >= 16, 3], got {xyz.shape}")
    xy = xyz[:, :2]
    every = np.arange(len(xy))
    y_min, y_max = xy[:, 1].min(), xy[:, 1].max()
    band = np.flatnonzero(xy[:, 1] <= y_min + hem_band * (y_max - y_min))
    ids = {
        # Sleeve tips: outermost particles, nudged towards the upper cuff corner.
        "top_left": _argext(xy, every, (-1.0, 0.1)),
        "top_right": _argext(xy, every, (1.0, 0.1)),
        "bottom_left": _argext(xy, band, (-1.0, -0.2)),
        "bottom_right": _argext(xy, band, (1.0, -0.2)),
    }
    ids["left_shoulder"] = _left_shoulder(xy)
    mirror = xy[ids["left_shoulder"]] * np.array([-1.0, 1.0])
    ids["right_shoulder"] = _nearest(xyz, mirror)
    anchors = xy[[ids["left_shoulder"], ids["right_shoulder"], ids["bottom_left"], ids["bottom_right"]]]
    ids["center"] = _nearest(xyz, anchors.mean(0))
    out = np.array([ids[name] for name in KEYPOINT_NAMES], dtype=np.int32)
    _check_layout(xy, out)
    return out


def _check_layout(xy: np.ndarray, ids: np.ndarray) -> None:
    """Reject layouts a person inspecting the mesh would discard (the paper's manual check)."""
    p = {name: xy[i] for name, i in zip(KEYPOINT_NAMES, ids, strict=True)}
    if len(set(ids.tolist())) != len(ids):
        raise KeypointError(
            f"keypoints: two keypoints share a particle {dict(zip(KEYPOINT_NAMES, ids.tolist(), strict=True))}"
        )
    if not p["top_left"][0] < p["left_shoulder"][0] < 0 < p["right_shoulder"][0] < p["top_right"][0]:
        raise KeypointError("keypoints: sleeve tips are not outside the shoulders")
    if (
        not max(p["bottom_left"][1], p["bottom_right"][1])
        < p["center"][1]
        < min(p["left_shoulder"][1], p["right_shoulder"][1])
    ):
        raise KeypointError("keypoints: centre is not between the hem and the shoulders")
