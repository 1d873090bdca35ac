"""benchmarks/paper_gpu_report.py: the paper-scale GPU report's rates and projections follow their
definitions from the stages' logs, and a stage that did not run leaves its entries empty."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from script_module import load_script


@pytest.fixture(scope="module")
def report_module():
    return load_script(Path("benchmarks/paper_gpu_report.py"))


def _log(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_rates_and_projections_come_from_the_logs(tmp_path: Path, report_module) -> None:
    work, out = tmp_path / "work", tmp_path / "out"
    out.mkdir()
    _log(
        work / "pretrain" / "log.jsonl",
        [
            {"event": "start"},
            {"event": "train", "step": 1, "elapsed_s": 50.0, "loss": 5.0, "tokens_per_s": 10.0},
            {"event": "train", "step": 11, "elapsed_s": 70.0, "loss": 4.0, "tokens_per_s": 900.0},
        ],
    )
    _log(
        work / "recipe" / "policy" / "log.jsonl",
        [{"event": "train", "step": s, "steps_per_s": r, "loss": 1.0 / s} for s, r in ((1, 1.0), (2, 9.0), (3, 11.0))],
    )
    (work / "pretrain.rc").write_text("0\n")
    (work / "bench_tokenizer.json").write_text('{"ms": 3}')
    result = report_module.main([str(out), str(work)])
    assert json.loads((out / "bench_paper_gpu.json").read_text()) == result
    encoder = result["encoder_pretraining"]
    assert encoder["seconds_per_step"] == pytest.approx(2.0)  # (70 - 50) s over 10 steps: the first is left out
    assert encoder["projected_hours_20000_steps"] == pytest.approx(20000 * 2.0 / 3600)
    assert (encoder["steps"], encoder["first_loss"], encoder["last_loss"]) == (11, 5.0, 4.0)
    policy = result["policy_training"]
    assert policy["steps_per_s"] == pytest.approx(10.0)  # the second half of the records: 9 and 11
    assert policy["projected_hours_225000_steps"] == pytest.approx(225000 / 10.0 / 3600)
    assert result["exit_codes"] == {
        "pretrain": 0,
        "recipe": None,
        "bench_policy_fp32": None,
        "bench_policy_bf16": None,
        "bench_tokenizer": None,
    }
    assert result["tokenizer"] == {"ms": 3}
    assert result["policy_query"] == {"float32": None, "bfloat16": None} and result["recipe_summary"] is None


def test_a_report_of_nothing_is_empty_not_an_error(tmp_path: Path, report_module) -> None:
    result = report_module.report(tmp_path)
    assert "encoder_pretraining" not in result and "policy_training" not in result
    assert set(result["exit_codes"].values()) == {None}
