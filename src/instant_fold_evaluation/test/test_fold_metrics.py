"""The paper's closed-loop metrics on hand-made cases: garment frame, events, descriptor,
context classifier, Geom., C-SR@95 envelope, W1, confidence intervals, summary."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from instant_fold_core.fold_record import GraspEpisode, MetricsError, grasp_episodes
from instant_fold_evaluation.events import DESCRIPTOR_DIM, GarmentFrame, descriptor_from_episodes, phases
from instant_fold_evaluation.metrics import (
    ContextClassifier,
    OracleReference,
    RolloutScore,
    mean_ci,
    score_rollout,
    summarize,
    w1,
    w1_over_contexts,
)

# A 0.4 m x 0.6 m shirt lying flat, shoulders at +y, centred at (1, 2): KEYPOINT_NAMES order
# top_left, top_right, bottom_left, bottom_right, left_shoulder, right_shoulder, center.
FLAT = np.array(
    [[0.8, 2.3, 0], [1.2, 2.3, 0], [0.8, 1.7, 0], [1.2, 1.7, 0], [0.8, 2.25, 0], [1.2, 2.25, 0], [1.0, 2.0, 0]]
)


def _rotated(points: np.ndarray, angle: float, shift: np.ndarray) -> np.ndarray:
    """Points [..., 3] rotated by `angle` about the flat garment's centre, then shifted."""
    c, s = np.cos(angle), np.sin(angle)
    out = np.array(points, dtype=np.float64)
    out[..., :2] = (out[..., :2] - FLAT[6, :2]) @ np.array([[c, s], [-s, c]]) + FLAT[6, :2] + shift
    return out


def _trace(closed: dict[int, list[tuple[int, int]]], frames: int = 20) -> np.ndarray:
    """[T, 2, 4]: arm a at x = frame index, y = arm, openness 0 inside its closed intervals."""
    tr = np.zeros((frames, 2, 4))
    tr[:, :, 0] = np.arange(frames)[:, None]
    tr[:, 1, 1] = 1.0
    tr[:, :, 3] = 1.0
    for arm, spans in closed.items():
        for a, b in spans:
            tr[a:b, arm, 3] = 0.0
    return tr


def test_garment_frame_is_centred_scaled_and_follows_the_garment():
    frame = GarmentFrame.from_keypoints(FLAT, 0.5)
    np.testing.assert_allclose(frame.axes, np.eye(2), atol=1e-12)
    np.testing.assert_allclose(frame.to_garment(FLAT[1]), [0.4, 0.6])  # top_right: right and up
    moved = _rotated(FLAT, 1.1, np.array([0.3, -0.2]))
    other = GarmentFrame.from_keypoints(moved, 0.5)
    np.testing.assert_allclose(other.to_garment(moved), frame.to_garment(FLAT), atol=1e-12)


def test_garment_frame_refuses_bad_keypoints():
    with pytest.raises(MetricsError, match="NaN"):
        GarmentFrame.from_keypoints(np.where(np.eye(7, 3) > 0, np.nan, FLAT), 0.5)
    with pytest.raises(MetricsError, match="shape"):
        GarmentFrame.from_keypoints(FLAT[:6], 0.5)
    with pytest.raises(MetricsError, match="positive"):
        GarmentFrame.from_keypoints(FLAT, 0.0)
    with pytest.raises(MetricsError, match="coincide"):
        GarmentFrame.from_keypoints(np.zeros((7, 3)), 0.5)


def test_grasp_episodes_find_each_closing_and_an_unreleased_one():
    eps = grasp_episodes(_trace({0: [(2, 5), (9, 12)], 1: [(3, 20)]}))
    assert [(e.arm, e.grasp_frame, e.release_frame, e.released) for e in eps] == [
        (0, 2, 5, True),
        (1, 3, 19, False),
        (0, 9, 12, True),
    ]
    np.testing.assert_allclose(eps[0].grasp, [2, 0, 0])
    np.testing.assert_allclose(eps[0].release, [5, 0, 0])
    assert grasp_episodes(_trace({})) == []
    with pytest.raises(MetricsError):
        grasp_episodes(np.zeros((5, 3, 4)))


def test_phases_start_when_an_arm_grasps_again():
    eps = grasp_episodes(_trace({0: [(1, 3), (6, 8), (10, 12)], 1: [(2, 4), (11, 13)]}))
    assert [sorted(p) for p in phases(eps)] == [[0, 1], [0], [0, 1]]


def _episode(arm: int, t0: int, t1: int, grasp, release) -> GraspEpisode:
    return GraspEpisode(arm, t0, t1, np.array([*grasp, 0.0]), np.array([*release, 0.0]), True)


