"""Per-stage latency of the online graph: sim node -> tokenizer -> policy server -> controller.

Two parts, for each policy/encoder configuration:

- **In process** (the policy server's own code, `PolicyServer`, on this process's one thread):
  the tokenizer per frame, the context cache per demonstration keyframe (tokenize + encode, what a
  `LoadDemonstration` costs per keyframe) and one query, over the demonstration's keyframes.
- **In the graph**: the main job's graph (separate processes over DDS, the simulator as camera
  and robot) for `--queries` policy queries, with the latencies an observer on the same DDS domain
  sees (`instant_fold.sim_fold.LatencyProbe`): frame -> tokens, tokens -> the matching arm state
  (under lockstep: the simulator's answer), the policy's share, and frame -> command; plus wall time
  per query (which includes the lock-stepped simulation of the executed steps).

`--configs cpu-small` uses the trained models in `--models` (random cpu-small weights if there are
none); `paper` uses the paper's configuration (DINOv3 ViT-S/16+ tokenizer, 384-d policy)
with random weights: latency does not depend on the weights. `--busy N ...` runs each case with N
CPU-bound processes beside it. DDS hops alone: `benchmarks/bench_dds.py`; the controller
loop: `benchmarks/bench_control.py`.

    python benchmarks/bench_graph.py [--configs cpu-small paper] [--busy 0 2] [--queries 40]
                                     [--out outputs/bench_graph.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from instant_fold.fold_graph import models_dir
from instant_fold.sim_fold import DEFAULT_DEMO
from instant_fold.sim_fold import main as sim_fold
from instant_fold_core.compute_threads import pin_compute_threads


def _stats(seconds: list[float]) -> dict[str, float | int]:
    a = np.asarray(seconds) * 1000.0
    return {
        "count": int(a.size),
        "median_ms": round(float(np.median(a)), 2),
        "p95_ms": round(float(np.percentile(a, 95)), 2),
        "max_ms": round(float(a.max()), 2),
    }


def _timed(fn: Callable[[], object], repeats: int) -> list[float]:
    fn()  # warm-up: first-call allocations are not a stage's steady cost
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def _busy_loop() -> None:
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2**31


@contextmanager
def busy_processes(n: int) -> Iterator[None]:
    """`n` CPU-bound processes for the duration (the 'busy' condition)."""
    procs = [multiprocessing.get_context("spawn").Process(target=_busy_loop, daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
            p.join()


def checkpoints(config: str, models: Path, tmp: Path) -> tuple[Path, Path, str]:
    """(policy, encoder, weights) of `config`: the trained cpu-small models when there are some."""
    from instant_fold_learning.testing import untrained_checkpoints

    if config == "cpu-small" and (models / "policy" / "config.json").is_file():
        return models / "policy", models / "encoder", "trained"
    policy, encoder = untrained_checkpoints(tmp / "models", preset=config)
    return policy, encoder, "random"


def in_process(policy: Path, encoder: Path, demo_path: str, repeats: int) -> dict[str, Any]:
    """The policy server's stages, timed on its own code (one thread)."""
    from instant_fold_core.demonstration import load_demonstration
    from instant_fold_policy.server import PolicyServer

    server = PolicyServer.from_checkpoints(policy, encoder, device="cpu")
    demo = load_demonstration(demo_path)
    k = demo.num_keyframes
    frames = [(demo.frame(i), demo.mask[i]) for i in range(k)]
    tokens = [server.tokenize(*f) for f in frames]
    rounds = max(3, repeats // k)  # each round goes over every keyframe
    tokenize = _timed(lambda: [server.tokenize(*f) for f in frames], rounds)

    def encode() -> None:
        server.runner.clear_demonstration()  # else the server skips a demonstration it already has
        server.load_demonstration(demo)

    load = _timed(encode, rounds)
    state = demo.keypose[0].astype(np.float64)
    query = _timed(lambda: [server.predict(t, state) for t in tokens], rounds)
    return {
        "demonstration_keyframes": k,
        "tokenizer_per_frame": _stats([t / k for t in tokenize]),
        "context_cache_per_keyframe": _stats([t / k for t in load]),
        "query": _stats([t / k for t in query]),
    }


def in_graph(policy: Path, encoder: Path, demo: str, queries: int, run_dir: Path) -> dict[str, Any]:
    """The main job's graph for `queries` queries, as its latency probe saw it."""
    options = {"--demo": demo, "--checkpoint": policy, "--encoder": encoder, "--max-steps": queries, "--out": run_dir}
    code = sim_fold([*(str(x) for kv in options.items() for x in kv), "--no-evaluate"])
    if code != 0:
        raise SystemExit(code)
    run = json.loads((run_dir / "metrics.json").read_text())
    per_query = run["latency_queries"]
    slowest = max(range(len(per_query)), key=lambda i: per_query[i].get("tokens_to_command", 0.0), default=None)
    return {
        "queries": run["fold"]["policy_queries"],
        "latency": run["latency"],
        "slowest_query": None if slowest is None else {"index": slowest, **per_query[slowest]},
        "wall_per_query_s": run["fold"]["duration_s"] / max(1, run["fold"]["policy_queries"]),
        "graph_ready_s": run["graph_ready_s"],
    }


def run_case(config: str, busy: int, args: argparse.Namespace) -> dict[str, Any]:
    """One configuration under `busy` CPU-bound processes: in process, then in the graph."""
    with tempfile.TemporaryDirectory() as tmp, busy_processes(busy):
        policy, encoder, weights = checkpoints(config, Path(args.models), Path(tmp))
        stages = in_process(policy, encoder, args.demo, args.repeats)
        graph = in_graph(policy, encoder, args.demo, args.queries, Path(tmp) / "run")
    return {"config": config, "weights": weights, "busy_processes": busy, "in_process": stages, "graph": graph}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", nargs="+", choices=("cpu-small", "paper"), default=["cpu-small"])
    p.add_argument("--busy", type=int, nargs="+", default=[0], help="CPU-bound processes beside it, one case each")
    p.add_argument("--queries", type=int, default=40)
    p.add_argument("--repeats", type=int, default=48, help="in-process keyframes timed per stage (at least 3 rounds)")
    p.add_argument("--models", default=str(models_dir()))
    p.add_argument("--demo", default=str(models_dir() / DEFAULT_DEMO))
    p.add_argument("--out", default="outputs/bench_graph.json")
    args = p.parse_args()
    pin_compute_threads()  # one intra-op thread per process, as the graph's nodes run
    load = os.getloadavg()
    cases = []
    for config in args.configs:
        for busy in args.busy:
            cases.append(run_case(config, busy, args))
            print(json.dumps(cases[-1]), flush=True)
    report = {
        "benchmark": "graph",
        "date": time.strftime("%Y-%m-%d"),
        "load_average_at_start": [round(x, 2) for x in load],
        "queries": args.queries,
        "cases": cases,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
