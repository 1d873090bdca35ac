"""The Newton cloth scene: gravity + table, pinning grasp and clean release, batched worlds."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from instant_fold_sim.garments import make_procedural_garment
from instant_fold_sim.keypoints import detect_keypoints
from instant_fold_sim.scene import ClothBatch, ClothScene


def test_grasp_moves_pinned_particles_and_release_frees_them(small_garment, cpu_small):
    rest = small_garment.vertices * cpu_small.sim.garment_scale
    start = rest + np.array([0.0, 0.0, 0.1])
    scene = ClothScene.build(small_garment, cpu_small.sim, initial_positions=start)
    scene.settle(30)
    settled = scene.positions()
    # Gravity + table: the dropped cloth lies on the table, not below it.
    assert settled[:, 2].max() < 0.05 and settled[:, 2].min() > -0.03

    tip = detect_keypoints(small_garment.vertices)[0]  # top_left: the left sleeve tip
    scene.grippers[0].position = settled[tip].copy()
    held = scene.grasp(0)
    assert tip in held and len(held) >= 1
    assert scene.arm_states()[0, 3] == 0.0
    assert not scene.active()[held].any() and scene.active().sum() == scene.num_particles - len(held)

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
    assert scene.grippers[0].held.size == 0 and scene.arm_states()[0, 3] == 1.0
    assert scene.active().all()
    scene.step_frame([lift + np.array([0.0, 0.0, 0.2]), scene.grippers[1].position])
    scene.settle(40)
    # Released particles fall back onto the cloth/table instead of staying at the gripper.
    assert scene.positions()[held, 2].max() < 0.08


def test_cloth_pushed_into_the_table_stays_on_top(small_garment, cpu_small):
    """A layer slammed down onto the table (fast, as a placing gripper does) never goes through it."""
    rest = small_garment.vertices * cpu_small.sim.garment_scale
    scene = ClothScene.build(small_garment, cpu_small.sim, initial_positions=rest + np.array([0.0, 0.0, 0.02]))
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


def _drag(scene: ClothScene, frames: int) -> np.ndarray:
    """Grasp the left sleeve tip and lift it to the side over `frames` frames; returns the goal."""
    tip = detect_keypoints(scene.garment.vertices)[0]
    scene.grippers[0].position = scene.positions()[tip].copy()
    scene.grasp(0)
    goal = scene.grippers[0].position + np.array([0.2, 0.0, 0.25])
    start = scene.grippers[0].position.copy()
    for k in range(1, frames + 1):
        scene.step_frame([start + (goal - start) * k / frames, scene.grippers[1].position])
    return goal


def test_batched_worlds_step_together_without_touching_each_other(small_garment, cpu_small):
    other = make_procedural_garment(1, spacing=cpu_small.garment_spacing)
    # Worlds 1 and 2 hold the same garment at the same place: only world separation keeps them apart.
    batch = ClothBatch([small_garment, other, other], cpu_small.sim)
    a, b, c = batch.scenes
    for scene in batch.scenes:
        scene.set_positions(scene.garment.vertices * cpu_small.sim.garment_scale + [0.0, 0.0, 0.05])
    for _ in range(25):
        batch.step()
    for scene in batch.scenes:  # each lies flat on its table, none on top of another
        assert scene.positions()[:, 2].max() < 0.05 and scene.positions()[:, 2].min() > -0.01
    np.testing.assert_array_equal(b.positions(), c.positions())
    resting_c = c.positions()
    resting_a = a.positions()
    t0 = a.sim_time

    # One thread per world: world 1 drags for 8 frames; world 0 steps 3 frames, then leaves and
    # parks; world 2 is not at the frame barrier and simply holds. Both threads are members before
    # either steps (a thread that starts late would otherwise step its frames alone).
    joined = threading.Barrier(2, timeout=60)

    def drag() -> None:
        with batch.frame_barrier(1):
            joined.wait()
            _drag(b, 8)

    def idle() -> None:
        with batch.frame_barrier(0):
            joined.wait()
            for _ in range(3):
                a.step_frame()
        a.park()

    threads = [threading.Thread(target=drag), threading.Thread(target=idle)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    # 8 shared control frames, not 8 + 3: the worlds' requests were stepped together.
    assert np.isclose(a.sim_time - t0, 8 * a.frame_dt) and np.isclose(b.sim_time - t0, 8 * b.frame_dt)
    assert b.grippers[0].held.size and not b.active()[b.grippers[0].held].any() and a.active().sum() == 0
    # The drag moved world 1 only: world 0's cloth (at rest, then parked) and world 2's (lying
    # where world 1's was, now under the lifted sleeve) stayed where they were.
    np.testing.assert_allclose(a.positions(), resting_a, atol=5e-3)
    np.testing.assert_allclose(c.positions(), resting_c, atol=5e-3)
    assert np.abs(b.positions() - c.positions()).max() > 0.2

    # A world of a batch computes what a scene of its own computes (bit-identical on CPU here;
    # the tolerance leaves room for contact sums in another order).
    solo = ClothScene.build(other, cpu_small.sim)
    solo.set_positions(other.vertices * cpu_small.sim.garment_scale + [0.0, 0.0, 0.05])
    for _ in range(25):
        solo.step_frame()
    goal = _drag(solo, 8)
    np.testing.assert_allclose(b.positions(), solo.positions(), atol=1e-4)
    held = b.grippers[0].held
    np.testing.assert_allclose(b.positions()[held], goal + b.grippers[0].offsets / 100.0, atol=1e-4)

    # Targets that are not two finite positions are refused before anything is simulated.
    for bad in ([[0.0, 0.0, 0.1]], [[np.nan, 0.0, 0.1], [0.0, 0.0, 0.1]]):
        with pytest.raises(ValueError, match="targets"):
            b.step_frame(bad)
    assert np.isclose(b.sim_time - t0, 8 * b.frame_dt)


@pytest.mark.parametrize("substeps", [8, 3])
def test_replayed_frames_compute_what_launched_frames_compute(small_garment, cpu_small, substeps):
    """A frame replayed from its recorded graph is bit-identical to one launched kernel by kernel,
    through a drop, a grasp and drag, a release and a park (the held particles change, the graph
    does not); an odd substep count swaps the states within a frame, so a frame starts from either."""
    other = make_procedural_garment(1, spacing=cpu_small.garment_spacing)
    sim = type(cpu_small.sim)(**{**cpu_small.sim.to_dict(), "substeps": substeps})
    runs = []
    for capture in (False, True):
        batch = ClothBatch([small_garment, other], sim, capture=capture)
        a, b = batch.scenes
        for scene in batch.scenes:
            scene.set_positions(scene.garment.vertices * sim.garment_scale + [0.0, 0.0, 0.05])
        for _ in range(6):
            batch.step()
        _drag(a, 5)
        a.release(0)
        b.park()
        for _ in range(4):
            batch.step()
        # One graph per state the frames start from (two when a frame swaps them), for the whole run.
        assert len(batch._graphs) == (0 if not capture else 2 if substeps % 2 else 1)
        runs.append(np.concatenate([a.positions(), b.positions(), batch.snapshot()[1]]))
    np.testing.assert_array_equal(runs[0], runs[1])
