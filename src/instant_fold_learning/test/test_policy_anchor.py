"""The cloth-anchored head: targets read from the cloth, its losses, next-event targets, drift recovery."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from instant_fold_core.dataset.keyframes import arm_events
from instant_fold_core.errors import ConfigError
from instant_fold_learning.policy.anchor import AnchorOutput, anchor_losses, windowed_mean
from instant_fold_learning.policy.configuration import preset
from instant_fold_learning.policy.data import ObservationTokens, collate, event_targets
from instant_fold_learning.policy.dataset import PolicyDataset, approach_arms, retarget_recovery
from instant_fold_learning.policy.decoder import TargetCondition
from instant_fold_learning.policy.inference import PolicyInputError, PolicyRunner, absolute_actions, sample_cached
from instant_fold_learning.policy.modeling import InstantFoldPolicy
from instant_fold_learning.policy.synthetic import MODES, synthetic_episodes
from instant_fold_learning.policy.training import approaching_arms, shift_teacher_targets
from instant_fold_learning.testing import ANCHORED


@pytest.fixture(scope="module")
def episodes():
    cfg = preset("cpu-small").model
    return synthetic_episodes(1, tuple(MODES)[:2], 2, cfg.cloth_feature_dim, cfg.num_cloth_tokens)


def anchored_policy(episodes, seed: int = 0, **train):
    cfg = preset("cpu-small")
    cfg.model = dataclasses.replace(cfg.model, **ANCHORED).validate()
    cfg.train = dataclasses.replace(cfg.train, **train).validate()
    torch.manual_seed(seed)
    policy = InstantFoldPolicy(cfg.model)
    dataset = PolicyDataset(episodes, cfg.model.horizon, cfg.train)
    dataset.calibrate(policy.normalizers)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # random weights everywhere, so no block is an identity
        for p in policy.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    return cfg, policy.eval(), dataset


def batch_of(dataset, n: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    return collate([dataset.sample(int(i), rng, augment=False) for i in rng.integers(len(dataset), size=n)])


def test_target_stays_on_the_cloth_wherever_the_arm_is(episodes):
    """The anchored grasp/place target is a cloth point (a mean of tokens within the window of the
    chosen one) plus the bounded offset: moving the arm by a metre cannot carry it off the cloth."""
    cfg, policy, dataset = anchored_policy(episodes)
    batch = batch_of(dataset)
    m = cfg.model
    reach = m.anchor_window_m + float(np.linalg.norm([m.anchor_offset_xy_m, m.anchor_offset_xy_m, m.anchor_offset_z_m]))
    context = policy.encode_context(batch.demo)
    for shift in (0.0, 1.0, -1.0):
        state = batch.obs.arm_state.clone()
        state[..., :2] += shift
        obs = dataclasses.replace(batch.obs, arm_state=state)
        with torch.no_grad():
            event = policy.prepare_scene(obs, context).anchor.position
        gap = torch.cdist(event, obs.cloth_positions).min(-1).values
        assert float(gap.max()) <= reach + 1e-5
    # Control: the flow head's keypose is an offset from the arm, so the same shift moves it off.
    flow = InstantFoldPolicy(preset("cpu-small").model)
    flow.normalizers = policy.normalizers
    state = batch.obs.arm_state.clone()
    state[..., :2] += 1.0
    obs = dataclasses.replace(batch.obs, arm_state=state)
    with torch.no_grad():
        _, _, keypose = absolute_actions(flow.eval(), sample_cached(flow, obs, flow.encode_context(batch.demo)), state)
    assert float(torch.cdist(keypose[..., :3], obs.cloth_positions).min(-1).values.min()) > reach


def test_windowed_mean_ignores_a_competing_far_candidate():
    positions = torch.tensor([[[0.0, 0.0, 1.0], [0.01, 0.0, 1.0], [0.5, 0.0, 1.0]]])
    logits = torch.tensor([[[2.0, 2.0, 1.9], [-1.0, -1.0, 3.0]]])
    point = windowed_mean(logits, positions, 0.04)
    torch.testing.assert_close(point[0, 0], torch.tensor([0.005, 0.0, 1.0]))  # not pulled to 0.5
    torch.testing.assert_close(point[0, 1, 0], torch.tensor(0.5))


def test_anchor_losses_match_their_definition():
    g = torch.Generator().manual_seed(0)
    b, n = 3, 5
    cloth = torch.rand(b, n, 3, generator=g)
    valid_tokens = torch.ones(b, n, dtype=torch.bool)
    valid_tokens[0, 2] = False
    logits = torch.randn(b, 2, n, generator=g).masked_fill(~valid_tokens[:, None], float("-inf"))
    out = AnchorOutput(
        logits,
        torch.rand(b, 2, 3, generator=g),
        torch.randn(b, 2, generator=g),
        torch.zeros(b, 2),
        torch.rand(b, 2, 3, generator=g),
    )
    target = cloth[:, [1, 3]] + torch.tensor([0.0, 0.0, -0.2])  # above tokens 1 and 3
    target[0, 0] = cloth[0, 2]  # on an invalid token: the nearest valid one is the label
    openness = torch.tensor([[0.0, 1.0]] * b)
    arms = torch.tensor([[True, False], [True, True], [False, True]])
    losses = anchor_losses(out, cloth, valid_tokens, target, openness, arms, scale_m=0.05)
    xy = torch.cdist(target[..., :2], cloth[..., :2]).masked_fill(~valid_tokens[:, None], float("inf"))
    labels = xy.argmin(-1)
    assert int(labels[0, 0]) != 2
    ce = [F.cross_entropy(logits[i, a][None], labels[i, a][None]) for i in range(b) for a in range(2) if arms[i, a]]
    assert float(losses["anchor_pointer"]) == pytest.approx(float(torch.stack(ce).mean()), rel=1e-5)
    pos = [
        F.smooth_l1_loss(out.position[i, a] / 0.05, target[i, a] / 0.05, reduction="sum")
        for i in range(b)
        for a in range(2)
        if arms[i, a]
    ]
    assert float(losses["anchor_position"]) == pytest.approx(float(torch.stack(pos).mean()), rel=1e-5)
    home = [
        F.smooth_l1_loss(out.home[i, a] / 0.05, target[i, a] / 0.05, reduction="sum")
        for i in range(b)
        for a in range(2)
        if not arms[i, a]
    ]
    assert float(losses["anchor_home"]) == pytest.approx(float(torch.stack(home).mean()), rel=1e-5)
    none = anchor_losses(out, cloth, valid_tokens, target, openness, torch.zeros(b, 2, dtype=torch.bool))
    assert [k for k, v in none.items() if float(v) != 0.0] == ["anchor_home"]


def test_event_targets_name_each_arms_next_grasp_or_release():
    state = np.zeros((10, 2, 4), np.float32)
    state[:, :, 3] = 1.0
    state[:, 0, :3] = np.arange(10)[:, None]  # the left arm's position = its frame index
    state[:, 1, :3] = -np.arange(10)[:, None]
    state[3:7, 0, 3] = 0.0  # left: grasp at 3, release at 7
    state[5:, 1, 3] = 0.0  # right: grasp at 5, never released
    events = arm_events(state)
    first = event_targets(state, events, 0)
    np.testing.assert_array_equal(first.position[:, 0], [3.0, -5.0])
    np.testing.assert_array_equal(first.openness, [0.0, 0.0])
    after = event_targets(state, events, 5)  # the grasp frame itself is behind: the release is next
    assert after.valid.tolist() == [True, False]
    assert after.position[0, 0] == 7.0 and after.openness[0] == 1.0
    assert after.position[1, 0] == -9.0  # no event left: the end pose (home)


def test_drift_recovery_moves_straight_to_the_true_grasp(episodes):
    cfg, _, dataset = anchored_policy(episodes, recovery_mode="to_target", recovery_drift_m=0.15)
    checked = 0
    for ep_idx, episode in enumerate(dataset.episodes):
        events = dataset.arm_events[ep_idx]
        for t in range(0, episode.num_frames, 5):
            event = event_targets(episode.arm_state, events, t)
            arms = approach_arms(episode, t, cfg.model.horizon, event)
            if not arms.any():
                continue
            rng = np.random.default_rng(t)
            expert = episode.arm_state[t].copy()
            from instant_fold_learning.policy.data import chunk_targets

            delta, _, kp_delta, _ = chunk_targets(episode, t, cfg.model.horizon)
            state, traj, kp = retarget_recovery(
                episode, t, cfg.model.horizon, rng, expert, delta, kp_delta, event, arms, cfg.train
            )
            for a in range(2):
                if not arms[a]:
                    np.testing.assert_allclose(traj[:, a], delta[:, a])
                    continue
                moved = state[a, :3] - expert[a, :3]
                assert np.linalg.norm(moved[:2]) <= 0.15 + 1e-6
                path = state[a, :3] + np.cumsum(traj[:, a], 0)
                before = np.linalg.norm(event.position[a] - state[a, :3])
                after = np.linalg.norm(event.position[a] - path[-1])
                assert after < before or before < 1e-6  # closer to the true grasp, never past it
                direction = (event.position[a] - state[a, :3]) / max(before, 1e-9)
                steps = traj[:, a] / np.maximum(np.linalg.norm(traj[:, a], axis=-1, keepdims=True), 1e-12)
                assert np.allclose(steps[np.linalg.norm(traj[:, a], axis=-1) > 1e-9], direction, atol=1e-4)
            # The keypose keeps its absolute position.
            np.testing.assert_allclose(state[:, :3] + kp, expert[:, :3] + kp_delta, atol=1e-5)
            checked += 1
    assert checked > 0


def test_shifted_teacher_targets_relabel_straight_moves_to_the_moved_target(episodes):
    """`anchor_teacher_shift_m`: only approaching arms of teacher-forced samples get a moved
    condition (within the disc), and their chunk goes straight to it at the expert's pace or the
    minimum speed; every other arm and sample, and the anchored head's labels, stay as they were."""
    cfg, _, dataset = anchored_policy(episodes, anchor_teacher_shift_m=0.1)
    batch = batch_of(dataset, n=48, seed=3)
    target, state = batch.target, batch.obs.arm_state
    forced = torch.arange(48) % 2 == 0
    condition = TargetCondition(target.event_position.clone(), target.event_valid, forced)
    shifted, relabelled = shift_teacher_targets(target, state, condition, cfg.train, torch.Generator().manual_seed(0))
    arms = approaching_arms(target, state) & forced[:, None]
    assert arms.sum() >= 4 and (approaching_arms(target, state) & ~forced[:, None]).any()
    b, a = arms.nonzero()[0].tolist()
    still = target.traj_delta.clone()
    still[b, :, a] = 0.0  # the same arm, waiting for its turn: not approaching, never moved
    assert not approaching_arms(dataclasses.replace(target, traj_delta=still), state)[b, a]
    moved = (shifted.position - condition.position).norm(dim=-1)
    assert (moved[arms] > 0).all() and (moved[arms] <= 0.1 + 1e-6).all() and (moved[~arms] == 0).all()
    assert torch.equal(shifted.position[..., 2], condition.position[..., 2])  # in the image plane
    kept = ~arms[:, None, :, None].expand_as(target.traj_delta)
    assert torch.equal(relabelled.traj_delta[kept], target.traj_delta[kept])
    for b, a in arms.nonzero().tolist():
        path = state[b, a, :3] + relabelled.traj_delta[b, :, a].cumsum(0)
        direction = shifted.position[b, a] - state[b, a, :3]
        steps = relabelled.traj_delta[b, :, a]
        lengths = steps.norm(dim=-1)
        pace = max(float(target.traj_delta[b, :, a].norm(dim=-1).mean()), cfg.train.recovery_min_speed_m)
        assert torch.allclose(
            steps[lengths > 1e-7], direction / direction.norm() * lengths[lengths > 1e-7, None], atol=1e-5
        )
        assert float(lengths.max()) <= pace + 1e-5
        assert float((shifted.position[b, a] - path[-1]).norm()) <= float(direction.norm()) + 1e-6
    for field in ("event_position", "keypose_delta", "traj_gripper"):
        assert torch.equal(getattr(relabelled, field), getattr(target, field))
    off = dataclasses.replace(cfg.train, anchor_teacher_shift_m=0.0)
    assert shift_teacher_targets(target, state, condition, off, torch.Generator()) == (condition, target)


