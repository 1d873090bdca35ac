"""The main job's module end to end (random-weight models, a few queries): outputs and metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from instant_fold.sim_fold import DEFAULT_DEMO, DEFAULT_FOLD, demonstrated_fold, fold_strip, main
from instant_fold_core.demonstration import load_demonstration
from instant_fold_learning.testing import untrained_checkpoints
from instant_fold_ros.bringup_share import models_dir

DEMO = (models_dir() / DEFAULT_DEMO).resolve()  # the source file behind a --symlink-install
#: The README's main job as measured (docs/results/): a finished run to re-score.
MEASURED_MAIN_JOB = Path(__file__).resolve().parents[3] / "docs" / "results" / "main_job.json"


def test_missing_demonstration_is_a_clear_error(tmp_path: Path, capsys) -> None:
    assert main(["--demo", str(tmp_path / "nope.safetensors"), "--out", str(tmp_path)]) == 1
    assert "nope.safetensors not found" in capsys.readouterr().err


def test_the_fold_compared_with_is_the_demonstrations_own(tmp_path: Path, capsys) -> None:
    """`--demo` alone picks the fold the evaluation compares with (the second bundled demonstration
    shows another fold); given `--mode`/`--variant` win; a file that names none, or cannot be read,
    is compared with the bundled demonstration's fold."""
    assert demonstrated_fold(DEMO, "", "") == DEFAULT_FOLD == ("sleeves_down__bottom_up", "S")
    second = DEMO.parent / "proc_00001_body_bottom_up__sleeves_down.safetensors"
    assert demonstrated_fold(second, "", "") == ("body_bottom_up__sleeves_down", "S")
    assert demonstrated_fold(second, "sleeves_down__bottom_up", "L") == ("sleeves_down__bottom_up", "L")
    assert demonstrated_fold(second, "", "L") == ("body_bottom_up__sleeves_down", "L")
    assert demonstrated_fold(tmp_path / "nope.safetensors", "", "") == DEFAULT_FOLD
    unnamed = load_demonstration(second)
    unnamed.mode, unnamed.meta = "", {}
    assert demonstrated_fold(unnamed.save(tmp_path / "human.safetensors"), "", "") == DEFAULT_FOLD
    assert "human.safetensors names no folding mode and variant" in capsys.readouterr().err


def test_missing_models_are_a_clear_error(tmp_path: Path, capsys) -> None:
    args = ["--demo", str(DEMO), "--checkpoint", str(tmp_path / "none"), "--out", str(tmp_path)]
    assert main(args) == 1
    assert "policy checkpoint" in capsys.readouterr().err


def test_a_rescored_run_keeps_its_fold_and_gets_the_banks_scores(tmp_path: Path, capsys) -> None:
    """`--rescore`: the measured main job scored again against the bank it was measured with gives
    its own numbers (the fold record survives its JSON); the run is left as it was, and a garment
    other than the run's, or the run's own folder as --out, is refused."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text(MEASURED_MAIN_JOB.read_text())
    bank = str(models_dir() / "oracle_banks" / "cpu")
    assert main(["--rescore", str(run / "metrics.json"), "--bank", bank, "--out", str(tmp_path / "again")]) == 0
    measured = json.loads(MEASURED_MAIN_JOB.read_text())
    again = json.loads((tmp_path / "again" / "metrics.json").read_text())
    assert again["rescored_from"] == str(run / "metrics.json")
    assert {k: v for k, v in again["same_init"].items() if k != "bank"} == pytest.approx(
        {k: v for k, v in measured["same_init"].items() if k != "bank"}
    )
    assert again["sim"] == measured["sim"] and again["fold"] == measured["fold"]
    assert f"C-SR@95 {'success' if measured['same_init']['csr95_success'] else 'failure'}" in capsys.readouterr().out
    assert json.loads((run / "metrics.json").read_text()) == measured
    other = [
        "--rescore",
        str(run / "metrics.json"),
        "--bank",
        bank,
        "--garment",
        "proc:2",
        "--out",
        str(tmp_path / "x"),
    ]
    assert main(other) == 1
    assert "the run folded proc_00001, --garment proc:2 is proc_00002" in capsys.readouterr().err
    assert main(["--rescore", str(run / "metrics.json"), "--bank", bank, "--out", str(run)]) == 1
    assert "--out is the run's own folder" in capsys.readouterr().err


def test_fold_strip_puts_the_demonstration_above_the_rollout(tmp_path: Path) -> None:
    demo = load_demonstration(DEMO)
    rollout = tmp_path / "rollout.png"
    Image.new("RGB", (3 * 256, 256)).save(rollout)
    strip = Image.open(fold_strip(DEMO, rollout, tmp_path / "strip.png"))
    assert strip.size == (demo.num_keyframes * 256, 512)


@pytest.mark.slow
@pytest.mark.ros
def test_sim_fold_writes_video_strip_and_metrics(tmp_path: Path, ros_env: dict[str, str], monkeypatch) -> None:
    for key, value in ros_env.items():
        monkeypatch.setenv(key, value)
    policy, encoder = untrained_checkpoints(tmp_path / "models")
    out = tmp_path / "run"
    args = ["--demo", str(DEMO), "--checkpoint", str(policy), "--encoder", str(encoder)]
    assert main([*args, "--max-steps", "3", "--seed", "3", "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["fold"]["policy_queries"] == 3 and metrics["fold"]["outcome"] == "step_limit"
    assert metrics["sim"]["frames"] >= 6 and len(metrics["sim"]["keypoint_error"]) == 7
    assert metrics["latency"]["frame_to_command"]["count"] >= 2
    for name in ("rollout.mp4", "fold_strip.png", "rollout_keyframes.png", "graph.log"):
        assert (out / name).stat().st_size > 0, name
