"""`compare`: issue 28's bars over evaluation runs, and the rule a new default model must pass.

    python -m instant_fold_evaluation.compare \\
        --baseline outputs/eval/v6_cpu outputs/eval/v6_cpu_garments \\
        --candidate outputs/eval/v7_cpu outputs/eval/v7_cpu_garments --out compare.json

Each side is one policy's `evaluate` runs (folders or their `summary.json`). Runs are grouped by
start set (simulator preset and seen folds: `cpu` and `cpu_garments` are one set, `cpu_sleeve` and
`cpu_garments_sleeve` another); within a set, the run whose garments are all of the held-out
split (`instant_fold_sim.garments.split_of_seed`) is the held-out garments column.

The bars (issue 28, "Done when"), per start set, from the run's own out-of-sample oracle row:
context accuracy >= 95 %, C-SR@95 >= 80 % of the oracle's, Geom. <= 1.5x the oracle's, first grasps
mean <= 4 cm and >= 75 % within 5 cm, held-out garments' C-SR@95 >= 60 % of their oracle's.

The rule (docs/evaluation.md, "The rule for a new default"): a candidate replaces the baseline when
it meets every bar the baseline meets, and at least one more. It is fixed before a candidate's
runs, so that a comparison cannot choose its yardstick after the fact. Runs that do not measure
the same thing (another benchmark, bank, seed, event targets or machine: numbers from two CPUs
are not comparable to the last digit) are refused with the fields that differ.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from instant_fold_core.errors import InstantFoldError
from instant_fold_evaluation.evaluate import EvaluationError, read_summary
from instant_fold_sim.garments import split_of_seed

#: Issue 28's bars: context accuracy (%), shares of the out-of-sample oracle's C-SR@95 (seen folds,
#: held-out garments), multiple of its Geom., first grasps' mean error (m) and share within 5 cm.
CTX_ACC_MIN = 95.0
CSR_SHARE, GARMENTS_CSR_SHARE, GEOM_FACTOR = 0.8, 0.6, 1.5
FIRST_GRASP_MEAN_MAX_M, FIRST_GRASP_WITHIN_5CM_MIN = 0.04, 0.75

#: What two runs of one benchmark must share to be compared (besides the benchmark spec itself).
SAME = (
    "bank_runs",
    "event_targets",
    "first_grasp_match_m",
    "grasp_match_m",
    "grasp_conflict_m",
    "max_steps",
    "sim_backend",
)


class ComparisonError(InstantFoldError, ValueError):
    """The runs cannot be compared as asked; the message names the runs and the fields."""


@dataclass(frozen=True)
class Bar:
    """One bar of one start set: the measured value against its threshold."""

    benchmark: str  # the start set's seen-fold benchmark
    name: str
    value: float
    threshold: float
    at_least: bool  # True: value >= threshold passes; False: value <= threshold

    @property
    def met(self) -> bool:
        return self.value >= self.threshold if self.at_least else self.value <= self.threshold

    @property
    def key(self) -> str:
        return f"{self.benchmark}: {self.name}"


def read_run(path: str | Path) -> dict[str, Any]:
    """An evaluate run's summary, from its folder or the JSON itself (e.g. a copy in docs/results)."""
    try:
        summary = read_summary(Path(path))
    except EvaluationError as exc:
        raise ComparisonError(str(exc)) from None
    if not summary.get("benchmark"):
        raise ComparisonError(f"{path}: a summary from before runs recorded their benchmark spec")
    return summary


def start_set(summary: dict[str, Any]) -> str:
    """The start set a run measures: its simulator preset and the folds it was trained on."""
    spec = summary["benchmark"]
    return f"{spec['preset']} [{', '.join(spec['seen'])}]"


def held_out_garments(summary: dict[str, Any]) -> bool:
    """Whether every garment of the run is a procedural garment of the held-out split."""
    garments = summary["benchmark"]["garments"]
    return all(g.startswith("proc:") and split_of_seed(int(g.split(":")[1])) == "heldout" for g in garments)


