"""Small synthetic cloth episodes (a textured particle sheet folded and dragged, rendered RGB-D).

Stand-in data for tests, benchmarks and smoke runs of encoder pretraining until simulated
episodes exist: every output is a schema-valid `Episode` with consistent particles, visibility
and keypoints, so the trainer and probe consume real simulator data unchanged. The sheet is a
grid of particles; folds rotate one side rigidly about a line on the table (the moved layer
lands on top), drags pull a Gaussian region; rendering splats a 4x upsampled grid with a
z-buffer and marks particles visible when they lie on the rendered surface.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from instant_fold_core.dataset.schema import Episode

GRID = (24, 20)  # particle rows x columns
TABLE_DEPTH = 0.8  # camera height above the table (m)
LAYER = 0.006  # height added to a folded layer so it renders on top (m)


@dataclass(frozen=True)
class ClothIdentity:
    """What stays fixed across the trajectories of one synthetic garment."""

    cloth_id: int
    size: tuple[float, float]  # (height, width) in metres
    colors: np.ndarray  # [rows * cols, 3] particle colours in [0, 1]


def make_cloth(cloth_id: int) -> ClothIdentity:
    """A sheet with a smooth, locally distinctive colour field (sinusoids per channel + stripes)."""
    rng = np.random.default_rng(10_000 + cloth_id)
    rows, cols = GRID
    t, s = np.meshgrid(np.linspace(0, 1, rows), np.linspace(0, 1, cols), indexing="ij")
    base = rng.uniform(0.2, 0.8, 3)
    colors = np.empty((rows, cols, 3))
    for c in range(3):
        kx, ky = rng.uniform(1.0, 3.0, 2) * rng.choice([-1, 1], 2)
        colors[..., c] = base[c] + 0.3 * np.sin(2 * np.pi * (kx * s + ky * t) + rng.uniform(0, 2 * np.pi))
    stripes = 0.1 * np.sign(np.sin(2 * np.pi * rng.uniform(4, 7) * (s if rng.random() < 0.5 else t)))
    colors = np.clip(colors + stripes[..., None], 0.0, 1.0)
    size = (float(rng.uniform(0.32, 0.42)), float(rng.uniform(0.28, 0.38)))
    return ClothIdentity(cloth_id, size, colors.reshape(-1, 3).astype(np.float32))


def _smoothstep(x: np.ndarray | float) -> np.ndarray | float:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3 - 2 * x)


def _fold(pos: np.ndarray, progress: float, params: dict) -> np.ndarray:
    """Rigidly rotate the points on one side of a table line by up to ~170 degrees."""
    point, direction = params["point"], params["direction"]
    normal = np.array([-direction[1], direction[0]])
    rel = pos[:, :2] - point
    signed = rel @ normal
    moving = signed > 0
    angle = 0.95 * np.pi * progress
    height = TABLE_DEPTH - pos[:, 2]  # height above the table
    # rotate (signed distance, height) about the line, then lift the moved layer onto the stack
    new_s = signed * np.cos(angle) - height * np.sin(angle)
    new_h = (
        np.abs(signed * np.sin(angle) + height * np.cos(angle)) + (LAYER + params["stack"]) * (1 - np.cos(angle)) / 2
    )
    out = pos.copy()
    along = rel @ direction
    out[moving, :2] = point + along[moving, None] * direction + new_s[moving, None] * normal
    out[moving, 2] = TABLE_DEPTH - new_h[moving]
    return out


def _drag(pos: np.ndarray, canon: np.ndarray, progress: float, params: dict) -> np.ndarray:
    """Pull a Gaussian neighbourhood (in cloth coordinates) of a grasp particle, lifting it."""
    w = np.exp(-((canon - canon[params["grasp"]]) ** 2).sum(-1) / (2 * params["radius"] ** 2))
    out = pos.copy()
    out[:, :2] += w[:, None] * params["shift"] * progress
    out[:, 2] -= w * 0.04 * np.sin(np.pi * progress)
    return out


def _render(pos: np.ndarray, colors: np.ndarray, k: np.ndarray, size: int, shade: float, rng: np.random.Generator):
    """Z-buffer splatting of the 4x upsampled sheet; returns rgb, depth, mask, particle visibility."""
    rows, cols = GRID
    grid = torch.from_numpy(np.concatenate([pos, colors], 1).T.reshape(1, 6, rows, cols).astype(np.float32))
    fine = F.interpolate(grid, size=(rows * 4, cols * 4), mode="bilinear", align_corners=True)[0]
    fpos = fine[:3].reshape(3, -1).T.numpy()
    fcol = fine[3:].reshape(3, -1).T.numpy()
    # shading from the surface normal of the fine grid (tilted layers look darker)
    p = fine[:3].numpy()
    du, dv = np.gradient(p, axis=2), np.gradient(p, axis=1)
    n = np.cross(du, dv, axis=0)
    nz = np.abs(n[2]) / (np.linalg.norm(n, axis=0) + 1e-9)
    fcol = np.clip(fcol * (0.55 + 0.45 * nz.reshape(-1, 1)) * shade, 0, 1)
    u = k[0, 0] * fpos[:, 0] / fpos[:, 2] + k[0, 2]
    v = k[1, 1] * fpos[:, 1] / fpos[:, 2] + k[1, 2]
    table = np.clip(np.array([0.45, 0.42, 0.40]) * shade + rng.normal(0, 0.02, (size, size, 3)), 0, 1)
    rgb = table.astype(np.float32)
    depth = np.full((size, size), TABLE_DEPTH + 0.002, dtype=np.float32)
    mask = np.zeros((size, size), dtype=bool)
    order = np.argsort(-fpos[:, 2])  # far to near: nearer splats overwrite
    for dy in (0, 1):
        for dx in (0, 1):
            ui = np.floor(u[order]).astype(int) + dx
            vi = np.floor(v[order]).astype(int) + dy
            ok = (ui >= 0) & (ui < size) & (vi >= 0) & (vi < size)
            ui, vi, idx = ui[ok], vi[ok], order[ok]
            nearer = fpos[idx, 2] <= depth[vi, ui]
            # sequential assignment keeps the last (nearest) write among duplicates
            rgb[vi[nearer], ui[nearer]] = fcol[idx[nearer]]
            depth[vi[nearer], ui[nearer]] = fpos[idx[nearer], 2]
            mask[vi[nearer], ui[nearer]] = True
    pu = np.round(k[0, 0] * pos[:, 0] / pos[:, 2] + k[0, 2]).astype(int)
    pv = np.round(k[1, 1] * pos[:, 1] / pos[:, 2] + k[1, 2]).astype(int)
    inside = (pu >= 0) & (pu < size) & (pv >= 0) & (pv < size)
    visible = np.zeros(len(pos), dtype=bool)
    visible[inside] = pos[inside, 2] <= depth[pv[inside], pu[inside]] + 0.004
    return (rgb * 255).round().astype(np.uint8), depth, mask, visible


def keypoint_ids() -> np.ndarray:
    """Particle ids of the 7 semantic keypoints on the sheet (schema order)."""
    rows, cols = GRID
    rc = [
        (0, 0),
        (0, cols - 1),
        (rows - 1, 0),
        (rows - 1, cols - 1),
        (2, cols // 5),
        (2, cols - 1 - cols // 5),
        (rows // 2, cols // 2),
    ]
    return np.array([r * cols + c for r, c in rc], dtype=np.int32)


def synthetic_episode(cloth: ClothIdentity, seed: int, frames: int = 8, image_size: int = 128) -> Episode:
    """One trajectory: random pose on the table, then one or two folds/drags over `frames` frames."""
    rng = np.random.default_rng(seed)
    rows, cols = GRID
    h, w = cloth.size
    t, s = np.meshgrid(np.linspace(-h / 2, h / 2, rows), np.linspace(-w / 2, w / 2, cols), indexing="ij")
    canon = np.stack([s.reshape(-1), t.reshape(-1)], 1)
    angle = rng.uniform(-0.4, 0.4)
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    flat = canon @ rot.T + rng.uniform(-0.03, 0.03, 2)
    pos0 = np.concatenate([flat, np.full((len(flat), 1), TABLE_DEPTH)], 1)
    wrinkles = np.sin(canon[:, 0] * rng.uniform(20, 40)) * np.sin(canon[:, 1] * rng.uniform(20, 40))
    pos0[:, 2] -= 0.002 * (1 + wrinkles)  # small wrinkles, always above the table
    ops = []
    for _ in range(int(rng.integers(1, 3))):
        if rng.random() < 0.6:
            d = rng.normal(size=2)
            d /= np.linalg.norm(d)
            ops.append(("fold", {"point": flat.mean(0) + rng.uniform(-0.05, 0.05, 2), "direction": d}))
        else:
            ops.append(
                (
                    "drag",
                    {
                        "grasp": int(rng.integers(len(canon))),
                        "radius": rng.uniform(0.06, 0.1),
                        "shift": rng.uniform(-0.12, 0.12, 2),
                    },
                )
            )
    f = image_size * rng.uniform(1.1, 1.25)
    k = np.array([[f, 0, (image_size - 1) / 2], [0, f, (image_size - 1) / 2], [0, 0, 1]], dtype=np.float32)
    shade = rng.uniform(0.8, 1.15)
    per_op = max(frames - 1, 1) / len(ops)
    out = {name: [] for name in ("rgb", "depth", "mask", "particles", "visible", "grip")}
    for i in range(frames):
        phase = i / per_op
        op_index = min(int(phase), len(ops) - 1)
        pos = pos0
        for j, (kind, params) in enumerate(ops[: op_index + 1]):
            progress = float(_smoothstep(phase - j)) if j == op_index else 1.0
            if kind == "fold":
                params.setdefault("stack", float((TABLE_DEPTH - pos[:, 2]).max()))
                pos = _fold(pos, progress, params)
            else:
                pos = _drag(pos, canon, progress, params)
        rgb, depth, mask, vis = _render(pos, cloth.colors, k, image_size, shade, rng)
        out["rgb"].append(rgb)
        out["depth"].append(depth)
        out["mask"].append(mask)
        out["particles"].append(pos.astype(np.float32))
        out["visible"].append(vis)
        grip = np.array([[*pos[keypoint_ids()[0]], 0.0], [0.15, 0.1, 0.6, 1.0]], dtype=np.float32)
        out["grip"].append(grip)
    particles = np.stack(out["particles"])
    grip = np.stack(out["grip"])
    return Episode(
        rgb=np.stack(out["rgb"]),
        depth=np.stack(out["depth"]),
        mask=np.stack(out["mask"]),
        intrinsics=k,
        extrinsics=np.eye(4, dtype=np.float32),
        arm_state=grip,
        action=np.concatenate([grip[1:], grip[-1:]]),
        particles=particles,
        particle_visible=np.stack(out["visible"]),
        keypoints=particles[:, keypoint_ids()],
        keypoint_particle_ids=keypoint_ids(),
        keyframes=np.arange(frames, dtype=np.int32),
        meta={
            "garment_id": f"synthetic-{cloth.cloth_id}",
            "mode": "random_deformation",
            "seed": seed,
            "source": "instant_fold_learning.encoder.synthetic",
        },
    ).validate()


def synthetic_dataset(
    num_cloths: int, trajectories: int, frames: int = 8, image_size: int = 128, first_cloth: int = 0, seed: int = 0
) -> list[Episode]:
    """`trajectories` episodes for each of `num_cloths` cloth identities."""
    return [
        synthetic_episode(make_cloth(c), seed * 1_000_003 + c * 1000 + j, frames, image_size)
        for c in range(first_cloth, first_cloth + num_cloths)
        for j in range(trajectories)
    ]
