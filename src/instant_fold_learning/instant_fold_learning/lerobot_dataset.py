"""`python -m instant_fold_learning.lerobot_dataset`: LeRobotDataset v3 export and import.

    export --out DIR [--store STORE [--episodes NAME ...]] [--demo FILE ...] [--bag BAG KEYFRAMES ...] [--fps 20]
        episodes of a zarr episode store, demonstration files and/or recorded bags with the
        keyframes extracted from them -> one LeRobotDataset folder
    import DIR --episode I --out FILE.safetensors [--force]
        episode I of a LeRobotDataset folder -> a demonstration the policy server loads

The format and the conversions are `instant_fold_core.dataset.lerobot_format` (a bag's side:
`instant_fold_demo.lerobot_bag`); see docs/lerobot.md.
Bad input ends with one `error:` line and exit status 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Generator
from contextlib import closing
from pathlib import Path

from instant_fold_core.dataset.lerobot_format import (
    LeRobotEpisode,
    demonstration_frames,
    iter_store_episodes,
    read_episode,
    to_demonstration,
    write_lerobot_dataset,
)
from instant_fold_core.demonstration import load_demonstration
from instant_fold_core.errors import InstantFoldError


def _sources(
    store_path: str | None, names: list[str] | None, demos: list[str], bags: list[list[str]], scratch: Path
) -> Generator[LeRobotEpisode, None, None]:
    """Store episodes first (all, or `names` in the order given), then the demonstration files,
    then the bags (each with its keyframes file; its frames memory-mapped under `scratch`)."""
    if store_path is not None:
        from instant_fold_core.dataset.zarr_store import EpisodeStore  # zarr 3: Python >= 3.11 only

        store = EpisodeStore(store_path)
        available = store.names()
        missing = [n for n in names or [] if n not in available]
        if missing:
            raise InstantFoldError(f"{store_path}: no episodes {missing} (it has {len(available)})")
        yield from iter_store_episodes(store, names or available)
    for path in demos:
        yield demonstration_frames(load_demonstration(path))
    if bags:
        from instant_fold_demo.lerobot_bag import bag_episode  # reads bags with rosbags and ROS messages

        for bag, keyframes in bags:
            with bag_episode(bag, keyframes, scratch) as episode:
                yield episode


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m instant_fold_learning.lerobot_dataset", description=__doc__.splitlines()[0]
    )
    sub = p.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="episode store and/or demonstrations -> LeRobotDataset v3 folder")
    ex.add_argument("--out", required=True, help="new (or empty) dataset folder")
    ex.add_argument("--store", help="zarr episode store")
    ex.add_argument("--episodes", nargs="+", help="episode names in the store (default: all)")
    ex.add_argument("--demo", nargs="+", default=[], help="demonstration files (.safetensors)")
    ex.add_argument(
        "--bag",
        nargs=2,
        action="append",
        default=[],
        metavar=("BAG", "KEYFRAMES"),
        help="a recorded bag (record_demo) and the demonstration file extract made from it; repeatable",
    )
    ex.add_argument("--fps", type=float, default=20.0, help="frame rate (default 20, the simulator's control rate)")
    im = sub.add_parser("import", help="one episode of a LeRobotDataset v3 folder -> demonstration file")
    im.add_argument("root", help="LeRobotDataset folder")
    im.add_argument("--episode", type=int, default=0, help="episode index (default 0)")
    im.add_argument("--out", required=True, help="demonstration file to write (.safetensors)")
    im.add_argument("--force", action="store_true", help="overwrite an existing demonstration file")
    args = p.parse_args(argv)
    try:
        if args.command == "export":
            if args.store is None and not args.demo and not args.bag:
                p.error("export needs --store, --demo and/or --bag")
            if args.episodes and args.store is None:
                p.error("--episodes needs --store")
            start = time.perf_counter()
            scratch = Path(args.out).resolve().parent
            # closing: a bag's scratch files go as soon as an export fails, not when collected
            with closing(_sources(args.store, args.episodes, args.demo, args.bag, scratch)) as sources:
                info = write_lerobot_dataset(args.out, sources, fps=args.fps)
            seconds = time.perf_counter() - start
            print(f"{args.out}: {info['total_episodes']} episodes, {info['total_frames']} frames, "
                  f"{info['total_tasks']} tasks, {_size(Path(args.out)) / 1e6:.1f} MB in {seconds:.1f} s")  # fmt: skip
        else:
            out = Path(args.out)
            if out.exists() and not args.force:
                raise InstantFoldError(f"{out} exists (--force to overwrite)")
            demo = to_demonstration(read_episode(args.root, args.episode))
            out.parent.mkdir(parents=True, exist_ok=True)
            print(f"{demo.save(out)}: {demo.num_keyframes} keyframes of episode {args.episode} of {args.root}")
    except (InstantFoldError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
