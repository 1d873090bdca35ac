"""Where folds go wrong: every grasp and release of finished evaluations, against the oracle's.

    python scripts/event_errors.py outputs/eval/default_v5 outputs/eval/garments_v5 \\
        outputs/eval/quick_full_rejoin outputs/eval/quick_replay \\
        --rescored outputs/eval/rescored --out docs/results/event_errors_v5.json

Each run is re-scored with the current metrics into `<rescored>/<run name>` (`evaluate rescore`:
no rollout reruns, the run itself is left as it is), and the JSON collects, per run, the event
errors (`summary.json`'s `events`) of the policy row and of the out-of-sample oracle row, and
those of the policy's seen folds split by success: whether the failed folds' extra error sits in
their grasps or in their releases is what the split says. Why a script and not a CLI option: it
assembles one diagnosis from several runs (docs/evaluation.md, "Where the folds go wrong").
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from instant_fold_evaluation.evaluate import rescore
from instant_fold_evaluation.grasps import EventError, summarize_events


def by_outcome(scores: Path) -> dict[str, dict[str, Any]]:
    """The policy's seen folds' event errors, split into successful (C-SR@95) and failed folds, and
    how many folds of each made an event the oracle does not (`with_extra`: a regrasp)."""
    lines = [json.loads(line) for line in scores.read_text().splitlines()]
    policy = [line for line in lines if line["row"] == "policy" and line["split"] == "seen"]
    return {
        outcome: {
            "folds": len(group),
            "with_extra": sum(any(e["performed"] and not e["expected"] for e in line["events"]) for line in group),
            "events": summarize_events([EventError.from_json(line["events"]) for line in group]),
        }
        for outcome, group in (
            ("success", [line for line in policy if line["success"]]),
            ("failure", [line for line in policy if not line["success"]]),
        )
    }


def run_report(run: Path, rescored: Path) -> dict[str, Any]:
    """One run re-scored into `rescored` and its event errors."""
    summary = rescore(run, rescored)
    rows = summary["rows"]
    return {
        "source": str(run),
        "rescored": str(rescored),
        "benchmark": summary["benchmark"]["name"],
        "label": summary["label"] or Path(summary["checkpoint"]).name,
        "checkpoint": summary["checkpoint"],
        "bank": summary["bank"],
        "rows": {
            row: {split: {"rollouts": s["rollouts"], "events": s["events"]} for split, s in rows[row].items()}
            for row in ("policy", "oracle-out-of-sample")
            if row in rows
        },
        "policy_seen_by_outcome": by_outcome(rescored / "scores.jsonl"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="results directories of finished evaluate runs")
    p.add_argument("--rescored", required=True, help="parent folder of the re-scored copies")
    p.add_argument("--out", required=True, help="the JSON to write")
    a = p.parse_args(argv)
    report = {
        "command": shlex.join(["python", "scripts/event_errors.py", *(argv if argv is not None else sys.argv[1:])]),
        "units": "xy distances in metres of the camera frame the policy acts in (sim metres x obs_scale)",
        "runs": {Path(r).name: run_report(Path(r), Path(a.rescored) / Path(r).name) for r in a.runs},
    }
    Path(a.out).write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    print(f"event_errors: wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
