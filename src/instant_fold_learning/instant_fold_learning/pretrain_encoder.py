"""`pretrain_encoder` (`python -m instant_fold_learning.pretrain_encoder`, also under torchrun): temporal
contrastive pretraining of the cloth encoder from an episode store (`instant_fold_learning.encoder.training`)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

from instant_fold_core.dataset.schema import Episode
from instant_fold_core.errors import ArtifactError, ConfigError
from instant_fold_learning.encoder import training as library
from instant_fold_learning.encoder.data import (
    DataError,
    EpisodeSource,
    StoreEpisodes,
)
from instant_fold_learning.encoder.training import ENCODER_DIR, PretrainConfig, pretrain
from instant_fold_learning.trainer import (
    TrainingDiverged,
    add_run_arguments,
    close_distributed,
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pretrain_encoder", description=library.__doc__.split("\n")[0])
    add_run_arguments(p, "paper, cpu-small", f"{ENCODER_DIR}/")
    data = p.add_mutually_exclusive_group()
    data.add_argument("--data", help="episode store written by `python -m instant_fold_sim.generate`")
    data.add_argument(
        "--synthetic",
        nargs=3,
        type=int,
        metavar=("CLOTHS", "TRAJECTORIES", "FRAMES"),
        help="train on generated synthetic cloth episodes instead of a dataset",
    )
    p.add_argument("--split", default="train", help="garment split of the store to train on (train, heldout, all)")
    p.add_argument("--backbone-checkpoint", help="official DINOv3 weights (.pth/.safetensors)")
    return p


def _store_episodes(path: str, split: str) -> StoreEpisodes:
    """The episodes of one garment split of a store, read per batch (`StoreEpisodes`)."""
    from instant_fold_core.dataset.zarr_store import EpisodeStore, StoreError  # zarr only when a store is read

    try:
        store = EpisodeStore(path)
        names = [n for n in store.names() if split == "all" or store.meta(n).get("split") == split]
    except StoreError as exc:
        raise DataError(str(exc)) from exc
    if not names:
        raise DataError(f"store {path} has no episode of split {split!r}")
    return StoreEpisodes(store, names)


def main(argv: list[str] | None = None) -> int:
    """The `pretrain_encoder` CLI; 2 (and the reason on stderr) when the run cannot start, 1 when it
    diverged (nothing non-finite saved)."""
    args = _parser().parse_args(argv)
    try:
        config = PretrainConfig.load(args.config)
        if args.steps is not None:  # checked with the rest of the config when the run starts
            config.train = dataclasses.replace(config.train, steps=args.steps)
        if args.backbone_checkpoint:
            config.encoder.backbone_checkpoint = args.backbone_checkpoint
        episodes: Sequence[Episode] | EpisodeSource
        if args.data:
            episodes = _store_episodes(args.data, args.split)
        elif args.synthetic:
            from instant_fold_learning.encoder.synthetic import synthetic_dataset

            cloths, trajs, frames = args.synthetic
            episodes = synthetic_dataset(cloths, trajs, frames, config.encoder.image_size, seed=config.train.seed)
        else:
            raise DataError("no training data: pass --data STORE (or --synthetic CLOTHS TRAJECTORIES FRAMES)")
        summary = pretrain(episodes, config, args.out, args.device, args.resume)
    except (ConfigError, DataError, ArtifactError) as exc:  # ArtifactError: a damaged checkpoint or store
        print(f"pretrain_encoder: {exc}", file=sys.stderr)
        return 2
    except TrainingDiverged as exc:
        print(f"pretrain_encoder: {exc}", file=sys.stderr)
        return 1
    finally:
        close_distributed()
    if summary["rank"] == 0 and summary["history"]:
        first, last = summary["history"][0], summary["history"][-1]
        print(
            f"steps {summary['start_step']}->{last['step']}: loss {first['loss']:.4f} -> {last['loss']:.4f}, "
            f"{last['tokens_per_s']:.0f} tokens/s; encoder saved to {Path(args.out) / ENCODER_DIR}"
        )
    elif summary["rank"] == 0 and summary["start_step"] == 0:
        print(f"0 steps: the initial (untrained) encoder saved to {Path(args.out) / ENCODER_DIR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
