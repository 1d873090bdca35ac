"""Same-cloth loss: time and peak memory, dense vs blockwise, 1k -> 100k tokens (+ the paper batch).

Each measurement runs in a fresh subprocess so its peak memory is its own (CUDA: peak allocated;
CPU: peak RSS above the process baseline). Forward + backward of `same_cloth_contrastive_loss`
with F = tokens / 64 frames, 64 tokens per frame, M particles per frame, D-dim features.

    python benchmarks/bench_loss.py --out bench_loss.json [--device cuda] [--sizes 1000 5000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def measure(impl: str, tokens: int, dim: int, particles: int, device: str, block: int) -> dict:
    import torch

    from instant_fold_learning.encoder.losses import same_cloth_contrastive_loss

    frames = tokens // 64
    gen = torch.Generator().manual_seed(0)
    pp = (torch.rand(frames, particles, 3, generator=gen) * 0.4).to(device)
    pv = (torch.rand(frames, particles, generator=gen) > 0.2).to(device)
    tp = pp[:, :64] + 0.005 * torch.randn(frames, 64, 3, generator=gen).to(device)
    tf = torch.randn(frames, 64, dim, generator=gen).to(device).requires_grad_()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t0 = time.perf_counter()
    loss = same_cloth_contrastive_loss(tp, tf, pp, pv, 0.01, 0.07, impl=impl, block=block)
    t1 = time.perf_counter()
    loss.backward()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    t2 = time.perf_counter()
    return {
        "impl": impl,
        "tokens": tokens,
        "forward_s": t1 - t0,
        "forward_backward_s": t2 - t0,
        "peak_mem_mib": peak / 2**20,
        "loss": float(loss),
        "device": device,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 5000, 10000, 20000, 50000, 100000])
    p.add_argument("--paper-batch", action="store_true", help="also run 96 x 15 x 64 = 92,160 tokens blockwise")
    p.add_argument("--dense-max", type=int, default=10000, help="largest dense size to attempt (U^2 memory)")
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--particles", type=int, default=500)
    p.add_argument("--block", type=int, default=4096)
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default="bench_loss.json")
    p.add_argument("--_child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args._child:
        impl, tokens = args._child
        print(json.dumps(measure(impl, int(tokens), args.dim, args.particles, args.device, args.block)))
        return
    runs = [("dense", n) for n in args.sizes if n <= args.dense_max] + [("blockwise", n) for n in args.sizes]
    if args.paper_batch:
        runs.append(("blockwise", 96 * 15 * 64))
    results = []
    for impl, n in runs:
        cmd = [
            sys.executable,
            __file__,
            "--_child",
            impl,
            str(n),
            "--dim",
            str(args.dim),
            "--particles",
            str(args.particles),
            "--device",
            args.device,
            "--block",
            str(args.block),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            res = {"impl": impl, "tokens": n, "error": proc.stderr.strip().splitlines()[-1:]}
        else:
            res = json.loads(proc.stdout.strip().splitlines()[-1])
        results.append(res)
        print(json.dumps(res), flush=True)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
