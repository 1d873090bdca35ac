"""End to end without a human (slow: simulates a fold, minutes on a loaded CPU): the simulator's
scripted sleeves-then-hem fold rendered to a rosbag, hands reported at the grippers by the
tracker stand-in, the simulator's cloth masks; bag -> tracks -> keyframes -> Demonstration must
recover the simulator's own grasp/release events (same frame +- 1) and positions (within 2 cm).
What this does not test: MediaPipe on real hands (see sim_demo.py and docs/demonstrations.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sim_demo import SimMasks, episode_bag, gripper_hands, true_events

from instant_fold_core.demonstration import KeyframeEvent, load_demonstration
from instant_fold_demo.extract import demonstration_from_bag, save

pytestmark = pytest.mark.slow

#: The bundled demonstration's episode (models/demos/README.md).
GARMENT, MODE, VARIANT, SEED = "proc:1", "sleeves_down__bottom_up", "S", 7760499649599549745
FRAME_TOLERANCE, POSITION_TOLERANCE_M = 1, 0.02


def test_simulated_demonstration_is_recovered_from_its_bag(tmp_path: Path) -> None:
    from instant_fold_sim.garments import resolve_garment
    from instant_fold_sim.programs import resolve_mode
    from instant_fold_sim.rollout import preset, run_episode

    cfg = preset("cpu-small")
    garment = resolve_garment(GARMENT, spacing=cfg.garment_spacing, max_particles=cfg.max_particles)
    episode = run_episode(garment, resolve_mode(MODE), VARIANT, SEED, cfg)
    fps = float(episode.meta["fps"])
    bag = episode_bag(tmp_path / "demo_bag", episode.rgb, episode.depth, episode.intrinsics, fps)
    demo, report = demonstration_from_bag(
        bag, gripper_hands(episode.gripper_state, episode.intrinsics, fps), SimMasks(episode.mask)
    )
    truth = true_events(episode.gripper_state)
    found = [
        (("left", "right").index(e["arm"]), e["kind"], e["frame"], np.array(e["position"])) for e in report["events"]
    ]
    assert [(a, k) for a, k, _, _ in found] == [(a, k) for a, k, _, _ in truth]
    for (_, _, frame, pos), (_, _, true_frame, true_pos) in zip(found, truth, strict=True):
        assert abs(frame - true_frame) <= FRAME_TOLERANCE
        assert np.linalg.norm(pos - true_pos) <= POSITION_TOLERANCE_M
    # one keyframe per simultaneous event, a retraction before the left arm's second grasp, home at the end
    assert demo.events[-1].tolist() == [KeyframeEvent.TERMINAL] * 2
    assert (demo.events == KeyframeEvent.GRASP).sum() == 4 and (demo.events == KeyframeEvent.RELEASE).sum() == 4
    out = tmp_path / "human.safetensors"
    save(demo, report, out)
    assert load_demonstration(out).num_keyframes == demo.num_keyframes
