"""Folding programs produce their folds (oracle check), and the mode bank is complete."""

from __future__ import annotations

import numpy as np
import pytest

from instant_fold_sim.garments import make_procedural_garment, newton_tshirt
from instant_fold_sim.programs import FOLDING_MODES, MODES, resolve_mode
from instant_fold_sim.rollout import run_episode

#: Oracle tolerance: every moved keypoint within 10 % of the garment diagonal of its target.
ORACLE_TOL = 0.10


def test_mode_bank_matches_the_paper():
    folds = [MODES[n] for n in FOLDING_MODES]
    assert len(folds) == 19
    assert sorted(m.mode_id for m in folds) == list(range(1, 20))
    assert sum(m.family == "sleeves_first" for m in folds) == 15
    assert sum(m.family == "body_first" for m in folds) == 4
    assert all(m.description.endswith(".") and m.name for m in folds)
    side = [m for m in folds if m.family == "sleeves_first" and m.name.endswith("side_fold")]
    assert {"LL", "LR", "RL", "RR", "SL", "SR"} <= {v for m in side for v in m.variants}
    # Collision-prone sleeve motions are restricted to sequential variants.
    assert "S" not in resolve_mode("sleeves_cross__bottom_up").variants
    assert resolve_mode(1) is MODES["sleeves_down__shoulders_down"]


def _fold_area(points: np.ndarray) -> float:
    xy = points[:, :2]
    return float(np.prod(xy.max(0) - xy.min(0)))


def test_sleeve_fold_then_body_fold_pass_the_oracle(cpu_small):
    garment = make_procedural_garment(0, spacing=cpu_small.garment_spacing)
    ep = run_episode(garment, resolve_mode("sleeves_down__bottom_up"), "S", seed=1, config=cpu_small)
    moves = ep.meta["oracle"]["moves"]
    sleeve = [m for m in moves if m["subaction"] == "sleeves_down"]
    body = [m for m in moves if m["subaction"] == "bottom_up"]
    assert len(sleeve) == 2 and len(body) == 2
    assert max(m["error"] for m in sleeve) < ORACLE_TOL, moves
    assert max(m["error"] for m in body) < ORACLE_TOL, moves
    # The garment really is folded: its footprint shrank a lot and its keypoints stacked up.
    assert _fold_area(ep.particles[-1]) < 0.6 * _fold_area(ep.particles[0])
    # Gripper closes and opens: grasp/release keyframes exist, and the terminal frame is one.
    closed = ep.arm_state[:, :, 3] < 0.5
    assert closed.any() and not closed[-1].any()
    assert ep.keyframes[-1] == ep.num_frames - 1 and len(ep.keyframes) >= 4


@pytest.mark.slow
@pytest.mark.parametrize("garment_spec", ["proc:3", "newton_tshirt"])
@pytest.mark.parametrize("mode_name", FOLDING_MODES)
def test_every_mode_passes_the_oracle(garment_spec, mode_name, cpu_small, record_property):
    garment = (
        newton_tshirt(max_particles=600)
        if garment_spec == "newton_tshirt"
        else make_procedural_garment(3, spacing=cpu_small.garment_spacing)
    )
    mode = MODES[mode_name]
    ep = run_episode(garment, mode, mode.variants[0], seed=7, config=cpu_small)
    record_property("oracle_max_error", ep.meta["oracle"]["max_error"])  # per-mode table: --junitxml
    assert ep.meta["oracle"]["max_error"] < ORACLE_TOL, ep.meta["oracle"]
