"""Benchmark the cloth simulator and the episode generator; prints and writes JSON.

    PYTHONPATH=src/instant_fold_core:src/instant_fold_sim python benchmarks/bench_sim.py \\
        --preset cpu-small --episodes 2 --out /tmp/sim_cpu-small.json

Reports, per preset: particles, substeps/iterations, physics real-time factor (simulated
seconds per wall second, stepping only), render ms/frame, seconds per episode (whole
pipeline: layout, drop, program, rendering) and episodes per hour per core, plus the oracle
error of each benchmarked episode. One process = one core; multiply by cores for a machine.

`--worlds N` simulates N garments (procedural seeds from --garment-seed) as worlds of one Newton
model (`ClothBatch`) and runs the episodes as one batch (`generate.iter_batch`, a thread per
world, meeting at a frame barrier): the numbers are then per batch, and episodes per hour count all worlds.

The physics is timed with each frame's substeps replayed from a recorded Warp graph and launched
kernel by kernel (`physics`, `physics_launched`: `ClothBatch`'s `capture`); `--capture off` runs
the episodes without graphs too (the default, `auto`, records them on the CPU).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import warp as wp

from instant_fold_core.compute_threads import machine_record, pin_compute_threads
from instant_fold_core.dataset.zarr_store import EpisodeStore
from instant_fold_sim import generate
from instant_fold_sim.garments import make_procedural_garment
from instant_fold_sim.programs import resolve_mode
from instant_fold_sim.render import Appearance, Camera, render
from instant_fold_sim.rollout import preset, run_episode
from instant_fold_sim.scene import ClothBatch


def bench_physics(cfg, garments, frames: int, capture: bool | None = None) -> dict:
    """Stepping cost alone: drop the garments and step `frames` control frames."""
    batch = ClothBatch(garments, cfg.sim, capture=capture)
    for scene in batch.scenes:
        scene.set_positions(scene.garment.vertices * cfg.sim.garment_scale + np.array([0.0, 0.0, 0.2]))
    batch.step()  # warm-up (kernel load)
    t0 = time.perf_counter()
    for _ in range(frames):
        batch.step()
    wall = time.perf_counter() - t0
    sim = frames / cfg.sim.fps
    return {
        "capture": batch.capture,
        "worlds": batch.num_worlds,
        "particles": batch.model.particle_count,
        "substeps": cfg.sim.substeps,
        "iterations": cfg.sim.iterations,
        "fps": cfg.sim.fps,
        "real_time_factor": sim / wall,  # every world advances this fast
        "world_seconds_per_second": batch.num_worlds * sim / wall,
        "ms_per_frame": 1000 * wall / frames,
    }


def bench_episodes(cfg, garments, mode: str, variant: str, repeats: int) -> list[dict]:
    """Whole episodes (layout, drop, program, rendering): one at a time, or a batch of worlds."""
    runs = []
    for k in range(repeats):
        t0 = time.perf_counter()
        if len(garments) == 1:
            metas = [run_episode(garments[0], resolve_mode(mode), variant, seed=100 + k, config=cfg).meta]
        else:
            with tempfile.TemporaryDirectory() as tmp:
                specs = [(f"proc:{g.params['seed']}", g.garment_id) for g in garments]
                jobs = generate.make_jobs(specs, [resolve_mode(mode).name], [variant], 1, base_seed=100 + k)
                results = list(generate.iter_batch([[job] for job in jobs], tmp, cfg.name))
                store = EpisodeStore(tmp)
                metas = [store.meta(name) for name, status, _ in results if status == "done"]
        wall = time.perf_counter() - t0
        runs.append(
            {
                "seconds": wall,
                "episodes": len(metas),
                "frames": [m["timing"]["frames"] for m in metas],
                "render_s": [m["timing"]["render_s"] for m in metas],
                "oracle_max_error": [m["oracle"]["max_error"] for m in metas],
                "layout_attempts": [m["layout_attempts"] for m in metas],
            }
        )
    return runs


def bench_render(cfg, garment, repeats: int = 20) -> float:
    pts = garment.vertices * cfg.sim.garment_scale
    cam = Camera(resolution=cfg.resolution)
    render(cam, Appearance(), pts, garment.faces)
    t0 = time.perf_counter()
    for _ in range(repeats):
        render(cam, Appearance(), pts, garment.faces)
    return 1000 * (time.perf_counter() - t0) / repeats


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="cpu-small")
    p.add_argument("--garment-seed", type=int, default=0)
    p.add_argument("--worlds", type=int, default=1, help="garments simulated together in one model")
    p.add_argument("--mode", default="sleeves_down__bottom_up")
    p.add_argument("--variant", default="S")
    p.add_argument("--episodes", type=int, default=2, help="repeats (each a batch of --worlds episodes)")
    p.add_argument("--physics-frames", type=int, default=40)
    p.add_argument(
        "--capture", choices=["auto", "on", "off"], default="auto", help="record frames as graphs in the episodes"
    )
    p.add_argument("--out", default=None)
    args = p.parse_args()
    pin_compute_threads()  # one process = one core, as the generator's workers run
    ClothBatch.capture_default = {"auto": None, "on": True, "off": False}[args.capture]
    cfg = preset(args.preset)
    garments = [make_procedural_garment(args.garment_seed + w, spacing=cfg.garment_spacing) for w in range(args.worlds)]
    result = {
        "preset": cfg.name,
        "device": str(wp.get_device()),
        "machine": machine_record(),
        "garments": [g.garment_id for g in garments],
        "mode": args.mode,
        "variant": args.variant,
        "capture": args.capture,
        "physics": bench_physics(cfg, garments, args.physics_frames, capture=True),
        "physics_launched": bench_physics(cfg, garments, args.physics_frames, capture=False),
        "render_ms_per_frame": bench_render(cfg, garments[0]),
    }
    runs = bench_episodes(cfg, garments, args.mode, args.variant, args.episodes)
    seconds = float(np.sum([r["seconds"] for r in runs]))
    episodes = int(np.sum([r["episodes"] for r in runs]))
    result.update(
        {
            "runs": runs,
            "seconds_per_episode": seconds / max(episodes, 1),
            "episodes_per_hour_per_process": 3600 * episodes / seconds,
        }
    )
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
