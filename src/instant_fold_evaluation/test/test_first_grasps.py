"""Grasps and releases and their errors against the oracle's (instant_fold_evaluation.grasps):
the first grasps, then every event."""

from __future__ import annotations

import json

import numpy as np
import pytest

from instant_fold_core.fold_record import GraspEpisode, MetricsError
from instant_fold_evaluation.grasps import (
    EventError,
    EventReference,
    GraspReference,
    arm_events,
    first_grasps,
    summarize_events,
    summarize_first_grasps,
)


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
        arm_events([_episode(0, 1, p)] + ([_episode(1, 2, (5, 5, 0))] if i < 2 else [])) for i, p in enumerate(left)
    ]
    ref = EventReference.from_runs(runs).first_grasps()
    np.testing.assert_allclose(ref.position[0], [0, 0, 0], atol=1e-12)
    assert ref.expected == (True, False)
    with pytest.raises(MetricsError, match="K > 0"):
        EventReference.from_runs([])
    with pytest.raises(MetricsError, match=r"\[2, 2, n, 3\]"):
        EventReference.from_runs([np.zeros((2, 3))])


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


def _fold(shift: tuple[float, float] = (0.0, 0.0), left_releases: bool = True) -> list[GraspEpisode]:
    """A two-arm fold: each arm grasps and releases twice; `shift` moves the left arm's second
    release in xy; without `left_releases` the left arm's second episode never opens."""
    out = []
    for k in range(2):
        for arm in range(2):
            g = np.array([arm - 0.5, 0.1 * k, 0.0])
            r = g + np.array([0.0, 0.5, 0.1])
            if (arm, k) == (0, 1):
                r = r + np.array([*shift, 0.0])
            released = left_releases or (arm, k) != (0, 1)
            out.append(GraspEpisode(arm, 100 * k + arm, 100 * k + 50, g, r, released))
    return out


def _oracle(k: int = 5) -> EventReference:
    """K executions scattered +-1 cm in x around `_fold()`: their median is `_fold()`'s events."""
    runs = []
    for i in range(k):
        d = np.array([0.01 * (i - k // 2), 0.0, 0.0])
        runs.append(
            arm_events(
                [GraspEpisode(e.arm, e.grasp_frame, e.release_frame, e.grasp + d, e.release + d, True) for e in _fold()]
            )
        )
    return EventReference.from_runs(runs)


def test_arm_events_number_each_arms_grasps_and_releases_in_time_order():
    events = arm_events(_fold(left_releases=False))
    assert events.shape == (2, 2, 2, 3)
    np.testing.assert_array_equal(events[0, 1, 1], [0.5, 0.1, 0.0])  # right arm's second grasp
    np.testing.assert_allclose(events[1, 1, 0], [0.5, 0.5, 0.1])  # right arm's first release
    assert np.isnan(events[1, 0, 1]).all()  # the left arm never let go the second time
    np.testing.assert_array_equal(first_grasps(_fold()), events[0, :, 0])
    assert arm_events([]).shape == (2, 2, 0, 3)


def test_a_fold_identical_to_the_oracles_median_has_no_event_error():
    err = _oracle().error(arm_events(_fold()), scale=0.5)
    assert [m.label for m in err.matches] == ["grasp 1"] * 2 + ["release 1"] * 2 + ["grasp 2"] * 2 + ["release 2"] * 2
    assert all(m.expected and m.performed and m.xy == pytest.approx(0.0, abs=1e-12) for m in err.matches)
    summary = summarize_events([err])
    assert list(summary) == ["grasp 1", "release 1", "grasp 2", "release 2"]
    assert summary["release 2"] == {
        "expected": 2,
        "measured": 2,
        "missed": 0,
        "xy_m": {"mean": pytest.approx(0.0, abs=1e-12), "median": pytest.approx(0.0, abs=1e-12)},
        "within_5cm": 1.0,
        "extra": 0,
    }


def test_a_shifted_release_is_the_shift_times_the_scale_and_only_there():
    err = _oracle().error(arm_events(_fold(shift=(0.06, 0.08))), scale=0.5)
    off = [m for m in err.matches if m.xy is not None and m.xy > 1e-9]
    assert [(m.label, m.arm) for m in off] == [("release 2", 0)] and off[0].xy == pytest.approx(0.05)
    s = summarize_events([err])["release 2"]
    assert s["xy_m"]["mean"] == pytest.approx(0.025) and s["within_5cm"] == 1.0  # 5 cm is within
    assert summarize_events([_oracle().error(arm_events(_fold(shift=(0.2, 0.0))))])["release 2"]["within_5cm"] == 0.5


def test_an_event_the_fold_skips_is_missed_and_one_it_adds_is_extra():
    ref = _oracle()
    missed = ref.error(arm_events(_fold(left_releases=False)))
    (m,) = [m for m in missed.matches if not m.performed]
    assert (m.label, m.arm, m.expected, m.xy) == ("release 2", 0, True, None)
    one_episode = ref.error(arm_events(_fold()[:2]))  # only the first grasp and release of each arm
    extra = [*_fold(), GraspEpisode(1, 300, 350, np.zeros(3), np.ones(3), True)]
    s = summarize_events([missed, one_episode, ref.error(arm_events(extra))])
    assert (s["release 2"]["expected"], s["release 2"]["missed"], s["release 2"]["within_5cm"]) == (6, 3, 0.5)
    assert (s["grasp 2"]["missed"], s["grasp 2"]["extra"]) == (2, 0)
    # Events beyond every reference pool under "later"; one in a numbered slot counts there.
    assert s["later"] == {
        "expected": 0, "measured": 0, "missed": 0, "xy_m": None, "within_5cm": None, "extra": 2,
    }  # fmt: skip
    one_armed = EventReference.from_runs([arm_events([e for e in _fold() if (e.arm, e.grasp_frame) != (1, 101)])])
    s = summarize_events([one_armed.error(arm_events(_fold()))])
    assert (s["grasp 2"]["expected"], s["grasp 2"]["extra"], s["release 2"]["extra"]) == (1, 1, 1)
    assert list(s) == ["grasp 1", "release 1", "grasp 2", "release 2"]
    assert missed.to_json()[-2] == {"event": "release 2", "arm": 0, "expected": True, "performed": False, "xy_m": None}
    assert EventError.from_json(json.loads(json.dumps(missed.to_json()))) == missed


def test_the_oracle_performs_an_event_only_when_most_executions_do():
    """Two of five executions grasp a third time with the right arm: no reference for it."""
    third = GraspEpisode(1, 300, 350, np.zeros(3), np.ones(3), True)
    runs = [arm_events(_fold() + ([third] if i < 2 else [])) for i in range(5)]
    ref = EventReference.from_runs(runs)
    assert ref.position.shape == (2, 2, 3, 3) and np.isnan(ref.position[:, :, 2]).all()
    assert not any(m.expected for m in ref.error(arm_events([*_fold(), third])).matches if m.index == 2)
