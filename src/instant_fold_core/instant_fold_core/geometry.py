"""Camera geometry for cloth tokens: crop/resize with intrinsics, back-projection, FPS, projection.

All functions are batched torch and device-agnostic so the same code runs in the tokenizer on CPU,
on GPU and inside the training loop. Conventions: pixel (u, v) = (column, row) with integer values
at pixel centres; camera optical frame (x right, y down, z forward), metres.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .validation import ValidationError


class GeometryError(ValidationError):
    """Geometric input is unusable; the message names the offending field."""


def _check_intrinsics(intrinsics: torch.Tensor, batch: int) -> None:
    if intrinsics.shape != (batch, 3, 3):
        raise GeometryError(f"intrinsics: expected shape ({batch}, 3, 3), got {tuple(intrinsics.shape)}")
    if not torch.isfinite(intrinsics).all():
        raise GeometryError("intrinsics: contains NaN or infinite values")
    if (intrinsics[:, 0, 0] <= 0).any() or (intrinsics[:, 1, 1] <= 0).any():
        raise GeometryError("intrinsics: focal lengths fx, fy must be positive")


def crop_resize_intrinsics(intrinsics: torch.Tensor, height: int, width: int, size: int) -> torch.Tensor:
    """Intrinsics after a centre crop of an HxW image to a square and a resize to `size` x `size`.

    The crop shifts the principal point; the resize scales focal lengths and maps pixel centres
    with the half-pixel convention of `F.interpolate(align_corners=False)` so that projection of a
    3D point lands on the same image content before and after.
    """
    side = min(height, width)
    x0, y0 = (width - side) // 2, (height - side) // 2
    scale = size / side
    k = intrinsics.clone().to(torch.float32)
    k[..., 0, 2] = (k[..., 0, 2] - x0 + 0.5) * scale - 0.5
    k[..., 1, 2] = (k[..., 1, 2] - y0 + 0.5) * scale - 0.5
    k[..., 0, 0] = k[..., 0, 0] * scale
    k[..., 1, 1] = k[..., 1, 1] * scale
    k[..., 0, 1] = k[..., 0, 1] * scale
    return k


def center_crop_resize(
    rgb: torch.Tensor, depth: torch.Tensor, mask: torch.Tensor, intrinsics: torch.Tensor, size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Centre-crop [B,3,H,W] rgb, [B,H,W] depth and mask to a square and resize to `size`.

    RGB is resampled bilinearly (antialiased when shrinking); depth and mask use nearest-exact so
    no depth value is invented across a cloth edge. Returns (rgb, depth, mask, intrinsics).
    """
    _, _, h, w = rgb.shape
    side = min(h, w)
    x0, y0 = (w - side) // 2, (h - side) // 2
    k = crop_resize_intrinsics(intrinsics, h, w, size)
    rgb = rgb[:, :, y0 : y0 + side, x0 : x0 + side]
    depth = depth[:, y0 : y0 + side, x0 : x0 + side]
    mask = mask[:, y0 : y0 + side, x0 : x0 + side]
    if side != size:
        rgb = F.interpolate(rgb, size=(size, size), mode="bilinear", align_corners=False, antialias=side > size)
        depth = F.interpolate(depth[:, None], size=(size, size), mode="nearest-exact")[:, 0]
        mask = F.interpolate(mask[:, None].to(torch.uint8), size=(size, size), mode="nearest-exact")[:, 0].bool()
    return rgb, depth, mask, k