def test_teacher_forcing_conditions_on_the_given_targets(episodes):
    _, policy, dataset = anchored_policy(episodes)
    batch = batch_of(dataset, n=4)
    context = policy.encode_context(batch.demo)
    given = TargetCondition(
        batch.target.event_position + 0.5, batch.target.event_valid, torch.tensor([True, False, True, False])
    )
    scene = policy.prepare_scene(batch.obs, context, condition=given)
    torch.testing.assert_close(scene.target.position[0], given.position[0])
    torch.testing.assert_close(scene.target.position[1], scene.anchor.position[1].detach())
    losses = policy.compute_loss(batch, generator=torch.Generator().manual_seed(0), teacher=given)
    losses["loss"].backward()
    assert {"anchor_pointer", "anchor_position", "anchor_remaining"} <= set(losses)
    unused = [n for n, p in policy.named_parameters() if p.grad is None]
    assert not unused, f"parameters without gradient (would break DDP): {unused}"


def saved_runner(episodes, tmp_path):
    """A `PolicyRunner` of an anchored policy saved and loaded back, conditioned on the keyframes
    of its first training episode; and that episode."""
    cfg, policy, dataset = anchored_policy(episodes)
    policy.save_pretrained(tmp_path / "ckpt", cfg)
    runner = PolicyRunner.from_checkpoint(tmp_path / "ckpt")
    demo = dataset.episodes[0]
    kf = demo.keyframes
    runner.load_demonstration(
        demo.cloth_positions[kf], demo.cloth_features[kf], demo.arm_state[kf], demo.cloth_valid[kf]
    )
    return runner, demo


