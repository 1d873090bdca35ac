"""Sim in the loop without ROS: frames, lock-stepped time, grasping through camera-frame commands,
recording, and the same-init score."""

from __future__ import annotations

import numpy as np
import pytest

from instant_fold_core.dataset.schema import KEYPOINT_NAMES
from instant_fold_sim.programs import resolve_mode
from instant_fold_sim.rollout import preset, run_episode
from instant_fold_sim.sim_world import SimWorld, SimWorldError

SEED = 11


@pytest.fixture(scope="module")
def world() -> SimWorld:
    return SimWorld("proc:1", SEED, "cpu-small")


def test_camera_and_world_frames_round_trip(world: SimWorld) -> None:
    p = np.array([[0.1, -0.2, 0.3], [0.5, 0.4, 0.0]])
    assert np.allclose(world.world_from_camera(world.camera_from_world(p)), p, atol=1e-12)
    # the table (world z = 0) is in front of the camera, further than the arms' home
    table = world.camera_from_world(np.array([[0.0, 0.0, 0.0]]))[0]
    assert 0.9 < table[2] < 1.35 and (world.home()[:, 2] < table[2]).all()


def test_observation_is_the_cloth_in_real_metres(world: SimWorld) -> None:
    obs = world.observe()
    assert obs.rgb.shape == (256, 256, 3) and obs.mask.sum() > 500
    table_depth = world.camera_from_world(np.zeros((1, 3)))[0, 2]
    assert np.all(np.abs(obs.depth[obs.mask] - table_depth) < 0.05)  # cloth lies on the table


def test_time_only_moves_when_stepped_and_grasps_carry_the_cloth(world: SimWorld) -> None:
    start_frames = world.frames
    state = world.arm_state()
    assert world.step(state[:, :3], state[:, 3], until=world.sim_time) == 0
    assert world.frames == start_frames
    # move the left gripper onto the left sleeve tip (camera frame), close, lift 6 cm, open
    tip = world.camera_from_world(world.keypoints_world()[KEYPOINT_NAMES.index("top_left")][None])[0]
    target = state[:, :3].copy()
    target[0] = tip
    assert world.step(target, np.ones(2), until=world.sim_time + 0.1) == 2
    assert np.allclose(world.arm_state()[0, :3], tip, atol=1e-9)
    assert world.stamp_ns() == (world.frames * 1_000_000_000) // 20
    before = world.keypoints_world()[KEYPOINT_NAMES.index("top_left")].copy()
    lifted = target.copy()
    lifted[0, 2] -= 0.06  # towards the camera = up
    world.step(lifted, np.array([0.0, 1.0]), until=world.sim_time + 0.15)
    assert world.arm_state()[0, 3] == 0.0 and world.scene.grippers[0].held.size > 0
    after = world.keypoints_world()[KEYPOINT_NAMES.index("top_left")]
    assert after[2] - before[2] > 0.08  # sim space is twice real: 6 cm real = 12 cm sim
    world.step(lifted, np.ones(2), until=world.sim_time + 0.05)
    assert world.scene.grippers[0].held.size == 0
    episode = world.episode("test", "S")
    assert episode.num_frames == world.frames + 1
    closed = episode.arm_state[:, 0, 3] < 0.5
    assert closed.any() and not closed[-1]
    assert {int(np.flatnonzero(closed)[0]), int(np.flatnonzero(closed)[-1]) + 1} <= set(episode.keyframes.tolist())


@pytest.mark.parametrize(
    ("target", "openness", "until", "message"),
    [
        (np.full((2, 3), np.nan), np.ones(2), 1.0, "target"),
        (np.zeros((3, 3)), np.ones(2), 1.0, "target"),
        (np.zeros((2, 3)), np.array([np.inf, 1.0]), 1.0, "openness"),
        (np.zeros((2, 3)), np.ones(2), np.nan, "until"),
    ],
)
def test_bad_commands_are_refused(world: SimWorld, target, openness, until, message: str) -> None:
    frames = world.frames
    with pytest.raises(SimWorldError, match=message):
        world.step(target, openness, until)
    assert world.frames == frames


@pytest.mark.slow
def test_replaying_the_oracle_through_camera_commands_scores_a_success() -> None:
    """The scripted program's own actions, sent as camera-frame commands, reproduce its fold."""
    mode = resolve_mode("sleeves_down__bottom_up")
    cfg = preset("cpu-small")
    world = SimWorld("proc:1", SEED, cfg)
    episode = run_episode(world.garment, mode, "S", SEED, cfg)
    for t in range(episode.num_frames - 1):
        world.step(episode.action[t, :, :3], episode.action[t, :, 3], until=(t + 1) / world.fps)
    metrics = world.evaluate(mode.name, "S")
    # Not bit-identical: the stored actions are float32 (0.1 um rounding), and cloth contact with
    # friction amplifies such differences, so the replay lands near, not exactly on, the oracle.
    assert metrics["success"], metrics
    assert metrics["start_error_max"] > 0.2  # doing nothing would be far from the fold
    idle = SimWorld("proc:1", SEED, cfg).evaluate(mode.name, "S")
    assert not idle["success"] and idle["keypoint_error_max"] == pytest.approx(idle["start_error_max"])


def test_viewer_writes_the_recorded_rollout(world: SimWorld, tmp_path) -> None:
    from PIL import Image

    from instant_fold_sim.viewer import keyframe_strip, video

    world.step(world.arm_state()[:, :3], np.array([0.0, 1.0]), until=world.sim_time + 0.05)
    world.step(world.arm_state()[:, :3], np.ones(2), until=world.sim_time + 0.05)
    episode = world.episode("test", "S")
    assert len(episode.keyframes) >= 3
    strip = Image.open(keyframe_strip(episode, tmp_path / "strip.png", max_panels=2))
    assert strip.size == (2 * 256, 256)
    gif = video(episode, tmp_path / "rollout.gif")
    assert len(Image.open(gif).n_frames * [0]) == episode.num_frames