def test_descriptor_dimensions_are_order_then_arm_positions_per_phase_then_phase_count():
    frame = GarmentFrame.from_keypoints(FLAT, 0.5)
    # Phase 1: right arm 5 frames (0.5 s at 10 fps) after the left; phase 2: right arm alone.
    eps = [
        _episode(0, 10, 20, (0.8, 2.3), (0.8, 1.7)),
        _episode(1, 15, 20, (1.2, 2.3), (1.2, 1.7)),
        _episode(1, 30, 40, (1.0, 1.7), (1.0, 2.3)),
    ]
    d = descriptor_from_episodes(eps, frame, fps=10.0)
    assert d is not None and d.shape == (DESCRIPTOR_DIM,)
    expected = [0.5, -0.4, 0.6, -0.4, -0.6, 0.4, 0.6, 0.4, -0.6]
    expected += [-1.0, 0, 0, 0, 0, 0.0, -0.6, 0.0, 0.6]
    expected += [2 / 4]
    np.testing.assert_allclose(d, expected, atol=1e-12)
    assert descriptor_from_episodes([], frame, 10.0) is None
    # Order saturates at ORDER_SCALE_S; a lone left arm is +1.
    late = [_episode(0, 0, 5, (1, 2), (1, 2)), _episode(1, 100, 105, (1, 2), (1, 2))]
    assert descriptor_from_episodes(late, frame, 10.0)[0] == 1.0
    assert descriptor_from_episodes(late[:1], frame, 10.0)[0] == 1.0


def test_descriptor_is_invariant_to_where_the_garment_lies():
    frame = GarmentFrame.from_keypoints(FLAT, 0.5)
    eps = [_episode(0, 3, 9, (0.8, 2.3), (0.9, 1.9)), _episode(1, 4, 9, (1.2, 2.3), (1.1, 1.9))]
    angle, shift = -0.7, np.array([0.5, 0.1])
    moved_frame = GarmentFrame.from_keypoints(_rotated(FLAT, angle, shift), 0.5)
    moved = [
        GraspEpisode(
            e.arm,
            e.grasp_frame,
            e.release_frame,
            _rotated(e.grasp, angle, shift),
            _rotated(e.release, angle, shift),
            True,
        )
        for e in eps
    ]
    np.testing.assert_allclose(
        descriptor_from_episodes(moved, moved_frame, 10.0), descriptor_from_episodes(eps, frame, 10.0), atol=1e-12
    )


def test_classifier_votes_three_nearest_and_breaks_ties_by_distance():
    d = np.zeros((6, DESCRIPTOR_DIM))
    d[:3, 0] = [0.0, 0.1, 0.2]
    d[3:, 0] = [1.0, 1.1, 1.2]
    clf = ContextClassifier(d, ["a"] * 3 + ["b"] * 3)
    q = np.zeros(DESCRIPTOR_DIM)
    assert clf.predict(q) == "a"
    q[0] = 1.05
    assert clf.predict(q) == "b"
    assert clf.predict(None) is None
    # 1 vote each for three labels: the nearest voter wins.
    tie = ContextClassifier(d[[0, 3, 5]], ["a", "b", "c"])
    q[0] = 0.9
    assert tie.predict(q) == "b"
    with pytest.raises(MetricsError):
        clf.predict(np.zeros(5))
    with pytest.raises(MetricsError):
        ContextClassifier(d, ["a"])


