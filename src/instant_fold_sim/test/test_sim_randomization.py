"""Domain randomisation: start layouts the solver can simulate."""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.spatial import cKDTree

from instant_fold_sim.garments import make_procedural_garment
from instant_fold_sim.keypoints import detect_keypoints
from instant_fold_sim.randomization import STACK_GAP, initial_layout, sample_randomization
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
