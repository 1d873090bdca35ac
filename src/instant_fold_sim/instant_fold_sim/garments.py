"""Top garments for the simulator: procedural tops, Newton's T-shirt asset and user OBJ meshes.

Every garment is returned as a `GarmentMesh` in its *canonical frame*: real-world metres, x to
the garment's left-to-right (image right when the neck points up), y from hem to neck, z up
out of the table, centred on the body. The keypoint heuristic and the folding programs work in
this frame, and the scene scales it into simulation space. All meshes go through
`validate_mesh` so a bad asset fails with a reason instead of exploding the solver.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from instant_fold_core.errors import InvalidInputError

#: Particle budget per garment (the paper downsamples every mesh to at most 2k particles).
MAX_PARTICLES = 2000

#: Every `HELDOUT_EVERY`-th procedural seed is held out (300 train : 60 held-out, as in the paper).
HELDOUT_EVERY = 6


class GarmentError(InvalidInputError):
    """A garment mesh is unusable; the message says why."""


@dataclass
class GarmentMesh:
    """A triangle mesh in the canonical frame (metres) with its identity and split."""

    vertices: np.ndarray  # float64 [N, 3]
    faces: np.ndarray  # int32 [F, 3]
    garment_id: str
    split: str  # "train" | "heldout"
    source: str  # "procedural" | "newton" | "obj"
    params: dict[str, Any] = field(default_factory=dict)
    #: int8 [N]: -1 on the left sleeve's own particles, +1 on the right's, 0 on the body; None where
    #: the mesh does not know its parts (meshes from files). Lets the layout's sleeve disturbance move
    #: a sleeve without the body (`DRRanges.sleeve_selection`).
    sleeve_side: np.ndarray | None = None

    @property
    def num_particles(self) -> int:
        return int(self.vertices.shape[0])

    def size(self) -> float:
        """Garment scale used to normalise errors: the diagonal of its flat bounding box (m)."""
        extent = self.vertices[:, :2].max(0) - self.vertices[:, :2].min(0)
        return float(np.linalg.norm(extent))


# --------------------------------------------------------------------------- validation


def validate_mesh(vertices: np.ndarray, faces: np.ndarray, max_particles: int = MAX_PARTICLES) -> None:
    """Reject meshes the cloth solver cannot handle, naming the defect.

    Checks: shapes/finiteness, particle budget, face indices in range, degenerate (near
    zero-area or repeated-vertex) triangles, edges shared by more than two triangles
    (non-manifold), and unreferenced vertices (free particles would fall through the table).
    """
    vertices = np.asarray(vertices)
    faces = np.asarray(faces)
    if vertices.ndim != 2 or vertices.shape[1] != 3 or len(vertices) == 0:
        raise GarmentError(f"vertices: expected a non-empty [N, 3] array, got {vertices.shape}")
    if not np.isfinite(vertices).all():
        raise GarmentError("vertices: contain NaN or infinite values")
    if len(vertices) > max_particles:
        raise GarmentError(f"too many particles: {len(vertices)} > {max_particles}")
    if faces.ndim != 2 or faces.shape[1] != 3 or len(faces) == 0:
        raise GarmentError(f"faces: expected a non-empty [F, 3] triangle array, got {faces.shape}")
    if faces.min() < 0 or faces.max() >= len(vertices):
        raise GarmentError(f"faces: indices out of range [0, {len(vertices)})")
    repeated = (faces[:, 0] == faces[:, 1]) | (faces[:, 1] == faces[:, 2]) | (faces[:, 0] == faces[:, 2])
    if repeated.any():
        raise GarmentError(f"degenerate triangles: {int(repeated.sum())} faces repeat a vertex")
    a, b, c = (vertices[faces[:, i]] for i in range(3))
    areas = 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)
    mean_edge = float(np.mean(np.linalg.norm(b - a, axis=1)))
    tiny = areas < 1e-4 * mean_edge**2
    if tiny.any():
        raise GarmentError(f"degenerate triangles: {int(tiny.sum())} faces have near-zero area")
    edges = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    if (counts > 2).any():
        raise GarmentError(f"non-manifold mesh: {int((counts > 2).sum())} edges shared by more than two faces")
    unused = np.setdiff1d(np.arange(len(vertices)), faces.ravel())
    if unused.size:
        raise GarmentError(f"non-manifold mesh: {unused.size} vertices belong to no triangle")


# --------------------------------------------------------------------------- procedural tops


@dataclass
class TopParams:
    """Shape of a procedural top, in metres / degrees (real-world scale)."""

    body_width: float = 0.52  # chest width at the armpits
    hem_width: float = 0.50
    body_length: float = 0.68  # hem to shoulder line
    shoulder_width: float = 0.44  # distance between the two shoulder points
    armhole_depth: float = 0.21  # shoulder line to armpit
    neck_depth: float = 0.05
    neck_width: float = 0.18
    sleeve_length: float = 0.55
    sleeve_width: float = 0.13  # cuff width
    sleeve_angle: float = 35.0  # below horizontal
    long_sleeves: bool = True


def sample_top_params(seed: int) -> TopParams:
    """Draw a plausible long- or short-sleeved top (about half each) from `seed`."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x70B5]))
    long_sleeves = bool(rng.random() < 0.5)
    body_width = rng.uniform(0.34, 0.46)
    return TopParams(
        body_width=body_width,
        hem_width=body_width * rng.uniform(0.9, 1.1),
        body_length=rng.uniform(0.44, 0.58),
        shoulder_width=body_width * rng.uniform(0.78, 0.92),
        armhole_depth=rng.uniform(0.14, 0.19),
        neck_depth=rng.uniform(0.02, 0.05),
        neck_width=rng.uniform(0.11, 0.16),
        sleeve_length=rng.uniform(0.26, 0.36) if long_sleeves else rng.uniform(0.10, 0.16),
        sleeve_width=rng.uniform(0.08, 0.11) if long_sleeves else rng.uniform(0.11, 0.15),
        sleeve_angle=rng.uniform(45.0, 70.0) if long_sleeves else rng.uniform(10.0, 35.0),
        long_sleeves=long_sleeves,
    )


