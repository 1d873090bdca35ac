"""Domain randomisation exactly as the paper's table (appendix A), seeded and recorded.

All ranges are uniform unless stated; lengths are simulation-space metres (the paper's meshes
are scaled by two, and so is this space). `sample_randomization(seed)` draws everything an
episode needs up front, so an episode is reproducible from its seed alone and the drawn values
go verbatim into `Episode.meta["randomization"]`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.spatial import cKDTree

from instant_fold_core.errors import ConfigError

from .render import Appearance, Camera

SLEEVE_MODES = ("N", "L", "R", "B")
SLEEVE_MODE_PROBS = (0.2, 0.2, 0.2, 0.4)
#: `DRRanges.sleeve_selection`'s values.
SLEEVE_SELECTIONS = ("x", "sleeve")


@dataclass
class DRRanges:
    """The paper's table; change only to run ablations."""

    translation: float = 0.18
    rotation_deg: float = 40.0
    drop_height: float = 0.2
    sleeve_amplitude: tuple[float, float] = (0.04, 0.08)
    sleeve_rotation_deg: float = 30.0
    wrinkle_prob: float = 0.5
    wrinkle_scale: tuple[float, float] = (0.9, 1.1)
    wrinkle_amplitude: tuple[float, float] = (0.02, 0.06)
    hue: tuple[float, float] = (0.0, 1.0)
    saturation: tuple[float, float] = (0.0, 0.8)
    value: tuple[float, float] = (0.15, 0.9)
    brightness: tuple[float, float] = (0.9, 1.1)
    contrast: tuple[float, float] = (0.95, 1.05)
    camera_height: tuple[float, float] = (1.7, 2.3)
    camera_angle_deg: float = 5.0
    fov_deg: tuple[float, float] = (35.0, 52.0)
    #: Which particles a sleeve disturbance moves: "x", every particle beyond that shoulder's x (what
    #: every store, bank and result so far was made with; on a garment whose hem is wider than its
    #: shoulders it moves the hem corners too: docs/sim.md, "Known limitations"), or "sleeve", the
    #: sleeve's own particles (`GarmentMesh.sleeve_side`: procedural tops; a mesh without labels is
    #: refused). The cpu-small-sleeve preset sets it (the hem-rigid benchmarks, config/benchmarks/*_sleeve.yaml).
    sleeve_selection: str = "x"

    def __post_init__(self) -> None:
        if self.sleeve_selection not in SLEEVE_SELECTIONS:
            raise ConfigError(
                f"dr.sleeve_selection: expected one of {SLEEVE_SELECTIONS}, got {self.sleeve_selection!r}"
            )


@dataclass
class Randomization:
    """Every value drawn for one episode attempt."""

    translation: tuple[float, float]
    rotation_deg: float
    drop_height: float
    sleeve_mode: str
    sleeve_amplitude: dict[str, float]
    sleeve_direction_deg: dict[str, float]
    sleeve_rotation_deg: dict[str, float]
    wrinkle: bool
    wrinkle_scale: float
    wrinkle_amplitude: float
    wrinkle_phase: tuple[float, ...]
    camera: Camera
    appearance: Appearance

    def to_dict(self) -> dict:
        return asdict(self)


def sample_randomization(
    rng: np.random.Generator, ranges: DRRanges | None = None, resolution: int = 256
) -> Randomization:
    r = ranges or DRRanges()
    u = rng.uniform
    mode = str(rng.choice(SLEEVE_MODES, p=SLEEVE_MODE_PROBS))
    sides = {"N": (), "L": ("left",), "R": ("right",), "B": ("left", "right")}[mode]
    return Randomization(
        translation=(float(u(-r.translation, r.translation)), float(u(-r.translation, r.translation))),
        rotation_deg=float(u(-r.rotation_deg, r.rotation_deg)),
        drop_height=r.drop_height,
        sleeve_mode=mode,
        sleeve_amplitude={s: float(u(*r.sleeve_amplitude)) for s in sides},
        sleeve_direction_deg={s: float(u(0, 360)) for s in sides},
        sleeve_rotation_deg={s: float(u(-r.sleeve_rotation_deg, r.sleeve_rotation_deg)) for s in sides},
        wrinkle=bool(rng.random() < r.wrinkle_prob),
        wrinkle_scale=float(u(*r.wrinkle_scale)),
        wrinkle_amplitude=float(u(*r.wrinkle_amplitude)),
        wrinkle_phase=tuple(float(x) for x in u(0, 2 * np.pi, size=6)),
        camera=Camera(
            height=float(u(*r.camera_height)),
            roll=float(u(-r.camera_angle_deg, r.camera_angle_deg)),
            pitch=float(u(-r.camera_angle_deg, r.camera_angle_deg)),
            yaw=float(u(-r.camera_angle_deg, r.camera_angle_deg)),
            fov=float(u(*r.fov_deg)),
            resolution=resolution,
        ),
        appearance=Appearance(
            hue=float(u(*r.hue)),
            saturation=float(u(*r.saturation)),
            value=float(u(*r.value)),
            brightness=float(u(*r.brightness)),
            contrast=float(u(*r.contrast)),
        ),
    )


