"""Issue 5 on simulated Newton episodes: a cpu-small policy overfits a handful of them, and from one
start state its first grasps follow the mode of whichever demonstration it is given. It trains with
the default models' augmentation (SE(2) about the optical axis) and shared demonstrations per batch.

The data is built here from a clean clone: 2 start states x modes 2 (`sleeves_down__bottom_up`) and
16 (`body_bottom_up__sleeves_down`) of one procedural garment on the cpu-small simulator preset,
tokenised by a randomly initialised cpu-small cloth encoder (weights cannot be downloaded; the
policy must work from whatever features the frozen encoder gives).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from instant_fold_core.dataset.schema import KEYPOINT_NAMES
from instant_fold_evaluation.offline import first_moving_frame, nearest_keypoints, rollout_first_grasp
from instant_fold_learning.encoder.configuration import preset as encoder_preset
from instant_fold_learning.encoder.modeling import ClothEncoder
from instant_fold_learning.policy.configuration import preset as policy_preset
from instant_fold_learning.policy.inference import PolicyRunner
from instant_fold_learning.policy.tokenize_episodes import tokenize_episode
from instant_fold_learning.policy.training import CHECKPOINT_DIR, train

#: Simulating 4 episodes and 1600 training steps take ~7-15 min on 2 shared CPU cores (the
#: project's default timeout is 10 min); the whole module is slow.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

GARMENT = "proc:0"
#: Start states k of the generator (`episode_seed(0, "proc_00000", k)`): both modes fold cleanly
#: from these two (oracle errors 0.02-0.13 in the generated stores).
STARTS = (1, 2)
MODES = {
    "sleeves_down__bottom_up": ("top_left", "top_right"),
    "body_bottom_up__sleeves_down": ("bottom_left", "bottom_right"),
}


@pytest.fixture(scope="module")
def episodes():
    """{(start, mode): (Episode, TokenizedEpisode)} for both starts and both modes."""
    from instant_fold_sim.garments import resolve_garment
    from instant_fold_sim.generate import episode_seed
    from instant_fold_sim.programs import resolve_mode
    from instant_fold_sim.rollout import preset

    config = preset("cpu-small")
    garment = resolve_garment(GARMENT, spacing=config.garment_spacing, max_particles=config.max_particles)
    torch.manual_seed(0)
    encoder = ClothEncoder(encoder_preset("cpu-small")).eval()
    out = {}
    for start in STARTS:
        for mode in MODES:
            episode = run_episode_checked(garment, resolve_mode(mode), episode_seed(0, "proc_00000", start), config)
            out[start, mode] = (episode, tokenize_episode(encoder, episode))
    return out


def run_episode_checked(garment, mode, seed, config):
    from instant_fold_sim.rollout import run_episode

    episode = run_episode(garment, mode, "S", seed=seed, config=config)
    assert episode.meta["oracle"]["max_error"] < 0.15, episode.meta["oracle"]  # a clean demonstration
    return episode


@pytest.fixture(scope="module")
def trained(episodes, tmp_path_factory):
    cfg = policy_preset("cpu-small")
    cfg.train.frames = "moving"
    # The default models' recipe: SE(2) augmentation and demonstrations shared within a batch. The
    # augmentation slows fitting the (unaugmented) frames: 1200 steps reached 9.5x, hence 1600.
    cfg.train.steps, cfg.train.noise_samples, cfg.train.log_every, cfg.train.checkpoint_every = 1600, 8, 100, 400
    cfg.train.se2_prob, cfg.train.demos_per_batch = 0.5, 4
    out = tmp_path_factory.mktemp("policy")
    history = train(cfg.validate(), [tok for _, tok in episodes.values()], out, echo=False)
    return history, out / CHECKPOINT_DIR


def test_policy_overfits_simulated_episodes(trained):
    history, _ = trained
    assert history["ema_action_error"] < 0.1 * history["initial_action_error"], history


def test_first_grasps_follow_the_demonstrated_mode(episodes, trained):
    """Same start state (identical until the first contact in both modes), demonstrations recorded
    from the other start state: each arm first closes on the keypoint the demonstrated mode grasps."""
    runner = PolicyRunner.from_checkpoint(trained[1])
    for query_start, demo_start in zip(STARTS, STARTS[::-1], strict=True):
        query_raw, query = episodes[query_start, next(iter(MODES))]
        start = first_moving_frame(query)
        for other_mode in MODES:  # the observation is the same whichever mode's episode it comes from
            np.testing.assert_array_equal(
                episodes[query_start, other_mode][1].cloth_positions[start], query.cloth_positions[start]
            )
        grasps = {}
        for mode, expected in MODES.items():
            demo = episodes[demo_start, mode][1]
            kf = demo.keyframes
            runner.load_demonstration(
                demo.cloth_positions[kf], demo.cloth_features[kf], demo.arm_state[kf], demo.cloth_valid[kf]
            )
            rollout = rollout_first_grasp(runner, query, start, generator=torch.Generator().manual_seed(0))
            keypoints = query_raw.keypoints[start, : len(KEYPOINT_NAMES)]
            assert nearest_keypoints(rollout.grasp, keypoints, KEYPOINT_NAMES) == list(expected), (mode, rollout.grasp)
            grasps[mode] = rollout.grasp
        a, b = grasps.values()
        assert np.linalg.norm(a - b, axis=-1).min() > 0.2  # sleeve tips vs hem corners: far apart
