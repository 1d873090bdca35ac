"""Top-down pinhole camera and a small z-buffer rasteriser for the cloth.

Why our own rasteriser instead of `newton.sensors.SensorCamera`: it runs identically on CPU and
GPU machines, needs no scene re-registration per garment, gives exact per-triangle ids for the
cloth mask and particle visibility, and renders a 256x256 frame of a <= 2k-particle garment in
a few milliseconds with numpy. The robot grippers are deliberately not rendered (the paper
excludes them from the observations).

Frames: the world is z-up with the table at z = 0; the camera optical frame is x right, y down,
z forward (the `Episode` convention). `T_world_camera` maps optical-frame points to the world.
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass

import numpy as np


def _rot(axis: str, angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    if axis == "x":
        return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    if axis == "y":
        return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


@dataclass
class Camera:
    """A square pinhole camera looking down at the table."""

    height: float = 2.0  # sim-space metres above the table
    roll: float = 0.0  # degrees, about the optical axis
    pitch: float = 0.0  # degrees, about the optical x axis
    yaw: float = 0.0  # degrees, about the optical y axis
    fov: float = 45.0  # degrees, square aspect
    resolution: int = 256

    @property
    def intrinsics(self) -> np.ndarray:
        f = 0.5 * self.resolution / np.tan(np.radians(self.fov) / 2)
        c = 0.5 * (self.resolution - 1)
        return np.array([[f, 0, c], [0, f, c], [0, 0, 1]], dtype=np.float64)

    @property
    def T_world_camera(self) -> np.ndarray:
        # Top-down base pose: optical x = world x, optical y = world -y, optical z = world -z,
        # so the garment's neck (+y) points up in the image. Perturbations act in the optical frame.
        base = np.array([[1, 0, 0], [0, -1, 0], [0, 0, -1]], dtype=np.float64)
        r = (
            base
            @ _rot("z", np.radians(self.roll))
            @ _rot("x", np.radians(self.pitch))
            @ _rot("y", np.radians(self.yaw))
        )
        t = np.eye(4)
        t[:3, :3] = r
        t[:3, 3] = [0.0, 0.0, self.height]
        return t

    def world_to_camera(self, p: np.ndarray) -> np.ndarray:
        t = self.T_world_camera
        return (np.asarray(p) - t[:3, 3]) @ t[:3, :3]

    def project(self, p_cam: np.ndarray) -> np.ndarray:
        """Pixel coordinates (u, v) [..., 2] of optical-frame points."""
        k = self.intrinsics
        z = np.maximum(p_cam[..., 2], 1e-6)
        return np.stack([k[0, 0] * p_cam[..., 0] / z + k[0, 2], k[1, 1] * p_cam[..., 1] / z + k[1, 2]], -1)

    def in_view(self, points_world: np.ndarray, margin_px: float = 4.0) -> bool:
        uv = self.project(self.world_to_camera(points_world))
        lo, hi = margin_px, self.resolution - 1 - margin_px
        return bool(((uv >= lo) & (uv <= hi)).all())


@dataclass
class Appearance:
    """Cloth colour (HSV) and image-space brightness/contrast."""

    hue: float = 0.6
    saturation: float = 0.5
    value: float = 0.6
    brightness: float = 1.0
    contrast: float = 1.0
    table_rgb: tuple[float, float, float] = (0.55, 0.45, 0.35)

    @property
    def cloth_rgb(self) -> np.ndarray:
        return np.array(colorsys.hsv_to_rgb(self.hue, self.saturation, self.value))


@dataclass
class Frame:
    rgb: np.ndarray  # uint8 [H, W, 3]
    depth: np.ndarray  # float32 [H, W], sim-space metres along the optical axis
    mask: np.ndarray  # bool [H, W]
    particle_visible: np.ndarray  # bool [N]


def render(
    camera: Camera, appearance: Appearance, particles: np.ndarray, faces: np.ndarray, visibility_tol: float = 0.02
) -> Frame:
    """Rasterise the cloth over the table plane; returns colour, depth, mask and visibility."""
    res = camera.resolution
    k = camera.intrinsics
    t_wc = camera.T_world_camera
    p_cam = camera.world_to_camera(particles)
    uv = camera.project(p_cam)
    # Background: the table plane z = 0, intersected per pixel ray.
    jj, ii = np.meshgrid(np.arange(res), np.arange(res))
    rays = np.stack([(jj - k[0, 2]) / k[0, 0], (ii - k[1, 2]) / k[1, 1], np.ones((res, res))], -1)
    rays_world_z = rays @ t_wc[2, :3]
    with np.errstate(divide="ignore"):
        depth_table = np.where(rays_world_z < 0, -t_wc[2, 3] / rays_world_z, 0.0)
    zbuf = np.full(res * res, np.inf)
    tri_id = np.full(res * res, -1, dtype=np.int64)
    _rasterise(uv, p_cam[:, 2], faces, res, zbuf, tri_id)
    cloth = tri_id >= 0
    depth = np.where(cloth, zbuf, depth_table.ravel()).reshape(res, res)
    mask = cloth.reshape(res, res)
    # Shading: Lambert with a light along the optical axis; two-sided cloth.
    a, b, c = (p_cam[faces[:, i]] for i in range(3))
    normals = np.cross(b - a, c - a)
    normals /= np.linalg.norm(normals, axis=1, keepdims=True) + 1e-12
    shade = 0.35 + 0.65 * np.abs(normals[:, 2])
    rgb = np.empty((res * res, 3))
    rgb[:] = appearance.table_rgb
    rgb[cloth] = appearance.cloth_rgb[None, :] * shade[tri_id[cloth], None]
    rgb = rgb.reshape(res, res, 3)
    mean = rgb.mean()
    rgb = ((rgb - mean) * appearance.contrast + mean) * appearance.brightness
    return Frame(
        rgb=np.clip(rgb * 255 + 0.5, 0, 255).astype(np.uint8),
        depth=depth.astype(np.float32),
        mask=mask,
        particle_visible=particle_visibility(camera, particles, depth, visibility_tol),
    )


def particle_visibility(
    camera: Camera, particles: np.ndarray, depth: np.ndarray, visibility_tol: float = 0.02
) -> np.ndarray:
    """Which particles [N] the camera sees: inside the image and not behind what its pixel shows
    (`depth` [H, W] along the optical axis, the particles' units). One rule for every camera: the
    project's renderer and another simulator's frames (Isaac Lab's, where an arm can cover cloth)."""
    res = camera.resolution
    p_cam = camera.world_to_camera(particles)
    uv = camera.project(p_cam)
    px = np.clip(np.round(uv).astype(int), 0, res - 1)
    inside = ((uv >= 0) & (uv <= res - 1)).all(axis=1)
    front = depth[px[:, 1], px[:, 0]]
    return inside & (p_cam[:, 2] <= front + visibility_tol)


def _rasterise(
    uv: np.ndarray,
    z: np.ndarray,
    faces: np.ndarray,
    res: int,
    zbuf: np.ndarray,
    tri_id: np.ndarray,
    small_span: int = 24,
) -> None:
    """Z-buffer the triangles: small ones all at once, the rare large ones in bounded groups."""
    tri = uv[faces]
    lo = np.clip(np.floor(tri.min(1)).astype(int), 0, res - 1)
    hi = np.clip(np.ceil(tri.max(1)).astype(int), 0, res - 1)
    span = (hi - lo).max(1) + 1
    ids = np.arange(len(faces))
    groups = [ids[span <= small_span]] + [
        ids[span > small_span][i : i + 8] for i in range(0, int((span > small_span).sum()), 8)
    ]
    for g in groups:
        if g.size:
            _rasterise_group(uv, z, faces, g, lo[g], hi[g], res, zbuf, tri_id)


def _rasterise_group(
    uv: np.ndarray,
    z: np.ndarray,
    faces: np.ndarray,
    ids: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    res: int,
    zbuf: np.ndarray,
    tri_id: np.ndarray,
) -> None:
    """Test every pixel centre in each triangle's bounding box; keep the nearest per pixel."""
    faces = faces[ids]
    tri = uv[faces]  # [F, 3, 2]
    span = int(max(1, (hi - lo).max() + 1))
    off = np.arange(span)
    px = lo[:, 0, None, None] + off[None, None, :]  # [F, 1, S]
    py = lo[:, 1, None, None] + off[None, :, None]  # [F, S, 1]
    px, py = np.broadcast_arrays(px, py)
    x0, x1, x2 = (tri[:, i, 0, None, None] for i in range(3))
    y0, y1, y2 = (tri[:, i, 1, None, None] for i in range(3))
    det = (y1 - y2) * (x0 - x2) + (x2 - x1) * (y0 - y2)
    ok_det = np.abs(det) > 1e-9
    det = np.where(ok_det, det, 1.0)
    w0 = ((y1 - y2) * (px - x2) + (x2 - x1) * (py - y2)) / det
    w1 = ((y2 - y0) * (px - x2) + (x0 - x2) * (py - y2)) / det
    w2 = 1 - w0 - w1
    eps = -1e-4
    inside = (
        (w0 >= eps) & (w1 >= eps) & (w2 >= eps) & ok_det & (px <= hi[:, 0, None, None]) & (py <= hi[:, 1, None, None])
    )
    zf = z[faces]
    depth = w0 * zf[:, 0, None, None] + w1 * zf[:, 1, None, None] + w2 * zf[:, 2, None, None]
    f_idx = np.broadcast_to(ids[:, None, None], inside.shape)[inside]
    pix = (py * res + px)[inside]
    d = depth[inside]
    order = np.lexsort((d, pix))  # nearest first within each pixel
    pix, d, f_idx = pix[order], d[order], f_idx[order]
    first = np.ones(len(pix), dtype=bool)
    first[1:] = pix[1:] != pix[:-1]
    pix, d, f_idx = pix[first], d[first], f_idx[first]
    closer = d < zbuf[pix]
    zbuf[pix[closer]] = d[closer]
    tri_id[pix[closer]] = f_idx[closer]
