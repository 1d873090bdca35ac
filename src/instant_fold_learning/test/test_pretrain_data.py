"""Pretraining data path: motion filter, strict PK sampling, augmentations, synthetic episodes."""

import numpy as np
import pytest
import torch

from instant_fold_core.dataset.filtering import motion_filter
from instant_fold_core.validation import ValidationError
from instant_fold_learning.encoder.augment import (
    ColorJitter,
    gripper_template,
    occlude_with_grippers,
    random_gripper_centers,
)
from instant_fold_learning.encoder.data import DataError, PKSampler, PretrainDataset, StoreEpisodes
from instant_fold_learning.encoder.synthetic import make_cloth, synthetic_episode


def test_motion_filter_keeps_frames_that_moved_enough_since_the_last_kept_one():
    t, m = 8, 100
    particles = np.zeros((t, m, 3), dtype=np.float32)
    # frame 1: 10% of particles move 5 cm (not enough); frame 2: 20% moved 5 cm (kept)
    particles[1, :10, 0] = 0.05
    particles[2:, :20, 0] = 0.05
    # frame 3 identical to 2 (dropped); frame 4: 30% moved 1.5 cm relative to frame 2 (dropped)
    particles[4:, 20:50, 1] = 0.015
    # frame 5: those 30% now 3 cm from frame 2 (kept); frames 6, 7 each move everything 3 cm
    particles[5:, 20:50, 1] = 0.03
    particles[6, :, 2] = 0.03
    particles[7, :, 2] = 0.06
    assert motion_filter(particles).tolist() == [0, 2, 5, 6, 7]
    assert motion_filter(particles, max_frames=3).tolist() == [0, 5, 7]
    with pytest.raises(ValidationError, match="particles"):
        motion_filter(np.zeros((3, 0, 3)))


def test_strict_pk_sampling():
    trajectories = [[0, 1, 2], [3, 4], [5], [6, 7, 8, 9]]
    sampler = PKSampler(trajectories, p=2, k=2, seed=1)
    seen = set()
    for i in range(12):
        groups = sampler.batch(i)
        assert len(groups) == 2
        cloths = {next(c for c, t in enumerate(trajectories) if g[0] in t) for g in groups}
        assert len(cloths) == 2 and 2 not in cloths  # distinct cloths; cloth 2 has only one trajectory
        for g in groups:
            assert len(set(g)) == 2 and any(set(g) <= set(t) for t in trajectories)
        seen.update(x for g in groups for x in g)
    assert 5 not in seen and len(seen) >= 7
    again = PKSampler(trajectories, p=2, k=2, seed=1)
    assert [again.batch(i) for i in (7, 3)] == [sampler.batch(7), sampler.batch(3)]  # resumable
    with pytest.raises(DataError, match="PK sampling"):
        PKSampler(trajectories, p=3, k=3)


def test_synthetic_episodes_are_schema_valid_with_occlusion_from_folds():
    ep = synthetic_episode(make_cloth(0), seed=2, frames=8, image_size=64)
    ep.validate()
    assert ep.meta["garment_id"] == "synthetic-0"
    assert ep.particle_visible[0].mean() > 0.95
    assert ep.particle_visible.mean(1).min() < 0.8  # a fold hides part of the cloth
    assert np.allclose(ep.keypoints, ep.particles[:, ep.keypoint_particle_ids])
    # visible particles project onto the cloth mask
    k = ep.intrinsics
    p = ep.particles[0][ep.particle_visible[0]]
    u = np.round(k[0, 0] * p[:, 0] / p[:, 2] + k[0, 2]).astype(int)
    v = np.round(k[1, 1] * p[:, 1] / p[:, 2] + k[1, 2]).astype(int)
    assert ep.mask[0][v, u].mean() > 0.95


def test_dataset_batches_stack_frames_by_cloth_and_trajectory():
    eps = [synthetic_episode(make_cloth(c), seed=s, frames=5, image_size=64) for c in range(2) for s in range(2)]
    data = PretrainDataset(eps, image_size=48)
    assert data.cloths == ["synthetic-0", "synthetic-1"] and data.trajectories == [[0, 1], [2, 3]]
    batch = data.batch([[0, 1], [3, 2]])
    n = sum(len(data.frames[i]) for i in range(4))
    assert batch.rgb.shape == (n, 3, 48, 48) and batch.mask.shape == (n, 48, 48)
    assert batch.cloth.tolist().count(0) == len(data.frames[0]) + len(data.frames[1])
    assert len(batch.particles) == 4 and batch.trajectory.max() == 3
    eps[0].meta.pop("garment_id")
    with pytest.raises(DataError, match="garment_id"):
        PretrainDataset(eps, image_size=48)


