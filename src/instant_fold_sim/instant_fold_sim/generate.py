"""Generation CLI: simulated folding demonstrations into an episode store.

    python -m instant_fold_sim.generate --out data/sim.zarr --preset cpu-small \\
        --garments proc:0:12 --split train --modes 1,2 --episodes-per 2 --workers 2

Jobs are (garment, mode, k) for k < episodes-per, run k by k; the variant cycles through the mode's
variants (so episodes are evenly split across them) unless the mode is written `mode/VARIANT`, and the seed is derived from
(--seed, garment id, k), so any episode can be regenerated alone and episode k of every mode on a
garment starts from the same cloth state (the in-context pairs and same-start evaluation need that). Finished
episodes are skipped, which makes every run resumable; one run fills a store at a time (a second
one is refused, naming the first's pid). With --workers > 1 the jobs run on
Ray (a local cluster bound to 127.0.0.1 by default, --address to join an existing one; the store
must then be on a filesystem all nodes share). With --worlds N each process simulates N garments at once in one
Newton model (`ClothBatch`): the way to fill a GPU.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import logging
import queue
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from instant_fold_core.dataset.schema import folding_context
from instant_fold_core.dataset.zarr_store import EpisodeStore
from instant_fold_core.errors import ConfigError
from instant_fold_core.output_dir import OutputDirError, claimed_output_dir
from instant_fold_core.parallel import run_jobs

from .fold_split import HELDOUT_CONTEXTS, TRAINING_CONTEXTS
from .garments import (
    MAX_PARTICLES,
    GarmentError,
    GarmentMesh,
    expand_proc_range,
    load_obj_folder,
    resolve_garment,
    split_of_seed,
)
from .keypoints import KeypointError
from .programs import FOLDING_MODES, MODES, resolve_mode
from .rollout import EpisodeFailed, preset, run_episode
from .scene import ClothBatch

log = logging.getLogger("instant_fold_sim.generate")


@dataclass(frozen=True)
class Job:
    garment_spec: str
    garment_id: str
    mode: str
    variant: str
    k: int
    seed: int

    @property
    def name(self) -> str:
        return f"{self.garment_id}__m{MODES[self.mode].mode_id:02d}_{self.variant}__e{self.k:03d}"


def episode_seed(base: int, garment_id: str, k: int) -> int:
    """Stable 63-bit seed from (base, garment, k), independent of job order, worker count and mode:
    the start state depends on the seed alone, so modes sharing k share their start."""
    digest = hashlib.sha256(f"{base}|{garment_id}|{k}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def expand_garments(
    specs: list[str], split: str | None, spacing: float, max_particles: int = MAX_PARTICLES
) -> list[tuple[str, str]]:
    """(spec, garment id) pairs. `proc:A:B` = procedural seeds A..B-1, `proc:S` one seed,
    `newton_tshirt`, an OBJ file, or a folder of OBJ files (invalid ones are reported and skipped)."""
    out: list[tuple[str, str]] = []
    for spec in (one for given in specs for one in expand_proc_range(given)):
        if spec.startswith("proc:"):
            s = int(spec.split(":")[1])
            if split is None or split_of_seed(s) == split:
                out.append((spec, f"proc_{s:05d}"))
        elif Path(spec).is_dir():
            good, rejected = load_obj_folder(spec, resample=True, max_particles=max_particles)
            for fname, reason in rejected.items():
                log.warning("rejected %s: %s", fname, reason)
            out += [(str(Path(spec) / (g.garment_id[4:] + ".obj")), g.garment_id) for g in good]
        else:
            garment = resolve_garment(spec, spacing=spacing, max_particles=max_particles)
            if split is None or garment.split == split:
                out.append((spec, garment.garment_id))
    return out


def make_jobs(
    garments: list[tuple[str, str]], modes: list[str], variants: list[str] | None, episodes_per: int, base_seed: int
) -> list[Job]:
    """Jobs start-state-major (k, then garment, then mode), so a run stopped early leaves every
    garment and mode with the same number of start states. A mode written `name/V` runs only
    variant V; otherwise its variants (those in `variants`, if given) alternate with k."""
    allowed: dict[str, list[str]] = {}
    for entry in modes:
        name, sep, pinned = entry.partition("/")
        mode = MODES[name]
        if sep and pinned not in mode.variants:
            raise ValueError(f"mode {entry!r}: variant {pinned!r} is not one of {mode.variants}")
        keep = [pinned] if sep else [v for v in mode.variants if variants is None or v in variants]
        if keep:
            allowed[name] = keep
    return [
        Job(spec, gid, name, keep[k % len(keep)], k, episode_seed(base_seed, gid, k))
        for k in range(episodes_per)
        for spec, gid in garments
        for name, keep in allowed.items()
    ]


_GARMENT_CACHE: dict[tuple[str, float], GarmentMesh] = {}

Result = tuple[str, str, float]  # (episode name, "done" | "skipped" | "failed: why", max oracle error or -1)


def _garment(spec: str, preset_name: str) -> GarmentMesh:
    cfg = preset(preset_name)
    key = (spec, cfg.garment_spacing)
    if key not in _GARMENT_CACHE:
        _GARMENT_CACHE[key] = resolve_garment(spec, spacing=cfg.garment_spacing, max_particles=cfg.max_particles)
    return _GARMENT_CACHE[key]


def _simulate(job: Job, store: EpisodeStore, preset_name: str, world: tuple[ClothBatch, int] | None = None) -> Result:
    """Simulate and store one episode, on a scene of its own or on a world of a batch. A world
    joins the batch's frame barrier only while it simulates: writing the episode does not hold the others up."""
    if job.name in store:
        return job.name, "skipped", -1.0
    try:
        garment = _garment(job.garment_spec, preset_name)
        with world[0].frame_barrier(world[1]) if world else nullcontext() as scene:
            episode = run_episode(garment, MODES[job.mode], job.variant, job.seed, preset(preset_name), scene=scene)
    except (EpisodeFailed, GarmentError, KeypointError) as exc:
        return job.name, f"failed: {exc}", -1.0
    episode.meta["episode_name"] = job.name
    episode.meta["preset"] = preset_name  # a store may hold start states of several presets
    store.write(job.name, episode)
    return job.name, "done", float(episode.meta["oracle"]["max_error"])