def split_of_seed(seed: int) -> str:
    """Fixed train/held-out split of procedural garments by seed."""
    return "heldout" if seed % HELDOUT_EVERY == HELDOUT_EVERY - 1 else "train"


def _bilinear(corners: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Map (u, v) in [0,1]^2 onto the quad corners (00, 10, 01, 11)."""
    c00, c10, c01, c11 = corners
    u, v = u[..., None], v[..., None]
    return (1 - u) * (1 - v) * c00 + u * (1 - v) * c10 + (1 - u) * v * c01 + u * v * c11


class _GridMesher:
    """Accumulates structured quad patches that share vertices along their seams."""

    def __init__(self) -> None:
        self.points: list[np.ndarray] = []
        self.faces: list[tuple[int, int, int]] = []

    def add_points(self, pts: np.ndarray) -> np.ndarray:
        start = sum(len(p) for p in self.points)
        self.points.append(pts.reshape(-1, 2))
        return np.arange(start, start + pts.shape[0] * pts.shape[1]).reshape(pts.shape[:2])

    def add_quads(self, ids: np.ndarray) -> None:
        """Triangulate a [rows, cols] grid of vertex ids, alternating diagonals to avoid bias."""
        for i in range(ids.shape[0] - 1):
            for j in range(ids.shape[1] - 1):
                a, b, c, d = ids[i, j], ids[i, j + 1], ids[i + 1, j], ids[i + 1, j + 1]
                if (i + j) % 2 == 0:
                    self.faces += [(a, b, d), (a, d, c)]
                else:
                    self.faces += [(a, b, c), (b, d, c)]


def procedural_top(params: TopParams, spacing: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Triangulate a flat top: lower body, upper body and two sleeves stitched on shared seams.

    `spacing` is the target edge length (m); it sets the particle count (~1k at 1.6 cm). Returns
    the vertices, the faces and each vertex's sleeve side (-1 left sleeve, +1 right, 0 body; the
    armhole seam belongs to the body).
    """
    p = params
    half_hem, half_chest, half_sh = p.hem_width / 2, p.body_width / 2, p.shoulder_width / 2
    y_arm = p.body_length - p.armhole_depth
    nx = max(4, round(p.body_width / spacing))
    n_low = max(2, round(y_arm / spacing))
    n_up = max(2, round(p.armhole_depth / spacing))
    mesher = _GridMesher()
    # Lower body: hem -> armpit line; upper body: armpit line -> shoulder line (shares a row).
    u = np.linspace(0, 1, nx + 1)
    v_low = np.linspace(0, 1, n_low + 1)
    lower = _bilinear(
        np.array([[-half_hem, 0], [half_hem, 0], [-half_chest, y_arm], [half_chest, y_arm]]),
        *np.meshgrid(u, v_low),
    )
    lower_ids = mesher.add_points(lower)
    v_up = np.linspace(0, 1, n_up + 1)[1:]
    upper = _bilinear(
        np.array([[-half_chest, y_arm], [half_chest, y_arm], [-half_sh, p.body_length], [half_sh, p.body_length]]),
        *np.meshgrid(u, v_up),
    )
    upper_ids = np.vstack([lower_ids[-1:], mesher.add_points(upper)])
    mesher.add_quads(lower_ids)
    mesher.add_quads(upper_ids)
    # Sleeves: inner edge = the body's side column of the upper part (armpit -> shoulder).
    n_sl = max(2, round(p.sleeve_length / spacing))
    ang = math.radians(p.sleeve_angle)
    sleeves: dict[int, np.ndarray] = {}
    for side in (-1, 1):
        col = 0 if side < 0 else nx
        inner = upper_ids[:, col]
        armpit = np.array([side * half_chest, y_arm])
        shoulder = np.array([side * half_sh, p.body_length])
        axis = np.array([side * math.cos(ang), -math.sin(ang)])
        normal_up = np.array([side * math.sin(ang), math.cos(ang)])
        cuff_center = 0.5 * (armpit + shoulder) + p.sleeve_length * axis
        cuff_lo = cuff_center - 0.5 * p.sleeve_width * normal_up
        cuff_hi = cuff_center + 0.5 * p.sleeve_width * normal_up
        us = np.linspace(0, 1, n_sl + 1)[1:]
        vs = np.linspace(0, 1, len(inner))
        pts = _bilinear(np.array([armpit, cuff_lo, shoulder, cuff_hi]), *np.meshgrid(us, vs))
        sleeve_ids = mesher.add_points(pts)
        sleeves[side] = sleeve_ids.ravel()
        mesher.add_quads(np.hstack([inner[:, None], sleeve_ids]))
    xy = np.vstack(mesher.points)
    sleeve_side = np.zeros(len(xy), dtype=np.int8)
    for side, ids in sleeves.items():
        sleeve_side[ids] = side
    # Neckline: pull the top rows down in a smooth dip between the neck points.
    top_band = np.clip((xy[:, 1] - y_arm) / p.armhole_depth, 0, 1) ** 2
    dip = np.clip(1 - (xy[:, 0] / (p.neck_width / 2)) ** 2, 0, None)
    xy[:, 1] -= p.neck_depth * dip * top_band
    faces = np.asarray(mesher.faces, dtype=np.int32)
    if _normals_down(xy, faces):
        faces = faces[:, [0, 2, 1]]
    verts = np.column_stack([xy, np.zeros(len(xy))])
    return _centre(verts), faces, sleeve_side


def _normals_down(xy: np.ndarray, faces: np.ndarray) -> bool:
    a, b, c = xy[faces[:, 0]], xy[faces[:, 1]], xy[faces[:, 2]]
    cross = (b - a)[:, 0] * (c - a)[:, 1] - (b - a)[:, 1] * (c - a)[:, 0]
    return bool(np.mean(cross) < 0)


def _centre(verts: np.ndarray) -> np.ndarray:
    """Centre the garment on its bounding box in x/y and put its lowest point at z = 0."""
    out = verts.astype(np.float64).copy()
    lo, hi = out.min(0), out.max(0)
    out[:, 0] -= 0.5 * (lo[0] + hi[0])
    out[:, 1] -= 0.5 * (lo[1] + hi[1])
    out[:, 2] -= lo[2]
    return out


def make_procedural_garment(seed: int, spacing: float = 0.016) -> GarmentMesh:
    """Procedural top #`seed` (deterministic), with its fixed split."""
    params = sample_top_params(seed)
    verts, faces, sleeve_side = procedural_top(params, spacing)
    validate_mesh(verts, faces)
    return GarmentMesh(
        vertices=verts,
        faces=faces,
        garment_id=f"proc_{seed:05d}",
        split=split_of_seed(seed),
        source="procedural",
        params={**asdict(params), "seed": seed, "spacing": spacing},
        sleeve_side=sleeve_side,
    )


# --------------------------------------------------------------------------- meshes from files


def decimate(vertices: np.ndarray, faces: np.ndarray, max_particles: int) -> tuple[np.ndarray, np.ndarray]:
    """Quadric-decimate a mesh to at most `max_particles` vertices (the paper's <= 2k downsampling)."""
    import fast_simplification

    if len(vertices) <= max_particles:
        return vertices, faces
    target = 1.0 - 0.97 * max_particles / len(vertices)
    v, f = fast_simplification.simplify(vertices.astype(np.float32), faces.astype(np.int32), target_reduction=target)
    # Quadric collapses leave a few slivers; drop them (they carry no area) before re-indexing.
    a, b, c = (v[f[:, i]].astype(np.float64) for i in range(3))
    areas = 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)
    f = f[areas >= 1e-3 * np.median(areas)]
    used = np.unique(f)
    remap = np.full(len(v), -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    return v[used].astype(np.float64), remap[f].astype(np.int32)


def _flatten_layers(verts: np.ndarray) -> np.ndarray:
    """Squash a 3D garment (front/back layers) towards a thin flat layout ready to be dropped."""
    out = verts.copy()
    mid = 0.5 * (out[:, 2].min() + out[:, 2].max())
    out[:, 2] = mid + 0.08 * (out[:, 2] - mid)
    return _centre(out)


def garment_from_arrays(
    vertices: np.ndarray,
    faces: np.ndarray,
    garment_id: str,
    source: str,
    *,
    up_axis: int = 1,
    unit_scale: float = 1.0,
    max_particles: int = MAX_PARTICLES,
    resample: bool = False,
    split: str = "train",
) -> GarmentMesh:
    """Canonicalise an arbitrary standing garment mesh (neck along `up_axis`) and validate it.

    With `resample=True` dense meshes are decimated to the particle budget first; otherwise a
    mesh over budget is rejected.
    """
    vertices = np.asarray(vertices, dtype=np.float64) * unit_scale
    faces = np.asarray(faces, dtype=np.int64)
    if resample:
        validate_mesh(vertices, faces, max_particles=10**7)
        vertices, faces = decimate(vertices, faces, max_particles)
    validate_mesh(vertices, faces, max_particles)
    # Canonical axes: x = width, y = up (neck), z = front/back thickness.
    if up_axis not in (1, 2):
        raise GarmentError(f"up_axis: expected 1 (y) or 2 (z), got {up_axis}")
    perm = [0, up_axis, 3 - up_axis]
    verts = _flatten_layers(vertices[:, perm])
    return GarmentMesh(
        vertices=verts,
        faces=faces.astype(np.int32),
        garment_id=garment_id,
        split=split,
        source=source,
        params={"up_axis": up_axis, "unit_scale": unit_scale, "resampled": resample},
    )


def load_obj(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read vertices and (fan-triangulated) faces from a Wavefront OBJ file."""
    path = Path(path)
    if not path.is_file():
        raise GarmentError(f"{path}: no such OBJ file")
    verts: list[list[float]] = []
    faces: list[list[int]] = []
    for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        try:
            if parts[0] == "v":
                verts.append([float(x) for x in parts[1:4]])
            elif parts[0] == "f":
                idx = [int(tok.split("/")[0]) for tok in parts[1:]]
                idx = [i - 1 if i > 0 else len(verts) + i for i in idx]
                faces += [[idx[0], idx[k], idx[k + 1]] for k in range(1, len(idx) - 1)]
        except (ValueError, IndexError) as exc:
            raise GarmentError(f"{path}:{lineno}: malformed line {line!r}") from exc
    if not verts or not faces:
        raise GarmentError(f"{path}: no vertices or faces")
    return np.asarray(verts, dtype=np.float64), np.asarray(faces, dtype=np.int64)


def load_obj_garment(
    path: str | Path,
    *,
    resample: bool = False,
    max_particles: int = MAX_PARTICLES,
    up_axis: int = 1,
    unit_scale: float = 1.0,
    split: str = "train",
) -> GarmentMesh:
    """A user top (e.g. a Cloth3D mesh exported to OBJ) as a validated canonical garment."""
    verts, faces = load_obj(path)
    return garment_from_arrays(
        verts,
        faces,
        f"obj_{Path(path).stem}",
        "obj",
        up_axis=up_axis,
        unit_scale=unit_scale,
        max_particles=max_particles,
        resample=resample,
        split=split,
    )


def load_obj_folder(folder: str | Path, **kwargs: Any) -> tuple[list[GarmentMesh], dict[str, str]]:
    """Every valid OBJ top in `folder` (sorted) plus {file name: rejection reason} for the rest."""
    good: list[GarmentMesh] = []
    rejected: dict[str, str] = {}
    for path in sorted(Path(folder).glob("*.obj")):
        try:
            good.append(load_obj_garment(path, **kwargs))
        except GarmentError as exc:
            rejected[path.name] = str(exc)
    return good, rejected


def newton_tshirt(max_particles: int = MAX_PARTICLES) -> GarmentMesh:
    """The T-shirt shipped with Newton's example assets, decimated to the particle budget.

    The asset is in centimetres with the neck along +y and the front/back along z.
    """
    import newton.examples
    import newton.usd
    from pxr import Usd

    stage = Usd.Stage.Open(newton.examples.get_asset("unisex_shirt.usd"))
    mesh = newton.usd.get_mesh(stage.GetPrimAtPath("/root/shirt"))
    verts = np.asarray(mesh.vertices, dtype=np.float64)
    faces = np.asarray(mesh.indices, dtype=np.int64).reshape(-1, 3)
    garment = garment_from_arrays(
        verts,
        faces,
        "newton_tshirt",
        "newton",
        up_axis=1,
        unit_scale=0.01,
        max_particles=max_particles,
        resample=True,
        split="train",
    )
    garment.params["max_particles"] = max_particles
    return garment


def expand_proc_range(spec: str) -> list[str]:
    """`proc:A:B` -> the specs `proc:A` .. `proc:B-1`; any other spec unchanged (as a list of one)."""
    if spec.startswith("proc:") and spec.count(":") == 2:
        _, a, b = spec.split(":")
        return [f"proc:{s}" for s in range(int(a), int(b))]
    return [spec]


def garment_id_of(spec: str) -> str:
    """The id `resolve_garment(spec)` gives its garment, without building the mesh."""
    if spec.startswith("proc:"):
        return f"proc_{int(spec.split(':', 1)[1]):05d}"
    if spec == "newton_tshirt":
        return "newton_tshirt"
    return f"obj_{Path(spec).stem}"


def resolve_garment(spec: str, spacing: float = 0.02, max_particles: int = MAX_PARTICLES) -> GarmentMesh:
    """Garment from a spec string: `proc:<seed>`, `newton_tshirt`, or a path to an OBJ file."""
    if spec.startswith("proc:"):
        return make_procedural_garment(int(spec.split(":", 1)[1]), spacing=spacing)
    if spec == "newton_tshirt":
        return newton_tshirt(max_particles=max_particles)
    return load_obj_garment(spec, resample=True, max_particles=max_particles)
