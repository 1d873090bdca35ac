"""Training throughput of the in-context policy: samples/s of a full step, and where a step goes.

A step is what `policy/training.py` runs: draw a batch (context pairing, augmentation, collation),
forward (demonstration encoding, scene fusion, flow + gripper losses over `noise_samples` draws),
backward, AdamW. Each variant overrides `train.*` fields of the config, e.g.

    python benchmarks/bench_policy_train.py --out bench_policy_train.json \\
        [--data runs/default_models/tokens_train] [--config cpu-small] [--steps 30] [--threads 1] \\
        [--variants baseline: shared4:demos_per_batch=4 se2:demos_per_batch=4,se2_prob=0.5]

Without --data the episodes are synthetic (policy/synthetic.py) with their keyframes resampled to
`--keyframes` per demonstration (the simulator's episodes have 8-14), since the demonstration's
length is what the context encoder's cost grows with. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from instant_fold_learning.policy.configuration import load_config
from instant_fold_learning.policy.data import TokenizedEpisode
from instant_fold_learning.policy.dataset import PolicyDataset
from instant_fold_learning.policy.modeling import InstantFoldPolicy
from instant_fold_learning.policy.synthetic import MODES, synthetic_episodes
from instant_fold_learning.policy.training import load_episodes, step_generators

PARTS = ("data", "encode_demo", "forward", "backward", "optimizer")


def _episodes(data: str | None, cfg, keyframes: int) -> list[TokenizedEpisode]:
    if data:
        return load_episodes(data, None, cfg)
    episodes = synthetic_episodes(4, tuple(MODES)[:2], 3, cfg.model.cloth_feature_dim, cfg.model.num_cloth_tokens)
    return [
        dataclasses.replace(e, keyframes=np.unique(np.linspace(0, e.num_frames - 1, keyframes).astype(np.int32)))
        for e in episodes
    ]


def _parse_variant(text: str) -> tuple[str, dict[str, float]]:
    name, _, body = text.partition(":")
    overrides = {}
    for item in filter(None, body.split(",")):
        key, _, value = item.partition("=")
        overrides[key] = float(value)
    return name, overrides


def bench_variant(cfg, episodes: list[TokenizedEpisode], overrides: dict[str, float], steps: int, warmup: int) -> dict:
    train = cfg.train
    for key, value in overrides.items():
        default = getattr(train, key)
        train = dataclasses.replace(train, **{key: type(default)(value)})
    train.validate()
    torch.manual_seed(0)
    policy = InstantFoldPolicy(cfg.model)
    dataset = PolicyDataset(episodes, cfg.model.horizon, train)
    dataset.calibrate(policy.normalizers)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=train.lr)
    times: dict[str, list[float]] = {p: [] for p in (*PARTS, "step")}
    for step in range(warmup + steps):
        rng, gen = step_generators(train.seed, step, 0)
        t0 = time.perf_counter()
        batch = dataset.draw_batch(rng, train.batch_size)
        t1 = time.perf_counter()
        with torch.no_grad():  # the demonstration encoding alone, timed apart from the rest
            policy.encode_context(batch.demo)
        t2 = time.perf_counter()
        losses = policy.compute_loss(batch, generator=gen, repeats=train.noise_samples)
        t3 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        losses["loss"].backward()
        t4 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), train.grad_clip)
        optimizer.step()
        t5 = time.perf_counter()
        if step >= warmup:
            for part, dt in zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True):
                times[part].append(dt * 1000)
            times["step"].append((t1 - t0 + t5 - t2) * 1000)  # the no-grad encoding is not part of a step
    step_ms = statistics.median(times["step"])
    return {
        "overrides": overrides,
        "batch_size": train.batch_size,
        "noise_samples": train.noise_samples,
        "demos_per_batch": train.demos_per_batch,
        "step_ms": step_ms,
        "samples_per_s": train.batch_size / step_ms * 1000,
        **{f"{p}_ms": statistics.median(times[p]) for p in PARTS},
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="cpu-small", help="preset or YAML file")
    parser.add_argument("--data", help="directory of tokenised episodes (default: synthetic)")
    parser.add_argument("--keyframes", type=int, default=10, help="keyframes per synthetic demonstration")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument(
        "--variants",
        nargs="+",
        default=["baseline:", "shared4:demos_per_batch=4", "shared2:demos_per_batch=2", "shared1:demos_per_batch=1"],
        help="NAME:key=value,... overriding train.* fields",
    )
    parser.add_argument("--out", type=Path, default=Path("bench_policy_train.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = load_config(args.config)
    episodes = _episodes(args.data, cfg, args.keyframes)
    keyframes = [int(e.keyframes.size) for e in episodes]
    report = {
        "config": cfg.name,
        "data": args.data or f"synthetic ({len(episodes)} episodes)",
        "keyframes_median": statistics.median(keyframes),
        "threads": args.threads,
        "steps": args.steps,
        "load_average_1_5_15": os.getloadavg(),
        "cpu": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "variants": {},
    }
    print(f"{'variant':<12} {'samples/s':>9} {'step ms':>8} " + " ".join(f"{p + ' ms':>14}" for p in PARTS))
    for text in args.variants:
        name, overrides = _parse_variant(text)
        r = bench_variant(cfg, episodes, overrides, args.steps, args.warmup)
        report["variants"][name] = r
        print(
            f"{name:<12} {r['samples_per_s']:>9.1f} {r['step_ms']:>8.1f} "
            + " ".join(f"{r[p + '_ms']:>14.1f}" for p in PARTS),
            flush=True,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return report


if __name__ == "__main__":
    main()
