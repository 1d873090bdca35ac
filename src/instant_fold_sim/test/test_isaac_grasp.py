"""The Isaac Lab scene's grasp models without Isaac Lab: what held cloth follows (issue 31)."""

from __future__ import annotations

import numpy as np
import pytest

from instant_fold_sim.isaac_lab.grasp import GRASP_MODELS, HeldCloth

RADIUS = 0.05
#: A hand turned a quarter turn about z (world x -> y).
QUARTER_TURN = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])


def cloth() -> np.ndarray:
    """Five particles: three within the grasp radius of the origin, two outside it."""
    return np.array([[0.0, 0.0, 0.0], [0.02, 0.0, 0.0], [0.0, 0.03, 0.0], [0.2, 0.0, 0.0], [0.0, 0.3, 0.0]])


def test_fingers_hold_the_cloth_where_the_hand_is_not_where_it_was_sent() -> None:
    """A target beyond the arm's reach: the hand stops short, and the held particles stay with it."""
    hold = HeldCloth("fingers")
    hold.grasp(cloth(), np.zeros(3), np.eye(3), RADIUS, np.zeros(0, np.int64))
    assert hold.ids.tolist() == [0, 1, 2]
    out_of_reach = np.array([2.0, 0.0, 0.5])
    hand = np.array([0.6, 0.0, 0.2])  # where the simulated fingers got to
    held = hold.targets(hand, np.eye(3), out_of_reach)
    assert np.allclose(held, cloth()[:3] + hand)
    assert np.linalg.norm(held - out_of_reach, axis=1).min() > 1.0


def test_fingers_turn_the_held_cloth_with_the_hand() -> None:
    hold = HeldCloth("fingers")
    hold.grasp(cloth(), np.zeros(3), np.eye(3), RADIUS, np.zeros(0, np.int64))
    held = hold.targets(np.zeros(3), QUARTER_TURN, np.zeros(3))
    assert np.allclose(held, cloth()[:3] @ QUARTER_TURN.T)  # (0.02, 0, 0) -> (0, 0.02, 0)
    # offsets are kept in the hand's frame: grasping with a turned hand and turning back undoes it
    turned = HeldCloth("fingers")
    turned.grasp(cloth(), np.zeros(3), QUARTER_TURN, RADIUS, np.zeros(0, np.int64))
    assert np.allclose(turned.targets(np.zeros(3), QUARTER_TURN, np.zeros(3)), cloth()[:3], atol=1e-7)


def test_commanded_is_the_first_attachment_bit_for_bit() -> None:
    """The model the first numbers were measured with: the commanded target plus world offsets."""
    positions = cloth().astype(np.float32)
    tcp = np.array([0.001, 0.002, 0.003])
    hold = HeldCloth("commanded")
    hold.grasp(positions, tcp, QUARTER_TURN, RADIUS, np.zeros(0, np.int64))
    target = np.array([2.0, 0.0, 0.5])
    before = np.asarray(target, np.float32) + (positions[hold.ids] - tcp).astype(np.float32)
    assert np.array_equal(hold.targets(np.array([0.6, 0.0, 0.2]), np.eye(3), target), before)


def test_grasps_skip_the_other_grippers_cloth_and_take_the_nearest_when_none_is_near() -> None:
    hold = HeldCloth("fingers")
    hold.grasp(cloth(), np.zeros(3), np.eye(3), RADIUS, np.array([0, 1]))
    assert hold.ids.tolist() == [2]
    hold.grasp(cloth(), np.array([0.25, 0.0, 0.0]), np.eye(3), 0.01, np.zeros(0, np.int64))
    assert hold.ids.tolist() == [3]
    hold.release()
    assert hold.ids.size == 0 and hold.targets(np.zeros(3), np.eye(3), np.zeros(3)).shape == (0, 3)


def test_an_unknown_grasp_model_is_refused() -> None:
    assert GRASP_MODELS == ("fingers", "commanded")
    with pytest.raises(ValueError, match="expected one of fingers, commanded"):
        HeldCloth("friction")
