"""First grasps and their error against the oracle's (instant_fold_core.evaluation.grasps)."""

from __future__ import annotations

import numpy as np
import pytest

from instant_fold_core.evaluation.events import GraspEpisode, MetricsError
from instant_fold_core.evaluation.grasps import GraspReference, first_grasps, summarize_first_grasps


def _episode(arm: int, frame: int, at: tuple[float, float, float]) -> GraspEpisode:
    p = np.array(at, dtype=np.float64)
    return GraspEpisode(arm, frame, frame + 5, p, p + 0.1, True)


def test_first_grasps_take_each_arms_earliest_grasp():
    episodes = [_episode(0, 30, (3, 0, 0)), _episode(0, 10, (1, 0, 0)), _episode(1, 20, (2, 0, 0))]
    np.testing.assert_array_equal(first_grasps(episodes), [[1, 0, 0], [2, 0, 0]])
    only_left = first_grasps([_episode(0, 5, (1, 2, 3))])
    assert np.isnan(only_left[1]).all() and only_left[0].tolist() == [1, 2, 3]
    assert np.isnan(first_grasps([])).all()


def test_the_reference_is_the_median_and_ignores_an_arm_most_executions_do_not_use():
    # The left arm: four executions near (0, 0), one 1 m off (it went elsewhere first): the
    # median stays at the cluster, a mean would move 20 cm. The right arm grasps in 2 of 5.
    left = [(0.01, 0, 0), (-0.01, 0, 0), (0, 0.01, 0), (0, -0.01, 0), (1.0, 0, 0)]
    runs = [
        first_grasps([_episode(0, 1, p)] + ([_episode(1, 2, (5, 5, 0))] if i < 2 else [])) for i, p in enumerate(left)
    ]
    ref = GraspReference.from_runs(runs)
    np.testing.assert_allclose(ref.position[0], [0, 0, 0], atol=1e-12)
    assert ref.expected == (True, False)
    with pytest.raises(MetricsError, match="K > 0"):
        GraspReference.from_runs([])


def test_error_is_xy_and_3d_distance_scaled_and_none_where_not_measurable():
    ref = GraspReference(np.array([[0.0, 0.0, 0.0], [np.nan] * 3]))
    fold = np.array([[0.3, 0.4, 1.2], [1.0, 1.0, 1.0]])
    e = ref.error(fold, scale=0.5)
    assert e.xy[0] == pytest.approx(0.25) and e.xyz[0] == pytest.approx(0.65)
    assert e.xy[1] is None and e.expected == (True, False) and e.grasped == (True, True)
    missed = ref.error(np.full((2, 3), np.nan))
    assert missed.xy == (None, None) and missed.grasped == (False, False)
    assert e.to_json() == {
        "expected": [True, False],
        "grasped": [True, True],
        "xy_m": [e.xy[0], None],
        "xyz_m": [e.xyz[0], None],
    }


def test_summary_pools_expected_arms_and_counts_a_miss_as_not_within():
    ref = GraspReference(np.zeros((2, 3)))
    near = ref.error(np.array([[0.03, 0, 0], [0.0, 0.04, 0.3]]))
    far = ref.error(np.array([[0.2, 0, 0], [np.nan] * 3]))
    s = summarize_first_grasps([near, far])
    assert (s["arms"], s["measured"], s["missed"]) == (4, 3, 1)
    assert s["xy_m"]["mean"] == pytest.approx((0.03 + 0.04 + 0.2) / 3)
    assert s["xy_m"]["median"] == pytest.approx(0.04)
    assert s["xyz_m"]["median"] == pytest.approx(0.2)
    assert s["within_5cm"] == pytest.approx(2 / 4)
    nothing = summarize_first_grasps([GraspReference(np.full((2, 3), np.nan)).error(np.zeros((2, 3)))])
    assert nothing == {"arms": 0, "measured": 0, "missed": 0, "xy_m": None, "xyz_m": None, "within_5cm": None}