def _oracle(k: int = 5, spread: float = 0.02, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    base = GarmentFrame.from_keypoints(FLAT, 0.5).to_garment(FLAT)
    uv = base + rng.normal(0, spread, (k, 7, 2))
    return uv, 0.45 + rng.normal(0, 0.01, k)


def test_oracle_reference_normalises_by_the_median_error_and_sits_at_its_envelope():
    uv, fr = _oracle()
    ref = OracleReference.from_runs(uv, fr, [0, 4])
    np.testing.assert_allclose(ref.target, np.median(uv, axis=0))
    err = np.linalg.norm(uv[:, [0, 4]] - ref.target[[0, 4]], axis=-1)
    np.testing.assert_allclose(ref.median_error, np.maximum(np.median(err, axis=0), 0.01))
    # Geom. is the worst normalised target-keypoint error; an error of 3 medians on keypoint 4.
    moved = ref.target.copy()
    moved[4, 0] += 3 * ref.median_error[1]
    moved[2] += 10.0  # not a target keypoint of this context: ignored
    assert ref.geom(moved) == pytest.approx(3.0)
    assert ref.geom(ref.target) == 0.0
    # Quality: fold rate half the oracle's doubles it; the envelope is the oracle's 95th percentile.
    assert ref.quality(ref.target, ref.fold_rate_median / 2) == pytest.approx(2.0)
    q = [ref.quality(u, f) for u, f in zip(uv, fr, strict=True)]
    assert ref.envelope == pytest.approx(np.percentile(q, 95))
    assert sum(q_k <= ref.envelope for q_k in q) == 4  # (K - 1) / K by construction
    assert ref.quality(ref.target, ref.fold_rate_median) <= ref.envelope


def test_geom_floor_keeps_a_perfectly_repeatable_keypoint_finite():
    uv, fr = _oracle(spread=0.0)
    ref = OracleReference.from_runs(uv, fr, [1], geom_floor=0.01)
    assert ref.median_error.tolist() == [0.01]
    moved = ref.target.copy()
    moved[1, 1] += 0.05
    assert ref.geom(moved) == pytest.approx(5.0)


def test_oracle_reference_refuses_too_few_runs_and_bad_values():
    uv, fr = _oracle()
    with pytest.raises(MetricsError, match="K >= 2"):
        OracleReference.from_runs(uv[:1], fr[:1], [0])
    with pytest.raises(MetricsError, match="finite"):
        OracleReference.from_runs(uv, np.full(5, np.nan), [0])
    with pytest.raises(MetricsError, match="indices"):
        OracleReference.from_runs(uv, fr, [7])
    ref = OracleReference.from_runs(uv, fr, [0])
    with pytest.raises(MetricsError):
        ref.geom(np.full((7, 2), np.inf))


def test_score_needs_the_right_context_and_the_envelope_for_success():
    uv, fr = _oracle()
    ref = OracleReference.from_runs(uv, fr, [0, 4])
    d = np.zeros((2, DESCRIPTOR_DIM))
    d[1, 0] = 1.0
    clf = ContextClassifier(d, ["a", "b"], k=1)
    good = score_rollout("g", "a", d[0], ref.target, ref.fold_rate_median, clf, ref)
    assert good.context_correct and good.success and good.predicted == "a"
    wrong = score_rollout("g", "a", d[1], ref.target, ref.fold_rate_median, clf, ref)
    assert wrong.predicted == "b" and not wrong.context_correct and not wrong.success
    flat = score_rollout("g", "a", d[0], ref.target, 0.0, clf, ref)  # right events, nothing folded
    assert flat.context_correct and not flat.success and flat.quality > 100
    none = score_rollout("g", "a", None, ref.target, ref.fold_rate_median, clf, ref)
    assert none.predicted is None and not none.success


def test_w1_matches_scipy_per_coordinate_and_is_zero_for_the_same_samples():
    a, _ = _oracle(seed=1)
    b, _ = _oracle(k=9, seed=2)
    expected = np.mean([stats.wasserstein_distance(a.reshape(5, 14)[:, j], b.reshape(9, 14)[:, j]) for j in range(14)])
    assert w1(a, b) == pytest.approx(expected)
    assert w1(a, a) == 0.0
    assert w1(a + 0.1, a) == pytest.approx(0.1)
    assert w1_over_contexts({"x": a + 0.1, "y": b}, {"x": a, "y": b}) == pytest.approx(0.05)
    with pytest.raises(MetricsError, match="no oracle"):
        w1_over_contexts({"z": a}, {"x": a})


def test_mean_ci_is_the_student_t_half_width():
    v = [1.0, 2.0, 4.0]
    ci = mean_ci(v)
    assert ci["mean"] == pytest.approx(7 / 3) and ci["garments"] == 3
    assert ci["ci95"] == pytest.approx(stats.t.ppf(0.975, 2) * np.std(v, ddof=1) / np.sqrt(3))
    assert mean_ci([5.0]) == {"mean": 5.0, "ci95": 0.0, "garments": 1}


def test_summary_averages_per_garment_first():
    uv = np.zeros((7, 2))

    def s(g: str, ok: bool, geom: float) -> RolloutScore:
        return RolloutScore(g, "c", "c" if ok else None, ok, geom, geom, ok, uv, 0.5)

    # Garment A: 3 rollouts, 1 success; garment B: 1 rollout, 1 success -> (33.3 + 100) / 2.
    scores = [s("A", True, 1.0), s("A", False, 2.0), s("A", False, 3.0), s("B", True, 4.0)]
    out = summarize(scores, {"c": np.zeros((3, 7, 2))})
    assert out["csr95"]["mean"] == pytest.approx((100 / 3 + 100) / 2)
    assert out["ctx_acc"]["garments"] == 2 and out["rollouts"] == 4
    assert out["geom"]["mean"] == pytest.approx((2.0 + 4.0) / 2)
    assert out["w1"] == 0.0
    assert summarize(scores, None)["w1"] is None  # no reference distribution (out-of-sample oracle row)