def group(summaries: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Runs by start set, then by column (`seen` folds on training garments, `garments`)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for summary in summaries:
        column, key = "garments" if held_out_garments(summary) else "seen", start_set(summary)
        columns = out.setdefault(key, {})
        if column in columns:
            raise ComparisonError(
                f"two runs for {key} / {column}: {columns[column]['benchmark']['name']} and "
                f"{summary['benchmark']['name']}"
            )
        columns[column] = summary
    for name, columns in out.items():
        if "seen" not in columns:
            raise ComparisonError(f"{name}: held-out garments without a seen-fold run")
    return out


def assert_comparable(a: dict[str, Any], b: dict[str, Any]) -> None:
    """ComparisonError unless two runs measure the same thing: benchmark spec, bank, sampler seed,
    event targets and their distances, and the machine (CPU flags and numeric library versions)."""
    differ = [k for k in SAME if a.get(k) != b.get(k)]
    if a["benchmark"] != b["benchmark"]:
        differ.append("benchmark")
    if (a.get("seed") or 0) != (b.get("seed") or 0):
        differ.append("seed")
    if a.get("machine") != b.get("machine"):
        differ.append(f"machine ({a.get('machine')} vs {b.get('machine')})")
    if differ:
        raise ComparisonError(f"{a['benchmark']['name']} runs differ in {', '.join(differ)}: not comparable")


def _policy(summary: dict[str, Any]) -> dict[str, Any]:
    try:
        return summary["rows"]["policy"]["seen"]
    except KeyError:
        raise ComparisonError(f"{summary['benchmark']['name']}: the run has no policy row (a reference run)") from None


def _oracle(summary: dict[str, Any]) -> dict[str, Any]:
    try:
        return summary["rows"]["oracle-out-of-sample"]["seen"]
    except KeyError:
        raise ComparisonError(f"{summary['benchmark']['name']}: no out-of-sample oracle row (bank of < 3)") from None


def bars(columns: dict[str, dict[str, Any]]) -> list[Bar]:
    """Issue 28's bars of one start set's runs, named by its seen-fold benchmark."""
    name = columns["seen"]["benchmark"]["name"]
    seen, oracle = _policy(columns["seen"]), _oracle(columns["seen"])
    grasp = seen["first_grasp"]
    out = [
        Bar(name, "Ctx. Acc. (%)", seen["ctx_acc"]["mean"], CTX_ACC_MIN, True),
        Bar(name, "C-SR@95 (%)", seen["csr95"]["mean"], CSR_SHARE * oracle["csr95"]["mean"], True),
        Bar(name, "Geom.", seen["geom"]["mean"], GEOM_FACTOR * oracle["geom"]["mean"], False),
        Bar(name, "first grasps mean (cm)", 100 * grasp["xy_m"]["mean"], 100 * FIRST_GRASP_MEAN_MAX_M, False),
        Bar(name, "first grasps within 5 cm (%)", 100 * grasp["within_5cm"], 100 * FIRST_GRASP_WITHIN_5CM_MIN, True),
    ]
    if "garments" in columns:
        held, held_oracle = _policy(columns["garments"]), _oracle(columns["garments"])
        out.append(
            Bar(
                name,
                "held-out garments C-SR@95 (%)",
                held["csr95"]["mean"],
                GARMENTS_CSR_SHARE * held_oracle["csr95"]["mean"],
                True,
            )
        )
    return out


@dataclass(frozen=True)
class Verdict:
    """The rule applied: the bars the baseline meets that the candidate keeps or loses, and those it gains."""

    kept: list[str]
    lost: list[str]
    gained: list[str]

    @property
    def passes(self) -> bool:
        return not self.lost and bool(self.gained)


def compare(baseline: Sequence[dict[str, Any]], candidate: Sequence[dict[str, Any]]) -> tuple[list[Bar], list[Bar]]:
    """Both sides' bars, over the same start sets and columns of comparable runs."""
    a, b = group(baseline), group(candidate)
    if {k: sorted(v) for k, v in a.items()} != {k: sorted(v) for k, v in b.items()}:
        raise ComparisonError(f"the sides measure different runs: baseline {_columns(a)}, candidate {_columns(b)}")
    for name, columns in a.items():
        for column, summary in columns.items():
            assert_comparable(summary, b[name][column])
    return [x for name in a for x in bars(a[name])], [x for name in b for x in bars(b[name])]


def _columns(groups: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """The benchmarks of one side's runs, for an error message."""
    return [summary["benchmark"]["name"] for columns in groups.values() for summary in columns.values()]


def verdict(baseline: list[Bar], candidate: list[Bar]) -> Verdict:
    """The rule: every bar the baseline meets, and at least one more."""
    met = {bar.key for bar in candidate if bar.met}
    base = [bar.key for bar in baseline if bar.met]
    return Verdict(
        kept=[k for k in base if k in met],
        lost=[k for k in base if k not in met],
        gained=[bar.key for bar in candidate if bar.met and bar.key not in base],
    )


def report(baseline: list[Bar], candidate: list[Bar], result: Verdict) -> str:
    """A table of both sides against the bars (a check mark where met), then the verdict."""
    lines = ["| bar | threshold | baseline | candidate |", "|---|---|---|---|"]
    for a, b in zip(baseline, candidate, strict=True):
        sign = ">=" if a.at_least else "<="
        lines.append(
            f"| {a.key} | {sign} {a.threshold:.2f} | {a.value:.2f}{' ok' if a.met else ''} | "
            f"{b.value:.2f}{' ok' if b.met else ''} |"
        )
    outcome = "passes" if result.passes else "fails"
    lines += [
        "",
        f"The candidate {outcome} the rule (every bar the baseline meets, and one more): "
        f"kept {len(result.kept)}, lost {result.lost or 'none'}, gained {result.gained or 'none'}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="compare", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", nargs="+", required=True, help="the baseline policy's evaluate runs")
    parser.add_argument("--candidate", nargs="+", required=True, help="the candidate's runs, on the same benchmarks")
    parser.add_argument("--out", type=Path, help="write the bars and the verdict as JSON")
    args = parser.parse_args(argv)
    try:
        base, cand = compare([read_run(p) for p in args.baseline], [read_run(p) for p in args.candidate])
    except ComparisonError as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2
    result = verdict(base, cand)
    print(report(base, cand, result), end="")
    if args.out:
        record = {
            "baseline": {"runs": args.baseline, "bars": [asdict(x) | {"met": x.met} for x in base]},
            "candidate": {"runs": args.candidate, "bars": [asdict(x) | {"met": x.met} for x in cand]},
            "verdict": asdict(result) | {"passes": result.passes},
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n")
    return 0 if result.passes else 1


if __name__ == "__main__":
    sys.exit(main())
