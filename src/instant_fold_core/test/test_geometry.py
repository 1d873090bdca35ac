"""Camera geometry: FPS equals greedy FPS, back-projection round-trips, crops keep projections."""

import numpy as np
import pytest
import torch

from instant_fold_core.geometry import (
    GeometryError,
    backproject_depth,
    center_crop_resize,
    farthest_point_sampling,
    gather_points,
    project_points,
    sample_features,
)


def greedy_fps_reference(points: np.ndarray, n: int, start: int = 0) -> list[int]:
    """Textbook greedy FPS: repeatedly take the point farthest from the chosen set."""
    chosen = [start]
    dist = np.full(len(points), np.inf)
    for _ in range(n - 1):
        dist = np.minimum(dist, ((points - points[chosen[-1]]) ** 2).sum(-1))
        chosen.append(int(np.argmax(dist)))
    return chosen


def _intrinsics(b: int, f: float = 300.0, cx: float = 160.0, cy: float = 120.0) -> torch.Tensor:
    k = torch.tensor([[f, 0.0, cx], [0.0, f, cy], [0.0, 0.0, 1.0]])
    return k.expand(b, 3, 3).clone()


def test_fps_matches_greedy_reference():
    gen = torch.Generator().manual_seed(0)
    pts = torch.rand(3, 500, 3, generator=gen, dtype=torch.float64)
    idx = farthest_point_sampling(pts, 64, start=0)
    assert idx.shape == (3, 64) and idx.dtype == torch.long
    for b in range(3):
        assert idx[b].tolist() == greedy_fps_reference(pts[b].numpy(), 64, 0)


def test_fps_random_start_and_validity_mask():
    gen = torch.Generator().manual_seed(1)
    pts = torch.rand(2, 300, 3, generator=gen)
    valid = torch.rand(2, 300, generator=gen) > 0.5
    idx = farthest_point_sampling(pts, 32, valid=valid, generator=gen)
    assert valid.gather(1, idx).all()
    assert all(len(set(row.tolist())) == 32 for row in idx)
    # random start: the first index varies with the generator, later ones follow greedily
    idx2 = farthest_point_sampling(pts, 32, valid=valid, generator=torch.Generator().manual_seed(7))
    assert not torch.equal(idx[:, 0], idx2[:, 0])
    ref = greedy_fps_reference(pts[0][valid[0]].numpy(), 32, int(valid[0, : idx2[0, 0]].sum()))
    assert torch.nonzero(valid[0])[:, 0][ref].tolist() == idx2[0].tolist()


@pytest.mark.gpu
def test_fps_on_cuda_points_with_the_cpu_generator_training_seeds():
    # Encoder pretraining seeds one CPU generator per step and tokenizes CUDA batches with it; the
    # random FPS start is drawn on the CPU and moved, the same start as for CPU points.
    gen = torch.Generator().manual_seed(3)
    pts = torch.rand(2, 300, 3, generator=gen)
    valid = torch.rand(2, 300, generator=gen) > 0.5
    on_cpu = farthest_point_sampling(pts, 16, valid=valid, generator=torch.Generator().manual_seed(5))
    on_cuda = farthest_point_sampling(pts.cuda(), 16, valid=valid.cuda(), generator=torch.Generator().manual_seed(5))
    assert on_cuda.device.type == "cuda"
    assert on_cuda.cpu().tolist() == on_cpu.tolist()


def test_fps_fewer_valid_points_than_requested_and_errors():
    pts = torch.rand(1, 10, 3)
    valid = torch.zeros(1, 10, dtype=torch.bool)
    valid[0, [2, 5, 7]] = True
    idx = farthest_point_sampling(pts, 6, start=2, valid=valid)
    assert set(idx[0].tolist()) == {2, 5, 7}
    with pytest.raises(GeometryError, match="no valid point"):
        farthest_point_sampling(pts, 4, valid=torch.zeros(1, 10, dtype=torch.bool))
    with pytest.raises(GeometryError, match="points"):
        farthest_point_sampling(torch.rand(10, 3), 4)
    with pytest.raises(GeometryError, match="start"):
        farthest_point_sampling(pts, 4, start=0, valid=valid)


