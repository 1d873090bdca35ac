"""What the SE(2) augmentation does to image features: are cloth-token features rotation-invariant?

The policy's SE(2) augmentation (`train.se2_prob`) rotates token positions about the camera's optical
axis but keeps the token features, which stands for a garment that lay rotated on the table only if
the encoder would have given the same features for the rotated image. This measures it: a frame's
RGB-D image and mask are rotated by theta about the principal point (exactly a rotation of the
camera-frame points about the optical axis when fx = fy), both are tokenised, every token of the
rotated frame is matched to the nearest rotated token of the original (within --match-m), and the
cosine similarity of matched features is reported against references: the same tokens one frame
later (t vs t + 1, unrotated) and random token pairs of one frame (chance level).

    python benchmarks/bench_se2_features.py --store runs/default_models/store.zarr \\
        --encoder models/encoder --out bench_se2_features.json [--angles 0 5 10 20 40]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from scipy import ndimage

from instant_fold_core.dataset.zarr_store import EpisodeStore
from instant_fold_core.rgbd import RGBDFrame
from instant_fold_core.tokens import TokenArrays
from instant_fold_learning.encoder.modeling import ClothEncoder
from instant_fold_learning.encoder.tokenize import tokenize_frame


def rotate_about_principal_point(image: np.ndarray, intrinsics: np.ndarray, degrees: float, order: int) -> np.ndarray:
    """The image of the scene rotated by `degrees` about the optical axis (fx = fy assumed)."""
    a = np.deg2rad(degrees)
    c, s = np.cos(a), np.sin(a)
    matrix = np.array([[c, -s], [s, c]])  # output (row, col) -> input (row, col), about (cy, cx)
    centre = np.array([intrinsics[1, 2], intrinsics[0, 2]])
    offset = centre - matrix @ centre

    def one(channel: np.ndarray) -> np.ndarray:
        return ndimage.affine_transform(channel, matrix, offset, order=order, mode="nearest")

    if image.ndim == 2:
        return one(image)
    return np.stack([one(image[..., i]) for i in range(image.shape[-1])], -1)


def rotation_z(degrees: float) -> np.ndarray:
    a = np.deg2rad(degrees)
    return np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]])


def matched_similarity(a: TokenArrays, b: TokenArrays, rotation: np.ndarray, max_m: float) -> tuple[list, list]:
    """Cosine similarities (and distances) of b's tokens to the nearest rotated token of a."""
    pa = a.positions[a.valid] @ rotation.T
    fa, pb, fb = a.features[a.valid], b.positions[b.valid], b.features[b.valid]
    dist = np.linalg.norm(pb[:, None] - pa[None], axis=-1)
    nearest = dist.argmin(1)
    keep = dist[np.arange(len(pb)), nearest] < max_m
    fa_n = fa[nearest[keep]] / np.linalg.norm(fa[nearest[keep]], axis=1, keepdims=True)
    fb_n = fb[keep] / np.linalg.norm(fb[keep], axis=1, keepdims=True)
    return list((fa_n * fb_n).sum(1)), list(dist[np.arange(len(pb)), nearest][keep])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", required=True)
    parser.add_argument("--encoder", default="models/encoder")
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--frames", type=int, default=4, help="frames per episode (evenly spaced)")
    parser.add_argument("--angles", type=float, nargs="+", default=[0, 5, 10, 20, 40])
    parser.add_argument("--match-m", type=float, default=0.02, help="largest matched-token distance (m)")
    parser.add_argument("--out", type=Path, default=Path("bench_se2_features.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    encoder = ClothEncoder.from_pretrained(args.encoder).eval()
    store = EpisodeStore(args.store)
    names = store.names()[:: max(1, len(store) // args.episodes)][: args.episodes]
    sims: dict[str, list[float]] = {str(a): [] for a in args.angles}
    dists: dict[str, list[float]] = {str(a): [] for a in args.angles}
    next_frame: list[float] = []
    chance: list[float] = []
    rng = np.random.default_rng(0)
    for name in names:
        ep = store.read(name)
        for t in np.linspace(0, ep.num_frames - 2, args.frames).astype(int):
            k = ep.intrinsics
            base = tokenize_frame(encoder, RGBDFrame(ep.rgb[t], ep.depth[t], k), ep.mask[t])
            later = tokenize_frame(encoder, RGBDFrame(ep.rgb[t + 1], ep.depth[t + 1], k), ep.mask[t + 1])
            next_frame += matched_similarity(base, later, np.eye(3), args.match_m)[0]
            f = base.features[base.valid] / np.linalg.norm(base.features[base.valid], axis=1, keepdims=True)
            i, j = rng.integers(len(f), size=(2, 64))
            chance += list((f[i] * f[j]).sum(1)[i != j])
            for a in args.angles:
                frame = RGBDFrame(
                    rotate_about_principal_point(ep.rgb[t], k, a, 1),
                    rotate_about_principal_point(ep.depth[t], k, a, 0),
                    k,
                )
                mask = rotate_about_principal_point(ep.mask[t].astype(np.uint8), k, a, 0).astype(bool)
                s, d = matched_similarity(base, tokenize_frame(encoder, frame, mask), rotation_z(a), args.match_m)
                sims[str(a)] += s
                dists[str(a)] += d
    report = {
        "store": args.store,
        "encoder": args.encoder,
        "episodes": names,
        "frames_per_episode": args.frames,
        "match_m": args.match_m,
        "rotated": {
            a: {
                "cosine_mean": float(np.mean(sims[a])),
                "match_distance_median_m": float(np.median(dists[a])),
                "pairs": len(sims[a]),
            }
            for a in sims
        },
        "next_frame_cosine_mean": float(np.mean(next_frame)),
        "random_pair_cosine_mean": float(np.mean(chance)),
    }
    print(f"{'rotation':>9} {'cosine':>7} {'match dist cm':>14} {'pairs':>6}")
    for a, r in report["rotated"].items():
        print(f"{a:>9} {r['cosine_mean']:>7.3f} {r['match_distance_median_m'] * 100:>14.2f} {r['pairs']:>6}")
    print(f"next frame (t+1, unrotated): {report['next_frame_cosine_mean']:.3f}")
    print(f"random token pairs (chance): {report['random_pair_cosine_mean']:.3f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