def test_anchored_checkpoint_round_trip_and_runner(episodes, tmp_path):
    runner, demo = saved_runner(episodes, tmp_path)
    chunk = runner.predict(
        demo.cloth_positions[0],
        demo.cloth_features[0],
        demo.arm_state[0],
        demo.cloth_valid[0],
        torch.Generator().manual_seed(0),
    )
    assert chunk.keypose is not None and np.isfinite(chunk.keypose).all()


@pytest.mark.parametrize(
    "overrides",
    [{"keypose_head": "pointer"}, {"anchor_window_m": 0.0}],
)
def test_bad_anchored_configs_are_refused(overrides):
    with pytest.raises(ConfigError):
        dataclasses.replace(preset("cpu-small").model, **overrides).validate()


def test_observation_shape_contract_unchanged(episodes):
    """The anchored head takes the same observation as the paper's head (the graph is unchanged)."""
    _, policy, dataset = anchored_policy(episodes)
    batch = batch_of(dataset, n=2)
    obs = ObservationTokens(
        batch.obs.cloth_positions, batch.obs.cloth_features, batch.obs.cloth_valid, batch.obs.arm_state
    )
    with torch.no_grad():
        out = sample_cached(policy, obs, policy.encode_context(batch.demo))
    assert out.anchor.shape == (2, 2, 3) and out.keypose is None


