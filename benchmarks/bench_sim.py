"""Benchmark the cloth simulator and the episode generator; prints and writes JSON.

    PYTHONPATH=src/instant_fold_core:src/instant_fold_sim python benchmarks/bench_sim.py \\
        --preset cpu-small --episodes 2 --out /tmp/sim_cpu-small.json

Reports, per preset: particles, substeps/iterations, physics real-time factor (simulated
seconds per wall second, stepping only), render ms/frame, seconds per episode (whole
pipeline: layout, drop, program, rendering) and episodes per hour per core, plus the oracle
error of each benchmarked episode. One process = one core; multiply by cores for a machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import warp as wp

from instant_fold_sim.garments import make_procedural_garment
from instant_fold_sim.programs import resolve_mode
from instant_fold_sim.render import Appearance, Camera, render
from instant_fold_sim.rollout import preset, run_episode
from instant_fold_sim.scene import ClothScene


def bench_physics(cfg, garment, frames: int) -> dict:
    """Stepping cost alone: drop the garment and step `frames` control frames."""
    rest = garment.vertices * cfg.sim.garment_scale
    scene = ClothScene.build(garment, cfg.sim, initial_positions=rest + np.array([0.0, 0.0, 0.2]))
    scene.step_frame()  # warm-up (kernel load)
    t0 = time.perf_counter()
    for _ in range(frames):
        scene.step_frame()
    wall = time.perf_counter() - t0
    sim = frames / cfg.sim.fps
    return {
        "particles": scene.num_particles,
        "substeps": cfg.sim.substeps,
        "iterations": cfg.sim.iterations,
        "fps": cfg.sim.fps,
        "real_time_factor": sim / wall,
        "ms_per_frame": 1000 * wall / frames,
    }


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
    p.add_argument("--mode", default="sleeves_down__bottom_up")
    p.add_argument("--variant", default="S")
    p.add_argument("--episodes", type=int, default=2)
    p.add_argument("--physics-frames", type=int, default=40)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    cfg = preset(args.preset)
    garment = make_procedural_garment(args.garment_seed, spacing=cfg.garment_spacing)
    result = {
        "preset": cfg.name,
        "device": str(wp.get_device()),
        "machine": platform.processor() or platform.machine(),
        "garment": garment.garment_id,
        "mode": args.mode,
        "variant": args.variant,
        "physics": bench_physics(cfg, garment, args.physics_frames),
        "render_ms_per_frame": bench_render(cfg, garment),
    }
    episodes = []
    for k in range(args.episodes):
        t0 = time.perf_counter()
        ep = run_episode(garment, resolve_mode(args.mode), args.variant, seed=100 + k, config=cfg)
        wall = time.perf_counter() - t0
        tm = ep.meta["timing"]
        episodes.append(
            {
                "seconds": wall,
                "frames": ep.num_frames,
                "sim_time_s": tm["sim_time_s"],
                "render_s": tm["render_s"],
                "oracle_max_error": ep.meta["oracle"]["max_error"],
                "layout_attempts": ep.meta["layout_attempts"],
            }
        )
    secs = float(np.mean([e["seconds"] for e in episodes]))
    result.update({"episodes": episodes, "seconds_per_episode": secs, "episodes_per_hour_per_core": 3600 / secs})
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
