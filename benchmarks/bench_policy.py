"""Benchmark the in-context policy: ms per query (cached fast path vs naive), ms to encode a demo.

Setting of the issue: 10 Euler steps, horizon H = 8, a demonstration of 8 keyframes x 66 tokens
(64 cloth + 2 robot-state tokens) cached, batch 1. Random weights (timing does not depend on
them) with calibrated normalisers. Prints a table and writes JSON.

    python benchmarks/bench_policy.py --out bench_policy.json [--configs paper cpu-small] [--device cuda]
        [--dtype bfloat16] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from instant_fold_learning.policy.configuration import preset
from instant_fold_learning.policy.data import DemoTokens, ObservationTokens
from instant_fold_learning.policy.inference import sample_cached, sample_naive
from instant_fold_learning.policy.modeling import InstantFoldPolicy, policy_summary

KEYFRAMES = 8
HORIZON = 8


def _inputs(cfg, device, dtype, seed: int = 0) -> tuple[DemoTokens, ObservationTokens]:
    g = torch.Generator().manual_seed(seed)
    n, d = cfg.num_cloth_tokens, cfg.cloth_feature_dim

    def cloud(*lead: int) -> torch.Tensor:
        xy = torch.rand(*lead, n, 2, generator=g) * 0.4 - 0.2
        return torch.cat((xy, 0.8 + 0.02 * torch.rand(*lead, n, 1, generator=g)), -1)

    def state(*lead: int) -> torch.Tensor:
        xyz = torch.rand(*lead, 2, 3, generator=g) * 0.3 + torch.tensor([-0.15, -0.15, 0.6])
        return torch.cat((xyz, torch.ones(*lead, 2, 1)), -1)

    k = KEYFRAMES
    demo = DemoTokens(
        cloud(1, k),
        torch.randn(1, k, n, d, generator=g),
        torch.ones(1, k, n, dtype=torch.bool),
        state(1, k),
        torch.ones(1, k, dtype=torch.bool),
        torch.zeros(1, dtype=torch.long),
    )
    obs = ObservationTokens(cloud(1), torch.randn(1, n, d, generator=g), torch.ones(1, n, dtype=torch.bool), state(1))
    return demo.to(device, dtype), obs.to(device, dtype)


def _time(fn, repeats: int, warmup: int, device: torch.device) -> dict[str, float]:
    """Wall-clock and process-CPU milliseconds per call.

    On a shared CPU the wall clock includes time the process waits for a core; the CPU time of a
    single-threaded run (--threads 1) is what the call costs when it has a core to itself.
    """
    wall, cpu = [], []
    for i in range(warmup + repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            wall.append((time.perf_counter() - start) * 1000)
            cpu.append((time.process_time() - start_cpu) * 1000)
    return {
        "median_ms": statistics.median(wall),
        "p95_ms": float(np.percentile(wall, 95)),
        "cpu_median_ms": statistics.median(cpu),
        "cpu_p95_ms": float(np.percentile(cpu, 95)),
        "n": len(wall),
    }


def bench(
    name: str, device: torch.device, dtype: torch.dtype, repeats: int, naive_repeats: int, compile_: bool
) -> dict:
    cfg = preset(name).model
    cfg.horizon, cfg.execute_steps = HORIZON, min(cfg.execute_steps, HORIZON)
    policy = InstantFoldPolicy(cfg)
    policy.normalizers.delta.set_range(torch.full((3,), -0.05), torch.full((3,), 0.05))
    policy.normalizers.keypose.set_range(torch.full((3,), -0.4), torch.full((3,), 0.4))
    policy = policy.to(device, dtype).eval()
    demo, obs = _inputs(cfg, device, dtype)
    if compile_:
        policy.denoiser.compile(dynamic=False)  # as PolicyRunner(compile=True)
    with torch.inference_mode():
        context = policy.encode_context(demo)

        def query() -> None:
            sample_cached(policy, obs, context)

        result = {
            "config": name,
            "compiled": compile_,
            "device": str(device),
            "dtype": str(dtype).removeprefix("torch."),
            "parameters": policy_summary(policy),
            "demo_tokens": KEYFRAMES * (cfg.num_cloth_tokens + 2),
            "horizon": HORIZON,
            "euler_steps": cfg.num_inference_steps,
            "encode_demo": _time(lambda: policy.encode_context(demo), max(5, repeats // 4), 2, device),
            "query_cached": _time(query, repeats, 5, device),
            "query_naive": _time(lambda: sample_naive(policy, demo, obs), naive_repeats, 1, device),
        }
    result["speedup_naive_over_cached"] = result["query_naive"]["median_ms"] / result["query_cached"]["median_ms"]
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", default=["paper", "cpu-small"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default=None, help="float32 (CPU default) | bfloat16 | float16 (GPU)")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--naive-repeats", type=int, default=10)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (default 1: batch-1 queries gain nothing from more on a shared CPU)",
    )
    parser.add_argument("--compile", action="store_true", help="torch.compile the per-step action branch")
    parser.add_argument("--out", type=Path, default=Path("bench_policy.json"))
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype) if args.dtype else torch.float32
    report = {
        "load_average_1_5_15": os.getloadavg(),
        "host": {
            "platform": platform.platform(),
            "cpu_threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None,
        },
        "results": [
            bench(name, device, dtype, args.repeats, args.naive_repeats, args.compile) for name in args.configs
        ],
    }
    for r in report["results"]:
        print(
            f"{r['config']:>10} {r['device']} {r['dtype']}: params {r['parameters']['total'] / 1e6:.2f} M | "
            f"query {r['query_cached']['median_ms']:.1f} ms median / {r['query_cached']['p95_ms']:.1f} p95 | "
            f"naive {r['query_naive']['median_ms']:.1f} ms | encode demo {r['encode_demo']['median_ms']:.1f} ms"
        )
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    return report


if __name__ == "__main__":
    main()
