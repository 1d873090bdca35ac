"""The paper's closed-loop metrics (section 4.2, appendix "Evaluation Metric Details").

Every rollout is scored against the oracle executions of its own start state (a same-init
family) and the folding context its demonstration shows:

- **Ctx. Acc.**: the rollout's 19-D event descriptor (`events.py`) is classified by a 3-NN vote
  over the oracle descriptors of the family's contexts (`ContextClassifier`); correct when the
  vote is the demonstrated context.
- **Geom.**: the worst target-keypoint error at the final state, each keypoint's error
  normalised by the oracle median error of that keypoint for the same init and context
  (`OracleReference.geom`). Errors are garment-frame distances to the oracle's median final
  position (the target geometry); a median under `geom_floor` garment sizes is floored so that
  a perfectly repeatable keypoint does not make the ratio explode.
- **C-SR@95**: context correct AND fold quality inside the oracle's 95th-percentile envelope.
  The quality is the composite `max(Geom., median oracle fold rate / fold rate)`: geometry that
  is as repeatable as the oracle's and a fold that removed as much footprint; the envelope is the
  95th percentile of the oracle executions' own quality (so the oracle sits at the envelope by
  construction: with K executions, (K - 1) / K of them pass for K < 20).
- **W1**: per context, the Wasserstein-1 distance between the rollouts' and the oracle's
  distributions of each final semantic-geometry coordinate (7 keypoints x uv = 14 one-dimensional
  distributions), averaged over coordinates, then over contexts.
- Aggregation: per-garment means first, then the mean across garments with a 95 % Student-t
  confidence half-width (`mean_ci`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from instant_fold_core.fold_record import MetricsError

from .events import DESCRIPTOR_DIM


class ContextClassifier:
    """k-NN (Euclidean) over the oracle event descriptors of one same-init family.

    Ties between labels are broken by the smaller sum of distances of their voters."""

    def __init__(self, descriptors: np.ndarray, labels: list[str], k: int = 3) -> None:
        d = np.asarray(descriptors, dtype=np.float64)
        if d.ndim != 2 or d.shape[1] != DESCRIPTOR_DIM or len(d) == 0:
            raise MetricsError(f"descriptors: expected [N > 0, {DESCRIPTOR_DIM}], got {d.shape}")
        if len(labels) != len(d):
            raise MetricsError(f"{len(labels)} labels for {len(d)} descriptors")
        if k < 1:
            raise MetricsError(f"k must be at least 1, got {k}")
        self.descriptors, self.labels, self.k = d, list(labels), k

    def predict(self, descriptor: np.ndarray | None) -> str | None:
        """The context voted for `descriptor`; None (no context) for a fold without a grasp."""
        if descriptor is None:
            return None
        q = np.asarray(descriptor, dtype=np.float64)
        if q.shape != (DESCRIPTOR_DIM,) or not np.isfinite(q).all():
            raise MetricsError(f"descriptor: expected {DESCRIPTOR_DIM} finite values, got shape {q.shape}")
        dist = np.linalg.norm(self.descriptors - q, axis=1)
        nearest = np.argsort(dist, kind="stable")[: self.k]
        votes = Counter(self.labels[i] for i in nearest)
        top = max(votes.values())
        tied = [label for label, n in votes.items() if n == top]
        return min(tied, key=lambda label: (sum(dist[i] for i in nearest if self.labels[i] == label), label))


@dataclass(frozen=True)
class OracleReference:
    """The oracle calibration of one (init, context): target geometry, median errors, envelope."""

    target: np.ndarray  # [7, 2] median final garment-frame uv of the oracle executions
    keypoints: tuple[int, ...]  # the context's target keypoints (those its program moves)
    median_error: np.ndarray  # [len(keypoints)] oracle median error per target keypoint (floored)
    fold_rate_median: float
    envelope: float  # 95th percentile of the oracle executions' quality

    @classmethod
    def from_runs(
        cls,
        final_uv: np.ndarray,
        fold_rates: np.ndarray,
        mode_keypoints: list[int] | tuple[int, ...],
        geom_floor: float = 0.01,
        percentile: float = 95.0,
    ) -> OracleReference:
        """Calibrate on K >= 2 oracle executions: final uv [K, 7, 2] and fold rates [K]."""
        uv = np.asarray(final_uv, dtype=np.float64)
        fr = np.asarray(fold_rates, dtype=np.float64)
        if uv.ndim != 3 or uv.shape[1:] != (7, 2) or len(uv) < 2:
            raise MetricsError(f"final_uv: expected [K >= 2, 7, 2] oracle executions, got {uv.shape}")
        if fr.shape != (len(uv),) or not (np.isfinite(uv).all() and np.isfinite(fr).all()):
            raise MetricsError(f"fold_rates: expected {len(uv)} finite values, got shape {fr.shape}")
        kps = tuple(int(k) for k in mode_keypoints)
        if not kps or min(kps) < 0 or max(kps) >= 7:
            raise MetricsError(f"mode_keypoints: expected indices in [0, 7), got {kps}")
        target = np.median(uv, axis=0)
        errors = np.linalg.norm(uv[:, kps] - target[list(kps)], axis=-1)  # [K, n]
        median_error = np.maximum(np.median(errors, axis=0), geom_floor)
        ref = cls(target, kps, median_error, float(np.median(fr)), float("inf"))
        quality = [ref.quality(u, f) for u, f in zip(uv, fr, strict=True)]
        return cls(target, kps, median_error, ref.fold_rate_median, float(np.percentile(quality, percentile)))

    def geom(self, uv: np.ndarray) -> float:
        """Worst normalised target-keypoint error of final garment-frame keypoints [7, 2]."""
        u = np.asarray(uv, dtype=np.float64)
        if u.shape != (7, 2) or not np.isfinite(u).all():
            raise MetricsError(f"final uv: expected finite [7, 2], got shape {u.shape}")
        err = np.linalg.norm(u[list(self.keypoints)] - self.target[list(self.keypoints)], axis=-1)
        return float(np.max(err / self.median_error))

    def quality(self, uv: np.ndarray, fold_rate: float) -> float:
        """Composite fold quality (lower is better): max(Geom., oracle median fold rate / fold rate)."""
        return max(self.geom(uv), self.fold_rate_median / max(float(fold_rate), 1e-3))


@dataclass(frozen=True)
class RolloutScore:
    """One fold scored against one (init, context)."""

    garment: str
    context: str
    predicted: str | None
    context_correct: bool
    geom: float
    quality: float
    success: bool  # C-SR@95: context correct and quality inside the envelope
    final_uv: np.ndarray
    fold_rate: float


def score_rollout(
    garment: str,
    context: str,
    descriptor: np.ndarray | None,
    final_uv: np.ndarray,
    fold_rate: float,
    classifier: ContextClassifier,
    reference: OracleReference,
) -> RolloutScore:
    """Score a fold (its descriptor, final uv [7, 2] and fold rate) against `context`."""
    predicted = classifier.predict(descriptor)
    correct = predicted == context
    quality = reference.quality(final_uv, fold_rate)
    return RolloutScore(
        garment,
        context,
        predicted,
        correct,
        reference.geom(final_uv),
        quality,
        bool(correct and quality <= reference.envelope),
        np.asarray(final_uv, dtype=np.float64),
        float(fold_rate),
    )


def w1(rollout_uv: np.ndarray, oracle_uv: np.ndarray) -> float:
    """Mean over the 14 final-geometry coordinates of the 1-D Wasserstein-1 distance between the
    rollouts' [N, 7, 2] and the oracle's [M, 7, 2] empirical distributions."""
    a = np.asarray(rollout_uv, dtype=np.float64).reshape(len(rollout_uv), -1)
    b = np.asarray(oracle_uv, dtype=np.float64).reshape(len(oracle_uv), -1)
    if len(a) == 0 or len(b) == 0 or a.shape[1] != 14 or b.shape[1] != 14:
        raise MetricsError(f"w1: expected non-empty [N, 7, 2] sets, got {a.shape} and {b.shape}")
    return float(np.mean([stats.wasserstein_distance(a[:, j], b[:, j]) for j in range(14)]))


def w1_over_contexts(rollout_uv: dict[str, np.ndarray], oracle_uv: dict[str, np.ndarray]) -> float:
    """W1 per context (rollouts pooled over the starts of that context), averaged over contexts."""
    missing = sorted(set(rollout_uv) - set(oracle_uv))
    if missing:
        raise MetricsError(f"w1: no oracle executions of {missing}")
    if not rollout_uv:
        raise MetricsError("w1: no rollouts")
    return float(np.mean([w1(uv, oracle_uv[c]) for c, uv in rollout_uv.items()]))


def mean_ci(values: list[float] | np.ndarray, level: float = 0.95) -> dict[str, float]:
    """Mean and Student-t confidence half-width across garments (0 for one garment)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        raise MetricsError("mean_ci: no values")
    half = 0.0
    if v.size > 1:
        half = float(stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))
    return {"mean": float(v.mean()), "ci95": half, "garments": int(v.size)}


def summarize(scores: list[RolloutScore], oracle_uv: dict[str, np.ndarray] | None) -> dict[str, Any]:
    """Ctx. Acc. and C-SR@95 (%), Geom. (per-garment means, then mean +- 95 % CI across
    garments), W1 (pooled per context; None without `oracle_uv`: the out-of-sample oracle row,
    whose folds are the reference distribution itself) and the rollout count."""
    if not scores:
        raise MetricsError("summarize: no scores")
    by_garment: dict[str, list[RolloutScore]] = {}
    for s in scores:
        by_garment.setdefault(s.garment, []).append(s)

    def across(value) -> dict[str, float]:
        return mean_ci([float(np.mean([value(s) for s in group])) for group in by_garment.values()])

    by_context: dict[str, list[np.ndarray]] = {}
    for s in scores:
        by_context.setdefault(s.context, []).append(s.final_uv)
    pooled = {c: np.stack(v) for c, v in by_context.items()}
    return {
        "ctx_acc": across(lambda s: 100.0 * s.context_correct),
        "csr95": across(lambda s: 100.0 * s.success),
        "geom": across(lambda s: s.geom),
        "w1": None if oracle_uv is None else w1_over_contexts(pooled, oracle_uv),
        "rollouts": len(scores),
    }
