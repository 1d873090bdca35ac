"""Motion filter for pretraining frames (paper, appendix B "Trajectory Filtering").

Starting from frame 0, a frame is kept when more than `frac` of the particles moved more than
`dist` metres since the last kept frame; sequences longer than `max_frames` are then
subsampled uniformly. This drops frames where the grippers move but the cloth does not.
"""

from __future__ import annotations

import numpy as np

from instant_fold_core.validation import ValidationError

TAU_DIST = 0.02  # metres
TAU_FRAC = 0.15
MAX_FRAMES = 15


def motion_filter(
    particles: np.ndarray, dist: float = TAU_DIST, frac: float = TAU_FRAC, max_frames: int = MAX_FRAMES
) -> np.ndarray:
    """Indices (int64, increasing) of the frames kept from particles [T, M, 3]."""
    p = np.asarray(particles, dtype=np.float64)
    if p.ndim != 3 or p.shape[2] != 3 or p.shape[0] == 0 or p.shape[1] == 0:
        raise ValidationError(f"particles: motion filtering needs non-empty [T, M, 3] particles, got {p.shape}")
    kept = [0]
    for t in range(1, p.shape[0]):
        moved = np.linalg.norm(p[t] - p[kept[-1]], axis=1) > dist
        if moved.mean() > frac:
            kept.append(t)
    kept_arr = np.asarray(kept, dtype=np.int64)
    if len(kept_arr) > max_frames:
        kept_arr = kept_arr[np.round(np.linspace(0, len(kept_arr) - 1, max_frames)).astype(int)]
    return kept_arr