def initial_layout(
    canonical: np.ndarray, keypoint_ids: np.ndarray, dr: Randomization, sleeve_side: np.ndarray | None = None
) -> np.ndarray:
    """Sim-space particle positions before the drop: sleeve disturbance, wrinkles, pose, height.

    `canonical` is the garment already scaled into simulation space (flat, centred).
    Sleeve disturbance rotates a sleeve's particles about its shoulder and shifts them by the
    sampled amplitude: with `sleeve_side` (-1 left, +1 right, 0 body per particle) the sleeve's own
    particles, without it every particle beyond that shoulder's x. The wrinkle field is a smooth
    sum of sinusoids whose wavelength is the garment size over the sampled scale.
    """
    if sleeve_side is not None and sleeve_side.shape != (len(canonical),):
        raise ConfigError(f"sleeve_side: one label per particle expected ({len(canonical)}), got {sleeve_side.shape}")
    pos = canonical.copy()
    shoulders = {"left": canonical[keypoint_ids[4]], "right": canonical[keypoint_ids[5]]}
    moved = np.zeros(len(pos), dtype=bool)
    for side, amp in dr.sleeve_amplitude.items():
        sh = shoulders[side]
        if sleeve_side is not None:
            sel = sleeve_side == (-1 if side == "left" else 1)
        else:
            sel = pos[:, 0] < sh[0] if side == "left" else pos[:, 0] > sh[0]
        moved |= sel
        ang = np.radians(dr.sleeve_rotation_deg[side])
        c, s = np.cos(ang), np.sin(ang)
        rel = pos[sel, :2] - sh[:2]
        pos[sel, :2] = sh[:2] + rel @ np.array([[c, s], [-s, c]])
        d = np.radians(dr.sleeve_direction_deg[side])
        pos[sel, :2] += amp * np.array([np.cos(d), np.sin(d)])
    if dr.wrinkle:
        size = np.ptp(canonical[:, :2], axis=0).max()
        k = 2 * np.pi * 3.0 * dr.wrinkle_scale / size
        ph = dr.wrinkle_phase
        x, y = pos[:, 0], pos[:, 1]
        pos[:, 0] += dr.wrinkle_amplitude * 0.5 * np.sin(k * y + ph[0]) * np.cos(k * 0.7 * x + ph[1])
        pos[:, 1] += dr.wrinkle_amplitude * 0.5 * np.sin(k * x + ph[2]) * np.cos(k * 0.7 * y + ph[3])
        pos[:, 2] += dr.wrinkle_amplitude * np.abs(np.sin(k * 0.8 * x + ph[4]) * np.sin(k * 0.8 * y + ph[5]))
    _stack_over(pos, moved, canonical)
    ang = np.radians(dr.rotation_deg)
    c, s = np.cos(ang), np.sin(ang)
    pos[:, :2] = pos[:, :2] @ np.array([[c, s], [-s, c]]) + np.asarray(dr.translation)
    pos[:, 2] += dr.drop_height
    return pos


#: Height (sim m) a disturbed sleeve starts above the cloth it was pushed over: a few
#: self-contact margins, so the layers meet in contact rather than inside each other.
STACK_GAP = 0.02


def _stack_over(pos: np.ndarray, moved: np.ndarray, canonical: np.ndarray) -> None:
    """Lift disturbed-sleeve particles that lie over the rest of the garment on top of it.

    A sleeve rotated or shifted over the body starts in the body's plane: its triangles cross
    the body's, self-contact cannot separate layers that start inside each other, and the
    locked layers stand up as a tent (seen: a 12 cm ridge that never collapsed and spoiled every
    body fold from that start). A sleeve thrown over the body lies on it, so it starts above it.
    """
    if not moved.any() or moved.all():
        return
    edge = float(np.median(cKDTree(canonical[:, :2]).query(canonical[:, :2], k=2)[0][:, 1]))
    still = np.flatnonzero(~moved)
    tree = cKDTree(pos[still, :2])
    for i, near in zip(np.flatnonzero(moved), tree.query_ball_point(pos[moved, :2], r=edge), strict=True):
        if near:
            pos[i, 2] = max(pos[i, 2], float(pos[still[near], 2].max()) + STACK_GAP)
