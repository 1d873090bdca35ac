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

from instant_fold_core.contracts import KeyframeEvent
from instant_fold_core.demonstration import load_demonstration
from instant_fold_demo.extract import demonstration_from_bag, save

pytestmark = pytest.mark.slow

#: The bundled demonstration's episode (models/demos/README.md).
GARMENT, MODE, VARIANT, SEED = "proc:1", "sleeves_down__bottom_up", "S", 7760499649599549745
FRAME_TOLERANCE, POSITION_TOLERANCE_M = 1, 0.02


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory):
    """The simulated episode and the demonstration extracted from its bag (simulated once)."""
    from instant_fold_sim.garments import resolve_garment
    from instant_fold_sim.programs import resolve_mode
    from instant_fold_sim.rollout import preset, run_episode

    cfg = preset("cpu-small")
    garment = resolve_garment(GARMENT, spacing=cfg.garment_spacing, max_particles=cfg.max_particles)
    episode = run_episode(garment, resolve_mode(MODE), VARIANT, SEED, cfg)
    fps = float(episode.meta["fps"])
    bag = episode_bag(tmp_path_factory.mktemp("sim") / "demo_bag", episode.rgb, episode.depth, episode.intrinsics, fps)
    demo, report = demonstration_from_bag(
        bag, gripper_hands(episode.arm_state, episode.intrinsics, fps), SimMasks(episode.mask)
    )
    return episode, demo, report


def test_simulated_demonstration_is_recovered_from_its_bag(simulated, tmp_path: Path) -> None:
    episode, demo, report = simulated
    truth = true_events(episode.arm_state)
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


#: The main job's start state (models/demos/README.md: another start than the demonstration's).
FOLD_SEED, MAX_STEPS = 1469361038825727794, 150


def _predicted_context(demo) -> str:
    """Fold the main job's start with the default policy conditioned on `demo`; the context the
    oracle bank's classifier assigns to the rollout (docs/evaluation.md)."""
    from instant_fold_evaluation.closed_loop import load_condition, run_rollout
    from instant_fold_evaluation.oracle_bank import Context, OracleBank
    from instant_fold_policy.server import PolicyServer
    from instant_fold_ros.bringup_share import models_dir
    from instant_fold_sim.sim_world import SimWorld

    models = models_dir()
    server = PolicyServer.from_checkpoints(str(models / "policy"), str(models / "encoder"), "cpu", 0)
    world = SimWorld(GARMENT, FOLD_SEED, "cpu-small", record=False)
    load_condition(server, demo, Context(MODE, VARIANT))
    result = run_rollout(world, server, MAX_STEPS)
    family = OracleBank.open(models / "oracle_banks" / "cpu").family(GARMENT, FOLD_SEED)
    return family.score(world.garment.garment_id, f"{MODE}/{VARIANT}", result.record).predicted


def test_extracted_demonstration_makes_the_policy_fold_as_the_simulators_own(simulated) -> None:
    """Item 5 of the issue: the policy conditioned on the extracted demonstration chooses the same
    mode as conditioned on the simulator's own keyframes of that episode."""
    from instant_fold_core.demonstration import from_episode

    episode, demo, _ = simulated
    assert _predicted_context(demo) == _predicted_context(from_episode(episode))
