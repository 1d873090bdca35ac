"""The Newton cloth scene: gravity + table, pinning grasp and clean release."""

from __future__ import annotations

import numpy as np
from newton import ParticleFlags

from instant_fold_sim.keypoints import detect_keypoints
from instant_fold_sim.scene import ClothScene


def test_grasp_moves_pinned_particles_and_release_frees_them(small_garment, cpu_small):
    rest = small_garment.vertices * cpu_small.sim.garment_scale
    start = rest + np.array([0.0, 0.0, 0.1])
    scene = ClothScene(small_garment, cpu_small.sim, initial_positions=start)
    scene.settle(30)
    settled = scene.positions()
    # Gravity + table: the dropped cloth lies on the table, not below it.
    assert settled[:, 2].max() < 0.05 and settled[:, 2].min() > -0.03

    tip = detect_keypoints(small_garment.vertices)[0]  # top_left: the left sleeve tip
    scene.grippers[0].position = settled[tip].copy()
    held = scene.grasp(0)
    assert tip in held and len(held) >= 1
    assert scene.gripper_states()[0, 3] == 0.0
    flags = scene.model.particle_flags.numpy()
    assert not (flags[held] & int(ParticleFlags.ACTIVE)).any()

    lift = settled[tip] + [0.1, 0.0, 0.3]
    for k in range(1, 11):
        scene.step_frame([settled[tip] + (lift - settled[tip]) * k / 10, scene.grippers[1].position])
    lifted = scene.positions()
    # Pinned particles follow the gripper rigidly; far-away cloth (the other sleeve) stays put.
    offsets = settled[held] - settled[tip]
    np.testing.assert_allclose(lifted[held], lift + offsets, atol=1e-4)
    far = np.linalg.norm(settled[:, :2] - settled[tip, :2], axis=1) > 0.8
    assert np.abs(lifted[far] - settled[far]).max() < 0.05

    scene.release(0)
    assert scene.grippers[0].held.size == 0 and scene.gripper_states()[0, 3] == 1.0
    assert (scene.model.particle_flags.numpy()[held] & int(ParticleFlags.ACTIVE)).all()
    scene.step_frame([lift + np.array([0.0, 0.0, 0.2]), scene.grippers[1].position])
    scene.settle(40)
    # Released particles fall back onto the cloth/table instead of staying at the gripper.
    assert scene.positions()[held, 2].max() < 0.08


def test_cloth_pushed_into_the_table_stays_on_top(small_garment, cpu_small):
    """A layer slammed down onto the table (fast, as a placing gripper does) never goes through it."""
    rest = small_garment.vertices * cpu_small.sim.garment_scale
    scene = ClothScene(small_garment, cpu_small.sim, initial_positions=rest + np.array([0.0, 0.0, 0.02]))
    tip = detect_keypoints(small_garment.vertices)[0]
    scene.grippers[0].position = scene.positions()[tip].copy()
    scene.grasp(0)
    high = scene.grippers[0].position + np.array([0.3, 0.0, 0.5])
    for _ in range(4):
        scene.step_frame([high, scene.grippers[1].position])
    below = high * [1.0, 1.0, 0.0] - [0.0, 0.0, 0.3]  # commanded 30 cm into the table in one frame
    scene.step_frame([below, scene.grippers[1].position])
    scene.release(0)
    scene.settle(10)
    floor = 0.2 * cpu_small.sim.particle_radius
    assert scene.positions()[:, 2].min() >= floor, scene.positions()[:, 2].min()