def test_a_store_is_read_per_batch_with_the_same_batches_as_in_memory(tmp_path):
    """Pretraining on a store reads particles up front and only a batch's kept frames after:
    reading whole stores eagerly grew past the machine's memory (module docstring of data.py)."""
    from instant_fold_core.dataset.zarr_store import EpisodeStore

    eps = [synthetic_episode(make_cloth(c), seed=s, frames=9, image_size=64) for c in range(2) for s in range(2)]
    store = EpisodeStore(tmp_path / "store", mode="a")
    for i, ep in enumerate(eps):
        store.write(f"ep{i}", ep)
    reads: list[tuple[str, int | None]] = []
    read, read_array = store.read, store.read_array
    store.read = lambda name, frames=None: (
        reads.append((name, None if frames is None else len(frames))) or read(name, frames)
    )
    store.read_array = lambda name, field: reads.append((name, field)) or read_array(name, field)
    lazy = PretrainDataset(StoreEpisodes(store, [f"ep{i}" for i in range(4)]), image_size=48, max_frames=4)
    assert reads == [(f"ep{i}", "particles") for i in range(4)]  # no image read up front
    eager = PretrainDataset(eps, image_size=48, max_frames=4)
    assert [f.tolist() for f in lazy.frames] == [f.tolist() for f in eager.frames]
    assert lazy.trajectories == eager.trajectories
    reads.clear()
    a, b = lazy.batch([[0, 1], [3, 2]]), eager.batch([[0, 1], [3, 2]])
    assert reads == [(f"ep{i}", len(lazy.frames[i])) for i in (0, 1, 3, 2)]  # just the kept frames
    for key, value in a.__dict__.items():
        other = getattr(b, key)
        pairs = zip(value, other, strict=True) if isinstance(value, list) else [(value, other)]
        assert all(torch.equal(x, y) for x, y in pairs), key
    # Kept frames are read once and held: a later batch reads nothing and equals a fresh read.
    reads.clear()
    again = lazy.batch([[1, 0], [2, 3]])
    assert reads == []
    fresh = PretrainDataset(eps, image_size=48, max_frames=4, cache_bytes=0).batch([[1, 0], [2, 3]])
    assert all(torch.equal(getattr(again, k), getattr(fresh, k)) for k in ("rgb", "depth", "mask", "keypoints"))
    again.particles[0].add_(1.0)  # a batch's tensors are its own: the cache is not changed through them
    assert torch.equal(lazy.batch([[1, 0], [2, 3]]).particles[0], fresh.particles[0])


def test_the_frame_cache_keeps_to_its_budget(tmp_path):
    """Past `cache_bytes` the least recently used episodes are dropped (and read again when needed)."""
    from instant_fold_core.dataset.zarr_store import EpisodeStore

    eps = [synthetic_episode(make_cloth(c), seed=s, frames=9, image_size=64) for c in range(2) for s in range(2)]
    store = EpisodeStore(tmp_path / "store", mode="a")
    for i, ep in enumerate(eps):
        store.write(f"ep{i}", ep)
    one = PretrainDataset(eps, image_size=48, max_frames=4)
    one.frames_of(0)
    size = one._cached_bytes  # one episode's kept frames, as the cache measures them
    data = PretrainDataset(StoreEpisodes(store, [f"ep{i}" for i in range(4)]), 48, max_frames=4, cache_bytes=2 * size)
    read = store.read
    reads: list[str] = []
    store.read = lambda name, frames=None: reads.append(name) or read(name, frames)
    data.batch([[0, 1], [2, 3]])
    assert list(data._cache) == [2, 3] and data._cached_bytes <= 2 * size
    data.batch([[0, 1], [2, 3]])
    assert reads == ["ep0", "ep1", "ep2", "ep3"] * 2  # each batch evicts what the next needs first


def test_gripper_template_scales_with_depth_and_occludes_the_cloth():
    k = torch.tensor([[[100.0, 0, 50], [0, 100.0, 50], [0, 0, 1]]])
    near = gripper_template(torch.tensor([[[0.0, 0.0, 0.5]]]), k, 100, 100, radius=0.03)
    far = gripper_template(torch.tensor([[[0.0, 0.0, 1.0]]]), k, 100, 100, radius=0.03)
    # radius 6 px at 0.5 m, 3 px at 1 m: disk area ratio ~4 below the centre row
    assert near[0, 50:].sum() / far[0, 50:].sum() == pytest.approx(4.0, rel=0.25)
    assert near[0, 0, 50] and not near[0, 99, 50]  # the arm reaches up to the top edge only
    rgb = torch.rand(1, 3, 100, 100)
    depth = torch.full((1, 100, 100), 0.8)
    mask = torch.ones(1, 100, 100, dtype=torch.bool)
    rgb2, depth2, mask2, covered = occlude_with_grippers(rgb, depth, mask, k, torch.tensor([[[0.0, 0.0, 0.5]]]))
    assert torch.equal(covered, near) and not mask2[covered].any() and mask2[~covered].all()
    # a gripper behind the cloth (farther than the scene) hides nothing
    behind = occlude_with_grippers(rgb, depth, mask, k, torch.tensor([[[0.0, 0.0, 0.9]]]))
    assert not behind[3].any() and torch.equal(behind[2], mask)
    assert torch.allclose(depth2[covered], torch.tensor(0.5)) and torch.equal(
        rgb2[:, :, ~covered[0]], rgb[:, :, ~covered[0]]
    )


def test_random_gripper_centers_sit_above_valid_points_and_color_jitter_is_reproducible():
    pts = torch.rand(2, 50, 3)
    valid = torch.zeros(2, 50, dtype=torch.bool)
    valid[:, 10:20] = True
    c = random_gripper_centers(pts, valid, 2, lift=0.03, generator=torch.Generator().manual_seed(0))
    for b in range(2):
        for g in range(2):
            d = (pts[b, 10:20] - c[b, g] - torch.tensor([0, 0, 0.03])).norm(dim=-1)
            assert d.min() < 1e-6
    rgb = torch.rand(3, 3, 8, 8)
    jitter = ColorJitter()
    a = jitter(rgb, torch.Generator().manual_seed(4))
    b = jitter(rgb, torch.Generator().manual_seed(4))
    assert torch.equal(a, b) and not torch.equal(a, rgb) and a.min() >= 0 and a.max() <= 1
