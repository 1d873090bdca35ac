"""Faults: silent garbage that loaded, trained or executed as if it were data.

Each case failed before (issue "faults and bad input", item 7): a zarr chunk file lost in a copy
read back as zeros and passed validation (a missing action chunk became a [0, 0, 0, 0] label);
normalisers with infinite bounds and `alibi_length_scale_m: 0` loaded, after which every prediction
was NaN and `evaluate_policy` reported NaN with exit 0; a chunk stamped in the future (or, over DDS,
stamped 0) skipped the controller's staleness check. Now each is refused with a message.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from instant_fold_core.checkpoint import CheckpointError
from instant_fold_core.dataset.zarr_store import EpisodeStore, StoreError
from instant_fold_core.errors import ConfigError
from instant_fold_learning.encoder.synthetic import make_cloth, synthetic_episode
from instant_fold_learning.policy.configuration import preset
from instant_fold_learning.policy.modeling import InstantFoldPolicy
from instant_fold_learning.policy.synthetic import synthetic_episodes
from instant_fold_learning.testing import untrained_checkpoints
from instant_fold_ros.bringup_share import config_dir


def test_a_lost_zarr_chunk_is_corruption_not_zeros(tmp_path: Path) -> None:
    store = EpisodeStore(tmp_path / "store", mode="a")
    store.write("e0", synthetic_episode(make_cloth(0), seed=0, frames=6, image_size=32))
    lost = next((tmp_path / "store" / "episodes" / "e0" / "action" / "c").rglob("*"))
    while lost.is_dir():
        lost = next(lost.iterdir())
    lost.unlink()  # one frame's action chunk did not survive the copy
    store = EpisodeStore(tmp_path / "store")
    with pytest.raises(StoreError, match="action misses 1 of 6 chunk files"):
        store.read("e0")
    with pytest.raises(StoreError, match="action misses"):
        store.read_array("e0", "action")


@pytest.mark.parametrize(("key", "bound"), [("high", float("inf")), ("low", float("-inf"))])
def test_non_finite_normalisers_are_refused(tmp_path: Path, key: str, bound: float) -> None:
    policy_dir, _ = untrained_checkpoints(tmp_path)
    path = policy_dir / "normalizers.json"
    data = json.loads(path.read_text())
    first = next(iter(data))
    data[first][key][0] = bound
    path.write_text(json.dumps(data))  # Python writes Infinity / NaN, and reads them back
    with pytest.raises(CheckpointError, match="must be finite"):
        InstantFoldPolicy.from_pretrained(policy_dir)


@pytest.mark.parametrize("scale", [0.0, float("nan")])
def test_an_alibi_length_scale_that_is_not_positive_is_refused(scale: float) -> None:
    cfg = preset("cpu-small")
    cfg.model.alibi_length_scale_m = scale
    with pytest.raises(ConfigError, match="alibi_length_scale_m"):
        cfg.validate()


def test_a_chunk_from_the_future_is_stale_too() -> None:
    from instant_fold_control.config import load_robot_config
    from instant_fold_control.controller import DualArmController
    from instant_fold_core.contracts import ActionChunk

    robot = load_robot_config(config_dir() / "robots" / "sim.yaml")
    logs: list[str] = []
    controller = DualArmController(robot, lambda _level, text: logs.append(text))
    home = np.array([[-0.3, 0.0, 0.9], [0.3, 0.0, 0.9]])
    base = tuple(arm.extrinsics.to_base(p) for arm, p in zip(robot.arms, home, strict=True))
    controller.update_measurement((base[0], base[1]), np.ones(2), 100.0)
    controller.step(100.0)
    chunk = ActionChunk(home[None], np.ones((1, 2)), 1, 0.05)
    assert not controller.submit_chunk(chunk, 100.0, 100.0 + 3600.0)  # stamped an hour ahead
    assert controller.safety.counts["refused_stale"] == 1 and "in the future" in logs[-1]
    assert controller.submit_chunk(chunk, 100.0, 100.0)  # a fresh one still runs


def test_evaluate_policy_fails_on_nan_predictions(tmp_path: Path, capsys) -> None:
    """Weights gone NaN (a diverged run) give NaN action errors: reported, and not as a success."""
    from safetensors.torch import load_file, save_file

    from instant_fold_evaluation import evaluate_policy
    from instant_fold_learning import train_policy
    from instant_fold_learning.policy import training as policy_training

    out = tmp_path / "run"
    assert train_policy.main(["--synthetic", "1", "--steps", "1", "--out", str(out), "--device", "cpu"]) == 0
    checkpoint = out / policy_training.CHECKPOINT_DIR
    weights = load_file(str(checkpoint / "model.safetensors"))
    for tensor in weights.values():
        if tensor.is_floating_point():
            tensor.fill_(float("nan"))
    save_file(weights, str(checkpoint / "model.safetensors"))
    data = tmp_path / "data"
    data.mkdir()
    cfg = preset("cpu-small")
    for i, episode in enumerate(synthetic_episodes(1, ("right_over_left",), 1, cfg.model.cloth_feature_dim)):
        episode.save(data / f"e{i}.npz")
    args = ["--checkpoint", str(checkpoint), "--data", str(data), "--samples", "2", "--max-frames", "2"]
    assert evaluate_policy.main(args) == 1
    assert "not finite" in capsys.readouterr().err


@pytest.mark.ros
def test_an_unstamped_chunk_over_dds_is_refused(tmp_path: Path, ros_env: dict[str, str]) -> None:
    """The controller node, driving two loopback Dobot controllers, refuses a chunk stamped 0 (1970)."""
    from loopback_controller import run_script

    here = [[-0.2, 0.0, 0.8], [0.2, 0.0, 0.8]]
    chunk = {"positions": [here], "openness": [[1, 1]], "representation": 0, "steps_to_execute": 1}
    run = run_script(tmp_path, ros_env, [{"delay_s": 0.3, "chunk": {**chunk, "step_duration": 0.1}, "unstamped": True}])
    assert run.probe_code == 0 and run.node_code == 0, run.describe()
    assert "safety:refused_stale" in run.log and "s old" in run.log, run.log
