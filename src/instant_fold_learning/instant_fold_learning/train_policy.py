"""`train_policy` (`python -m instant_fold_learning.train_policy`, also under torchrun): the in-context policy
on tokenised episodes (`instant_fold_learning.policy.training`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from instant_fold_core.checkpoint import CheckpointError
from instant_fold_core.errors import ConfigError
from instant_fold_learning.policy import training as library
from instant_fold_learning.policy.configuration import load_config
from instant_fold_learning.policy.data import PolicyDataError
from instant_fold_learning.policy.normalization import NormalizerError
from instant_fold_learning.policy.training import CHECKPOINT_DIR, load_episodes, plot_training_curves, train
from instant_fold_learning.trainer import (
    LOG_FILE,
    TrainingDiverged,
    add_run_arguments,
    close_distributed,
)


def main(argv: list[str] | None = None) -> int:
    """The `train_policy` CLI; 2 (and the reason on stderr) when the run cannot start, 1 when it
    diverged (nothing non-finite saved)."""
    parser = argparse.ArgumentParser(
        prog="train_policy", description=library.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_run_arguments(parser, "paper, paper-real, cpu-small", f"{CHECKPOINT_DIR}/")
    parser.add_argument("--data", help="directory of tokenised episodes (*.npz, see TokenizedEpisode.save)")
    parser.add_argument("--synthetic", type=int, help="train on N synthetic garments instead of --data")
    parser.add_argument("--batch-size", type=int, help="override train.batch_size (global, split over ranks)")
    parser.add_argument("--plot", help="write training curves to this PNG at the end")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config)
        if args.steps is not None:
            cfg.train.steps = args.steps
        if args.batch_size is not None:
            cfg.train.batch_size = args.batch_size
        cfg.validate()
        episodes = load_episodes(args.data, args.synthetic, cfg)
        train(cfg, episodes, args.out, args.device, resume=args.resume)
    except (ConfigError, PolicyDataError, NormalizerError, CheckpointError) as exc:
        print(f"train_policy: {exc}", file=sys.stderr)
        return 2
    except TrainingDiverged as exc:
        print(f"train_policy: {exc}", file=sys.stderr)
        return 1
    finally:
        close_distributed()
    if args.plot and int(os.environ.get("RANK", "0")) == 0:
        print(f"[policy] wrote {plot_training_curves(Path(args.out) / LOG_FILE, args.plot)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
