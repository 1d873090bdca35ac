"""Temporal contrastive pretraining losses (paper appendix B, Algorithm 1).

Both objectives are soft-weighted supervised contrastive losses over L2-normalised features z:

    l_u = logsumexp_{v in C(u)} (z_u . z_v / tau)  -  sum_v Wbar_uv z_u . z_v / tau

with C(u) = every valid token except u. The positive weights factor over groups (same particle
for the same-cloth loss, same keypoint label / cloth / trajectory for the cross-cloth loss), so
the positive term is computed from per-group feature sums in O(U*D). Only the denominator is
quadratic; `impl="blockwise"` streams it in tiles with an online log-sum-exp and recomputes the
tiles in the backward pass, so memory stays linear in the number of tokens while the result is
the same as the dense formula (`impl="dense"`, kept as the reference).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F

from instant_fold_core.validation import ValidationError

Impl = Literal["blockwise", "dense"]

#: Curriculum weights of the cross-cloth keypoint loss: same trajectory, same cloth across
#: trajectories, across cloths (paper appendix B).
CURRICULUM_WEIGHTS: tuple[float, float, float] = (0.3, 0.5, 1.0)


class LossInputError(ValidationError):
    """Loss inputs have inconsistent shapes or types; the message names the field."""


def _tile_logits(zi: torch.Tensor, zj: torch.Tensor, i0: int, j0: int, tau: float) -> torch.Tensor:
    """Logits of one (anchor tile, key tile) pair with self pairs set to -inf."""
    logits = zi @ zj.T / tau
    if i0 == j0:
        logits = logits.fill_diagonal_(float("-inf"))
    return logits


def _tile_pairs(u: int, block: int):
    """Tile pairs (i0, j0) with i0 <= j0: each off-diagonal pair serves both directions."""
    starts = range(0, u, block)
    return [(i0, j0) for i0 in starts for j0 in starts if i0 <= j0]


def _online_update(run_max: torch.Tensor, run_sum: torch.Tensor, logits: torch.Tensor) -> None:
    """Fold a tile of logits (rows = anchors) into running max/sum, in place (online LSE)."""
    new_max = torch.maximum(run_max, logits.max(dim=1).values)
    shift = torch.where(torch.isfinite(new_max), new_max, torch.zeros_like(new_max))
    run_sum.mul_(torch.exp(run_max - shift)).add_(torch.exp(logits - shift[:, None]).sum(dim=1))
    run_max.copy_(new_max)


class _BlockwiseLogSumExp(torch.autograd.Function):
    """lse_u = log sum_{v != u, valid_v} exp(z_u . z_v / tau), streamed over tiles.

    The similarity matrix is symmetric, so each tile pair (i, j), i < j, is computed once and
    serves the anchors of both tiles. Forward keeps a running max and sum per anchor (online
    log-sum-exp); backward recomputes each tile's softmax from the saved lse, so nothing of size
    U x U is ever held in memory.
    """

    @staticmethod
    def forward(ctx, z: torch.Tensor, valid: torch.Tensor, tau: float, block: int) -> torch.Tensor:
        u = z.shape[0]
        run_max = torch.full((u,), float("-inf"), dtype=z.dtype, device=z.device)
        run_sum = torch.zeros_like(run_max)
        for i0, j0 in _tile_pairs(u, block):
            i1, j1 = min(i0 + block, u), min(j0 + block, u)
            logits = _tile_logits(z[i0:i1], z[j0:j1], i0, j0, tau)
            _online_update(run_max[i0:i1], run_sum[i0:i1], logits.masked_fill(~valid[None, j0:j1], float("-inf")))
            if i0 != j0:
                cols = logits.T.masked_fill(~valid[None, i0:i1], float("-inf"))
                _online_update(run_max[j0:j1], run_sum[j0:j1], cols)
        shift = torch.where(torch.isfinite(run_max), run_max, torch.zeros_like(run_max))
        lse = shift + torch.log(run_sum)
        ctx.save_for_backward(z, valid, lse)
        ctx.tau, ctx.block = tau, block
        return lse

    @staticmethod
    def backward(ctx, grad_lse: torch.Tensor):
        z, valid, lse = ctx.saved_tensors
        tau, block = ctx.tau, ctx.block
        finite = torch.isfinite(lse)
        lse_safe = torch.where(finite, lse, torch.zeros_like(lse))
        coef = torch.where(finite, grad_lse, torch.zeros_like(grad_lse))
        grad = torch.zeros_like(z)
        u = z.shape[0]
        for i0, j0 in _tile_pairs(u, block):
            i1, j1 = min(i0 + block, u), min(j0 + block, u)
            zi, zj = z[i0:i1], z[j0:j1]
            logits = _tile_logits(zi, zj, i0, j0, tau)
            # d lse_u / d z_u = sum_v p_uv z_v / tau and d lse_u / d z_v = p_uv z_u / tau, with p the
            # anchor-row softmax; w[a, b] collects both directions of the pair (a in i, b in j).
            w = torch.exp(logits.masked_fill(~valid[None, j0:j1], float("-inf")) - lse_safe[i0:i1, None])
            w = w * coef[i0:i1, None]
            if i0 != j0:
                back = torch.exp(logits.masked_fill(~valid[i0:i1, None], float("-inf")) - lse_safe[None, j0:j1])
                w = w + back * coef[None, j0:j1]
                grad[i0:i1] += w @ zj / tau
                grad[j0:j1] += w.T @ zi / tau
            else:
                grad[i0:i1] += (w + w.T) @ zi / tau
        return grad, None, None, None


def contrastive_logsumexp(
    z: torch.Tensor, valid: torch.Tensor, tau: float, impl: Impl = "blockwise", block: int = 2048
) -> torch.Tensor:
    """Per-anchor log-sum-exp of similarities over all valid non-self tokens ([U,D] -> [U])."""
    if impl == "dense":
        logits = z @ z.T / tau
        eye = torch.eye(z.shape[0], dtype=torch.bool, device=z.device)
        logits = logits.masked_fill(eye | ~valid[None, :], float("-inf"))
        return torch.logsumexp(logits, dim=1)
    if impl == "blockwise":
        return _BlockwiseLogSumExp.apply(z, valid, float(tau), int(block))
    raise LossInputError(f"impl: expected 'blockwise' or 'dense', got {impl!r}")


def soft_supcon(
    z: torch.Tensor,
    valid: torch.Tensor,
    positive_sum: torch.Tensor,
    positive_weight: torch.Tensor,
    tau: float,
    impl: Impl = "blockwise",
    block: int = 2048,
) -> torch.Tensor:
    """Mean soft supervised contrastive loss over anchors with positives.

    `positive_sum[u] = sum_v W_uv z_v` and `positive_weight[u] = sum_v W_uv` (self excluded);
    anchors with zero positive weight or an invalid token are dropped, as in Algorithm 1.
    Returns 0 (with a graph) when no anchor has a positive.
    """
    anchors = valid & (positive_weight > 0)
    if not anchors.any():
        return z.sum() * 0.0
    lse = contrastive_logsumexp(z, valid, tau, impl, block)
    pos = (z * positive_sum).sum(-1)[anchors] / (positive_weight[anchors] * tau)
    return (lse[anchors] - pos).mean()


def _group_sum(values: torch.Tensor, groups: torch.Tensor, num_groups: int) -> torch.Tensor:
    """Sum rows of `values` ([U] or [U,D]) per group id ([U] in [0, num_groups))."""
    out = values.new_zeros((num_groups, *values.shape[1:]))
    return out.index_add(0, groups, values)


def assign_tokens_to_particles(
    token_pos: torch.Tensor, particle_pos: torch.Tensor, particle_vis: torch.Tensor, chunk: int = 64
) -> tuple[torch.Tensor, torch.Tensor]:
    """Nearest visible particle per token (Algorithm 1, lines 1-7).

    Returns (assignment [F,N] long, -1 where the frame has no visible particle, distance [F,N]).
    Frames are processed in chunks to bound the F x N x M distance tensor.
    """
    assign, dist = [], []
    dtype = torch.promote_types(token_pos.dtype, torch.float32)
    for f0 in range(0, token_pos.shape[0], chunk):
        d = torch.cdist(
            token_pos[f0 : f0 + chunk].to(dtype),
            particle_pos[f0 : f0 + chunk].to(dtype),
            compute_mode="donot_use_mm_for_euclid_dist",
        )
        d = d.masked_fill(~particle_vis[f0 : f0 + chunk, None, :], float("inf"))
        best, idx = d.min(dim=-1)
        none = ~torch.isfinite(best)
        assign.append(torch.where(none, torch.full_like(idx, -1), idx))
        dist.append(torch.where(none, torch.full_like(best, float("inf")), best))
    return torch.cat(assign), torch.cat(dist)


def _check_same_cloth_inputs(token_pos, token_feat, particle_pos, particle_vis, token_valid) -> None:
    if token_pos.ndim != 3 or token_pos.shape[-1] != 3:
        raise LossInputError(f"token_pos: expected [F, N, 3], got {tuple(token_pos.shape)}")
    f, n, _ = token_pos.shape
    if token_feat.ndim != 3 or token_feat.shape[:2] != (f, n):
        raise LossInputError(f"token_feat: expected [{f}, {n}, D], got {tuple(token_feat.shape)}")
    if particle_pos.ndim != 3 or particle_pos.shape[0] != f or particle_pos.shape[-1] != 3:
        raise LossInputError(f"particle_pos: expected [{f}, M, 3], got {tuple(particle_pos.shape)}")
    if particle_vis.shape != particle_pos.shape[:2] or particle_vis.dtype != torch.bool:
        raise LossInputError(
            f"particle_vis: expected bool {tuple(particle_pos.shape[:2])}, got "
            f"{particle_vis.dtype} {tuple(particle_vis.shape)}"
        )
    if token_valid is not None and (token_valid.shape != (f, n) or token_valid.dtype != torch.bool):
        raise LossInputError(f"token_valid: expected bool [{f}, {n}], got {tuple(token_valid.shape)}")


def _first_max(scores: torch.Tensor, groups: torch.Tensor, num_groups: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-group maximum of `scores` and a mask of the first token attaining it in each group."""
    u = scores.shape[0]
    group_max = torch.full((num_groups,), -torch.inf, dtype=scores.dtype, device=scores.device)
    group_max = group_max.scatter_reduce(0, groups, scores, "amax")
    order = torch.arange(u, device=scores.device)
    at_max = torch.where(scores == group_max[groups], order, torch.full_like(order, u))
    first = torch.full((num_groups,), u, device=scores.device, dtype=order.dtype)
    first = first.scatter_reduce(0, groups, at_max, reduce="amin")
    return group_max, order == first[groups]


