"""`compare`: issue 28's bars and the default-model rule, on the measured runs docs/evaluation.md
decides with (v6 against the hem-rigid-trained policy, which passes, and against v7, which fails),
and its refusals of runs that do not measure the same thing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from docs_quotes import RESULTS, issue_28_bars

from instant_fold_evaluation.compare import (
    ComparisonError,
    assert_comparable,
    bars,
    compare,
    group,
    main,
    read_run,
    verdict,
)

BENCHMARKS = ("cpu_sleeve", "cpu_garments_sleeve", "cpu", "cpu_garments")
V6 = [RESULTS / f"eval_{b}_v6_first50.json" for b in BENCHMARKS]
V7 = [RESULTS / f"eval_{b}_v7.json" for b in BENCHMARKS]
HEM = [RESULTS / f"eval_{b}_hemtrained.json" for b in BENCHMARKS]


def _runs(paths: list[Path]) -> list[dict]:
    return [read_run(p) for p in paths]


def test_v7_fails_the_rule_on_old_start_context_as_the_docs_say() -> None:
    result = verdict(*compare(_runs(V6), _runs(V7)))
    assert result.lost == ["cpu: Ctx. Acc. (%)"]
    assert result.gained == ["cpu_sleeve: C-SR@95 (%)", "cpu_sleeve: held-out garments C-SR@95 (%)"]
    assert not result.passes


def test_the_hem_trained_policy_passes_the_rule() -> None:
    result = verdict(*compare(_runs(V6), _runs(HEM)))
    assert result.passes and not result.lost and result.gained == ["cpu_sleeve: C-SR@95 (%)"]


def test_the_bars_are_issue_28s_from_the_runs_own_oracle_rows() -> None:
    """The thresholds each run carries are those the docs compute from the reference runs (the same
    banks), and the runs pair by start set whatever order they come in."""
    for seen, garments, reference in (
        (V6[0], V6[1], ("eval_cpu_sleeve_reference.json", "eval_cpu_garments_sleeve_reference.json")),
        (V6[2], V6[3], ("eval_cpu_k10_reference.json", "eval_cpu_garments_k10_reference.json")),
    ):
        (columns,) = group(_runs([garments, seen])).values()
        threshold = {bar.name: bar.threshold for bar in bars(columns)}
        expected = issue_28_bars(*reference)
        assert threshold["C-SR@95 (%)"] == pytest.approx(expected["csr"])
        assert threshold["Geom."] == pytest.approx(expected["geom"])
        assert threshold["held-out garments C-SR@95 (%)"] == pytest.approx(expected["garments_csr"])
        assert threshold["Ctx. Acc. (%)"] == 95 and threshold["first grasps mean (cm)"] == 4


def _edited(tmp_path: Path, source: Path, **changes: object) -> Path:
    summary = json.loads(source.read_text()) | changes
    out = tmp_path / source.name
    out.write_text(json.dumps(summary))
    return out


def test_runs_from_another_machine_or_seed_are_refused(tmp_path: Path) -> None:
    other = _edited(tmp_path, V7[2], machine={"cpu": "AMD EPYC", "cpu_flags_sha256": "0c31b8d624ec"})
    with pytest.raises(ComparisonError, match="cpu runs differ in machine"):
        compare(_runs([V6[2]]), _runs([other]))
    with pytest.raises(ComparisonError, match="differ in seed"):
        compare(_runs([V6[2]]), _runs([_edited(tmp_path, V7[2], seed=1)]))


def test_sides_over_different_benchmarks_are_refused() -> None:
    with pytest.raises(ComparisonError, match="different runs"):
        compare(_runs(V6[2:]), _runs(V7[2:3]))
    with pytest.raises(ComparisonError, match="without a seen-fold run"):
        group(_runs([V6[3]]))
    with pytest.raises(ComparisonError, match="two runs for"):
        group(_runs([V6[2], V7[2]]))


def test_unreadable_runs_are_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "empty").mkdir()
    for path, message in (
        (tmp_path / "broken.json", "unreadable"),
        (tmp_path / "missing.json", "no summary.json"),
        (tmp_path / "empty", "no summary.json"),
        (RESULTS / "v7_training.json", "not an evaluate summary"),
        (_edited(tmp_path, V6[2], benchmark=None), "recorded their benchmark spec"),
    ):
        with pytest.raises(ComparisonError, match=message):
            read_run(path)


def test_a_run_without_an_out_of_sample_oracle_is_refused(tiny_run: Path) -> None:
    """The tiny benchmark's bank has 2 executions per context: no out-of-sample row to set bars by."""
    run = read_run(tiny_run / "out")
    with pytest.raises(ComparisonError, match="no out-of-sample oracle row"):
        verdict(*compare([run], [run]))


def test_the_command_prints_the_table_writes_the_verdict_and_exits_by_it(tmp_path: Path, capsys) -> None:
    out = tmp_path / "compare.json"
    assert main(["--baseline", *map(str, V6), "--candidate", *map(str, V7), "--out", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "| cpu: Ctx. Acc. (%) | >= 95.00 | 98.41 ok | 90.48 |" in printed
    assert "The candidate fails the rule" in printed
    record = json.loads(out.read_text())
    assert record["verdict"]["passes"] is False and record["verdict"]["lost"] == ["cpu: Ctx. Acc. (%)"]
    assert len(record["candidate"]["bars"]) == 12
    assert main(["--baseline", *map(str, V6), "--candidate", *map(str, HEM)]) == 0
    assert main(["--baseline", str(V6[2]), "--candidate", str(tmp_path / "missing.json")]) == 2
    assert "compare: " in capsys.readouterr().err


def test_v6_folds_the_quick_yardstick_alike_on_both_amd_machines() -> None:
    """docs/evaluation.md: v6's `cpu_quick` run on the second machine and its `cpu` run's k = 3
    rollouts on the first have the same per-garment Geom. and successes; `compare` still refuses
    the pair (another benchmark spec and machine)."""
    quick, full = read_run(RESULTS / "eval_cpu_quick_v6_0c31.json"), read_run(V6[2])
    assert (quick["machine"]["cpu_flags_sha256"], full["machine"]["cpu_flags_sha256"]) == (
        "0c31b8d624ec",
        "806a97fa10b6",
    )
    assert quick["checkpoint"] == full["checkpoint"] == "models/policy"
    for garment, row in quick["garments"]["seen"].items():
        other = full["garments"]["seen"][garment]["starts"]["3"]["policy"]
        assert {k: v for k, v in row["policy"].items() if k != "geom"} == {
            k: v for k, v in other.items() if k != "geom"
        }, garment
        assert row["policy"]["geom"] == pytest.approx(other["geom"], rel=1e-12), garment
    assert round(quick["rows"]["policy"]["seen"]["csr95"]["mean"] * 21 / 100) == 16
    with pytest.raises(ComparisonError, match="machine"):
        assert_comparable(quick, full)
