"""Benchmark the closed-loop evaluation: oracle-bank build time, rollouts per hour, Ray scaling.

    python benchmarks/bench_eval.py --benchmark tiny --workers 1 2 --out outputs/bench_eval/cpu.json

For each worker count, runs `evaluate` from scratch (a fresh oracle bank, demonstration cache and
results directory in a temporary folder) with the default models and reads its timing: bank build
(oracle executions per hour), demonstrations, and closed-loop rollouts (rollouts per hour, and
the mean wall time of one rollout in its worker). Prints a table and writes JSON. The numbers of
a full benchmark run are in that run's own `summary.json` (`timing`).
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
from pathlib import Path

from instant_fold_evaluation.benchmark import BenchmarkSpec
from instant_fold_evaluation.evaluate import build_parser, evaluate
from instant_fold_ros.bringup_share import models_dir


def run(spec_name: str, workers: int, checkpoint: str, encoder: str, max_steps: int) -> dict:
    spec = BenchmarkSpec.load(spec_name)
    with tempfile.TemporaryDirectory() as tmp:
        args = build_parser().parse_args(
            [
                "--benchmark", spec_name,
                "--checkpoint", checkpoint,
                "--encoder", encoder,
                "--out", f"{tmp}/out",
                "--bank", f"{tmp}/bank",
                "--demo-dir", f"{tmp}/demos",
                "--workers", str(workers),
                "--max-steps", str(max_steps),
            ]
        )  # fmt: skip
        summary = evaluate(args)
    t = summary["timing"]
    oracle_runs = len(spec.bank_keys()) * spec.oracle_runs
    rollouts = summary["rollouts"]
    return {
        "workers": workers,
        "oracle_executions": oracle_runs,
        "bank_s": t["bank_s"],
        "oracle_executions_per_hour": 3600.0 * oracle_runs / t["bank_s"],
        "demos_s": t["demos_s"],
        "rollouts": rollouts,
        "max_steps": summary["max_steps"],
        "rollouts_s": t["rollouts_s"],
        "rollouts_per_hour": 3600.0 * rollouts / t["rollouts_s"],
        "mean_rollout_wall_s": summary["mean_rollout_wall_s"],
        "outcomes": summary["outcomes"],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--benchmark", default="tiny")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--checkpoint", default=str(models_dir() / "policy"))
    p.add_argument("--encoder", default=str(models_dir() / "encoder"))
    p.add_argument("--max-steps", type=int, default=0, help="policy queries per rollout (default: the spec's)")
    p.add_argument("--out", default="outputs/bench_eval/bench_eval.json")
    a = p.parse_args()
    results = [run(a.benchmark, w, a.checkpoint, a.encoder, a.max_steps) for w in a.workers]
    print(f"{'workers':>8} {'oracle/h':>9} {'bank s':>8} {'rollouts/h':>11} {'rollout s':>10}")
    for r in results:
        print(
            f"{r['workers']:>8} {r['oracle_executions_per_hour']:>9.0f} {r['bank_s']:>8.1f} "
            f"{r['rollouts_per_hour']:>11.0f} {r['mean_rollout_wall_s']:>10.1f}"
        )
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {"benchmark": a.benchmark, "machine": platform.processor() or platform.machine(), "results": results},
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
