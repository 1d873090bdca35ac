"""Fold rate: how much of the table a garment stops covering when it is folded.

The paper's fold-quality test depends on the final *fold rate* (appendix, C-SR@95) without
defining it; ours is the share of the start state's top-down footprint that the fold removed,
`1 - area(final) / area(start)`, where the footprint is the union of the mesh's triangles
projected onto the table plane and rasterised on a grid of `resolution` cells across the larger
side of the start footprint. A flat garment folded in half scores about 0.5; an untouched one 0.
"""

from __future__ import annotations

import numpy as np

from instant_fold_core.errors import InvalidInputError


class CoverageError(InvalidInputError):
    """Vertices or faces that do not describe a mesh; the message says which."""


def _check(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces)
    if v.ndim != 2 or v.shape[1] < 2 or not np.isfinite(v).all():
        raise CoverageError(f"vertices: expected finite [V, 2|3] positions, got shape {v.shape}")
    if f.ndim != 2 or f.shape[1] != 3 or f.size == 0 or f.min() < 0 or f.max() >= len(v):
        raise CoverageError(f"faces: expected [F, 3] indices into {len(v)} vertices, got shape {f.shape}")
    return v[:, :2], f


def footprint(vertices: np.ndarray, faces: np.ndarray, origin: np.ndarray, cell: float, shape: tuple[int, int]):
    """Boolean grid [shape] of the cells whose centre lies in a projected triangle."""
    xy, f = _check(vertices, faces)
    grid = np.zeros(shape, dtype=bool)
    tri = (xy[f] - origin) / cell - 0.5  # triangle corners in cell-centre coordinates
    lo = np.clip(np.floor(tri.min(axis=1)).astype(int), 0, np.array(shape) - 1)
    hi = np.clip(np.ceil(tri.max(axis=1)).astype(int), 0, np.array(shape) - 1)
    for (a, b, c), (i0, j0), (i1, j1) in zip(tri, lo, hi, strict=True):
        ii, jj = np.mgrid[i0 : i1 + 1, j0 : j1 + 1]
        p = np.stack([ii, jj], axis=-1).astype(np.float64)
        d = (b[1] - c[1]) * (a[0] - c[0]) + (c[0] - b[0]) * (a[1] - c[1])
        if abs(d) < 1e-12:
            continue  # degenerate in projection (a vertical triangle covers no area)
        w0 = ((b[1] - c[1]) * (p[..., 0] - c[0]) + (c[0] - b[0]) * (p[..., 1] - c[1])) / d
        w1 = ((c[1] - a[1]) * (p[..., 0] - c[0]) + (a[0] - c[0]) * (p[..., 1] - c[1])) / d
        inside = (w0 >= -1e-9) & (w1 >= -1e-9) & (1 - w0 - w1 >= -1e-9)
        grid[i0 : i1 + 1, j0 : j1 + 1] |= inside
    return grid


class Coverage:
    """Footprint areas on a grid fixed by the start state, so start and final areas compare exactly."""

    def __init__(self, start_vertices: np.ndarray, faces: np.ndarray, resolution: int = 128) -> None:
        xy, _ = _check(start_vertices, faces)
        if resolution < 8:
            raise CoverageError(f"resolution: at least 8 cells, got {resolution}")
        lo, hi = xy.min(axis=0), xy.max(axis=0)
        self.cell = float((hi - lo).max()) / resolution
        if self.cell <= 0:
            raise CoverageError("start vertices: all at one point")
        # Folding can move cloth outside the start footprint's box: the grid has a margin of one
        # footprint size on every side.
        self.origin = lo - (hi - lo).max()
        n = 3 * resolution + 1
        self.shape = (n, n)
        self.faces = np.asarray(faces)
        self.start_area = self.area(start_vertices)

    def area(self, vertices: np.ndarray) -> float:
        """Projected area of the mesh with these vertex positions (same units as the vertices, squared)."""
        return float(footprint(vertices, self.faces, self.origin, self.cell, self.shape).sum()) * self.cell**2

    def fold_rate(self, vertices: np.ndarray) -> float:
        """1 - area(vertices) / area(start): the share of the start footprint the fold removed."""
        return 1.0 - self.area(vertices) / self.start_area
