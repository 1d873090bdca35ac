"""Rigid planar registration of cloth-token sets: the rotation about the camera's optical axis and
the shift in the image plane that carry one cloth onto another.

Why: the policy conditions on a demonstration recorded on another start, so the demonstrated cloth
lies elsewhere and turned. Translating its centroid onto the current one (`masked_centroid`) leaves
the turn; issue 28's diagnosis found that a rigid 2D registration of a demonstration keyframe's
tokens onto the current ones maps the demonstrated grasp to within 2.5 cm on average. Cloth lies
flat on the table, seen from above, so a rotation about z plus an x, y shift is the motion that
relates two lay-outs of one garment state; depth (z) is left as it is (the table's distance from the
camera is not a property of the garment).

Method (batched, pure torch, deterministic, no gradients):
1. start angles: the source centroid onto the target centroid, the source turned by `rotations`
   equally spaced angles (ICP from a single start falls into the mirror minimum of an elongated
   cloth);
2. ICP from every start, with soft correspondences: each valid source token is matched to the mean
   of the valid target tokens weighted by exp(-cost / 2 sigma²), where the cost is the squared xy
   distance plus, when features are given, `feature_weight` times the squared distance of the
   L2-normalised features; sigma² is annealed from `SIGMA_START` to `SIGMA_END` token spacings²
   (the median nearest-neighbour distance of the target tokens). Why soft: two samplings of one
   cloth (64 farthest-point tokens each) have no one-to-one correspondences, and hard nearest
   neighbours then turn slowly and stop early (a resampled synthetic shirt 49° off was still 40°
   off after 5 hard-correspondence iterations). The rigid motion is re-solved in closed form each time
   (weighted 2D Procrustes: the angle is the atan2 of the cross-covariance's antisymmetric and
   symmetric parts), over the kept correspondences: the `trim` fraction of cheapest ones, and
   any within `MEDIAN_FACTOR` times the median cost (cloth that folded differently, or that one
   set lacks, drops out once the rest fits, but not while nothing fits yet);
3. after `coarse_iterations` only each element's best start goes on (the others rarely overtake it
   and cost most of the time); starts are compared on the mean hard nearest-neighbour cost capped
   at `CAP` token spacings² (a token without counterpart costs the same for every start);
4. with a `prior` (the previous registration of a fold, `RegistrationTrack`), ICP also runs from
   the prior, and that fit stays unless step 3's winner costs less than `KEEP_RATIO` x its cost.

Tokens with `valid` False never enter a sum, a nearest-neighbour search or a quantile: their
positions may be anything, NaN included. `residual` is the geometric fit (root mean square of the
`trim` fraction of smallest source-to-target nearest-neighbour xy distances, metres, features
ignored), so centroid-only alignment (`iterations=0, rotations=1`) and a full registration compare
on one scale.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch

from instant_fold_core.errors import InvalidInputError, NonFiniteError

#: Arrays accepted at this module's boundary (numpy or torch).
Array = np.ndarray | torch.Tensor

#: Metres² that a unit squared feature distance costs (features L2-normalised: squared distances in
#: [0, 4]): a dissimilar token pair (distance² 2) weighs like 1.4 cm apart, a tie-breaker between
#: fits that geometry alone cannot tell apart (a folded shirt turned by 180°). Why not more: the
#: cloth encoder's features change with the cloth's orientation in the image, so heavier weights pull
#: the fit towards the source's orientation (the quick yardstick's demonstrations against the scripted
#: folds from its rollout starts, 65 grasps, 16 start angles: mean grasp error 2.9 cm at 1e-4, 5.4 cm
#: at 1e-3, 8.1 cm without features; docs/registration.md).
DEFAULT_FEATURE_WEIGHT = 1e-4


#: A correspondence whose cost is below this multiple of the median cost is always kept (costs are
#: squared distances: 9 = three times the median distance).
MEDIAN_FACTOR = 9.0

#: Soft correspondences: each source token is matched to the mean of the target tokens weighted by
#: exp(-cost / 2 sigma²), sigma² annealed from SIGMA_START to SIGMA_END times the squared token spacing.
SIGMA_START = 4.0
SIGMA_END = 0.05

#: Hypotheses are compared on costs capped at this many squared token spacings (2 spacings).
CAP = 4.0

#: A registration continued from its stream's previous one (`prior`) is kept unless the search from
#: the start angles finds a fit whose objective is below this fraction of the continued one's. Why:
#: a garment whose outline is nearly symmetric (hem about as wide as the shoulders, sleeves lying
#: along the body) fits about as well turned by 180°, and from one query to the next small changes
#: of the observation decided which turn won: the mapped grasps jumped between opposite corners
#: while the arm approached (held-out garment proc_00005, the two fits' objectives within 10 % of
#: each other; docs/registration.md, "Tracking through a fold").
KEEP_RATIO = 0.7


class RegistrationError(InvalidInputError):
    """Token sets cannot be registered (wrong shapes, no valid token); the message names the field."""


@dataclass(frozen=True)
class PlanarRigid:
    """A batch of rigid motions of the image plane: p_xy -> rotation @ p_xy + translation, z kept.

    Attributes:
        rotation: [B, 2, 2] rotation matrices (determinant 1).
        translation: [B, 2] metres.
        residual: [B] metres, the fit of the registration that produced it (0 for one built by hand).
    """

    rotation: torch.Tensor
    translation: torch.Tensor
    residual: torch.Tensor

    @classmethod
    def from_angle(cls, angle: Array, translation: Array) -> PlanarRigid:
        """Motions from angles [B] (radians, counter-clockwise from x to y) and shifts [B, 2]."""
        a = torch.as_tensor(angle)
        a = a.to(torch.get_default_dtype()) if not a.is_floating_point() else a
        t = torch.as_tensor(translation, dtype=a.dtype)
        return cls(_rotation(a), t, torch.zeros_like(a))

    @property
    def angle(self) -> torch.Tensor:
        """[B] rotation angles in (-pi, pi]."""
        return torch.atan2(self.rotation[:, 1, 0], self.rotation[:, 0, 0])

    def apply(self, points: Array) -> Array:
        """Move points [B, L, 3] (x, y rotated and shifted, z kept); numpy in, numpy out."""
        is_numpy = not isinstance(points, torch.Tensor)
        p = torch.as_tensor(np.asarray(points) if is_numpy else points)
        if p.ndim != 3 or p.shape[-1] != 3 or p.shape[0] != self.rotation.shape[0]:
            raise RegistrationError(f"points: expected [{self.rotation.shape[0]}, L, 3], got {list(p.shape)}")
        rot, shift = self.rotation.to(p.dtype), self.translation.to(p.dtype)
        xy = p[..., :2] @ rot.transpose(-1, -2) + shift[:, None]
        out = torch.cat((xy, p[..., 2:]), -1)
        return out.numpy() if is_numpy else out

    def apply_point(self, point: np.ndarray) -> np.ndarray:
        """One point [3] moved by a single motion (B = 1): where a demonstrated grasp or release lands."""
        return np.asarray(self.apply(np.asarray(point)[None, None]))[0, 0]

    def inverse(self) -> PlanarRigid:
        """The motion back: rotation^T, -rotation^T translation (same residual)."""
        rot_t = self.rotation.transpose(-1, -2)
        return PlanarRigid(rot_t, -(rot_t @ self.translation[..., None])[..., 0], self.residual)


def _rotation(angle: torch.Tensor) -> torch.Tensor:
    c, s = torch.cos(angle), torch.sin(angle)
    return torch.stack((torch.stack((c, -s), -1), torch.stack((s, c), -1)), -2)


def _move(xy: torch.Tensor, rot: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """xy [P, L, 2] rotated by rot [P, 2, 2] and shifted by shift [P, 2] (elementwise: cheaper than a
    batched product of 2 x 2 matrices)."""
    x, y = xy[..., 0], xy[..., 1]
    r = rot[:, None]
    return torch.stack(
        (
            r[..., 0, 0] * x + r[..., 0, 1] * y + shift[:, None, 0],
            r[..., 1, 0] * x + r[..., 1, 1] * y + shift[:, None, 1],
        ),
        -1,
    )


def _tensor(name: str, value: Array, shape: tuple[int | None, ...]) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(value) if not isinstance(value, torch.Tensor) else value).detach().cpu()
    if t.ndim != len(shape) or any(s is not None and a != s for a, s in zip(t.shape, shape, strict=True)):
        want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
        raise RegistrationError(f"{name}: expected shape {want}, got {list(t.shape)}")
    return t


def _cloth(prefix: str, positions: Array, valid: Array, batch: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Checked xy [B, L, 2] with invalid slots zeroed (never NaN) and the mask [B, L]."""
    pos = _tensor(f"{prefix}_pos", positions, (batch, None, 3))
    val = _tensor(f"{prefix}_valid", valid, (pos.shape[0], pos.shape[1]))
    if val.dtype != torch.bool:
        raise RegistrationError(f"{prefix}_valid: expected bool, got {val.dtype}")
    empty = torch.nonzero(~val.any(-1))[:, 0].tolist()
    if empty:
        raise RegistrationError(f"{prefix}_valid: batch element(s) {empty} have no valid token")
    xy = pos[..., :2] if pos.is_floating_point() else pos[..., :2].double()
    xy = torch.where(val[..., None], xy, torch.zeros((), dtype=xy.dtype))
    if not torch.isfinite(xy).all():
        raise NonFiniteError(f"{prefix}_pos: a valid token has a NaN or infinite position")
    return xy, val


