"""Train the keypoint detector on tokenised simulated episodes (`instant_fold_learning.keypoints`).

    python -m instant_fold_learning.train_keypoints --config cpu-small --tokens WORK/tokens_train \
        --eval-tokens WORK/tokens_heldout --out WORK/keypoints

Writes `<out>/detector/` (safetensors + config.json: `KeypointDetector.from_pretrained`),
`<out>/train_state/` (`--resume` continues from it) and `<out>/log.jsonl`, whose `end` record holds
the x, y errors of the visible keypoints on the training frames and on `--eval-tokens`; also
printed as JSON. Threads: `--threads` (default 1) is set inside the program, so a documented
number is reproduced whatever the calling shell sets.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from instant_fold_core.checkpoint import CheckpointError
from instant_fold_core.config import load_file, override
from instant_fold_core.device import resolve_device
from instant_fold_core.errors import ConfigError
from instant_fold_learning.keypoints.configuration import PRESETS, KeypointDetectorConfig
from instant_fold_learning.keypoints.training import DETECTOR_DIR, load_keypoint_episodes, train
from instant_fold_learning.policy.data import PolicyDataError
from instant_fold_learning.trainer import TrainingDiverged, add_run_arguments


def load_config(name_or_path: str) -> KeypointDetectorConfig:
    """A preset name, or a YAML file (`preset: NAME` and the keys it overrides)."""
    if name_or_path in PRESETS:
        return PRESETS.get(name_or_path)
    if not Path(name_or_path).is_file():
        raise ConfigError(
            f"--config {name_or_path!r}: neither a YAML file nor a keypoint detector preset {list(PRESETS)}"
        )
    return load_file(name_or_path, PRESETS, KeypointDetectorConfig).validate()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_arguments(parser, "/".join(PRESETS), f"{DETECTOR_DIR}/")
    parser.add_argument("--tokens", required=True, help="tokenised simulated episodes (.npz with keypoints)")
    parser.add_argument("--eval-tokens", help="tokenised episodes to report the errors on (e.g. held-out starts)")
    parser.add_argument("--threads", type=int, default=1, help="torch compute threads (default 1)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """0 when trained; 2 for a bad config, device, token directory or run directory; 1 when the
    loss diverged (the last train state stays the one to resume from)."""
    args = build_parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        cfg = load_config(args.config)
        if args.steps is not None:
            cfg = override(cfg, {"train": {"steps": args.steps}})
        device = str(resolve_device(args.device))
        end = train(
            cfg,
            load_keypoint_episodes(args.tokens),
            args.out,
            load_keypoint_episodes(args.eval_tokens) if args.eval_tokens else None,
            device,
            args.resume,
        )
    except (ConfigError, PolicyDataError, CheckpointError) as exc:
        print(f"train_keypoints: {exc}", file=sys.stderr)
        return 2
    except TrainingDiverged as exc:
        print(f"train_keypoints: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(end, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
