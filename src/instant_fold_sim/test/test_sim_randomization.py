"""Domain randomisation: start layouts the solver can simulate."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.spatial import cKDTree

from instant_fold_core.errors import ConfigError
from instant_fold_sim.garments import make_procedural_garment
from instant_fold_sim.keypoints import detect_keypoints
from instant_fold_sim.randomization import STACK_GAP, DRRanges, initial_layout, sample_randomization
from instant_fold_sim.rollout import start_state


def test_a_sleeve_pushed_over_the_body_starts_on_top_of_it(small_garment):
    kp = detect_keypoints(small_garment.vertices)
    canonical = small_garment.vertices * 2.0
    dr = dataclasses.replace(
        sample_randomization(np.random.default_rng(0)),
        translation=(0.0, 0.0),
        rotation_deg=0.0,
        sleeve_mode="R",
        sleeve_amplitude={"right": 0.08},
        sleeve_direction_deg={"right": 180.0},  # pushed inwards, over the body
        sleeve_rotation_deg={"right": 0.0},
        wrinkle=False,
    )
    pos = initial_layout(canonical, kp, dr)
    sleeve = canonical[:, 0] > canonical[kp[5], 0]
    body = np.flatnonzero(~sleeve)
    np.testing.assert_array_equal(pos[body, 2], dr.drop_height)  # the body is not touched
    edge = np.median(cKDTree(canonical[:, :2]).query(canonical[:, :2], k=2)[0][:, 1])
    near = cKDTree(pos[body, :2]).query_ball_point(pos[sleeve, :2], r=edge)
    over = np.array([bool(n) for n in near])
    assert over.sum() >= 5  # the push really put part of the sleeve over the body ...
    # ... and that part starts above the body, not in its plane (where layers would interlock).
    assert (pos[sleeve][over, 2] >= dr.drop_height + STACK_GAP).all()
    assert (pos[sleeve][~over, 2] == dr.drop_height).all()


def test_start_states_lie_flat(cpu_small):
    """The start that stood up as a 12 cm tent (a sleeve dropped inside the body; proc:3, seed 7)."""
    garment = make_procedural_garment(3, spacing=cpu_small.garment_spacing)
    z = start_state(garment, 7, cpu_small).scene.positions()[:, 2]
    assert np.quantile(z, 0.99) < 0.06 and z.max() < 0.1, np.quantile(z, [0.5, 0.99, 1.0])


def _disturbed(garment, side: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The canonical sim-space garment, its keypoint ids and a disturbance of one sleeve alone
    (no pose, no wrinkles): what `initial_layout` moves is what the disturbance selected."""
    kp = detect_keypoints(garment.vertices)
    dr = dataclasses.replace(
        sample_randomization(np.random.default_rng(0)),
        translation=(0.0, 0.0),
        rotation_deg=0.0,
        sleeve_mode=side[0].upper(),
        sleeve_amplitude={side: 0.06},
        sleeve_direction_deg={side: 90.0},
        sleeve_rotation_deg={side: 25.0},
        wrinkle=False,
    )
    return garment.vertices * 2.0, kp, dr


def test_procedural_tops_label_their_sleeves() -> None:
    garment = make_procedural_garment(5, spacing=0.035)
    kp = detect_keypoints(garment.vertices)
    names = ["top_left", "top_right", "bottom_left", "bottom_right"]
    labels = dict(zip(names, garment.sleeve_side[kp[:4]], strict=True))
    assert labels == {"top_left": -1, "top_right": 1, "bottom_left": 0, "bottom_right": 0}
    for side in (-1, 1):  # each sleeve lies on its side of the body
        assert (garment.sleeve_side == side).sum() >= 10
        assert np.all(side * garment.vertices[garment.sleeve_side == side, 0] > 0)


def test_the_sleeve_selection_moves_the_sleeve_not_the_hem() -> None:
    """proc_00005's hem is wider than its shoulders: selected by x, the left sleeve's disturbance
    drags the left hem corner (docs/sim.md, "Known limitations"); selected by sleeve it does not."""
    garment = make_procedural_garment(5, spacing=0.035)
    canonical, kp, dr = _disturbed(garment, "left")
    by_x = initial_layout(canonical, kp, dr)
    by_sleeve = initial_layout(canonical, kp, dr, garment.sleeve_side)
    moved_x = np.linalg.norm(by_x[:, :2] - canonical[:, :2], axis=1) > 1e-9
    moved_sleeve = np.linalg.norm(by_sleeve[:, :2] - canonical[:, :2], axis=1) > 1e-9
    bottom_left, top_left = kp[2], kp[0]
    assert moved_x[bottom_left] and not moved_sleeve[bottom_left]
    assert moved_sleeve[top_left]
    np.testing.assert_array_equal(moved_sleeve, garment.sleeve_side == -1)


def test_an_unknown_sleeve_selection_is_refused() -> None:
    with pytest.raises(ConfigError, match="sleeve_selection"):
        DRRanges(sleeve_selection="hem")


def test_the_sleeve_selection_refuses_a_mesh_without_labels_and_wrong_labels(cpu_small) -> None:
    from instant_fold_sim.garments import GarmentMesh
    from instant_fold_sim.rollout import sleeve_labels

    garment = make_procedural_garment(5, spacing=cpu_small.garment_spacing)
    by_sleeve = dataclasses.replace(cpu_small, dr=dataclasses.replace(cpu_small.dr, sleeve_selection="sleeve"))
    assert sleeve_labels(garment, cpu_small) is None and sleeve_labels(garment, by_sleeve) is garment.sleeve_side
    unlabelled = GarmentMesh(garment.vertices, garment.faces, "mesh_00000", "train", "obj")
    with pytest.raises(ConfigError, match="mesh_00000 .obj. has none"):
        sleeve_labels(unlabelled, by_sleeve)
    canonical, kp, dr = _disturbed(garment, "left")
    with pytest.raises(ConfigError, match="one label per particle"):
        initial_layout(canonical, kp, dr, garment.sleeve_side[:-1])


def test_the_cpu_small_sleeve_preset_is_cpu_small_with_the_sleeve_selection(cpu_small) -> None:
    """The preset of the hem-rigid starts differs from cpu-small in the selection (and its name) only,
    so stores, banks and demonstrations made with either say which they are."""
    from instant_fold_sim.rollout import preset, sleeve_labels

    by_sleeve = preset("cpu-small-sleeve")
    assert (by_sleeve.name, by_sleeve.dr.sleeve_selection, cpu_small.dr.sleeve_selection) == (
        "cpu-small-sleeve",
        "sleeve",
        "x",
    )
    assert dataclasses.replace(by_sleeve, name="cpu-small", dr=cpu_small.dr) == cpu_small
    garment = make_procedural_garment(5, spacing=by_sleeve.garment_spacing)
    assert sleeve_labels(garment, by_sleeve) is garment.sleeve_side
