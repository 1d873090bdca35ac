"""Target following of the trajectory: known answers (a straight follower -> its own slope, a
trajectory that ignores its target -> 0) and a tiny anchored policy through the deployed path."""

from __future__ import annotations

import numpy as np
import pytest

from instant_fold_evaluation.target_following import (
    MIN_LEAD_FRAMES,
    NotAnchoredError,
    approach_probes,
    policy_chunk_end,
    target_following,
    target_slopes,
)
from instant_fold_learning.policy.inference import PolicyRunner
from instant_fold_learning.policy.progress import episode_event_counts
from instant_fold_learning.testing import ANCHORED, untrained_policy

HORIZON = 8


def test_probes_are_approach_frames_of_a_moving_arm(episodes):
    state = episodes[0].arm_state
    probes = approach_probes(state, HORIZON, 4)
    assert probes and len(probes) <= 8
    for arm, frame, grasp, progress, distance in probes:
        ahead = np.flatnonzero(state[frame:, arm, 3] < 0.5)
        assert state[frame, arm, 3] >= 0.5 and ahead[0] >= MIN_LEAD_FRAMES
        np.testing.assert_allclose(grasp, state[frame + ahead[0], arm, :3], atol=1e-6)
        assert progress >= 0.02 and distance > 0
    still = state.copy()
    still[:, :, :3] = still[0, :, :3]  # arms that never move do not approach anything
    assert approach_probes(still, HORIZON, 4) == []


def test_a_straight_follower_reads_its_own_slope_and_an_ignoring_trajectory_zero(episodes):
    e = episodes[0]
    probes = approach_probes(e.arm_state, HORIZON, 3)

    def ignores(pos, feat, valid, arm, counts, targets, held):
        return arm[..., :3] + 0.05

    def reaches(pos, feat, valid, arm, counts, targets, held):
        return np.where(held[..., None], targets, arm[..., :3])

    slopes, follower = target_slopes(ignores, e, HORIZON, (0.03, 0.06), 3)
    assert slopes.shape == (len(probes), 8) and follower.shape == (len(probes),)
    np.testing.assert_allclose(slopes, 0.0)
    np.testing.assert_allclose(target_slopes(reaches, e, HORIZON, (0.03,), 3)[0], 1.0, rtol=1e-5)
    assert ((follower > 0) & (follower <= 1)).all()


def test_the_policy_path_holds_the_probed_target_with_one_noise(episodes):
    # A policy that reads its progress through the fold gets each probe's event counts.
    runner = PolicyRunner(untrained_policy(episodes, **ANCHORED, event_progress=True)[0])
    e, demo = episodes[0], episodes[2]
    end = policy_chunk_end(runner, demo, seed=3)
    probes = approach_probes(e.arm_state, runner.cfg.horizon, 2)
    frames = [f for _, f, *_ in probes]
    targets = np.zeros((len(probes), 2, 3), np.float32)
    held = np.zeros((len(probes), 2), bool)
    counts = episode_event_counts(e.arm_state)[frames]
    args = (e.cloth_positions[frames], e.cloth_features[frames], e.cloth_valid[frames], e.arm_state[frames], counts)
    first = end(*args, targets, held)
    np.testing.assert_array_equal(first, end(*args, targets, held))  # same seed and batch: same chunk
    held[:, 0] = True
    assert not np.allclose(end(*args, targets + 0.3, held)[:, 0], first[:, 0])  # the held target reaches the chunk
    result = target_following(runner, [(e, demo)], 3, (0.03, 0.06), 2)
    assert result["probes"] == len(probes) and len(result["by_shift"]) == 8
    assert np.isfinite(result["slope_median"]) and 0 < result["follower_slope_median"] <= 1


def test_a_policy_without_targets_is_refused_by_its_own_error(episodes):
    with pytest.raises(NotAnchoredError, match="takes no target"):
        policy_chunk_end(PolicyRunner(untrained_policy(episodes)[0]), episodes[2], 0)
