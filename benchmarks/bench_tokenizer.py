"""Cloth encoder latency: ms per 640x480 frame, without and with the backbone.

"geometry" = centre crop/resize, back-projection, FPS (N=64) and bilinear sampling of a feature
map of the backbone's shape (so everything but the network); "full" = the whole tokenizer
forward (no grad). Paper (DINOv3 ViT-S/16+, 256 px) and cpu-small configurations.

    OMP_NUM_THREADS=1 python benchmarks/bench_tokenizer.py --out bench_tokenizer.json [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from instant_fold_core.geometry import center_crop_resize, sample_features
from instant_fold_learning.encoder import ClothEncoder, preset, token_geometry


def observation(batch: int, device: str):
    gen = torch.Generator().manual_seed(0)
    h, w = 480, 640
    rgb = torch.rand(batch, 3, h, w, generator=gen)
    depth = 0.75 + 0.05 * torch.rand(batch, h, w, generator=gen)
    v, u = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    mask = (((u - 320) / 200.0) ** 2 + ((v - 240) / 150.0) ** 2 < 1).expand(batch, h, w).contiguous()
    k = torch.tensor([[600.0, 0, 320], [0, 600.0, 240], [0, 0, 1]]).expand(batch, 3, 3).contiguous()
    return [x.to(device) for x in (rgb, depth, mask, k)]


def timed(fn, device: str, repeats: int) -> float:
    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / repeats


@torch.no_grad()
def bench(name: str, device: str, batch: int, repeats: int) -> dict:
    tok = ClothEncoder(preset(name)).to(device).eval()
    cfg = tok.config
    rgb, depth, mask, k = observation(batch, device)
    grid = cfg.image_size // tok.backbone.patch_size
    fmap = torch.randn(batch, tok.backbone.out_channels, grid, grid, device=device)

    def geometry() -> None:
        _, d, m, kk = center_crop_resize(rgb, depth, mask, k, cfg.image_size)
        geo = token_geometry(d, m, kk, cfg.num_tokens, cfg.near, cfg.far)
        sample_features(fmap, geo.pixels, (cfg.image_size, cfg.image_size))

    def full() -> None:
        tok(rgb, depth, mask, k)

    g = timed(geometry, device, repeats)
    f = timed(full, device, repeats)
    return {
        "config": name,
        "device": device,
        "batch": batch,
        "image": "640x480",
        "network_input": cfg.image_size,
        "geometry_ms_per_frame": 1000 * g / batch,
        "full_ms_per_frame": 1000 * f / batch,
        "threads": torch.get_num_threads(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default="bench_tokenizer.json")
    args = p.parse_args()
    results = []
    for name in ("cpu-small", "paper"):
        for batch in args.batches:
            res = bench(name, args.device, batch, args.repeats)
            print(json.dumps(res), flush=True)
            results.append(res)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
