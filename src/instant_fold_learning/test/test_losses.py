"""Losses equal Algorithm 1 / the explicit cross-cloth definition, blockwise equals dense."""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from instant_fold_learning.encoder.losses import (
    LossInputError,
    annealed_temperature,
    batch_global_same_cloth_loss,
    contrastive_logsumexp,
    cross_cloth_keypoint_loss,
    keypoint_features,
    same_cloth_contrastive_loss,
    same_cloth_positives,
)


def algorithm1_reference(token_pos, token_feat, particle_pos, particle_vis, sigma, tau):
    """Literal transcription of Algorithm 1 with explicit U x U matrices."""
    f, n, _ = token_pos.shape
    a_all, d_all = [], []
    for t in range(f):
        d = torch.cdist(token_pos[t], particle_pos[t])
        d = torch.where(particle_vis[t][None, :], d, torch.full_like(d, math.inf))
        a = d.argmin(dim=1)
        a_all.append(a)
        d_all.append(torch.linalg.norm(token_pos[t] - particle_pos[t][a], dim=-1))
    a = torch.cat(a_all)
    d = torch.cat(d_all)
    z = token_feat.reshape(f * n, -1)
    z = z / z.norm(dim=-1, keepdim=True)
    u = f * n
    m = (a[:, None] == a[None, :]).to(z.dtype)
    w = m * torch.exp(-(d[:, None] ** 2 + d[None, :] ** 2) / (4 * sigma**2))
    w = w * (1 - torch.eye(u, dtype=z.dtype))
    losses = []
    for i in range(u):
        if w[i].sum() <= 0:
            continue
        others = [j for j in range(u) if j != i]
        logits = z[i] @ z[others].T / tau
        log_prob = logits - torch.logsumexp(logits, 0)
        wbar = w[i, others] / w[i].sum()
        losses.append(-(wbar * log_prob).sum())
    return torch.stack(losses).mean()


