"""Arm sensitivity of the keypose: known answers (keypose = arm + const -> 1, fixed keypose -> 0)
and a tiny randomly initialised, calibrated policy through the deployed sampling path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from instant_fold_evaluation import arm_sensitivity as sensitivity
from instant_fold_evaluation.arm_sensitivity import (
    NoKeyposeError,
    arm_sensitivity,
    keypose_slopes,
    policy_keypose,
    probe_frames,
    shift_variants,
)
from instant_fold_evaluation.offline import first_close_frames
from instant_fold_learning.policy.data import PolicyDataError
from instant_fold_learning.policy.inference import PolicyRunner, SampledActions
from instant_fold_learning.policy.progress import episode_event_counts
from instant_fold_learning.testing import untrained_policy


def _runner(episodes, **model) -> PolicyRunner:
    """Random weights, normalisers calibrated on the episodes (no training)."""
    return PolicyRunner(untrained_policy(episodes, **model)[0])


@pytest.fixture(scope="module")
def runner(episodes) -> PolicyRunner:
    return _runner(episodes)


def test_probes_are_frames_before_each_arms_first_grasp(episodes):
    e = episodes[0]
    closes = first_close_frames(e.arm_state)
    probes = probe_frames(e.arm_state, 4)
    for arm in range(2):
        frames = [f for a, f in probes if a == arm]
        assert 0 < len(frames) <= 4 and frames == sorted(set(frames))
        assert frames[0] == 0 and frames[-1] == closes[arm] - 1
    state = e.arm_state.copy()
    state[:, 1, 3] = 0.0  # right arm closed from the start: no frame before its first grasp
    assert {a for a, _ in probe_frames(state, 4)} == {0}
    assert probe_frames(e.arm_state, 0) == []


def test_a_keypose_that_moves_with_the_arm_has_slope_one_and_a_fixed_one_zero(episodes):
    const = np.array([0.1, -0.2, 0.05, 0.0])

    def follows(pos, feat, valid, arm, counts):
        return arm + const

    def fixed(pos, feat, valid, arm, counts):
        return np.broadcast_to(const, arm.shape).copy()

    def half(pos, feat, valid, arm, counts):
        return np.concatenate([0.5 * arm[..., :3], arm[..., 3:]], -1)

    e = episodes[0]
    n_probes = len(probe_frames(e.arm_state, 3))
    ones = keypose_slopes(follows, e, (0.03, 0.06), 3)
    assert ones.shape == (n_probes, 8)
    np.testing.assert_allclose(ones, 1.0, rtol=1e-5)
    np.testing.assert_allclose(keypose_slopes(fixed, e, (0.03,), 3), 0.0)
    np.testing.assert_allclose(keypose_slopes(half, e, (0.03,), 3), 0.5, rtol=1e-5)
    assert [f"{'xy'[a]}{s:+.2f}" for a, s in shift_variants((0.06, 0.03))] == [
        "x-0.03", "x+0.03", "x-0.06", "x+0.06", "y-0.03", "y+0.03", "y-0.06", "y+0.06",
    ]  # fmt: skip
    with pytest.raises(PolicyDataError, match="positive"):
        shift_variants((0.0,))


def test_only_the_shifted_arms_keypose_is_measured(episodes):
    """The other arm's keypose moving with the shifted arm is cross-talk, not this arm's slope."""

    def crossed(pos, feat, valid, arm, counts):
        return arm[:, ::-1] + 0.0  # each arm's keypose is the other arm's state

    np.testing.assert_allclose(keypose_slopes(crossed, episodes[0], (0.03,), 3), 0.0)


def test_the_policy_path_uses_one_noise_for_every_shift(episodes, runner):
    e, demo = episodes[0], episodes[2]
    keypose = policy_keypose(runner, demo, seed=3)
    probes = probe_frames(e.arm_state, 2)
    frames = [f for _, f in probes]
    counts = episode_event_counts(e.arm_state)[frames]
    args = (e.cloth_positions[frames], e.cloth_features[frames], e.cloth_valid[frames], e.arm_state[frames], counts)
    first, again = keypose(*args), keypose(*args)
    assert first.shape == (len(probes), 2, 4)
    np.testing.assert_array_equal(first, again)  # same seed, same batch: same noise, same keypose
    result = arm_sensitivity(runner, [(e, demo), (episodes[1], episodes[3])], seed=3, frames_per_arm=2)
    assert result["probes"] == len(probes) + len(probe_frames(episodes[1].arm_state, 2))
    assert result["shifts_m"] == [0.03, 0.06] and len(result["by_shift"]) == 8
    assert np.isfinite(result["slope_median"]) and result["slope_mean"] >= 0.0
    assert arm_sensitivity(runner, [(e, demo)], seed=3, frames_per_arm=2)["slope_median"] == pytest.approx(
        np.median(keypose_slopes(keypose, e, frames_per_arm=2))
    )


def test_a_keypose_offset_that_ignores_the_arm_reads_one_through_absolute_actions(episodes, runner, monkeypatch):
    """A network whose normalised keypose output is constant (zero) predicts keypose = arm + a fixed
    offset once `absolute_actions` adds the arm state: slope 1, through the real wiring."""

    def constant_offset(policy, obs, context, generator=None):
        b, h = obs.arm_state.shape[0], policy.cfg.horizon
        zeros = torch.zeros
        return SampledActions(zeros(b, h, 2, 3), zeros(b, h, 2), zeros(b, 2, 3), zeros(b, 2))

    monkeypatch.setattr(sensitivity, "sample_cached", constant_offset)
    result = arm_sensitivity(runner, [(episodes[0], episodes[2])], frames_per_arm=2)
    assert result["slope_median"] == pytest.approx(1.0, rel=1e-4)
    assert result["slope_mean"] == pytest.approx(1.0, rel=1e-4)


def test_a_language_policy_is_probed_with_its_instruction(episodes):
    runner = _runner(episodes, conditioning="language")
    result = arm_sensitivity(runner, [(episodes[0], episodes[2])], frames_per_arm=2)
    assert result["probes"] > 0 and np.isfinite(result["slope_mean"])


def test_a_policy_without_a_keypose_is_refused_by_its_own_error(episodes):
    """The offline evaluator reports `skipped` for it and keeps its other numbers."""
    runner = _runner(episodes, use_keypose_aux=False)
    with pytest.raises(NoKeyposeError, match="no keypose"):
        arm_sensitivity(runner, [(episodes[0], episodes[2])], frames_per_arm=1)
