"""Benchmark the online graph end to end: sim node -> tokenizer -> policy server -> controller.

Runs the fold graph with the simulator as camera and robot (separate processes over DDS, exactly
the main job's graph) for a number of policy queries, and reports, as seen by an observer on the
same DDS domain: camera frame -> cloth tokens (tokenizer + transport), tokens -> action chunk
(policy server + transport) and frame -> chunk; plus wall time per policy query (which includes
the lock-stepped simulation of the executed steps: on a CPU the simulator dominates).

Usage: python benchmarks/bench_graph.py [--queries 20] [--models models] [--demo FILE]
                                        [--out outputs/bench_graph.json]
Without trained models in --models, cpu-small models with random weights are used (the latency
does not depend on the weights).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
from pathlib import Path

from instant_fold.fold_graph import models_dir
from instant_fold.sim_fold import DEFAULT_DEMO
from instant_fold.sim_fold import main as sim_fold


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queries", type=int, default=20)
    p.add_argument("--models", default=str(models_dir()))
    p.add_argument("--demo", default=str(models_dir() / DEFAULT_DEMO))
    p.add_argument("--out", default="outputs/bench_graph.json")
    args = p.parse_args()
    models = Path(args.models)
    with tempfile.TemporaryDirectory() as tmp:
        if (models / "policy" / "config.json").is_file() and (models / "encoder" / "config.json").is_file():
            policy, encoder, weights = models / "policy", models / "encoder", "trained"
        else:
            from instant_fold_core.testing import untrained_checkpoints

            policy, encoder = untrained_checkpoints(Path(tmp) / "models")
            weights = "random"
        run_dir = Path(tmp) / "run"
        code = sim_fold(
            [
                "--demo",
                args.demo,
                "--checkpoint",
                str(policy),
                "--tokenizer",
                str(encoder),
                "--max-steps",
                str(args.queries),
                "--no-evaluate",
                "--out",
                str(run_dir),
            ]
        )
        if code != 0:
            raise SystemExit(code)
        run = json.loads((run_dir / "metrics.json").read_text())
    report = {
        "benchmark": "graph",
        "weights": weights,
        "queries": run["fold"]["policy_queries"],
        "latency": run["latency"],
        "wall_per_query_s": run["fold"]["duration_s"] / max(1, run["fold"]["policy_queries"]),
        "graph_ready_s": run["graph_ready_s"],
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
    }
    print(json.dumps(report, indent=2))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