def test_backprojection_round_trips_through_projection():
    b, h, w = 2, 240, 320
    gen = torch.Generator().manual_seed(2)
    depth = 0.5 + torch.rand(b, h, w, generator=gen)
    depth[:, :10] = 0.0  # invalid
    depth[:, -5:] = 9.0  # beyond far
    mask = torch.rand(b, h, w, generator=gen) > 0.3
    k = _intrinsics(b)
    pts, valid = backproject_depth(depth, mask, k, near=0.1, far=3.0)
    assert pts.shape == (b, h * w, 3) and valid.shape == (b, h * w)
    assert not valid.view(b, h, w)[:, :10].any() and not valid.view(b, h, w)[:, -5:].any()
    assert (valid == (mask & (depth > 0.1) & (depth < 3.0)).view(b, -1)).all()
    uv = project_points(pts, k)
    v, u = torch.meshgrid(torch.arange(h).float(), torch.arange(w).float(), indexing="ij")
    grid = torch.stack([u.reshape(-1), v.reshape(-1)], -1).expand(b, -1, -1)
    assert torch.allclose(uv[valid], grid[valid], atol=1e-3)
    assert torch.allclose(pts[..., 2][valid], depth.view(b, -1)[valid])


def test_backprojection_rejects_bad_intrinsics():
    with pytest.raises(GeometryError, match="intrinsics"):
        backproject_depth(torch.ones(1, 4, 4), torch.ones(1, 4, 4, dtype=torch.bool), torch.eye(3)[None] * 0)


def test_crop_resize_keeps_points_on_the_same_content():
    """A 3D point projects onto the same (painted) pixel before and after crop + resize."""
    b, h, w, size = 1, 240, 320, 120
    k = _intrinsics(b)
    point = torch.tensor([[[0.05, -0.03, 0.8]]])
    u, v = project_points(point, k)[0, 0].round().long().tolist()
    rgb = torch.zeros(b, 3, h, w)
    rgb[:, 0, v - 3 : v + 4, u - 3 : u + 4] = 1.0
    depth = torch.full((b, h, w), 0.8)
    mask = torch.zeros(b, h, w, dtype=torch.bool)
    mask[:, v - 3 : v + 4, u - 3 : u + 4] = True
    rgb2, depth2, mask2, k2 = center_crop_resize(rgb, depth, mask, k, size)
    assert rgb2.shape == (1, 3, size, size) and depth2.shape == (1, size, size) and mask2.dtype == torch.bool
    u2, v2 = project_points(point, k2)[0, 0].tolist()
    ys, xs = torch.nonzero(mask2[0], as_tuple=True)
    assert abs(xs.float().mean() - u2) < 0.6 and abs(ys.float().mean() - v2) < 0.6
    assert rgb2[0, 0, round(v2), round(u2)] > 0.9


def test_bilinear_feature_sampling_matches_patch_centres_and_interpolates():
    # a 4x4 feature map over a 64x64 image: patch centres at pixels 7.5 + 16 i
    fmap = torch.arange(16.0).view(1, 1, 4, 4)
    uv = torch.tensor([[[7.5, 7.5], [23.5, 7.5], [15.5, 7.5], [7.5, 39.5]]])
    out = sample_features(fmap, uv, (64, 64))
    assert out.shape == (1, 4, 1)
    assert torch.allclose(out[0, :, 0], torch.tensor([0.0, 1.0, 0.5, 8.0]))


def test_gather_points():
    vals = torch.arange(12.0).view(1, 4, 3)
    assert torch.equal(gather_points(vals, torch.tensor([[2, 0]])), vals[:, [2, 0]])
