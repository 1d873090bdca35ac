"""Planar registration: recovers known motions of shirt-shaped token sets (rotated up to 60°,
shifted, noisy, partly masked, resampled, a subset), beats centroid alignment, ignores invalid
tokens, treats batch elements independently, round-trips numpy, refuses empty masks."""

import math

import numpy as np
import pytest
import torch

from instant_fold_core.errors import InvalidInputError, NonFiniteError
from instant_fold_core.geometry import farthest_point_sampling
from instant_fold_core.registration import (
    PlanarRigid,
    RegistrationError,
    RegistrationTrack,
    local_shift,
    register_planar,
)

N = 64


def shirt(spacing: float = 0.01) -> torch.Tensor:
    """A flat T-shirt outline (0.6 m sleeves band over a 0.3 x 0.4 m body) as dense points [P, 3]
    at 1.1 m depth: no rotational symmetry, so its registration is unique."""
    xs, ys = torch.arange(0, 0.6 + 1e-9, spacing), torch.arange(0, 0.5 + 1e-9, spacing)
    p = torch.stack(torch.meshgrid(xs, ys, indexing="ij"), -1).reshape(-1, 2)
    p = p[((p[:, 0] >= 0.15) & (p[:, 0] <= 0.45)) | (p[:, 1] >= 0.38)]
    return torch.cat((p, torch.full((len(p), 1), 1.1)), -1)


def tokens(gen: torch.Generator, batch: int) -> torch.Tensor:
    """[batch, N, 3] farthest-point samples of the shirt, each from a random start (as the tokenizer)."""
    dense = shirt()[None].repeat(batch, 1, 1)
    idx = farthest_point_sampling(dense, N, generator=gen)
    return dense.gather(1, idx[..., None].expand(-1, -1, 3))


def random_motion(gen: torch.Generator, batch: int, max_deg: float = 60.0) -> PlanarRigid:
    angle = (torch.rand(batch, generator=gen) * 2 - 1) * math.radians(max_deg)
    return PlanarRigid.from_angle(angle, (torch.rand(batch, 2, generator=gen) - 0.5) * 0.4)


