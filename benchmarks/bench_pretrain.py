"""cpu-small encoder pretraining on synthetic episodes: throughput, probe before/after, PCA figure.

Trains `--steps` steps on generated cloth episodes (train cloths), then runs the correspondence
probe on held-out cloths for the untrained and the pretrained encoder (and optionally the
paper-scale ViT-S/16+ with random weights as a frozen baseline), writes a JSON summary, prints
the probe table and saves the PCA visualisation PNG.

    OMP_NUM_THREADS=1 python benchmarks/bench_pretrain.py --out bench_pretrain.json \
        --png docs/img/encoder_pca.png [--steps 200] [--paper-baseline]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path

import torch

from instant_fold_learning.encoder import ClothEncoder, preset
from instant_fold_learning.encoder.probe import correspondence_probe, format_probe_table, pca_figure
from instant_fold_learning.encoder.synthetic import synthetic_dataset
from instant_fold_learning.encoder.training import ENCODER_DIR, PretrainConfig, PretrainModel, pretrain


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--cloths", type=int, default=6)
    p.add_argument("--trajectories", type=int, default=3)
    p.add_argument("--frames", type=int, default=8)
    p.add_argument("--heldout-cloths", type=int, default=3)
    p.add_argument("--max-pairs", type=int, default=150)
    p.add_argument("--paper-baseline", action="store_true", help="also probe a random-init ViT-S/16+ encoder")
    p.add_argument("--run-dir", help="keep the training run here (default: a temporary directory)")
    p.add_argument("--out", default="bench_pretrain.json")
    p.add_argument("--png", default="encoder_pca.png")
    args = p.parse_args()

    config = PretrainConfig.load("cpu-small")
    config.train.steps = args.steps
    size = config.encoder.image_size
    train = synthetic_dataset(args.cloths, args.trajectories, args.frames, size)
    heldout = synthetic_dataset(args.heldout_cloths, 2, args.frames, size, first_cloth=1000)
    torch.manual_seed(config.train.seed)
    untrained = PretrainModel(config.encoder, config.train).encoder.eval()  # the run's initial weights
    run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="encoder_pretrain_"))
    t0 = time.perf_counter()
    summary = pretrain(train, config, run_dir)
    wall = time.perf_counter() - t0
    hist = summary["history"]
    trained = ClothEncoder.from_pretrained(run_dir / ENCODER_DIR)

    models = {"cpu-small untrained": untrained, f"cpu-small pretrained ({args.steps} steps)": trained}
    probes = {name: correspondence_probe(m, heldout, max_pairs=args.max_pairs) for name, m in models.items()}
    if args.paper_baseline:
        probes["ViT-S/16+ random init (frozen)"] = correspondence_probe(
            ClothEncoder(preset("paper")).eval(), heldout, max_pairs=args.max_pairs
        )
    fixed_tau = eval_loss_at_fixed_tau(config, train, run_dir)
    result = {
        "steps": args.steps,
        "train_episodes": len(train),
        "heldout_episodes": len(heldout),
        "wall_s": wall,
        "tokens_per_s": hist[-1]["tokens_per_s"],
        "first_loss": hist[0]["loss"],
        "last10_mean_loss": sum(r["loss"] for r in hist[-10:]) / min(10, len(hist)),
        "same_loss_at_tau_0.1_initial_vs_trained": fixed_tau,
        "probe": probes,
        "torch_threads": torch.get_num_threads(),
    }
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(format_probe_table(probes))
    print(json.dumps({k: v for k, v in result.items() if k != "probe"}, indent=1))
    pca_figure(models, heldout[0], args.png)
    print(f"PCA figure: {args.png}")


@torch.no_grad()
def eval_loss_at_fixed_tau(config: PretrainConfig, episodes, run_dir: Path) -> list[float]:
    """Same-cloth loss (no augmentation, tau = 0.1) on one fixed batch for the initial and the
    trained encoder + head, so the comparison is not confounded by temperature annealing."""
    from instant_fold_core.checkpoint import load_strict
    from instant_fold_learning.encoder.data import PKSampler, PretrainDataset
    from instant_fold_learning.encoder.training import PretrainModel
    from instant_fold_learning.trainer import TRAIN_STATE_DIR, read_train_state

    cfg = dataclasses.replace(config.train, color_jitter=False, occlusion_prob=0.0)
    data = PretrainDataset(episodes, config.encoder.image_size, max_frames=cfg.max_frames)
    batch = data.batch(PKSampler(data.trajectories, cfg.clothes_per_batch, cfg.trajectories_per_cloth, 123).batch(0))
    torch.manual_seed(cfg.seed)
    initial = PretrainModel(config.encoder, cfg).eval()
    trained = PretrainModel(config.encoder, cfg).eval()
    load_strict(trained, read_train_state(run_dir / TRAIN_STATE_DIR).prefixed("model."), run_dir)
    return [float(m(batch, 0.1, torch.Generator().manual_seed(0))["same"]) for m in (initial, trained)]


if __name__ == "__main__":
    main()
