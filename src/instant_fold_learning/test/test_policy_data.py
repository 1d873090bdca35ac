"""Policy data: targets, context pairing, augmentations, collation, tokenised-episode files."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from instant_fold_core.dataset.schema import Episode
from instant_fold_learning.policy.configuration import TrainingConfig
from instant_fold_learning.policy.data import PolicyDataError, TokenizedEpisode, chunk_targets, collate
from instant_fold_learning.policy.dataset import (
    PolicyDataset,
    first_gripper_event,
    last_gripper_event,
    mode_ids,
    moving_frames,
    occlude_tokens,
    recovery_targets,
)
from instant_fold_learning.policy.instruction import InstructionError
from instant_fold_learning.policy.normalization import ActionNormalizers
from instant_fold_learning.policy.synthetic import MODES, make_episode, synthetic_episodes


@pytest.fixture(scope="module")
def episodes():
    return synthetic_episodes(2, tuple(MODES)[:2], 2, 16, 32)


def test_synthetic_modes_share_the_start_state_and_differ_afterwards():
    a, b = make_episode(0, "right_over_left", 3, 16), make_episode(0, "bottom_up", 3, 16)
    np.testing.assert_array_equal(a.cloth_positions[0], b.cloth_positions[0])
    np.testing.assert_array_equal(a.arm_state[0], b.arm_state[0])
    assert np.abs(a.arm_state[5] - b.arm_state[5]).max() > 0.02
    assert np.abs(a.cloth_positions[-1] - b.cloth_positions[-1]).max() > 0.05
    # Keyframes sit on the gripper events (close at grasp, open at release) and the last frame.
    g = a.arm_state[:, 0, 3]
    assert g[a.keyframes[1]] == 0 and g[a.keyframes[1] - 1] == 1
    assert g[a.keyframes[2]] == 1 and g[a.keyframes[2] - 1] == 0
    assert a.keyframes[-1] == a.num_frames - 1


def test_a_demonstration_of_another_variant_is_never_the_context(episodes):
    """Left-first and right-first executions of one mode are different folds (the paper's contexts):
    pairing them would teach the policy to ignore the demonstrated order."""
    first, second = (dataclasses.replace(e, meta=dict(e.meta)) for e in (episodes[0], episodes[2]))
    assert first.meta["garment_id"] == second.meta["garment_id"] and first.meta["mode"] == second.meta["mode"]
    ds = PolicyDataset([first, second], 4, TrainingConfig())
    assert ds.siblings == [[1], [0]]
    first.meta["variant"], second.meta["variant"] = "L", "R"
    ds = PolicyDataset([first, second], 4, TrainingConfig())
    assert ds.siblings == [[0], [1]]  # no sibling of its context: each serves as its own


def test_chunk_targets_rebuild_the_expert_actions(episodes):
    e = episodes[0]
    h = 4
    for t in (0, 10, e.num_frames - 2):
        d, grip, kd, kg = chunk_targets(e, t, h)
        absolute = e.arm_state[t, None, :, :3] + np.cumsum(d, 0)
        idx = np.minimum(np.arange(t, t + h), e.num_frames - 1)
        np.testing.assert_allclose(absolute, e.action[idx, :, :3], atol=1e-6)
        np.testing.assert_array_equal(grip, e.action[idx, :, 3])
        nxt = e.keyframes[e.keyframes > t]
        kf = nxt[0] if nxt.size else e.num_frames - 1
        np.testing.assert_allclose(e.arm_state[t, :, :3] + kd, e.arm_state[kf, :, :3], atol=1e-6)
        np.testing.assert_array_equal(kg, e.arm_state[kf, :, 3])
    d, *_ = chunk_targets(e, e.num_frames - 1, h)
    np.testing.assert_allclose(d[1:], 0.0)  # past the end: hold the last action


def test_recovery_relabel_returns_to_the_expert(episodes):
    e, t, h = episodes[0], 12, 4
    state, (d, grip, kd, _) = recovery_targets(e, t, h, np.random.default_rng(0), 0.03)
    offset = state[:, :3] - e.arm_state[t, :, :3]
    assert 0 < np.abs(offset).max() <= 0.03
    absolute = state[None, :, :3] + np.cumsum(d, 0)
    np.testing.assert_allclose(absolute[-1], e.action[t + h - 1, :, :3], atol=1e-6)  # rejoins the expert
    errors = np.linalg.norm(absolute - e.action[t : t + h, :, :3], axis=-1)
    assert np.all(np.diff(errors, axis=0) <= 1e-7)  # the error shrinks step by step
    np.testing.assert_allclose(state[:, :3] + kd, chunk_targets(e, t, h)[2] + e.arm_state[t, :, :3], atol=1e-6)
    np.testing.assert_array_equal(grip, chunk_targets(e, t, h)[1])


def test_occlusion_drops_tokens_behind_the_gripper_only():
    positions = np.array(
        [
            [0.0, 0.0, 0.8],  # straight below the gripper: hidden
            [0.02, 0.0, 0.8],  # 2 cm off the ray at gripper depth 0.6 -> 1.5 cm: hidden
            [0.2, 0.0, 0.8],  # far away: visible
            [0.0, 0.0, 0.5],  # between camera and gripper: visible
        ],
        np.float32,
    )
    valid = np.ones(4, bool)
    grippers = np.array([[0.0, 0.0, 0.6], [5.0, 5.0, 0.6]], np.float32)
    out = occlude_tokens(positions, valid, grippers, 0.03)
    np.testing.assert_array_equal(out, [False, False, True, True])
    # Never hides every token.
    assert occlude_tokens(positions[:2], valid[:2], grippers, 0.03).all()


def test_dataset_pairs_each_sample_with_a_sibling_demonstration(episodes):
    ds = PolicyDataset(episodes, 4, TrainingConfig(recovery_prob=0.0, occlusion_prob=0.0))
    rng = np.random.default_rng(0)
    for i in rng.integers(len(ds), size=20):
        ep_idx, t = ds.index[i]
        sample = ds.sample(int(i), rng)
        (demo_idx,) = ds.siblings[ep_idx]
        demo = episodes[demo_idx]
        assert demo_idx != ep_idx
        assert demo.meta["garment_id"] == episodes[ep_idx].meta["garment_id"]
        assert demo.meta["mode"] == episodes[ep_idx].meta["mode"]
        np.testing.assert_array_equal(sample.demo_arm_state, demo.arm_state[demo.keyframes])
        np.testing.assert_array_equal(sample.cloth_positions, episodes[ep_idx].cloth_positions[t])
        assert sample.instruction.shape == (0,)  # no instructions unless asked for


def test_instructions_are_the_episodes_folds_in_words_when_asked_for(episodes):
    """The language variant's samples carry their episode's instruction; a demonstration-conditioned
    dataset never reads one, so a variant with no words (a user's own) does not stop it."""
    ds = PolicyDataset(episodes, 4, TrainingConfig(), instructions=True)
    rng = np.random.default_rng(0)
    for i in rng.integers(len(ds), size=5):
        ep_idx, _ = ds.index[i]
        words = [ds.vocabulary.words[w - 1] for w in ds.sample(int(i), rng).instruction]
        assert words == episodes[ep_idx].meta["mode"].split("_")
    odd = [dataclasses.replace(e, meta={**e.meta, "variant": "X"}) for e in episodes]
    assert len(PolicyDataset(odd, 4, TrainingConfig())) == len(ds)
    with pytest.raises(InstructionError, match="variant 'X'"):
        PolicyDataset(odd, 4, TrainingConfig(), instructions=True)


def with_holds(episode: TokenizedEpisode) -> TokenizedEpisode:
    """The episode with its arms frozen on frames 0-4 (a hold before the first move) and 10-14 (a
    wait before closing the gripper at frame 15), as the simulator records while the cloth settles."""
    gs = episode.arm_state.copy()
    gs[:5] = gs[0]
    gs[10:15] = gs[10]
    gs[15:, 0, 3] = 1 - gs[15:, 0, 3]  # a gripper change is a move even without motion
    gs[15, :, :3] = gs[14, :, :3]
    return dataclasses.replace(episode, arm_state=gs).validate()


def test_moving_frames_keep_only_the_last_frame_of_each_hold(episodes):
    e = with_holds(episodes[0])
    kept = moving_frames(e)
    assert 4 in kept and 14 in kept  # the last hold frames: their chunk starts the next move
    assert not set(range(4)) & set(kept) and not set(range(10, 14)) & set(kept)
    assert e.num_frames - 1 not in kept
    # No two kept frames share an arm state (within 1 mm) unless their chunks agree.
    states = e.arm_state[kept].reshape(len(kept), -1)
    for i, t in enumerate(kept):
        same = kept[np.linalg.norm(states - states[i], axis=1) < 1e-3]
        chunks = [chunk_targets(e, int(u), 4)[0] for u in same]
        assert all(np.allclose(c, chunks[0], atol=1e-3) for c in chunks), t
    ds = PolicyDataset([e, *episodes[1:]], 4, TrainingConfig(frames="moving"))
    assert [t for i, t in ds.index if i == 0] == kept.tolist()
    full = PolicyDataset([e, *episodes[1:]], 4, TrainingConfig())
    assert len(full) == sum(x.num_frames for x in episodes) > len(ds)


def test_dataset_augmentations_are_applied_at_their_rates(episodes):
    ds = PolicyDataset(episodes, 4, TrainingConfig(recovery_prob=0.3, occlusion_prob=1.0, occlusion_radius_m=0.05))
    rng = np.random.default_rng(1)
    moved = occluded = 0
    for i in range(300):
        ep_idx, t = ds.index[i % len(ds)]
        s = ds.sample(i % len(ds), rng)
        moved += not np.allclose(s.arm_state, episodes[ep_idx].arm_state[t])
        occluded += not s.cloth_valid.all()
    assert 60 <= moved <= 120  # ~30 % recovery perturbations
    assert occluded > 0


def test_collate_pads_demonstrations_with_a_frame_mask(episodes):
    ds = PolicyDataset(episodes, 4)
    rng = np.random.default_rng(0)
    a, b = ds.sample(0, rng), ds.sample(1, rng)
    b.demo_cloth_positions, b.demo_cloth_features = b.demo_cloth_positions[:2], b.demo_cloth_features[:2]
    b.demo_cloth_valid, b.demo_arm_state = b.demo_cloth_valid[:2], b.demo_arm_state[:2]
    batch = collate([a, b])
    assert batch.demo.cloth_positions.shape[:2] == (2, 4)
    assert batch.demo.frame_mask.tolist() == [[True] * 4, [True, True, False, False]]
    assert batch.target.traj_delta.shape == (2, 4, 2, 3)
    with pytest.raises(PolicyDataError, match="empty"):
        collate([])


def test_tokenized_episode_file_round_trip_and_errors(episodes, tmp_path):
    e = episodes[0]
    e.save(tmp_path / "ep.npz")
    loaded = TokenizedEpisode.load(tmp_path / "ep.npz")
    for name in ("cloth_positions", "cloth_features", "cloth_valid", "arm_state", "action", "keyframes"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(e, name))
    assert loaded.meta == e.meta
    with np.load(tmp_path / "ep.npz") as f:  # the file format keeps its array name: old files stay readable
        assert "gripper_state" in f.files and "arm_state" not in f.files
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(PolicyDataError, match="not a readable"):
        TokenizedEpisode.load(tmp_path / "bad.npz")
    broken = TokenizedEpisode(
        e.cloth_positions.copy(),
        e.cloth_features,
        e.cloth_valid,
        e.arm_state,
        e.action,
        e.keyframes,
        e.meta,
    )
    broken.cloth_positions[2, 3, 0] = np.nan
    with pytest.raises(PolicyDataError, match="cloth_positions: contains NaN"):
        broken.validate()
    with pytest.raises(PolicyDataError, match="meta: missing 'mode'"):
        TokenizedEpisode(
            e.cloth_positions,
            e.cloth_features,
            e.cloth_valid,
            e.arm_state,
            e.action,
            e.keyframes,
            {"garment_id": "x"},
        ).validate()


def simulated(synthetic: TokenizedEpisode, particles: np.ndarray, visible: np.ndarray, ids: np.ndarray) -> Episode:
    """An `Episode` of the synthetic one's arm states and keyframes with blank 4 x 4 images, the
    given particles [T, M, 3], their visibility [T, M] and keypoint particle ids [7] (-1: unknown,
    keypoints then all zero)."""
    t = synthetic.num_frames
    keypoints = particles[:, ids] if (ids >= 0).all() else np.zeros((t, 7, 3), np.float32)
    return Episode(
        rgb=np.zeros((t, 4, 4, 3), np.uint8),
        depth=np.ones((t, 4, 4), np.float32),
        mask=np.ones((t, 4, 4), bool),
        intrinsics=np.eye(3, dtype=np.float32),
        extrinsics=np.eye(4, dtype=np.float32),
        arm_state=synthetic.arm_state,
        action=synthetic.action,
        particles=particles,
        particle_visible=visible,
        keypoints=keypoints,
        keypoint_particle_ids=ids,
        keyframes=synthetic.keyframes,
        meta={"garment_id": "g0", "mode": "bottom_up"},
    )


def test_tokenized_episode_from_an_episode():
    """Tokens attach to the shared `Episode` contract; its arrays and meta carry over."""
    synthetic = make_episode(0, "bottom_up", 0, 8, 16)
    t = synthetic.num_frames
    episode = simulated(synthetic, np.zeros((t, 0, 3), np.float32), np.zeros((t, 0), bool), np.full(7, -1, np.int32))
    tokenized = TokenizedEpisode.from_episode(
        episode, synthetic.cloth_positions, synthetic.cloth_features, synthetic.cloth_valid
    )
    np.testing.assert_array_equal(tokenized.action, episode.action)
    assert tokenized.meta == episode.meta and tokenized.cloth_features.shape == (t, 16, 8)
    with pytest.raises(PolicyDataError, match="cloth_positions: expected shape"):
        TokenizedEpisode.from_episode(
            episode, synthetic.cloth_positions[:-1], synthetic.cloth_features, synthetic.cloth_valid
        )


def test_simulated_keypoints_come_along_with_their_visibility(tmp_path):
    """A simulated episode's tracked keypoints (and their particles' visibility) reach the token
    file and survive a round trip; keypoints without particle ids (a real demonstration) do not."""
    synthetic = make_episode(0, "bottom_up", 0, 8, 16)
    t = synthetic.num_frames
    rng = np.random.default_rng(0)
    visible = rng.random((t, 20)) > 0.3
    particles = rng.normal(size=(t, 20, 3)).astype(np.float32)
    ids = np.array([3, 5, 7, 11, 13, 17, 19], np.int32)
    episode = simulated(synthetic, particles, visible, ids)
    tokens = (synthetic.cloth_positions, synthetic.cloth_features, synthetic.cloth_valid)
    tokenized = TokenizedEpisode.from_episode(episode, *tokens)
    tokenized.save(tmp_path / "ep.npz")
    loaded = TokenizedEpisode.load(tmp_path / "ep.npz")
    assert loaded.keypoints is not None and loaded.keypoint_visible is not None
    np.testing.assert_array_equal(loaded.keypoints, particles[:, ids])
    np.testing.assert_array_equal(loaded.keypoint_visible, visible[:, ids])
    untracked = dataclasses.replace(episode, keypoint_particle_ids=np.full(7, -1, np.int32))
    assert TokenizedEpisode.from_episode(untracked, *tokens).keypoints is None
    with pytest.raises(PolicyDataError, match="both or neither"):
        dataclasses.replace(loaded, keypoint_visible=None).validate()
    with pytest.raises(PolicyDataError, match="keypoints: expected shape"):
        dataclasses.replace(loaded, keypoints=loaded.keypoints[:, :3]).validate()


def test_mode_ids_follow_the_generator_or_sorted_names(episodes):
    assert mode_ids(episodes) == {"right_over_left": 0, "bottom_up": 1}  # meta["mode_id"]
    plain = [
        TokenizedEpisode(
            e.cloth_positions,
            e.cloth_features,
            e.cloth_valid,
            e.arm_state,
            e.action,
            e.keyframes,
            {"garment_id": "g", "mode": e.meta["mode"]},
        )
        for e in episodes
    ]
    assert mode_ids(plain) == {"bottom_up": 0, "right_over_left": 1}
    clash = [
        TokenizedEpisode(
            e.cloth_positions,
            e.cloth_features,
            e.cloth_valid,
            e.arm_state,
            e.action,
            e.keyframes,
            {**e.meta, "mode_id": 0},
        )
        for e in episodes
    ]
    with pytest.raises(PolicyDataError, match="share an id"):
        mode_ids(clash)


def test_batches_with_shared_demonstrations_pair_garment_and_mode(episodes):
    ds = PolicyDataset(episodes, 4, TrainingConfig(demos_per_batch=3))
    rng = np.random.default_rng(2)
    for _ in range(10):
        batch = ds.draw_batch(rng, 8)
        assert batch.demo.arm_state.shape[0] == 3
        assert batch.demo_index.tolist() == [0, 0, 0, 1, 1, 1, 2, 2]
        for b, g in enumerate(batch.demo_index.tolist()):
            # The sample's own episode is a sibling of the demonstration (same garment and mode).
            state = batch.obs.arm_state[b].numpy()
            owners = [i for i, e in enumerate(episodes) if any(np.array_equal(state, s) for s in e.arm_state)]
            demo_states = batch.demo.arm_state[g].numpy()
            demos = [
                i
                for i, e in enumerate(episodes)
                if np.array_equal(e.arm_state[e.keyframes], demo_states[: e.keyframes.size])
            ]
            assert any(d in ds.siblings[o] for o in owners for d in demos)
    with pytest.raises(PolicyDataError, match="owners"):
        collate([ds.sample(0, rng)], [0, 0])


def test_frame_stride_keeps_every_sth_frame(episodes):
    full = PolicyDataset(episodes, 4, TrainingConfig())
    half = PolicyDataset(episodes, 4, TrainingConfig(frame_stride=2))
    assert [t for i, t in half.index if i == 0] == list(range(0, episodes[0].num_frames, 2))
    assert len(half) == sum((e.num_frames + 1) // 2 for e in episodes) < len(full)


def test_se2_augmentation_moves_scene_and_actions_together(episodes):
    """One rigid motion about the optical axis maps the observation, the arm state, the absolute chunk
    and the keypose; the demonstration gets its own; the return home is never transformed."""
    ds = PolicyDataset(episodes, 4, TrainingConfig(se2_prob=1.0, se2_rotation_deg=30.0, se2_translation_m=0.1))
    rng = np.random.default_rng(3)
    transformed = 0
    for i in rng.integers(len(ds), size=40):
        ep_idx, t = ds.index[int(i)]
        e = episodes[ep_idx]
        ref = ds.sample(int(i), np.random.default_rng(0), augment=False)
        aug = ds.sample(int(i), rng)
        if t >= last_gripper_event(e):
            np.testing.assert_array_equal(aug.cloth_positions, ref.cloth_positions)
            np.testing.assert_array_equal(aug.traj_delta, ref.traj_delta)
            continue
        transformed += 1
        # Fit the rigid motion on the cloth tokens; it must map the arms, chunk and keypose too.
        src = np.concatenate([ref.cloth_positions, ref.arm_state[:, :3]])
        dst = np.concatenate([aug.cloth_positions, aug.arm_state[:, :3]])
        np.testing.assert_allclose(dst[:, 2], src[:, 2], atol=1e-6)  # depths unchanged
        c_src, c_dst = src[:, :2].mean(0), dst[:, :2].mean(0)
        u, _, vt = np.linalg.svd((src[:, :2] - c_src).T @ (dst[:, :2] - c_dst))
        rot = (u @ vt).T
        assert np.linalg.det(rot) > 0 and abs(np.degrees(np.arctan2(rot[1, 0], rot[0, 0]))) <= 30.0 + 1e-3

        def move(p, c_src=c_src, c_dst=c_dst, rot=rot):
            return (p[..., :2] - c_src) @ rot.T + c_dst

        np.testing.assert_allclose(move(src), dst[:, :2], atol=1e-5)
        absolute = ref.arm_state[None, :, :3] + np.cumsum(ref.traj_delta, 0)
        absolute_aug = aug.arm_state[None, :, :3] + np.cumsum(aug.traj_delta, 0)
        np.testing.assert_allclose(move(absolute), absolute_aug[..., :2], atol=1e-5)
        np.testing.assert_allclose(absolute[..., 2], absolute_aug[..., 2], atol=1e-6)
        keypose = ref.arm_state[:, :3] + ref.keypose_delta
        np.testing.assert_allclose(move(keypose), (aug.arm_state[:, :3] + aug.keypose_delta)[:, :2], atol=1e-5)
        np.testing.assert_array_equal(aug.cloth_features, ref.cloth_features)
        np.testing.assert_array_equal(aug.arm_state[:, 3], ref.arm_state[:, 3])
        # The demonstration moved rigidly too, but not by the observation's motion.
        demo_ref, demo_aug = ref.demo_cloth_positions.reshape(-1, 3), aug.demo_cloth_positions.reshape(-1, 3)
        np.testing.assert_allclose(
            np.linalg.norm(demo_aug[:5] - demo_aug[5:10], axis=1),
            np.linalg.norm(demo_ref[:5] - demo_ref[5:10], axis=1),
            atol=1e-5,
        )
        assert not np.allclose(move(demo_ref), demo_aug[:, :2], atol=1e-3)
    assert transformed >= 20
    # The normalisers cover every rotated delta.
    norm = ds.calibrate(ActionNormalizers())
    lengths = max(
        np.linalg.norm(chunk_targets(e, t, 4)[0][..., :2], axis=-1).max() for e in episodes for t in range(e.num_frames)
    )
    assert bool((norm.delta.low[:2] <= -lengths + 1e-6).all()) and bool((norm.delta.high[:2] >= lengths - 1e-6).all())


@pytest.mark.parametrize("groups", [0, 2])
def test_decision_frames_are_drawn_with_their_weight(episodes, groups):
    """Frames before the first gripper event are drawn decision_weight times as often as the others
    (their expected share: w n_d / (w n_d + n_o)); weight 1 is the uniform draw."""

    def decision_share(weight: float, seed: int = 0) -> tuple[float, list[int]]:
        ds = PolicyDataset(episodes, 4, TrainingConfig(decision_weight=weight, demos_per_batch=groups))
        first = [first_gripper_event(e) for e in episodes]
        rng = np.random.default_rng(seed)
        batches = [ds.draw_batch(rng, 8, augment=False) for _ in range(150)]
        states = [s for b in batches for s in b.obs.arm_state.numpy()]
        # Decision frames are the episodes' own frames before their first event; recover t by state.
        decision = 0
        for state in states:
            owner = [
                (i, t)
                for i, e in enumerate(episodes)
                for t in range(e.num_frames)
                if np.array_equal(e.arm_state[t], state)
            ]
            decision += all(t < first[i] for i, t in owner)
        n_d = sum(t < first[i] for i, t in ds.index)
        expected = weight * n_d / (weight * n_d + len(ds) - n_d)
        return decision / len(states), expected

    share, expected = decision_share(1.0)
    assert abs(share - expected) < 0.08
    share, expected = decision_share(4.0)
    assert abs(share - expected) < 0.08 and expected > 0.3
    assert first_gripper_event(episodes[0]) < last_gripper_event(episodes[0])
    with pytest.raises(ValueError, match="decision_weight"):
        TrainingConfig(decision_weight=0.0).validate()