def angle_error(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (torch.remainder(a - b + math.pi, 2 * math.pi) - math.pi).abs()


def test_recovers_rotation_and_translation_with_noise_and_masks():
    gen = torch.Generator().manual_seed(0)
    b = 16
    source = tokens(gen, b)
    truth = random_motion(gen, b)
    target = truth.apply(source) + torch.randn(b, N, 3, generator=gen) * 0.002
    source_valid = torch.rand(b, N, generator=gen) > 0.2
    target_valid = torch.rand(b, N, generator=gen) > 0.1
    est = register_planar(source, source_valid, target, target_valid)
    assert angle_error(est.angle, truth.angle).max() < math.radians(2.0)
    # Where the motion takes the source's tokens: within 1 cm everywhere.
    moved, expected = est.apply(source), truth.apply(source)
    assert (moved - expected).norm(dim=-1).max() < 0.01
    assert torch.equal(moved[..., 2], source[..., 2])  # depth is kept


def test_recovers_motion_between_independent_samplings():
    """Source and target are different farthest-point samplings of the cloth (no token matches
    exactly, as between a demonstration keyframe and the current view)."""
    gen = torch.Generator().manual_seed(1)
    b = 32
    source, truth = tokens(gen, b), random_motion(gen, b)
    target = truth.apply(tokens(gen, b))
    valid = torch.ones(b, N, dtype=torch.bool)
    est = register_planar(source, valid, target, valid)
    err = angle_error(est.angle, truth.angle)
    assert err.max() < math.radians(10) and err.mean() < math.radians(3)
    corners = torch.tensor([[[0.0, 0.5, 1.1], [0.6, 0.5, 1.1], [0.15, 0.0, 1.1], [0.45, 0.0, 1.1]]]).repeat(b, 1, 1)
    assert (est.apply(corners) - truth.apply(corners)).norm(dim=-1).mean() < 0.02


def test_source_subset_of_target():
    """The source holds half of the target's tokens: they land on their counterparts."""
    gen = torch.Generator().manual_seed(2)
    b = 8
    full = tokens(gen, b)
    truth = random_motion(gen, b)
    source_valid = torch.rand(b, N, generator=gen) < 0.5
    est = register_planar(full, source_valid, truth.apply(full), torch.ones(b, N, dtype=torch.bool))
    assert angle_error(est.angle, truth.angle).max() < math.radians(1.0)
    assert (est.translation - truth.translation).norm(dim=-1).max() < 0.005
    assert est.residual.max() < 1e-3


def test_tokens_without_counterpart_are_trimmed():
    """The source has a flap the target lacks (6 of 64 tokens, 15-25 cm beyond the sleeves' end,
    cloth seen in one view only): it is trimmed away and the rest fits exactly."""
    gen = torch.Generator().manual_seed(2)
    b = 8
    full = tokens(gen, b)
    truth = random_motion(gen, b)
    source = full.clone()
    flap = torch.arange(N) < 6
    source[:, flap, 0] = 0.75 + 0.1 * torch.rand(b, 6, generator=gen)
    source[:, flap, 1] = 0.4 + 0.1 * torch.rand(b, 6, generator=gen)
    valid = torch.ones(b, N, dtype=torch.bool)
    est = register_planar(source, valid, truth.apply(full), ~flap[None].expand(b, N))
    assert angle_error(est.angle, truth.angle).max() < math.radians(1.0)
    assert (est.translation - truth.translation).norm(dim=-1).max() < 0.005
    assert est.residual.max() < 1e-3  # the flap is outside the kept 80 %


def test_residual_below_centroid_alignment():
    gen = torch.Generator().manual_seed(3)
    b = 8
    source, truth = tokens(gen, b), random_motion(gen, b)
    target = truth.apply(source) + torch.randn(b, N, 3, generator=gen) * 0.002
    valid = torch.ones(b, N, dtype=torch.bool)
    centroid = register_planar(source, valid, target, valid, iterations=0, rotations=1)
    assert torch.allclose(centroid.rotation, torch.eye(2).expand(b, 2, 2))  # translation only
    full = register_planar(source, valid, target, valid)
    assert (full.residual < 0.003).all()  # the noise
    assert (full.residual < 0.5 * centroid.residual).all()
    # Resampled: the floor is the distance between two samplings, still below centroid alignment.
    resampled = truth.apply(tokens(gen, b))
    centroid = register_planar(source, valid, resampled, valid, iterations=0, rotations=1)
    full = register_planar(source, valid, resampled, valid)
    assert (full.residual < centroid.residual).all() and (full.residual < 0.025).all()


def test_features_break_the_symmetry_of_a_rectangle():
    """A regular grid on a rectangle fits itself turned by 180° exactly; distinct token features
    tell the two fits apart, whichever way round the truth is."""
    xs, ys = torch.meshgrid(torch.linspace(0, 0.5, 8), torch.linspace(0, 0.3, 8), indexing="ij")
    grid = torch.stack((xs.flatten(), ys.flatten(), torch.ones(N)), -1)[None].repeat(2, 1, 1)
    truth = PlanarRigid.from_angle(torch.tensor([math.radians(170.0), math.radians(-10.0)]), torch.zeros(2, 2))
    target = truth.apply(grid)
    valid = torch.ones(2, N, dtype=torch.bool)
    gen = torch.Generator().manual_seed(4)
    features = torch.randn(2, N, 16, generator=gen)
    noisy = features + 0.2 * torch.randn(2, N, 16, generator=gen)
    est = register_planar(grid, valid, target, valid, features, noisy)
    assert angle_error(est.angle, truth.angle).max() < math.radians(1.0)
    with pytest.raises(RegistrationError, match="both or neither"):
        register_planar(grid, valid, target, valid, features, None)


def test_invalid_tokens_never_matter():
    gen = torch.Generator().manual_seed(5)
    b = 4
    source, truth = tokens(gen, b), random_motion(gen, b)
    target = truth.apply(tokens(gen, b))
    features = torch.randn(b, N, 8, generator=gen)
    keep = 48  # the first 48 tokens are valid, the rest hold garbage
    valid = torch.arange(N)[None].expand(b, N) < keep
    garbage_s, garbage_t = source.clone(), target.clone()
    garbage_s[:, keep:] = torch.nan
    garbage_t[:, keep:] = torch.tensor([5.0, -7.0, 0.0])
    garbage_f = features.clone()
    garbage_f[:, keep:] = 1e6
    with_garbage = register_planar(garbage_s, valid, garbage_t, valid, garbage_f, garbage_f)
    valid_only = torch.ones(b, keep, dtype=torch.bool)
    cut = register_planar(
        source[:, :keep], valid_only, target[:, :keep], valid_only, features[:, :keep], features[:, :keep]
    )
    torch.testing.assert_close(with_garbage.rotation, cut.rotation, atol=1e-5, rtol=0)
    torch.testing.assert_close(with_garbage.translation, cut.translation, atol=1e-5, rtol=0)
    torch.testing.assert_close(with_garbage.residual, cut.residual, atol=1e-6, rtol=0)


def test_batch_elements_are_independent_and_deterministic():
    gen = torch.Generator().manual_seed(6)
    b = 6
    source, truth = tokens(gen, b), random_motion(gen, b)
    target = truth.apply(tokens(gen, b))
    valid = torch.rand(b, N, generator=gen) > 0.1
    batched = register_planar(source, valid, target, valid)
    again = register_planar(source, valid, target, valid)
    assert torch.equal(batched.rotation, again.rotation) and torch.equal(batched.translation, again.translation)
    for i in range(b):
        alone = register_planar(source[i : i + 1], valid[i : i + 1], target[i : i + 1], valid[i : i + 1])
        torch.testing.assert_close(alone.rotation[0], batched.rotation[i], atol=1e-5, rtol=0)
        torch.testing.assert_close(alone.translation[0], batched.translation[i], atol=1e-5, rtol=0)


def test_numpy_round_trip_and_inverse():
    gen = torch.Generator().manual_seed(7)
    source = tokens(gen, 2).double().numpy()
    truth = random_motion(gen, 2)
    target = truth.apply(source)
    assert isinstance(target, np.ndarray) and target.dtype == np.float64
    valid = np.ones((2, N), bool)
    est = register_planar(source, valid, target, valid)
    assert est.rotation.dtype == torch.float64
    moved = est.apply(source)
    assert isinstance(moved, np.ndarray)
    np.testing.assert_allclose(moved, target, atol=1e-6)
    np.testing.assert_allclose(est.inverse().apply(moved), source, atol=1e-9)
    np.testing.assert_allclose(np.linalg.det(est.rotation.numpy()), 1.0, atol=1e-12)


def test_errors():
    src = torch.rand(2, N, 3)
    valid = torch.ones(2, N, dtype=torch.bool)
    empty = valid.clone()
    empty[1] = False
    with pytest.raises(RegistrationError, match=r"source_valid: batch element\(s\) \[1\]") as info:
        register_planar(src, empty, src, valid)
    assert isinstance(info.value, InvalidInputError)
    with pytest.raises(RegistrationError, match="target_valid"):
        register_planar(src, valid, src, empty)
    with pytest.raises(RegistrationError, match="target_pos: expected shape"):
        register_planar(src, valid, src[:1], valid[:1])
    with pytest.raises(RegistrationError, match="expected bool"):
        register_planar(src, valid.float(), src, valid)
    nan = src.clone()
    nan[0, 3] = torch.nan
    with pytest.raises(NonFiniteError, match="source_pos"):
        register_planar(nan, valid, src, valid)
    with pytest.raises(RegistrationError, match="trim"):
        register_planar(src, valid, src, valid, trim=0.0)
    with pytest.raises(RegistrationError, match="points"):
        PlanarRigid.from_angle(torch.zeros(2), torch.zeros(2, 2)).apply(torch.zeros(3, 5, 3))


def test_single_valid_token_is_a_translation():
    src = torch.rand(1, N, 3)
    tgt = torch.rand(1, N, 3)
    one = torch.zeros(1, N, dtype=torch.bool)
    one[0, 7] = True
    est = register_planar(src, one, tgt, one)
    torch.testing.assert_close(est.apply(src)[0, 7, :2], tgt[0, 7, :2])


def test_local_shift_fits_a_part_that_lies_differently():
    """The right sleeve band of the target lies 4 cm lower than the rigid motion of the rest puts
    it (a part that settled differently): the whole-cloth fit misses the sleeve's tip by more than
    2 cm, the local shift around it halves that at least, and a point in the body, whose window
    holds no displaced token, stays within 1 cm of where the fit put it."""
    gen = torch.Generator().manual_seed(3)
    source = shirt(0.02)
    truth = PlanarRigid.from_angle(torch.tensor([0.3]), torch.tensor([[0.05, -0.02]]))
    sleeve = (source[:, 0] > 0.47) & (source[:, 1] >= 0.38)
    lying = source.clone()
    lying[sleeve, 1] -= 0.04  # in the garment's frame, then moved like the rest
    target = truth.apply(lying[None])[0] + torch.randn(len(source), 3, generator=gen) * 0.001
    valid = torch.ones(len(source), dtype=torch.bool)
    fit = register_planar(source[None], valid[None], target[None], valid[None])
    tip = source[sleeve][source[sleeve][:, 0].argmax()]  # the sleeve's far end, where a grasp would be
    expected = truth.apply(lying[sleeve][source[sleeve][:, 0].argmax()][None, None])[0, 0, :2]
    rigid = fit.apply(tip[None, None])[0, 0, :2]
    shift = local_shift(fit, source, valid, target, valid, tip, radius=0.08)
    missed = (rigid - expected).norm()
    assert missed > 0.02  # the whole-cloth fit misses the sleeve tip
    assert (rigid + torch.as_tensor(shift) - expected).norm() < 0.5 * missed
    body = source[(source[:, 0] - 0.3).abs().add((source[:, 1] - 0.1).abs()).argmin()]
    assert np.abs(local_shift(fit, source, valid, target, valid, body, radius=0.08)).max() < 0.01


def test_local_shift_needs_tokens_in_its_window_and_valid_arguments():
    source = shirt(0.05)
    valid = torch.ones(len(source), dtype=torch.bool)
    fit = register_planar(source[None], valid[None], source[None], valid[None])
    far = torch.tensor([5.0, 5.0, 1.1])  # no token within the window: no shift, not a guess
    assert np.array_equal(local_shift(fit, source, valid, source, valid, far, radius=0.1), np.zeros(2))
    for radius in (0.0, -0.1, math.nan, math.inf):
        with pytest.raises(RegistrationError, match="radius"):
            local_shift(fit, source, valid, source, valid, source[0], radius=radius)
    with pytest.raises(RegistrationError, match="iterations"):
        local_shift(fit, source, valid, source, valid, source[0], radius=0.1, iterations=0)
    with pytest.raises(RegistrationError, match="one-element"):
        two = PlanarRigid.from_angle(torch.zeros(2), torch.zeros(2, 2))
        local_shift(two, source, valid, source, valid, source[0], radius=0.1)
    with pytest.raises(NonFiniteError):
        local_shift(fit, source, valid, source, valid, torch.tensor([math.nan, 0.0, 1.1]), radius=0.1)


def test_one_point_moves_as_in_a_batch():
    motion = PlanarRigid.from_angle(torch.tensor([math.pi / 2]), torch.tensor([[0.1, -0.2]]))
    point = np.array([0.3, 0.0, 0.05])
    np.testing.assert_allclose(motion.apply_point(point), [0.1, 0.1, 0.05], atol=1e-6)
    np.testing.assert_allclose(motion.apply_point(point), motion.apply(point[None, None])[0, 0])


def rectangle() -> torch.Tensor:
    """[1, N, 3] a regular 8 x 8 grid on a 0.5 x 0.3 m rectangle: it fits itself turned by 180°
    exactly, the limit of a garment whose outline is nearly symmetric."""
    xs, ys = torch.meshgrid(torch.linspace(0, 0.5, 8), torch.linspace(0, 0.3, 8), indexing="ij")
    return torch.stack((xs.flatten(), ys.flatten(), torch.full((N,), 1.1)), -1)[None].double()


def test_a_prior_keeps_its_turn_of_a_symmetric_cloth():
    """Both turns of a rectangle fit equally well: continued from a prior, the registration keeps
    the prior's turn, whichever it is, where a fresh search picks one by chance."""
    grid, valid = rectangle(), torch.ones(1, N, dtype=torch.bool)
    gen = torch.Generator().manual_seed(5)
    truth = PlanarRigid.from_angle(
        torch.tensor([math.radians(10.0)], dtype=torch.float64), torch.tensor([[0.1, -0.05]])
    )
    target = truth.apply(grid) + torch.randn(1, N, 3, generator=gen, dtype=torch.float64) * 0.002
    for turn in (10.0, 190.0):
        prior = PlanarRigid.from_angle(
            torch.tensor([math.radians(turn + 3.0)], dtype=torch.float64), torch.tensor([[0.1, -0.05]])
        )
        est = register_planar(grid, valid, target, valid, prior=prior)
        assert angle_error(est.angle, torch.tensor([math.radians(turn)], dtype=torch.float64)) < math.radians(2.0)


def test_a_prior_the_cloth_refutes_is_left():
    """A prior turned 180° from the truth on a shirt (no symmetry) fits far worse than the fresh
    search's result, which replaces it."""
    gen = torch.Generator().manual_seed(6)
    source, target_tokens = tokens(gen, 1), tokens(gen, 1)
    truth = random_motion(gen, 1)
    target = truth.apply(target_tokens)
    valid = torch.ones(1, N, dtype=torch.bool)
    wrong = PlanarRigid(-truth.rotation, truth.translation, torch.zeros(1))
    est = register_planar(source, valid, target, valid, prior=wrong)
    assert angle_error(est.angle, truth.angle) < math.radians(3.0)


def test_a_track_keeps_one_turn_through_resampled_observations():
    """A symmetric cloth observed again and again with fresh noise: a fresh search each time flips
    between the two turns; a track keeps the one it found first, for every key."""
    grid, valid = rectangle(), torch.ones(1, N, dtype=torch.bool)
    gen = torch.Generator().manual_seed(7)
    truth = PlanarRigid.from_angle(torch.tensor([0.3], dtype=torch.float64), torch.tensor([[0.05, 0.02]]))
    observations = [
        truth.apply(grid) + torch.randn(1, N, 3, generator=gen, dtype=torch.float64) * 0.004 for _ in range(12)
    ]
    fresh = [float(register_planar(grid, valid, obs, valid).angle[0]) for obs in observations]
    track = RegistrationTrack()
    tracked = [float(track.register(i % 3, grid, valid, obs, valid).angle[0]) for i, obs in enumerate(observations)]

    def turns(angles: list[float]) -> set[int]:
        return {round(float(angle_error(torch.tensor(a), torch.tensor(angles[0]))) / math.pi) for a in angles}

    assert turns(fresh) == {0, 1}  # the fresh searches flip
    assert turns(tracked) == {0}


def test_prior_and_track_arguments_are_checked():
    grid, valid = rectangle(), torch.ones(1, N, dtype=torch.bool)
    two = PlanarRigid.from_angle(torch.zeros(2, dtype=torch.float64), torch.zeros(2, 2))
    with pytest.raises(RegistrationError, match="prior: expected 1 element"):
        register_planar(grid, valid, grid, valid, prior=two)
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(RegistrationError, match="keep_ratio"):
            register_planar(grid, valid, grid, valid, keep_ratio=bad)
        with pytest.raises(RegistrationError, match="keep_ratio"):
            RegistrationTrack(bad)
