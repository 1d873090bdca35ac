"""`tokenize_episodes` (`python -m instant_fold_learning.tokenize_episodes`): an episode store through a frozen
cloth encoder into the token directory the policy trains on (`instant_fold_learning.policy.tokenize_episodes`)."""

from __future__ import annotations

import argparse
import sys

from instant_fold_core.errors import ConfigError
from instant_fold_learning.policy import tokenize_episodes as library
from instant_fold_learning.policy.tokenize_episodes import TokenizeError, tokenize_store


def _shard(text: str) -> tuple[int, int]:
    k, sep, n = text.partition("/")
    if not sep or not k.isdigit() or not n.isdigit():
        raise argparse.ArgumentTypeError(f"expected K/N, got {text!r}")
    return int(k), int(n)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tokenize_episodes", description=library.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", required=True, help="episode store (zarr) written by instant_fold_sim.generate")
    parser.add_argument("--encoder", required=True, help="cloth encoder directory (ClothEncoder.save_pretrained)")
    parser.add_argument("--out", required=True, help="output directory of <episode>.npz files")
    parser.add_argument("--split", default="train", help="garment split to tokenise (train, heldout, all)")
    parser.add_argument("--modes", nargs="+", help="only these mode names")
    parser.add_argument("--match", nargs="+", help="only episode names matching one of these shell patterns")
    parser.add_argument("--exclude", nargs="+", help="leave out episode names matching one of these patterns")
    parser.add_argument("--max-oracle-error", type=float, help="skip episodes whose oracle max_error exceeds this")
    parser.add_argument("--policy-config", help="check N and D against this policy preset or YAML (e.g. cpu-small)")
    parser.add_argument("--batch-size", type=int, default=32, help="frames per encoder batch")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1")
    parser.add_argument(
        "--shard", type=_shard, default=(0, 1), help="K/N: every N-th selected episode from the K-th (N processes)"
    )
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    try:
        summary = tokenize_store(
            args.store,
            args.encoder,
            args.out,
            args.split,
            args.modes,
            args.max_oracle_error,
            args.policy_config,
            args.batch_size,
            args.device,
            progress=not args.no_progress,
            match=args.match,
            exclude=args.exclude,
            shard=args.shard,
        )
    except (TokenizeError, ConfigError, ValueError) as exc:
        print(f"tokenize_episodes: {exc}", file=sys.stderr)
        return 2
    for name, why in summary["skipped"].items():
        print(f"tokenize_episodes: skipped {name} ({why})")
    print(
        f"tokenize_episodes: {len(summary['tokenized'])} tokenised, {len(summary['existing'])} already present, "
        f"{len(summary['skipped'])} skipped -> {summary['out']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