def test_target_override_holds_the_masked_arms_target(episodes, tmp_path):
    """`PolicyRunner.predict`'s target override: the masked arm's keypose is the given point and its
    trajectory is conditioned on it; the other arm's target is still read from the cloth; an empty
    mask changes nothing, bit for bit."""
    runner, demo = saved_runner(episodes, tmp_path)
    query = (demo.cloth_positions[3], demo.cloth_features[3], demo.arm_state[3], demo.cloth_valid[3])

    def predict(*override):
        return runner.predict(*query, torch.Generator().manual_seed(0), *override)

    free = predict()
    held_at = np.array([[0.1, -0.2, 0.9], [0.0, 0.0, 0.0]], np.float32)
    held = predict(held_at, np.array([True, False]))
    np.testing.assert_array_equal(held.keypose[0, :3], held_at[0])
    np.testing.assert_array_equal(held.keypose[1], free.keypose[1])
    assert not np.array_equal(held.positions[:, 0], free.positions[:, 0])
    none = predict(held_at, np.zeros(2, bool))
    for a, b in ((none.positions, free.positions), (none.openness, free.openness), (none.keypose, free.keypose)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(PolicyInputError, match="give both or neither"):
        predict(held_at, None)
    with pytest.raises(PolicyInputError, match="override_mask: expected bool"):
        predict(held_at, np.ones(2))


def test_target_override_needs_the_anchored_head(episodes):
    _, anchored, _ = anchored_policy(episodes)
    flow = InstantFoldPolicy(preset("cpu-small").model)
    flow.normalizers = anchored.normalizers
    runner = PolicyRunner(flow)
    demo = episodes[0]
    kf = demo.keyframes
    runner.load_demonstration(
        demo.cloth_positions[kf], demo.cloth_features[kf], demo.arm_state[kf], demo.cloth_valid[kf]
    )
    with pytest.raises(PolicyInputError, match="only the anchored keypose head"):
        runner.predict(
            demo.cloth_positions[0],
            demo.cloth_features[0],
            demo.arm_state[0],
            demo.cloth_valid[0],
            target_override=np.zeros((2, 3), np.float32),
            override_mask=np.ones(2, bool),
        )
