"""Export a simulated episode's keyframes as a demonstration file (what the policy conditions on).

python -m instant_fold_sim.demo --store data/sim.zarr --episode NAME --out demo.safetensors
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from instant_fold_core.dataset.zarr_store import EpisodeStore
from instant_fold_core.demonstration import from_episode


def simulate_demonstration(garment: str, mode: str, variant: str, seed: int, preset_name: str, out: str | Path) -> Path:
    """Simulate the scripted fold of `mode`/`variant` from the start state of `seed` and save its
    keyframes as a demonstration at `out` (kept if it exists: the simulation is deterministic)."""
    from .garments import resolve_garment
    from .programs import resolve_mode
    from .rollout import preset, run_episode

    out = Path(out)
    if out.is_file():
        return out
    cfg = preset(preset_name)
    g = resolve_garment(garment, spacing=cfg.garment_spacing, max_particles=cfg.max_particles)
    episode = run_episode(g, resolve_mode(mode), variant, seed, cfg)
    out.parent.mkdir(parents=True, exist_ok=True)
    return from_episode(episode, name=f"{g.garment_id} {mode} [{variant}]").save(out)  # atomic


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m instant_fold_sim.demo", description=__doc__.splitlines()[0])
    p.add_argument("--store", required=True)
    p.add_argument("--episode", required=True, help="episode name in the store")
    p.add_argument("--out", required=True, help="demonstration file (.safetensors)")
    p.add_argument("--name", default="", help="demonstration name (default: garment and mode)")
    args = p.parse_args(argv)
    store = EpisodeStore(args.store)
    if args.episode not in store:
        print(f"{args.store}: no episode {args.episode!r} (it has {len(store.names())})", file=sys.stderr)
        return 1
    episode = store.read(args.episode)
    name = args.name or f"{episode.meta['garment_id']} {episode.meta['mode']} [{episode.meta.get('variant', '')}]"
    demo = from_episode(episode, name=name)
    print(f"{demo.save(args.out)}: {demo.num_keyframes} keyframes of {args.episode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