def random_pool(f=6, n=10, m=25, d=8, seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    particle_pos = torch.rand(f, m, 3, generator=gen, dtype=dtype) * 0.3
    particle_vis = torch.rand(f, m, generator=gen) > 0.3
    # tokens near particles so that many share an assignment
    src = torch.randint(0, m, (f, n), generator=gen)
    token_pos = particle_pos.gather(1, src[..., None].expand(-1, -1, 3)) + 0.01 * torch.randn(
        f, n, 3, generator=gen, dtype=dtype
    )
    token_feat = torch.randn(f, n, d, generator=gen, dtype=dtype, requires_grad=True)
    return token_pos, token_feat, particle_pos, particle_vis


@pytest.mark.parametrize("impl", ["dense", "blockwise"])
def test_same_cloth_loss_equals_algorithm1_forward_and_gradient(impl):
    tp, tf, pp, pv = random_pool()
    ref = algorithm1_reference(tp, tf, pp, pv, sigma=0.01, tau=0.1)
    (g_ref,) = torch.autograd.grad(ref, tf)
    out = same_cloth_contrastive_loss(tp, tf, pp, pv, sigma=0.01, tau=0.1, impl=impl, block=7)
    (g_out,) = torch.autograd.grad(out, tf)
    assert out.dim() == 0
    assert out.dtype == torch.float64 and torch.allclose(out, ref, rtol=1e-8), (out, ref)
    assert torch.allclose(g_out.double(), g_ref, rtol=1e-4, atol=1e-6)


def test_blockwise_equals_dense_float32_many_tokens_and_drops_anchors_without_positives():
    tp, tf, pp, pv = random_pool(f=30, n=64, m=200, d=32, seed=3, dtype=torch.float32)
    valid = torch.rand(30, 64, generator=torch.Generator().manual_seed(4)) > 0.1
    dense = same_cloth_contrastive_loss(tp, tf, pp, pv, 0.01, 0.07, token_valid=valid, impl="dense")
    (gd,) = torch.autograd.grad(dense, tf)
    block = same_cloth_contrastive_loss(tp, tf, pp, pv, 0.01, 0.07, token_valid=valid, impl="blockwise", block=300)
    (gb,) = torch.autograd.grad(block, tf)
    assert torch.allclose(dense, block, rtol=1e-5)
    assert torch.allclose(gd, gb, rtol=1e-4, atol=1e-7)
    assert gb[~valid].abs().max() == 0  # invalid tokens take no part


def test_blockwise_logsumexp_gradcheck():
    z = F.normalize(torch.randn(23, 5, dtype=torch.float64), dim=-1).requires_grad_()
    valid = torch.ones(23, dtype=torch.bool)
    valid[[3, 11]] = False
    assert torch.autograd.gradcheck(lambda x: contrastive_logsumexp(x, valid, 0.2, "blockwise", 4), (z,))
    assert torch.allclose(
        contrastive_logsumexp(z, valid, 0.2, "blockwise", 4), contrastive_logsumexp(z, valid, 0.2, "dense")
    )


def test_loss_is_low_when_features_encode_the_particle():
    """Features equal to a particle embedding give a lower loss than random features."""
    tp, _, pp, pv = random_pool(f=8, n=16, m=30, seed=5, dtype=torch.float32)
    a, _ = __import__("instant_fold_learning.encoder.losses", fromlist=["x"]).assign_tokens_to_particles(tp, pp, pv)
    emb = F.normalize(torch.randn(30, 32), dim=-1)
    good = same_cloth_contrastive_loss(tp, emb[a], pp, pv, 0.01, 0.1)
    bad = same_cloth_contrastive_loss(tp, torch.randn(8, 16, 32), pp, pv, 0.01, 0.1)
    assert good < bad - 1.0


def test_no_positive_anywhere_gives_zero_with_gradient_graph():
    tp = torch.rand(1, 4, 3)
    tf = torch.randn(1, 4, 8, requires_grad=True)
    pp = torch.rand(1, 4, 3)
    pv = torch.zeros(1, 4, dtype=torch.bool)  # nothing visible -> no assignment
    out = same_cloth_contrastive_loss(tp, tf, pp, pv, 0.01, 0.1)
    out.backward()
    assert out.item() == 0.0 and tf.grad is not None


def test_shape_errors_name_the_field():
    with pytest.raises(LossInputError, match="token_feat"):
        same_cloth_contrastive_loss(
            torch.rand(2, 4, 3), torch.rand(2, 5, 8), torch.rand(2, 6, 3), torch.ones(2, 6, dtype=torch.bool), 0.01, 0.1
        )
    with pytest.raises(LossInputError, match="particle_vis"):
        same_cloth_contrastive_loss(
            torch.rand(2, 4, 3), torch.rand(2, 4, 8), torch.rand(2, 6, 3), torch.ones(2, 6), 0.01, 0.1
        )


def test_batch_global_denominator_matches_dense_over_concatenated_pools():
    pools_in = [random_pool(f=4, n=8, m=20, seed=s, dtype=torch.float32) for s in (10, 11)]
    pools = [
        same_cloth_positives(tp, tf, pp, pv, 0.01, particle_offset=20 * i)
        for i, (tp, tf, pp, pv) in enumerate(pools_in)
    ]
    glob = batch_global_same_cloth_loss(pools, 0.1, impl="blockwise", block=5)
    dense = batch_global_same_cloth_loss(pools, 0.1, impl="dense")
    assert torch.allclose(glob, dense, rtol=1e-5)
    # a global denominator only adds negatives, so it is larger than the mean per-pool loss
    per_pool = torch.stack([same_cloth_contrastive_loss(*p, 0.01, 0.1) for p in pools_in]).mean()
    assert glob > per_pool


def cross_reference(z, valid, labels, cloth, traj, tau, weights):
    q = z.shape[0]
    z = F.normalize(z, dim=-1)
    w = torch.zeros(q, q, dtype=z.dtype)
    for i in range(q):
        for j in range(q):
            if i == j or not (valid[i] and valid[j]) or labels[i] != labels[j]:
                continue
            w[i, j] = weights[0] if traj[i] == traj[j] else weights[1] if cloth[i] == cloth[j] else weights[2]
    losses = []
    for i in range(q):
        if not valid[i] or w[i].sum() <= 0:
            continue
        others = [j for j in range(q) if j != i and valid[j]]
        logits = z[i] @ z[others].T / tau
        losses.append(-(w[i, others] / w[i].sum() * (logits - torch.logsumexp(logits, 0))).sum())
    return torch.stack(losses).mean()


@pytest.mark.parametrize("weights", [(0.3, 0.5, 1.0), (0.0, 0.0, 1.0)])
@pytest.mark.parametrize("impl", ["dense", "blockwise"])
def test_cross_cloth_loss_equals_explicit_curriculum_definition(weights, impl):
    gen = torch.Generator().manual_seed(6)
    q = 42
    z = torch.randn(q, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    labels = torch.randint(0, 3, (q,), generator=gen)
    traj = torch.randint(0, 6, (q,), generator=gen)
    cloth = traj // 2
    valid = torch.rand(q, generator=gen) > 0.15
    ref = cross_reference(z, valid, labels, cloth, traj, 0.1, weights)
    (g_ref,) = torch.autograd.grad(ref, z)
    out = cross_cloth_keypoint_loss(z, valid, labels, cloth, traj, 0.1, weights, impl=impl, block=9)
    (g_out,) = torch.autograd.grad(out, z)
    assert torch.allclose(out.double(), ref, rtol=1e-5)
    assert torch.allclose(g_out.double(), g_ref, rtol=1e-4, atol=1e-6)


def test_keypoint_features_average_nearby_tokens_only():
    token_pos = torch.tensor([[[0.0, 0, 1], [0.01, 0, 1], [0.5, 0, 1]]])
    feat = torch.tensor([[[1.0, 0], [1.0, 0], [0.0, 1]]])
    kp = torch.tensor([[[0.005, 0, 1], [2.0, 0, 1]]])
    out, ok = keypoint_features(
        token_pos, feat, torch.ones(1, 3, dtype=torch.bool), kp, torch.ones(1, 2, dtype=torch.bool), radius=0.05
    )
    assert ok.tolist() == [[True, False]]
    assert torch.allclose(out[0, 0], torch.tensor([1.0, 0.0]))


def test_temperature_annealing_is_monotone_from_start_to_end():
    taus = [annealed_temperature(s, 100, 0.2, 0.05) for s in range(100)]
    assert taus[0] == pytest.approx(0.2) and taus[-1] == pytest.approx(0.05)
    assert all(a >= b for a, b in itertools.pairwise(taus))


def test_float32_matches_the_dense_formula_when_one_token_dominates_its_particle():
    """A token 4 cm from its particle shares it with one 0.5 mm away: its weight is ~1e-7 of the
    near one's, so a subtract-self group sum would cancel in float32; the result must still equal
    Algorithm 1 evaluated densely in float32 (including which anchors underflow away)."""
    tp, tf, pp, _ = random_pool(f=4, n=12, m=20, seed=8)
    tp = tp.clone()
    tp[1, 3] = pp[1, 5] + torch.tensor([0.0, 0.0, 0.0005], dtype=tp.dtype)
    tp[2, 4] = pp[2, 5] + torch.tensor([0.0, 0.0, 0.04], dtype=tp.dtype)
    pp = pp.clone()
    pp[2, :5] += 1.0  # frame 2: every token's nearest particle is 5, most of them far away
    pp[2, 6:] += 1.0
    vis = torch.ones(4, 20, dtype=torch.bool)
    tf32 = tf.detach().float().requires_grad_()
    ref = algorithm1_reference(tp.float(), tf32, pp.float(), vis, 0.005, 0.1)
    (g_ref,) = torch.autograd.grad(ref, tf32)
    out = same_cloth_contrastive_loss(tp.float(), tf32, pp.float(), vis, 0.005, 0.1)
    (g_out,) = torch.autograd.grad(out, tf32)
    assert torch.allclose(out, ref, rtol=1e-5)
    assert torch.allclose(g_out, g_ref, rtol=1e-3, atol=1e-6)
    # in float64 fewer weights underflow, so more anchors survive: the dtype matters, as in the formula
    ref64 = algorithm1_reference(tp, tf.detach(), pp, vis, 0.005, 0.1)
    assert torch.allclose(same_cloth_contrastive_loss(tp, tf.detach(), pp, vis, 0.005, 0.1), ref64, rtol=1e-7)