def run_job(job: Job, store_path: str, preset_name: str) -> Result:
    """Simulate and store one episode on a scene of its own."""
    return _simulate(job, EpisodeStore(store_path, mode="a"), preset_name)


def plan_batches(jobs: list[Job], worlds: int, parallel: int = 1) -> list[list[list[Job]]]:
    """Batches of `worlds` slots; a slot is a queue of jobs on one garment (a world's mesh is
    fixed), so a garment with many episodes is spread over several slots. Slots are sized so
    that about `parallel` batches x `worlds` slots share the work evenly."""
    by_garment: dict[str, list[Job]] = {}
    for job in jobs:
        by_garment.setdefault(job.garment_spec, []).append(job)
    per_slot = max(1, -(-len(jobs) // (worlds * max(1, parallel))))
    slots = [q[i : i + per_slot] for q in by_garment.values() for i in range(0, len(q), per_slot)]
    return [slots[i : i + worlds] for i in range(0, len(slots), worlds)]


def iter_batch(slots: list[list[Job]], store_path: str, preset_name: str) -> Iterator[Result]:
    """Run the slots as worlds of one `ClothBatch` (a thread per world, meeting at a frame barrier);
    results are yielded as episodes finish."""
    store = EpisodeStore(store_path, mode="a")
    runnable: list[tuple[GarmentMesh, list[Job]]] = []
    for slot in slots:
        try:
            runnable.append((_garment(slot[0].garment_spec, preset_name), slot))
        except GarmentError as exc:
            yield from ((job.name, f"failed: {exc}", -1.0) for job in slot)
    if not runnable:
        return
    batch = ClothBatch([garment for garment, _ in runnable], preset(preset_name).sim)
    results: queue.Queue[Result | BaseException | None] = queue.Queue()

    def work(world: int, slot: list[Job]) -> None:
        try:
            for job in slot:
                results.put(_simulate(job, store, preset_name, (batch, world)))
            batch.scenes[world].park()
        except BaseException as exc:  # re-raised by the caller once the other worlds are done
            results.put(exc)
        finally:
            results.put(None)

    threads = [threading.Thread(target=work, args=(w, slot), daemon=True) for w, (_, slot) in enumerate(runnable)]
    for t in threads:
        t.start()
    failure: BaseException | None = None
    for _ in range(len(threads)):
        while (item := results.get()) is not None:
            if isinstance(item, BaseException):
                failure = failure or item
            else:
                yield item
    for t in threads:
        t.join()
    if failure is not None:
        raise failure


def run_batch(slots: list[list[Job]], store_path: str, preset_name: str) -> list[Result]:
    return list(iter_batch(slots, store_path, preset_name))


def _episode_costs(store_path: str | Path, names: Sequence[str] = ()) -> dict[str, list[tuple[int, float]]]:
    """(frames, wall seconds) of every timed episode of a store (of those matching one of the
    `names` globs, when given), by folding context."""
    store = EpisodeStore(store_path)
    by_context: dict[str, list[tuple[int, float]]] = {}
    for name in store.names():
        if names and not any(fnmatch.fnmatchcase(name, pattern) for pattern in names):
            continue
        meta = store.meta(name)
        timing = meta.get("timing") or {}
        if "frames" in timing and "total_s" in timing:
            by_context.setdefault(folding_context(meta), []).append((int(timing["frames"]), float(timing["total_s"])))
    return by_context


def generation_cost(store_path: str | Path, names: Sequence[str] = ()) -> dict[str, float]:
    """What a store cost to generate, whatever restarts its run had: timed episodes, frames and
    worker-seconds (`meta["timing"]`, each episode as its worker measured it), the seconds per
    frame, and the minutes those worker-seconds take on 2 workers (the CPU recipe's). `names`:
    episode-name globs, the part of a store a smaller recipe would generate (e.g. `*__e00[012]`)."""
    rows = [row for rows in _episode_costs(store_path, names).values() for row in rows]
    frames, seconds = sum(f for f, _ in rows), sum(t for _, t in rows)
    return {
        "episodes": len(rows),
        "frames": frames,
        "worker_seconds": round(seconds),
        "seconds_per_frame": round(seconds / frames, 3) if frames else 0.0,
        "minutes_for_2_workers": round(seconds / 120, 1),
    }


def cost_by_context(store_path: str | Path) -> dict[str, dict[str, float]]:
    """Per folding context of a store (`mode/variant`): its episodes, their mean frame count and
    mean wall seconds per episode (`meta["timing"]`, as its worker measured it, other workers
    running beside it). What a context costs to generate: sequential sleeve folds run longer."""
    by_context = _episode_costs(store_path)
    return {
        context: {
            "episodes": len(rows),
            "frames_mean": round(sum(f for f, _ in rows) / len(rows), 1),
            "seconds_mean": round(sum(t for _, t in rows) / len(rows), 1),
        }
        for context, rows in sorted(by_context.items())
    }


def _parse_list(value: str | None) -> list[str] | None:
    return None if value in (None, "all") else [v.strip() for v in value.split(",") if v.strip()]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m instant_fold_sim.generate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", required=True, help="episode store (zarr directory)")
    p.add_argument("--preset", default="paper", help="generation preset: paper | cpu-small")
    p.add_argument(
        "--garments",
        nargs="+",
        default=["proc:0:12"],
        help="proc:A:B | proc:S | newton_tshirt | file.obj | folder of OBJ files",
    )
    p.add_argument("--split", choices=["train", "heldout"], default=None, help="keep garments of this split")
    p.add_argument(
        "--modes",
        default="all",
        help="comma-separated mode names or ids, each optionally /VARIANT (e.g. 2/S), 'all' (19 folds), "
        "'random' (pretraining drags), or the fold split's 'training-folds' (16 contexts) / 'held-out-folds' (3)",
    )
    p.add_argument("--variants", default="all", help="comma-separated variants to keep (e.g. L,R,S)")
    p.add_argument("--episodes-per", type=int, default=1, help="episodes per (garment, mode)")
    p.add_argument(
        "--starts",
        default=None,
        help="only these start states k (comma-separated, each < --episodes-per), e.g. the training starts "
        "first and the held-out ones in a later run; seeds and names are those of the full run",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--workers", type=int, default=1, help="parallel processes (a local Ray cluster on 127.0.0.1 when > 1)"
    )
    p.add_argument(
        "--worlds",
        type=int,
        default=1,
        help="garment worlds simulated together in one Newton model per process (use many on a GPU)",
    )
    p.add_argument("--address", default=None, help="Ray cluster address to join (default: start locally)")
    return p


def _resolve_modes(spec: str) -> list[str]:
    if spec == "all":
        return list(FOLDING_MODES)
    if spec == "random":
        return [n for n, m in MODES.items() if m.family == "random"]
    if spec == "training-folds":
        return list(TRAINING_CONTEXTS)
    if spec == "held-out-folds":
        return list(HELDOUT_CONTEXTS)
    out = []
    for entry in _parse_list(spec) or []:
        name, sep, variant = entry.partition("/")
        out.append(resolve_mode(name).name + sep + variant)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.worlds < 1 or args.workers < 1:
        parser.error("--worlds and --workers must be at least 1")
    if args.episodes_per < 1:
        parser.error(f"--episodes-per must be at least 1, got {args.episodes_per}")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    try:
        cfg = preset(args.preset)
    except ConfigError as exc:
        parser.error(f"--preset: {exc}")
    try:
        garments = expand_garments(args.garments, args.split, cfg.garment_spacing, cfg.max_particles)
    except (GarmentError, ValueError) as exc:  # ValueError: a proc: seed that is not an integer
        parser.error(f"--garments: {exc} (expected proc:A:B, proc:S, newton_tshirt, an OBJ file or a folder of them)")
    try:
        jobs = make_jobs(garments, _resolve_modes(args.modes), _parse_list(args.variants), args.episodes_per, args.seed)
    except (KeyError, ValueError) as exc:
        parser.error(f"--modes: {exc}")
    if args.starts is not None:
        try:
            starts = {int(k) for k in _parse_list(args.starts) or []}
        except ValueError:
            parser.error(f"--starts: expected comma-separated integers, got {args.starts!r}")
        if not starts or not starts <= set(range(args.episodes_per)):
            parser.error(f"--starts: each start must be in 0..{args.episodes_per - 1}, got {args.starts!r}")
        jobs = [j for j in jobs if j.k in starts]
    try:
        # One generator per store: a second one would delete the first's episodes in progress as
        # "partial" and both would run the same jobs.
        with claimed_output_dir(args.out):
            return _generate(jobs, args)
    except OutputDirError as exc:
        print(f"generate: {exc}", file=sys.stderr)
        return 1


def _generate(jobs: list[Job], args: argparse.Namespace) -> int:
    """Run the jobs the store at `args.out` does not hold yet; 1 when every one of them failed."""
    store = EpisodeStore(args.out, mode="a")
    if removed := store.clean_partial():
        log.info("removed %d partial episode(s) left by an interrupted run", removed)
    todo = [j for j in jobs if j.name not in store]
    log.info("%d jobs, %d already finished, %d to run", len(jobs), len(jobs) - len(todo), len(todo))
    failures = 0
    with tqdm(total=len(jobs), initial=len(jobs) - len(todo), desc="episodes", unit="ep") as bar:
        for name, status, err in _run_all(todo, args):
            if status.startswith("failed"):
                failures += 1
                log.warning("%s %s", name, status)
            bar.set_postfix_str(f"{name} oracle={err:.3f}" if err >= 0 else name)
            bar.update(1)
    log.info("store %s holds %d episodes (%d failed this run)", args.out, len(store), failures)
    return 1 if failures and failures == len(todo) else 0


def _run_all(todo: list[Job], args: argparse.Namespace) -> Iterator[Result]:
    """Results as episodes finish: in this process, on local Ray workers or on a cluster (`run_jobs`)."""
    store = str(Path(args.out).resolve())
    if args.worlds <= 1:
        for _, result in run_jobs(run_job, todo, args.workers, args.address, (store, args.preset)):
            yield result
        return
    batches = plan_batches(todo, args.worlds, args.workers)
    if args.workers <= 1 and args.address is None:  # in process: report episode by episode
        for slots in batches:
            yield from iter_batch(slots, store, args.preset)
        return
    for _, results in run_jobs(run_batch, batches, args.workers, args.address, (store, args.preset)):
        yield from results


if __name__ == "__main__":
    sys.exit(main())