def pixel_grid(height: int, width: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """[H*W, 2] (u, v) pixel-centre coordinates in row-major order."""
    v, u = torch.meshgrid(
        torch.arange(height, device=device, dtype=torch.float32),
        torch.arange(width, device=device, dtype=torch.float32),
        indexing="ij",
    )
    return torch.stack([u.reshape(-1), v.reshape(-1)], dim=-1)


def backproject_depth(
    depth: torch.Tensor, mask: torch.Tensor, intrinsics: torch.Tensor, near: float = 0.05, far: float = 5.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lift masked depth [B,H,W] to camera-frame points [B,H*W,3] and their validity [B,H*W].

    A pixel is valid when it is in the mask and its depth is finite and inside [near, far]; the
    range filter drops sensor dropouts (0) and far background that a loose mask lets through.
    """
    b, h, w = depth.shape
    _check_intrinsics(intrinsics, b)
    uv = pixel_grid(h, w, depth.device)
    z = depth.reshape(b, -1).to(torch.float32)
    valid = mask.reshape(b, -1) & torch.isfinite(z) & (z >= near) & (z <= far)
    z = torch.where(valid, z, torch.zeros_like(z))
    k = intrinsics.to(torch.float32)
    fx, fy = k[:, 0, 0, None], k[:, 1, 1, None]
    cx, cy = k[:, 0, 2, None], k[:, 1, 2, None]
    x = (uv[None, :, 0] - cx) * z / fx
    y = (uv[None, :, 1] - cy) * z / fy
    return torch.stack([x, y, z], dim=-1), valid


def project_points(points: torch.Tensor, intrinsics: torch.Tensor) -> torch.Tensor:
    """Project camera-frame points [B,N,3] to pixel coordinates [B,N,2] (u, v)."""
    k = intrinsics.to(points.dtype)
    z = points[..., 2].clamp_min(1e-6)
    u = k[:, None, 0, 0] * points[..., 0] / z + k[:, None, 0, 2]
    v = k[:, None, 1, 1] * points[..., 1] / z + k[:, None, 1, 2]
    return torch.stack([u, v], dim=-1)


def farthest_point_sampling(
    points: torch.Tensor,
    n: int,
    start: int | torch.Tensor | None = None,
    valid: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Greedy farthest point sampling of `n` indices per batch element from points [B,P,3].

    `start=None` starts from a random valid point (so repeated calls cover the cloth differently,
    as the paper's non-deterministic FPS); an int or a [B] tensor fixes the first index, and
    `start=0` reproduces the classic greedy FPS from index 0 (ties go to the lowest index).
    Invalid points (mask `valid` [B,P]) are never chosen; when fewer than `n` points are valid the
    remaining slots repeat already chosen points (callers can tell from `valid.sum(-1)`).
    Returns int64 indices [B, n].
    """
    if points.ndim != 3 or points.shape[-1] != 3:
        raise GeometryError(f"points: expected [B, P, 3], got {tuple(points.shape)}")
    b, p, _ = points.shape
    if n < 1:
        raise GeometryError(f"n: must be >= 1, got {n}")
    if valid is None:
        valid = torch.ones(b, p, dtype=torch.bool, device=points.device)
    elif valid.shape != (b, p) or valid.dtype != torch.bool:
        raise GeometryError(f"valid: expected bool [{b}, {p}], got {valid.dtype} {tuple(valid.shape)}")
    if p == 0 or not valid.any(dim=1).all():
        raise GeometryError("points: a batch element has no valid point to sample")
    if start is None:
        # Drawn where the generator lives (training seeds a CPU generator for CUDA batches too).
        drawn_on = generator.device if generator is not None else points.device
        scores = torch.rand(b, p, device=drawn_on, generator=generator).to(points.device)
        first = torch.where(valid, scores, torch.full_like(scores, -1.0)).argmax(dim=1)
    else:
        first = torch.as_tensor(start, device=points.device, dtype=torch.long).expand(b).clone()
        if (first < 0).any() or (first >= p).any() or not valid.gather(1, first[:, None]).all():
            raise GeometryError(f"start: index {start} is out of range or not a valid point")
    # Work on the valid points only (a cloth mask is a fraction of the image); a stable sort keeps
    # their original order, so ties still resolve to the lowest original index.
    counts = valid.sum(dim=1)
    full_order = torch.argsort((~valid).to(torch.uint8), dim=1, stable=True)
    order = full_order[:, : int(counts.max())]
    compact_valid = torch.arange(order.shape[1], device=points.device)[None, :] < counts[:, None]
    position = torch.empty_like(full_order).scatter_(
        1, full_order, torch.arange(p, device=points.device).expand(b, p).contiguous()
    )
    compact = gather_points(points.to(torch.promote_types(points.dtype, torch.float32)), order)
    picked = _greedy_fps(compact, compact_valid, position.gather(1, first[:, None])[:, 0], n)
    return order.gather(1, picked)


def _greedy_fps(pts: torch.Tensor, valid: torch.Tensor, first: torch.Tensor, n: int) -> torch.Tensor:
    """The greedy loop: repeatedly take the valid point farthest from the chosen set."""
    b, p, _ = pts.shape
    out = torch.empty(b, n, dtype=torch.long, device=pts.device)
    # Invalid points keep distance -1 so argmax never prefers them over any valid point.
    dist = torch.where(valid, torch.full((b, p), float("inf"), device=pts.device, dtype=pts.dtype), -1.0)
    rows = torch.arange(b, device=pts.device)
    current = first
    for i in range(n):
        out[:, i] = current
        d = (pts - pts[rows, current][:, None, :]).square().sum(-1)
        dist = torch.where(valid, torch.minimum(dist, d), dist)
        current = dist.argmax(dim=1)
    return out


def gather_points(values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Gather [B,P,C] values at indices [B,N] -> [B,N,C]."""
    return values.gather(1, index[..., None].expand(-1, -1, values.shape[-1]))


def sample_features(feature_map: torch.Tensor, uv: torch.Tensor, image_size: tuple[int, int]) -> torch.Tensor:
    """Bilinearly sample a [B,C,h,w] feature map at pixel coordinates uv [B,N,2] of an HxW image.

    The feature map is assumed to tile the image (a ViT patch grid or a strided CNN map), so pixel
    centres map to normalised coordinates with the half-pixel convention (align_corners=False).
    Returns [B,N,C].
    """
    h, w = image_size
    grid = torch.stack([(uv[..., 0] + 0.5) / w * 2 - 1, (uv[..., 1] + 0.5) / h * 2 - 1], dim=-1)
    sampled = F.grid_sample(
        feature_map,
        grid[:, :, None, :].to(feature_map.dtype),
        mode="bilinear",
        align_corners=False,
        padding_mode="border",
    )
    return sampled[..., 0].transpose(1, 2)
