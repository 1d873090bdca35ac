"""Image-space augmentations of encoder pretraining: colour jitter and gripper occlusion.

Both work on batched torch tensors in the encoder's input convention (rgb float [B,3,H,W] in
[0,1], depth [B,H,W] m, mask bool [B,H,W], intrinsics [B,3,3]) and take an explicit
`torch.Generator` so a training step is reproducible (and resumable) from its seed. The policy
trainer does not use them: it augments token observations (`policy/dataset.py`), not images.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from instant_fold_core.geometry import project_points


@dataclass
class ColorJitter:
    """Random brightness, contrast, saturation and per-channel gain (appearance randomisation)."""

    brightness: float = 0.3
    contrast: float = 0.3
    saturation: float = 0.3
    channel_gain: float = 0.1

    def __call__(self, rgb: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        b = rgb.shape[0]

        def factor(spread: float, shape: tuple[int, ...]) -> torch.Tensor:
            u = torch.rand(shape, generator=generator, device="cpu").to(rgb.device)
            return 1.0 + (2 * u - 1) * spread

        out = rgb * factor(self.brightness, (b, 1, 1, 1))
        mean = out.mean(dim=(1, 2, 3), keepdim=True)
        out = (out - mean) * factor(self.contrast, (b, 1, 1, 1)) + mean
        gray = out.mean(dim=1, keepdim=True)
        out = (out - gray) * factor(self.saturation, (b, 1, 1, 1)) + gray
        out = out * factor(self.channel_gain, (b, 3, 1, 1))
        return out.clamp(0.0, 1.0)


def gripper_masks(
    centers: torch.Tensor, intrinsics: torch.Tensor, height: int, width: int, radius: float = 0.03
) -> torch.Tensor:
    """Pixels covered by each gripper at camera-frame `centers` [B,G,3]: a disk of metric `radius`
    whose image size follows the gripper's depth, plus the arm that holds it, a bar of the same
    width running from the disk to the image's top edge (the arm comes from above the table).
    Returns bool [B,G,H,W]."""
    uv = project_points(centers, intrinsics)  # [B,G,2]
    z = centers[..., 2].clamp_min(1e-3)
    r_px = intrinsics[:, None, 0, 0] * radius / z  # [B,G]
    v, u = torch.meshgrid(
        torch.arange(height, device=centers.device, dtype=torch.float32),
        torch.arange(width, device=centers.device, dtype=torch.float32),
        indexing="ij",
    )
    du = u[None, None] - uv[..., 0, None, None]
    dv = v[None, None] - uv[..., 1, None, None]
    r = r_px[..., None, None]
    disk = du.square() + dv.square() <= r.square()
    arm = (du.abs() <= 0.5 * r) & (dv <= 0)
    return disk | arm


def gripper_template(
    centers: torch.Tensor, intrinsics: torch.Tensor, height: int, width: int, radius: float = 0.03
) -> torch.Tensor:
    """Union of `gripper_masks` over the grippers: bool [B,H,W]."""
    return gripper_masks(centers, intrinsics, height, width, radius).any(dim=1)


def occlude_with_grippers(
    rgb: torch.Tensor,
    depth: torch.Tensor,
    mask: torch.Tensor,
    intrinsics: torch.Tensor,
    centers: torch.Tensor,
    radius: float = 0.03,
    color: tuple[float, float, float] = (0.15, 0.15, 0.17),
    contact_margin: float = 0.01,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Paint gripper occluders (see `gripper_masks`) into an observation.

    A gripper hides a pixel when it is nearer to the camera than the scene there, up to
    `contact_margin` (a gripper holding the cloth sits at the cloth's depth, its body above), or
    when the depth is invalid; hidden pixels take the gripper colour and depth and leave the cloth mask, so the
    encoder learns tokens that survive the robot covering part of the cloth. Returns
    (rgb, depth, mask, covered).
    """
    _, _, h, w = rgb.shape
    masks = gripper_masks(centers, intrinsics.to(centers.dtype), h, w, radius)
    z = centers[..., 2].to(depth.dtype)[..., None, None]
    gripper_depth = torch.where(masks, z, torch.full_like(z, torch.inf)).min(dim=1).values
    covered = torch.isfinite(gripper_depth) & ((depth <= 0) | (gripper_depth < depth + contact_margin))
    gripper_depth = torch.minimum(gripper_depth, depth.where(depth > 0, gripper_depth))
    paint = torch.tensor(color, device=rgb.device, dtype=rgb.dtype).view(1, 3, 1, 1)
    rgb = torch.where(covered[:, None], paint, rgb)
    depth = torch.where(covered, gripper_depth, depth)
    return rgb, depth, mask & ~covered, covered


def random_gripper_centers(
    points: torch.Tensor, valid: torch.Tensor, count: int, lift: float = 0.03, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Pick `count` gripper positions per batch element: random valid cloth points [B,P,3] raised
    `lift` metres toward the camera (a gripper just above the cloth it grasps). Returns [B,G,3]."""
    scores = torch.rand(valid.shape, generator=generator, device="cpu").to(points.device)
    scores = torch.where(valid, scores, torch.full_like(scores, -1.0))
    idx = scores.topk(count, dim=1).indices
    centers = points.gather(1, idx[..., None].expand(-1, -1, 3)).clone()
    centers[..., 2] -= lift
    return centers