def _feature_cost(
    source: Array | None, target: Array | None, batch: int, n: int, m: int, weight: float, dtype: torch.dtype
) -> torch.Tensor | None:
    """weight x squared distance of the L2-normalised features [B, N, M], or None without features."""
    if (source is None) != (target is None):
        raise RegistrationError("source_features, target_features: give both or neither")
    if source is None or target is None or weight == 0.0:
        return None
    fs = _tensor("source_features", source, (batch, n, None)).to(dtype)
    ft = _tensor("target_features", target, (batch, m, fs.shape[-1])).to(dtype)
    fs = torch.nn.functional.normalize(torch.nan_to_num(fs, 0.0, 0.0, 0.0), dim=-1)
    ft = torch.nn.functional.normalize(torch.nan_to_num(ft, 0.0, 0.0, 0.0), dim=-1)
    return weight * (2.0 - 2.0 * fs @ ft.transpose(-1, -2)).clamp_min(0.0)


def _masked_mean(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Weighted mean over dim 1: [P, L, C], [P, L] -> [P, C]."""
    return (x * w[..., None]).sum(1) / w.sum(1, keepdim=True).clamp_min(1e-12)


@dataclass(frozen=True)
class _Problem:
    """P registration problems (one per element, or per element and start angle).

    `offset` [P, N, M] holds what does not change while the source moves: the target's |y|² (+inf
    at invalid targets, so they are never matched) plus the feature cost, so each ICP step costs one
    batched matrix product (|x - y|² + f = |x|² + (|y|² + f) - 2 x.y).
    """

    xs: torch.Tensor  # [P, N, 2] source xy (invalid: 0)
    sv: torch.Tensor  # [P, N] source valid
    xt: torch.Tensor  # [P, M, 2] target xy (invalid: 0)
    offset: torch.Tensor  # [P, N, M]
    target_valid: torch.Tensor  # [P, 1, M] 1.0 at valid targets
    keep: torch.Tensor  # [P] rank of the trim quantile among the valid source tokens' costs
    median: torch.Tensor  # [P] rank of their median
    spacing2: torch.Tensor  # [P] squared median nearest-neighbour distance among the valid targets

    @classmethod
    def build(
        cls,
        xs: torch.Tensor,
        sv: torch.Tensor,
        xt: torch.Tensor,
        tv: torch.Tensor,
        fcost: torch.Tensor | None,
        trim: float,
    ) -> _Problem:
        ysq = (xt**2).sum(-1).masked_fill(~tv, math.inf)[:, None, :]
        offset = ysq.expand(-1, xs.shape[1], -1) if fcost is None else ysq + fcost
        count = sv.sum(-1)
        keep = (torch.ceil(trim * count).long() - 1).clamp_min(0)
        return cls(xs, sv, xt, offset.contiguous(), tv[:, None].to(xt.dtype), keep, (count - 1) // 2, _spacing2(xt, tv))

    def repeat(self, r: int) -> _Problem:
        """Each problem r times in a row (copy j of problem i at i * r + j)."""
        return _Problem(*(getattr(self, f.name).repeat_interleave(r, 0) for f in fields(self)))

    def _cost(self, rot: torch.Tensor, shift: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Under the motions (rot, shift): the cost [P, N, M] less each source token's |x|², and
        |x|² [P, N]."""
        moved = _move(self.xs, rot, shift)
        return torch.baddbmm(self.offset, moved, self.xt.transpose(-1, -2), alpha=-2.0), (moved**2).sum(-1)

    def nearest(self, rot: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        """[P, N] each source token's cheapest cost under the motions (rot, shift)."""
        cost, own = self._cost(rot, shift)
        return (cost.amin(-1) + own).clamp_min(0.0)

    def correspond(self, rot: torch.Tensor, shift: torch.Tensor, sigma2: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Soft correspondences under the motions (rot, shift): the weights [P, N] of the kept
        source tokens and their matched target xy [P, N, 2] (the targets' mean weighted by
        exp(-cost / (2 sigma2 x spacing²)))."""
        cost, own = self._cost(rot, shift)
        best = cost.amin(-1)
        # Softmax weights in place (the [P, N, M] tensors dominate the time): exp(-(cost - best) / t),
        # the exponent clamped where exp is below 1e-26 anyway (denormals make exp 10x slower),
        # invalid targets (cost +inf) weighted exactly 0.
        scale = (-0.5 / sigma2) / self.spacing2[:, None, None]
        soft = cost.sub_(best[..., None]).mul_(scale).clamp_min_(-60.0).exp_().mul_(self.target_valid)
        # [2, M] x [M, N] per problem: far faster than [N, M] x [M, 2] for torch's CPU kernels.
        matched = (self.xt.transpose(-1, -2) @ soft.transpose(-1, -2)).transpose(-1, -2) / soft.sum(-1, keepdim=True)
        return self._kept((best + own).clamp_min(0.0)), matched

    def _kept(self, cost: torch.Tensor) -> torch.Tensor:
        """[P, N] 1.0 where a valid source token's cost is within the trim quantile of its problem,
        or within `MEDIAN_FACTOR` x its median: far from convergence (costs large and alike) every
        pair counts, as in plain ICP; close to it, only the outlying pairs are dropped."""
        ranked = cost.masked_fill(~self.sv, math.inf).sort(-1).values
        quantile = ranked.gather(1, self.keep[:, None])
        threshold = torch.maximum(quantile, MEDIAN_FACTOR * ranked.gather(1, self.median[:, None]))
        return (self.sv & (cost <= threshold)).to(cost.dtype)

    def objective(self, cost: torch.Tensor) -> torch.Tensor:
        """[P] mean over the valid source tokens of their cost, capped at `CAP` token spacings²: a
        token without counterpart (cloth the other lacks) costs the same for every hypothesis."""
        capped = torch.minimum(cost, CAP * self.spacing2[:, None]).masked_fill(~self.sv, 0.0)
        return capped.sum(-1) / self.sv.sum(-1)

    def residual(self, cost: torch.Tensor) -> torch.Tensor:
        """[P] root mean square of the cheapest `trim` fraction of the valid tokens' costs."""
        ranked = cost.masked_fill(~self.sv, math.inf).sort(-1).values
        first = torch.arange(cost.shape[1]) <= self.keep[:, None]
        return (ranked.masked_fill(~first, 0.0).sum(-1) / (self.keep + 1).to(cost.dtype)).sqrt()


def _spacing2(xt: torch.Tensor, tv: torch.Tensor) -> torch.Tensor:
    """[B] squared median nearest-neighbour distance among the valid target tokens (the token
    spacing, the scale of the soft correspondences; a single valid token: 1 cm)."""
    sq = (xt**2).sum(-1)
    d2 = torch.baddbmm(sq[:, :, None] + sq[:, None], xt, xt.transpose(-1, -2), alpha=-2.0)
    pair = tv[:, :, None] & tv[:, None] & ~torch.eye(xt.shape[1], dtype=torch.bool)
    nearest = d2.masked_fill(~pair, math.inf).amin(-1).masked_fill(~tv, math.nan)
    return nearest.nanmedian(-1).values.nan_to_num(1e-4, 1e-4, 1e-4).clamp_min(1e-8)


def _procrustes(xs: torch.Tensor, matched: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted least-squares rotation [P, 2, 2] and shift [P, 2] of xs onto matched (closed form)."""
    mu_s, mu_t = _masked_mean(xs, w), _masked_mean(matched, w)
    a, c = xs - mu_s[:, None], matched - mu_t[:, None]
    cos_part = (w * (a[..., 0] * c[..., 0] + a[..., 1] * c[..., 1])).sum(-1)
    sin_part = (w * (a[..., 0] * c[..., 1] - a[..., 1] * c[..., 0])).sum(-1)
    rot = _rotation(torch.atan2(sin_part, cos_part))
    return rot, mu_t - (rot @ mu_s[..., None])[..., 0]


def _best(problem: _Problem, rot: torch.Tensor, shift: torch.Tensor, starts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each element's cheapest hypothesis out of its `starts` consecutive ones (ties: the first)."""
    objective = problem.objective(problem.nearest(rot, shift)).view(-1, starts)
    pick = objective.argmin(-1) + torch.arange(objective.shape[0]) * starts
    return rot[pick], shift[pick]


@torch.no_grad()
def register_planar(
    source_pos: Array,
    source_valid: Array,
    target_pos: Array,
    target_valid: Array,
    source_features: Array | None = None,
    target_features: Array | None = None,
    iterations: int = 12,
    rotations: int = 8,
    trim: float = 0.8,
    feature_weight: float = DEFAULT_FEATURE_WEIGHT,
    coarse_iterations: int = 2,
    prior: PlanarRigid | None = None,
    keep_ratio: float = KEEP_RATIO,
) -> PlanarRigid:
    """The rigid planar motion carrying each source cloth onto its target cloth.

    Args:
        source_pos, target_pos: [B, N, 3] and [B, M, 3] token positions (camera frame; x, y used).
        source_valid, target_valid: bool [B, N] and [B, M]; each element needs one valid token.
        source_features, target_features: optional [B, N, D] and [B, M, D] token features (both or
            neither); with them a correspondence also pays `feature_weight` x their squared
            distance after L2 normalisation.
        iterations: ICP iterations (0: the start angles' centroid alignment as it is).
        rotations: start angles, equally spaced over the full turn (1: no rotation).
        trim: fraction of the valid source tokens whose correspondences always count, in (0, 1].
        coarse_iterations: iterations every start angle runs before only each element's best goes on.
        prior: the previous registration of the same stream (`RegistrationTrack`), one per element:
            ICP also runs from it, and that fit is kept unless the search from the start angles
            finds one whose objective is below `keep_ratio` x its own.

    Numpy or torch in, a `PlanarRigid` of CPU tensors out (dtype: float64 for float64 positions,
    else float32). Raises `RegistrationError` on bad shapes, arguments or an element without a
    valid token, `NonFiniteError` on a NaN or infinite valid position.
    """
    if iterations < 0 or rotations < 1 or coarse_iterations < 0 or not 0.0 < trim <= 1.0:
        raise RegistrationError(
            f"iterations, coarse_iterations >= 0, rotations >= 1, trim in (0, 1]: got {iterations}, "
            f"{coarse_iterations}, {rotations}, {trim}"
        )
    _check_keep_ratio(keep_ratio)
    xs, sv = _cloth("source", source_pos, source_valid, None)
    xt, tv = _cloth("target", target_pos, target_valid, xs.shape[0])
    dtype = torch.float64 if xs.dtype == torch.float64 else torch.float32
    xs, xt = xs.to(dtype), xt.to(dtype)
    b, n, m = xs.shape[0], xs.shape[1], xt.shape[1]
    fcost = _feature_cost(source_features, target_features, b, n, m, feature_weight, dtype)
    problem = _Problem.build(xs, sv, xt, tv, fcost, trim)

    # Start angle r of element i is problem i * R + r, its centroid onto the target's.
    rot = _rotation(torch.arange(rotations, dtype=dtype) * (2 * math.pi / rotations)).repeat(b, 1, 1)
    cs = _masked_mean(xs, sv.to(dtype)).repeat_interleave(rotations, 0)
    shift = _masked_mean(xt, tv.to(dtype)).repeat_interleave(rotations, 0) - (rot @ cs[..., None])[..., 0]
    rot, shift = _icp(problem, rot, shift, rotations, iterations, coarse_iterations)
    if prior is not None:
        if prior.rotation.shape[0] != b:
            raise RegistrationError(f"prior: expected {b} element(s), got {prior.rotation.shape[0]}")
        kept_rot, kept_shift = _icp(problem, prior.rotation.to(dtype), prior.translation.to(dtype), 1, iterations, 0)
        fresh = problem.objective(problem.nearest(rot, shift))
        kept = problem.objective(problem.nearest(kept_rot, kept_shift))
        switch = fresh < keep_ratio * kept
        rot = torch.where(switch[:, None, None], rot, kept_rot)
        shift = torch.where(switch[:, None], shift, kept_shift)
    geometric = problem if fcost is None else _Problem.build(xs, sv, xt, tv, None, trim)
    return PlanarRigid(rot, shift, geometric.residual(geometric.nearest(rot, shift)))


def _check_keep_ratio(keep_ratio: float) -> float:
    """`keep_ratio`, refused (`RegistrationError`) unless in (0, 1] (NaN included)."""
    if not 0.0 < keep_ratio <= 1.0:
        raise RegistrationError(f"keep_ratio: expected a number in (0, 1], got {keep_ratio}")
    return keep_ratio


def _icp(
    problem: _Problem, rot: torch.Tensor, shift: torch.Tensor, starts: int, iterations: int, coarse_iterations: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """ICP from `starts` consecutive hypotheses per element (rot [P * starts, 2, 2], shift
    [P * starts, 2]); after `coarse_iterations` only each element's best goes on. Each element's
    final motion."""
    current = problem.repeat(starts) if starts > 1 else problem
    for it in range(iterations):
        if it == coarse_iterations and starts > 1:
            rot, shift = _best(current, rot, shift, starts)
            current, starts = problem, 1
        sigma2 = SIGMA_START * (SIGMA_END / SIGMA_START) ** (it / max(iterations - 1, 1))
        weight, matched = current.correspond(rot, shift, sigma2)
        rot, shift = _procrustes(current.xs, matched, weight)
    if starts > 1:
        rot, shift = _best(current, rot, shift, starts)
    return rot, shift


class RegistrationTrack:
    """The registrations of one stream of observations (a fold): each continues the stream's
    previous registration of the same source (`key`, e.g. a demonstration keyframe), or else its
    latest registration of any source, with `register_planar`'s `prior` (see `KEEP_RATIO` for why).

    A track belongs to one fold: a new fold, with the cloth laid out anew, starts a new track.
    """

    def __init__(self, keep_ratio: float = KEEP_RATIO) -> None:
        self.keep_ratio = _check_keep_ratio(keep_ratio)
        self._by_key: dict[Hashable, PlanarRigid] = {}
        self._latest: PlanarRigid | None = None

    def register(self, key: Hashable, *args: Any, **kwargs: Any) -> PlanarRigid:
        """`register_planar(*args, **kwargs)` continued from this track's prior for `key`; the
        result becomes the track's prior for `key` and for sources it has not registered yet."""
        prior = self._by_key.get(key, self._latest)
        transform = register_planar(*args, prior=prior, keep_ratio=self.keep_ratio, **kwargs)
        self._by_key[key] = self._latest = transform
        return transform


#: Iterations of `local_shift` (hard nearest neighbours from a fit that is already close).
LOCAL_ITERATIONS = 5
#: Fewest valid source tokens within the radius for `local_shift` to move the point (fewer: no shift).
LOCAL_MIN_TOKENS = 3


def local_shift(
    transform: PlanarRigid,
    source_pos: Array,
    source_valid: Array,
    target_pos: Array,
    target_valid: Array,
    point: Array,
    radius: float,
    source_features: Array | None = None,
    target_features: Array | None = None,
    feature_weight: float = DEFAULT_FEATURE_WEIGHT,
    iterations: int = LOCAL_ITERATIONS,
) -> np.ndarray:
    """The x, y shift [2] (metres) that, added after `transform` (one element), carries the source
    tokens within `radius` (x, y) of `point` onto the target cloth.

    Why: one rigid motion fits the whole cloth, and where two lay-outs of a garment differ (a fold
    that settled differently, a sleeve lying another way) it leaves an error that is largest away
    from the bulk of the cloth, where the grasps are: the hem corners, the sleeve tips (offline, a
    12 cm window maps demonstrated grasps closer: docs/registration.md, "Local refinement of a
    mapped grasp"). A few tokens fix a shift, not a turn: the
    refinement is translation only. Each iteration matches every windowed source token to its
    cheapest valid target token (xy distance² plus, with features, `feature_weight` x the squared
    distance of the L2-normalised features, as in `register_planar`) and moves by the mean offset.

    Args:
        transform: a registration of one element (`register_planar`'s, batch size 1).
        source_pos, target_pos: [N, 3] and [M, 3] token positions (x, y used); valid: bool [N], [M].
        point: [3] where the fit matters, in the source frame (the demonstrated grasp).
        radius: the window (metres, > 0), around `point` in the source frame.
        source_features, target_features: optional [N, D], [M, D] (both or neither).
        iterations: matching rounds (>= 1).

    Returns zeros with fewer than `LOCAL_MIN_TOKENS` valid source tokens in the window. Raises
    `RegistrationError` on bad shapes or arguments, `NonFiniteError` on a non-finite valid position.

    Limits: every windowed token counts (no trimming, no bound on the shift), so where the current
    cloth lacks part of the window (occluded, folded away) its tokens match the nearest edge and
    pull the point towards it; a window at an edge with no target tokens can shift it by about
    the window's size. This is the measured version (off by default, not adopted:
    docs/evaluation.md, "Grasp refinement, same checkpoint").
    """
    if not (radius > 0 and math.isfinite(radius)):
        raise RegistrationError(f"local_shift: radius must be a finite distance > 0, got {radius}")
    if iterations < 1:
        raise RegistrationError(f"local_shift: iterations must be >= 1, got {iterations}")
    if transform.rotation.shape[0] != 1:
        raise RegistrationError(
            f"local_shift: needs a one-element transform, got {transform.rotation.shape[0]} elements"
        )

    def one(x: Array) -> torch.Tensor:  # one element as a batch of one
        return (x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x)))[None]

    xs, sv = _cloth("source", one(source_pos), one(source_valid), 1)
    xt, tv = _cloth("target", one(target_pos), one(target_valid), 1)
    centre = _tensor("point", point, (3,)).to(xs.dtype)
    if not torch.isfinite(centre).all():
        raise NonFiniteError("point: not finite")
    window = sv[0] & (torch.linalg.vector_norm(xs[0] - centre[:2], dim=-1) <= radius)
    if int(window.sum()) < LOCAL_MIN_TOKENS:
        return np.zeros(2)
    dtype = torch.float64
    moved = _move(xs.to(dtype), transform.rotation.to(dtype), transform.translation.to(dtype))[0, window]
    targets = xt[0, tv[0]].to(dtype)
    fs, ft = (None if f is None else one(f) for f in (source_features, target_features))
    cost = _feature_cost(fs, ft, 1, xs.shape[1], xt.shape[1], feature_weight, dtype)
    fixed = cost[0][window][:, tv[0]] if cost is not None else torch.zeros(len(moved), len(targets), dtype=dtype)
    shift = torch.zeros(2, dtype=dtype)
    for _ in range(iterations):
        d2 = ((moved[:, None] + shift - targets[None]) ** 2).sum(-1) + fixed
        shift = (targets[d2.argmin(1)] - moved).mean(0)
    return shift.numpy()