def _exclusive_group_sums(
    values: torch.Tensor, weights: torch.Tensor, groups: torch.Tensor, num_groups: int, is_max: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token sums over the *other* members of its group: (sum w_v values_v, sum w_v).

    Subtracting the own term from the group sum is accurate for every member except the group's
    largest weight (`is_max`), where the rest may be orders of magnitude smaller; that member
    gets a sum computed without it instead.
    """
    weighted = weights[:, None] * values
    keep = (~is_max).to(values.dtype)
    sum_all = _group_sum(weighted, groups, num_groups)[groups]
    w_all = _group_sum(weights, groups, num_groups)[groups]
    sum_rest = _group_sum(weighted * keep[:, None], groups, num_groups)[groups]
    w_rest = _group_sum(weights * keep, groups, num_groups)[groups]
    excl_sum = torch.where(is_max[:, None], sum_rest, sum_all - weighted)
    excl_w = torch.where(is_max, w_rest, w_all - weights)
    return excl_sum, excl_w


def same_cloth_positives(
    token_pos: torch.Tensor,
    token_feat: torch.Tensor,
    particle_pos: torch.Tensor,
    particle_vis: torch.Tensor,
    sigma: float,
    token_valid: torch.Tensor | None = None,
    particle_offset: int = 0,
) -> dict[str, torch.Tensor]:
    """Flattened features, validity and positive sums of one same-cloth pool (Algorithm 1, 1-19).

    W_uv = [a_u = a_v] exp(-(d_u^2 + d_v^2) / 4 sigma^2) = [a_u = a_v] g_u g_v with
    g = exp(-d^2 / 4 sigma^2). The anchor's own g_u cancels in the normalised weights, so the
    positive term needs only the exclusive per-particle sums of g_v z_v and g_v, computed in
    O(U*D). g is rescaled per particle by its maximum (which also cancels) so the weights never
    underflow; the anchor test follows the dense formula in the working dtype. `particle_offset`
    shifts the returned particle ids so pools of different cloths can be concatenated without
    sharing positives (batch-global denominator).
    """
    _check_same_cloth_inputs(token_pos, token_feat, particle_pos, particle_vis, token_valid)
    f, n, _ = token_pos.shape
    m = particle_pos.shape[1]
    dtype = torch.promote_types(token_feat.dtype, torch.float32)
    assign, dist = assign_tokens_to_particles(token_pos, particle_pos, particle_vis)
    z = F.normalize(token_feat.reshape(f * n, -1).to(dtype), dim=-1)
    valid = assign.reshape(-1) >= 0
    if token_valid is not None:
        valid = valid & token_valid.reshape(-1)
    a = assign.reshape(-1).clamp_min(0)
    log_g = torch.where(valid, -dist.reshape(-1).to(dtype).square() / (4 * sigma**2), -torch.inf)
    group_max, is_max = _first_max(log_g, a, m)
    g = torch.where(valid, torch.exp(log_g - group_max[a]), torch.zeros_like(log_g))
    positive_sum, positive_weight = _exclusive_group_sums(z, g, a, m, is_max)
    # Algorithm 1 keeps an anchor when sum_v W_uv > 0 as computed, i.e. when some positive's
    # weight exp(log g_u + log g_v) does not underflow in this dtype.
    second = torch.full((m,), -torch.inf, dtype=dtype, device=z.device)
    second = second.scatter_reduce(0, a, torch.where(is_max, -torch.inf, log_g), "amax")
    best_other = torch.where(is_max, second[a], group_max[a])
    finfo = torch.finfo(dtype)
    has_positive = valid & (log_g + best_other > math.log(finfo.tiny * finfo.eps)) & (positive_weight > 0)
    return {
        "z": z,
        "valid": valid,
        "positive_sum": positive_sum,
        "positive_weight": torch.where(has_positive, positive_weight, torch.zeros_like(positive_weight)),
        "particle": a + particle_offset,
    }


def same_cloth_contrastive_loss(
    token_pos: torch.Tensor,
    token_feat: torch.Tensor,
    particle_pos: torch.Tensor,
    particle_vis: torch.Tensor,
    sigma: float,
    tau: float,
    token_valid: torch.Tensor | None = None,
    impl: Impl = "blockwise",
    block: int = 2048,
) -> torch.Tensor:
    """Same-cloth soft-weighted supervised contrastive loss, Algorithm 1 of the paper.

    Args:
        token_pos: [F, N, 3] token positions of every frame of every trajectory of one cloth.
        token_feat: [F, N, D] token features (normalised inside).
        particle_pos: [F, M, 3] particle positions of the same frames (ids shared by the cloth).
        particle_vis: [F, M] bool particle visibility.
        sigma: Gaussian width (m) of the token-to-particle assignment confidence.
        tau: temperature.
        token_valid: optional [F, N] bool; invalid tokens are neither anchors nor in any C(u).
        impl: "blockwise" (memory linear in tokens) or "dense" (reference).
    Returns a scalar: mean over anchors with at least one positive of the forward-only loss.
    """
    pool = same_cloth_positives(token_pos, token_feat, particle_pos, particle_vis, sigma, token_valid)
    return soft_supcon(pool["z"], pool["valid"], pool["positive_sum"], pool["positive_weight"], tau, impl, block)


def batch_global_same_cloth_loss(
    pools: list[dict[str, torch.Tensor]], tau: float, impl: Impl = "blockwise", block: int = 2048
) -> torch.Tensor:
    """Same-cloth positives with one denominator over the whole batch (all pools concatenated).

    The paper restricts C(u) to the cloth pool because the dense global matrix does not fit; the
    blockwise log-sum-exp makes the global variant computable, so it is offered as an option.
    """
    cat = {k: torch.cat([p[k] for p in pools]) for k in ("z", "valid", "positive_sum", "positive_weight")}
    return soft_supcon(cat["z"], cat["valid"], cat["positive_sum"], cat["positive_weight"], tau, impl, block)


def keypoint_features(
    token_pos: torch.Tensor,
    token_feat: torch.Tensor,
    token_valid: torch.Tensor,
    keypoints: torch.Tensor,
    keypoint_valid: torch.Tensor,
    radius: float = 0.05,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Keypoint features [F,K,D] from nearby tokens and their validity [F,K].

    Each keypoint's feature is the Gaussian-weighted (std radius/2) mean of the normalised
    features of valid tokens within `radius`, renormalised; a keypoint with no token in range, or
    marked invalid (e.g. occluded), is invalid.
    """
    z = F.normalize(token_feat.float(), dim=-1)
    d = torch.cdist(keypoints.float(), token_pos.float())  # [F, K, N]
    near = (d < radius) & token_valid[:, None, :]
    w = torch.exp(-d.square() / (2 * (radius / 2) ** 2)) * near
    feat = F.normalize(w @ z, dim=-1)
    return feat, keypoint_valid & near.any(dim=-1)


def cross_cloth_keypoint_loss(
    kp_feat: torch.Tensor,
    kp_valid: torch.Tensor,
    labels: torch.Tensor,
    cloth_ids: torch.Tensor,
    traj_ids: torch.Tensor,
    tau: float,
    level_weights: tuple[float, float, float] = CURRICULUM_WEIGHTS,
    impl: Impl = "dense",
    block: int = 2048,
) -> torch.Tensor:
    """Cross-cloth keypoint contrastive loss with curriculum weights (paper appendix B).

    Anchors and comparison set are all valid keypoint features of the batch (a global
    denominator: the keypoint set is small); positives of u are the other features with the same
    semantic label, weighted by `level_weights` = (same trajectory, same cloth other trajectory,
    other cloth). All inputs are flattened [Q] (features [Q, D]); `traj_ids` must be unique per
    trajectory across the batch.
    """
    w_traj, w_cloth, w_cross = level_weights
    z = F.normalize(kp_feat.float(), dim=-1)
    valid = kp_valid
    vz = z * valid[:, None]
    one = valid.to(z.dtype)
    # W_uv = [l_u = l_v] (w_cross + (w_cloth - w_cross)[c_u = c_v] + (w_traj - w_cloth)[t_u = t_v]),
    # a sum of three group indicators, so positive sums are group sums minus the self term.
    total_sum = torch.zeros_like(z)
    total_w = torch.zeros_like(one)
    for coef, key in (
        (w_cross, labels),
        (w_cloth - w_cross, labels * (int(cloth_ids.max()) + 1) + cloth_ids),
        (w_traj - w_cloth, labels * (int(traj_ids.max()) + 1) + traj_ids),
    ):
        if coef == 0:
            continue
        _, group = torch.unique(key, return_inverse=True)
        ng = int(group.max()) + 1
        total_sum = total_sum + coef * _group_sum(vz, group, ng)[group]
        total_w = total_w + coef * _group_sum(one, group, ng)[group]
    positive_sum = (total_sum - w_traj * vz) * one[:, None]
    positive_weight = (total_w - w_traj * one) * one
    positive_weight = torch.where(positive_weight > 1e-9, positive_weight, torch.zeros_like(positive_weight))
    return soft_supcon(z, valid, positive_sum, positive_weight, tau, impl, block)


def annealed_temperature(step: int, total_steps: int, start: float, end: float) -> float:
    """Cosine annealing of the temperature from `start` to `end`: gradually sharper contrasts."""
    if total_steps <= 1:
        return end
    t = min(max(step / (total_steps - 1), 0.0), 1.0)
    return end + 0.5 * (start - end) * (1 + math.cos(math.pi * t))
