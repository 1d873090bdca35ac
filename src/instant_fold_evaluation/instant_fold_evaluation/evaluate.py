"""`evaluate`: closed-loop same-init evaluation with the paper's metrics, and Table 1.

    python -m instant_fold_evaluation.evaluate --benchmark cpu --checkpoint models/policy \\
        --encoder models/encoder --out outputs/eval/default --workers 2
    python -m instant_fold_evaluation.evaluate --benchmark cpu --out outputs/eval/reference   # oracle, do-nothing
    python -m instant_fold_evaluation.evaluate table outputs/eval/default outputs/eval/lang --out table.md
    python -m instant_fold_evaluation.evaluate rescore outputs/eval/default --out outputs/eval/rescored/default

Steps, each resumable (finished work is never redone):
1. the oracle bank of the benchmark (K noisy scripted executions per start and context;
   `--bank`, by default the shipped `models/oracle_banks/<name>` or else `data/oracle_banks/<name>`,
   where a cut of another spec (`part_of`) is kept under that spec's name);
2. the demonstrations (the scripted fold of each garment and context from the spec's `demo_k`
   start, cached under `data/benchmark_demos/<name>`, a cut's under its whole's), for a
   demonstration-conditioned policy;
3. one in-process closed-loop rollout per (start, demonstrated context): `rollouts.jsonl`;
4. the scores: `scores.jsonl` (every scored fold of every row), `summary.json`, `table.md`
   (rows policy, wrong-demo, oracle in-sample and out-of-sample, do-nothing; seen / held-out
   folds x Ctx. Acc., C-SR@95, Geom., W1 as in the paper's Table 1; then the first-grasp errors
   and the errors of every grasp and release).
   `--video` adds an MP4 and a keyframe strip per rollout, `--rrd` a Rerun recording (docs/rerun.md).
   `--event-targets` sets where an anchored-head policy's arms grasp and let go
   (`instant_fold_learning.policy.event_targets`, docs/policy.md; by default the policy's own targets),
   `--grasp-refinement-m` how the demonstration's grasps are mapped for them (docs/registration.md).

`rescore` scores a finished run's `rollouts.jsonl` again into another folder with the current
metrics (new rows and columns of an older run), simulating nothing.

Jobs run in this process (`--workers 1`), on local Ray workers, or on a Ray cluster (`--address`).
`--sim-backend isaac_lab` rolls the policy out in Isaac Lab instead (one Isaac Lab process per
rollout, docs/isaac_lab.md), scored against the same Newton oracle bank: the paper's sim-to-sim
comparison.
Metrics and choices: docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from instant_fold_core.checkpoint import CheckpointError, checkpoint_id
from instant_fold_core.compute_threads import machine_record
from instant_fold_core.config import at_least_zero
from instant_fold_core.errors import ConfigError, InstantFoldError
from instant_fold_core.fold_record import FoldRecord
from instant_fold_core.fold_recording import FoldRecording
from instant_fold_core.parallel import run_jobs
from instant_fold_evaluation.oracle_bank import BankEntry, BankKey, OracleBank, OracleBankError
from instant_fold_learning.policy.event_targets import (
    AUTO,
    EVENT_TARGETS,
    FIRST_GRASP_MATCH_M,
    GRASP_CONFLICT_M,
    GRASP_MATCH_M,
)
from instant_fold_policy.fold_loop import FoldLoopConfig
from instant_fold_policy.server import PolicyServerError, policy_checkpoint_id
from instant_fold_ros.bringup_share import models_dir
from instant_fold_sim.isaac_lab.grasp import DEFAULT_GRASP, GRASP_MODELS
from instant_fold_sim.isaac_lab.server import BACKENDS as BRIDGE_BACKENDS

from .benchmark import BenchmarkSpec, Init, RolloutJob
from .scoring import (
    REFERENCE_LABELS,
    ROWS,
    context_table,
    event_table,
    families,
    grasp_table,
    notes,
    oracle_uv,
    primitive_table,
    score_line,
    score_rows,
    summarize_contexts,
    summarize_garments,
    summarize_rows,
    table,
)

#: Where benchmark data made on this machine goes by default (relative to the working directory,
#: as every generated-data path of the CLIs).
DATA = Path("data")


class EvaluationError(InstantFoldError, RuntimeError):
    """The evaluation cannot run as asked; the message says why."""


#: How long a bridge backend may take to start and build its scene (Isaac Lab on CPU, uncached
#: kernels: ~4.5 min measured).
BRIDGE_START_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class ServerConfig:
    """What a worker's policy server is built from (`PolicyServer.from_checkpoints`' arguments;
    hashable: a worker builds one server per config)."""

    checkpoint: str
    encoder: str
    device: str
    seed: int
    event_targets: str = "policy"  # instant_fold_learning.policy.event_targets
    grasp_refinement_m: float = 0.0  # docs/registration.md, "Local refinement"
    keypoints: str = ""  # a keypoint detector (docs/registration.md, "Grasps carried by keypoints")
    grasp_conflict_m: float = GRASP_CONFLICT_M  # docs/policy.md, "Event targets"
    grasp_match_m: float = GRASP_MATCH_M  # docs/policy.md, "Event targets"
    first_grasp_match_m: float = FIRST_GRASP_MATCH_M  # docs/policy.md, "Event targets"


@dataclass(frozen=True)
class RunConfig:
    """What a rollout worker needs besides its job (shipped once to every Ray worker)."""

    server: ServerConfig
    preset: str
    max_steps: int
    demo_dir: str
    video_dir: str
    sim_backend: str = "newton"  # or a bridge backend (instant_fold_sim.isaac_lab)
    sim_device: str = "cpu"
    rrd_dir: str = ""  # a Rerun recording per rollout goes here (none when empty)
    sim_grasp: str = DEFAULT_GRASP  # isaac_lab: what held cloth follows (instant_fold_sim.isaac_lab.grasp)
    fold: FoldLoopConfig = field(
        default_factory=FoldLoopConfig
    )  # the fold loop's options (home after the events, re-grasp guard)


def default_bank(spec: BenchmarkSpec) -> Path:
    shipped = models_dir() / "oracle_banks" / spec.store
    return shipped if shipped.is_dir() else DATA / "oracle_banks" / spec.store


def demo_path(demo_dir: str | Path, job: RolloutJob) -> Path:
    return Path(demo_dir) / f"{job.init.garment_id}__seed{job.demo_seed}__{job.context.stem}.safetensors"


# --------------------------------------------------------------------------- worker functions


def build_bank_entry(key: BankKey, root: str, preset_name: str, runs: int) -> str:
    OracleBank(root, preset_name, runs).build(key)
    return key.context.label


def build_demo(job: RolloutJob, demo_dir: str, preset_name: str) -> str:
    from instant_fold_sim.demo import simulate_demonstration

    path = demo_path(demo_dir, job)
    return str(
        simulate_demonstration(
            job.init.garment, job.context.mode, job.context.variant, job.demo_seed, preset_name, path
        )
    )


@functools.lru_cache(maxsize=2)
def _server(cfg: ServerConfig):
    from instant_fold_policy.server import PolicyServer

    return PolicyServer.from_checkpoints(
        cfg.checkpoint,
        cfg.encoder,
        cfg.device,
        cfg.seed,
        event_targets=cfg.event_targets,
        grasp_refinement_m=cfg.grasp_refinement_m,
        keypoint_detector=cfg.keypoints or None,
        grasp_conflict_m=cfg.grasp_conflict_m,
        grasp_match_m=cfg.grasp_match_m,
        first_grasp_match_m=cfg.first_grasp_match_m,
    )


def _check_simulator(backend: str, device: str) -> None:
    """Start the bridge backend once before anything is simulated: a missing Isaac Lab
    environment is a clear error here, not a failure inside the first rollout's worker."""
    from instant_fold_sim.isaac_lab.client import BridgeClient, BridgeError

    try:
        with BridgeClient(backend, device, start_timeout_s=BRIDGE_START_TIMEOUT_S):
            pass
    except BridgeError as exc:
        raise EvaluationError(f"--sim-backend {backend}: {exc}") from None


def run_job(job: RolloutJob, cfg: RunConfig) -> dict[str, Any]:
    """One rollout (in a worker): condition the policy, fold, return the JSON line. A bridge
    backend gets a simulator process of its own for the rollout (Isaac Lab builds one start state
    per process), closed when the rollout ends."""
    from instant_fold_sim.isaac_lab.client import BridgeClient
    from instant_fold_sim.sim_world import SimWorld

    if cfg.sim_backend == "newton":
        return _roll_out(job, cfg, SimWorld(job.init.garment, job.init.seed, cfg.preset, record=bool(cfg.video_dir)))
    with BridgeClient(
        cfg.sim_backend, cfg.sim_device, start_timeout_s=BRIDGE_START_TIMEOUT_S, grasp=cfg.sim_grasp
    ) as bridge:
        world = SimWorld(job.init.garment, job.init.seed, cfg.preset, record=bool(cfg.video_dir), bridge=bridge)
        return _roll_out(job, cfg, world)


def _roll_out(job: RolloutJob, cfg: RunConfig, world: Any) -> dict[str, Any]:
    from instant_fold_core.demonstration import load_demonstration

    from .closed_loop import POLICY_ERRORS, load_condition, not_run, run_rollout

    server = _server(cfg.server)
    demo = load_demonstration(demo_path(cfg.demo_dir, job)) if server.conditioning == "demo" else None
    recording = FoldRecording(Path(cfg.rrd_dir) / f"{job.id}.rrd") if cfg.rrd_dir else None
    if recording is not None and demo is not None:
        recording.demonstration(demo)
    try:
        load_condition(server, demo, job.context)
    except POLICY_ERRORS as exc:
        result = not_run(world, f"cannot condition the policy on {job.context.label}: {exc}")
    else:
        result = run_rollout(world, server, cfg.max_steps, fold=cfg.fold, recording=recording)
    line: dict[str, Any] = {
        "id": job.id,
        "garment": job.init.garment,
        "k": job.init.k,
        "seed": job.init.seed,
        "context": job.context.label,
        "outcome": result.outcome.name.lower(),
        "message": result.message,
        "queries": result.queries,
        "frames": result.frames,
        "wall_s": result.wall_s,
        "policy_s": result.policy_s,
        "safety_events": result.safety_events,
        "record": result.record.to_json(),
    }
    if cfg.video_dir and result.frames:
        from instant_fold_sim.viewer import keyframe_strip, video

        episode = world.episode(f"policy rollout, demo {job.context.label}", job.context.variant)
        line["video"] = str(video(episode, Path(cfg.video_dir) / f"{job.id}.mp4"))
        line["strip"] = str(keyframe_strip(episode, Path(cfg.video_dir) / f"{job.id}.png"))
    if recording is not None:
        line["rrd"] = str(_close_recording(recording, world, job))
    return line


def _close_recording(recording: FoldRecording, world: Any, job: RolloutJob) -> Path:
    """Add the target and the result to a rollout's recording and close it: the keypoints of the
    oracle program run from the same start (one more scripted fold, so `--rrd` costs a rollout
    about that much) and the fold's final keypoints."""
    same_init = world.evaluate(job.context.mode, job.context.variant)
    recording.keypoints(np.asarray(same_init["oracle_keypoints"]), np.asarray(same_init["final_keypoints"]))
    return recording.close()


# --------------------------------------------------------------------------- driver


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    lines = []
    for raw in path.read_text().splitlines():
        try:
            lines.append(json.loads(raw))
        except json.JSONDecodeError:
            continue  # a line cut by an interruption: its rollout runs again
    return lines


def _phase(desc: str, fn, items: list, workers: int, address: str | None, args: tuple) -> list[tuple[Any, Any]]:
    results: list[tuple[Any, Any]] = []
    if not items:
        return results
    with tqdm(total=len(items), desc=desc, unit="job") as bar:
        for item, result in run_jobs(fn, items, workers, address, args):
            results.append((item, result))
            bar.update(1)
    return results


def _check_run(out: Path, fingerprint: dict[str, Any]) -> None:
    """Bind `out` to one configuration (`run.json`), so that resuming never mixes in rollouts of
    another checkpoint, encoder, seed, step limit or benchmark."""
    path = out / "run.json"
    if path.is_file():
        old = json.loads(path.read_text())
        if "tokenizer_id" in old:  # written before the encoder had one name: the same field
            old["encoder_id"] = old.pop("tokenizer_id")
        differ = sorted(k for k in set(old) | set(fingerprint) if old.get(k) != fingerprint.get(k))
        if differ:
            raise EvaluationError(
                f"{out} holds an evaluation of another configuration (differs in {differ}): "
                "choose another --out, or delete it to start over"
            )
    else:
        path.write_text(json.dumps(fingerprint, indent=1, sort_keys=True) + "\n")


def _rewrite_jsonl(path: Path, lines: list[dict[str, Any]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(line) + "\n" for line in lines))
    os.replace(tmp, path)


def _rollouts(
    spec: BenchmarkSpec, cfg: RunConfig, out: Path, workers: int, address: str | None
) -> tuple[list[dict[str, Any]], int]:
    """Every job's rollout line (in job order) and how many ran now: the lines already in
    `rollouts.jsonl` are kept, the other jobs run and each line is appended as it finishes, so an
    interruption loses only the rollouts in flight."""
    jobs = spec.jobs()
    path = out / "rollouts.jsonl"
    ids = {j.id for j in jobs}
    done = {line["id"]: line for line in _read_jsonl(path) if line.get("id") in ids}
    _rewrite_jsonl(path, list(done.values()))  # drops a line cut by an interruption
    todo = [j for j in jobs if j.id not in done]
    with path.open("a") as f, tqdm(total=len(jobs), initial=len(done), desc="rollouts", unit="rollout") as bar:
        for _, line in run_jobs(run_job, todo, workers, address, (cfg,)):
            f.write(json.dumps(line) + "\n")
            f.flush()
            done[line["id"]] = line
            bar.set_postfix_str(f"{line['id']} {line['outcome']}")
            bar.update(1)
    return [done[j.id] for j in jobs], len(todo)


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    spec = BenchmarkSpec.load(args.benchmark)
    encoder = str(Path(args.encoder or models_dir() / "encoder").resolve())
    checkpoint = str(Path(args.checkpoint).resolve()) if args.checkpoint else ""
    keypoints = str(Path(args.keypoints).resolve()) if args.keypoints else ""
    max_steps = args.max_steps or spec.max_steps
    policy_conditioning, event_targets = "", args.event_targets
    for flag in (
        "--regrasp-guard-m",
        "--grasp-gate-m",
        "--event-order-wait",
    ):  # refused here, not in every rollout's worker
        name = flag[2:].replace("-", "_")
        try:
            FoldLoopConfig(**{name: getattr(args, name)})  # the fold loop's own check, the flag named
        except ConfigError as exc:
            raise EvaluationError(f"{flag}: {exc}") from None
    fold = FoldLoopConfig(
        home_after_events=args.home_after_events,
        regrasp_guard_m=args.regrasp_guard_m,
        grasp_gate_m=args.grasp_gate_m,
        event_order=args.event_order,
        event_order_wait=args.event_order_wait,
        event_order_call=args.event_order_call,
    )
    if args.event_order_call and not args.event_order:  # set and silently unused, a summary would misreport it
        raise EvaluationError("--event-order-call: the arms' events are ordered only with --event-order")
    for flag in ("--grasp-refinement-m", "--grasp-conflict-m", "--grasp-match-m", "--first-grasp-match-m"):
        name = flag[2:].replace("-", "_")
        try:
            at_least_zero(name, getattr(args, name))
        except ConfigError as exc:
            raise EvaluationError(f"{flag}: {exc}") from None
    server_cfg = ServerConfig(
        checkpoint,
        encoder,
        args.device,
        args.seed,
        args.event_targets,
        args.grasp_refinement_m,
        keypoints,
        args.grasp_conflict_m,
        args.grasp_match_m,
        args.first_grasp_match_m,
    )
    fingerprint: dict[str, Any] = {"benchmark": spec.to_dict()}
    if checkpoint:  # load it now: a bad checkpoint is refused before anything is simulated
        try:
            server = _server(server_cfg)
            policy_conditioning, event_targets = server.conditioning, server.event_targets  # "auto" resolved
        except PolicyServerError as exc:
            raise EvaluationError(str(exc)) from None
        fingerprint |= {
            "checkpoint_id": policy_checkpoint_id(checkpoint),
            "encoder_id": checkpoint_id(encoder),
            "seed": args.seed,
            "max_steps": max_steps,
        }
        if args.home_after_events:  # only when set, as below
            fingerprint["home_after_events"] = True
        if args.regrasp_guard_m:  # only when set, as above
            fingerprint["regrasp_guard_m"] = args.regrasp_guard_m
        if args.grasp_gate_m:  # only when set, as above
            fingerprint["grasp_gate_m"] = args.grasp_gate_m
        if args.event_order:  # only when set, as above
            fingerprint["event_order_wait"] = args.event_order_wait
            if args.event_order_call:  # only when set: event-order runs made before the call existed had none
                fingerprint["event_order_call"] = True
        if event_targets != "policy":  # only when set: the results directories of earlier runs stay resumable
            fingerprint["event_targets"] = event_targets
        if args.grasp_refinement_m:  # only when set, as above
            fingerprint["grasp_refinement_m"] = args.grasp_refinement_m
        if keypoints:  # only when set, as above
            fingerprint["keypoints_id"] = checkpoint_id(keypoints)
        if event_targets == "demonstration" and args.grasp_conflict_m:  # runs before 2026-11-28 had none
            fingerprint["grasp_conflict_m"] = args.grasp_conflict_m
        if event_targets == "demonstration" and args.grasp_match_m != GRASP_MATCH_M:  # as above: only when set
            fingerprint["grasp_match_m"] = args.grasp_match_m
        # Runs before 2026-11-28 took first grasps with grasp_match_m like the others.
        if event_targets == "demonstration" and args.first_grasp_match_m != args.grasp_match_m:
            fingerprint["first_grasp_match_m"] = args.first_grasp_match_m
        if args.sim_backend != "newton":  # rollouts of one simulator are never mixed with another's
            fingerprint["sim_backend"] = args.sim_backend
            if args.sim_backend == "isaac_lab":  # nor one grasp model's with another's
                fingerprint["sim_grasp"] = args.sim_grasp
            _check_simulator(args.sim_backend, args.sim_device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    _check_run(out, fingerprint)
    bank_root = Path(args.bank) if args.bank else default_bank(spec)
    bank = OracleBank(bank_root, spec.preset, spec.oracle_runs, grow=args.grow_bank)
    timing: dict[str, float] = {}

    t0 = time.perf_counter()
    missing = [k for k in spec.bank_keys() if bank.load(k) is None]
    _phase(
        "oracle bank",
        build_bank_entry,
        missing,
        args.workers,
        args.address,
        (str(bank_root), spec.preset, spec.oracle_runs),
    )
    timing["bank_s"] = time.perf_counter() - t0
    entries = _entries(
        spec,
        bank,
        "after building it (on a Ray cluster, the bank and demonstration directories must be on a "
        "filesystem the workers share)",
    )

    rollouts: dict[tuple[Init, str], FoldRecord] | None = None
    lines: list[dict[str, Any]] = []
    if checkpoint:
        demo_dir = Path(args.demo_dir or DATA / "benchmark_demos" / spec.store).resolve()
        t0 = time.perf_counter()
        if policy_conditioning == "demo":
            need = {demo_path(demo_dir, j): j for j in spec.jobs() if not demo_path(demo_dir, j).is_file()}
            _phase(
                "demonstrations",
                build_demo,
                list(need.values()),
                args.workers,
                args.address,
                (str(demo_dir), spec.preset),
            )
        timing["demos_s"] = time.perf_counter() - t0
        cfg = RunConfig(
            replace(server_cfg, event_targets=event_targets),  # "auto" resolved
            spec.preset,
            max_steps,
            str(demo_dir),
            str((out / "videos").resolve()) if args.video else "",
            args.sim_backend,
            args.sim_device,
            str((out / "videos").resolve()) if args.rrd else "",
            sim_grasp=args.sim_grasp,
            fold=fold,
        )
        t0 = time.perf_counter()
        lines, timing["rollouts_run"] = _rollouts(spec, cfg, out, args.workers, args.address)
        timing["rollouts_s"] = time.perf_counter() - t0
        rollouts = _records(spec, lines)

    scored = _score(spec, entries, rollouts, out)
    outcomes: dict[str, int] = {}
    for line in lines:
        outcomes[line["outcome"]] = outcomes.get(line["outcome"], 0) + 1
    summary = {
        "benchmark": spec.to_dict(),
        "bank": str(bank_root),
        "bank_runs": bank.runs,
        # The rollouts' numbers depend on it (instant_fold_core.compute_threads); this process's:
        # rollouts on the workers of a Ray cluster (--address) ran where those workers are.
        "machine": machine_record(),
        "checkpoint": args.checkpoint or None,
        "encoder": (args.encoder or "models/encoder") if args.checkpoint else None,
        "conditioning": policy_conditioning or None,
        "seed": args.seed if args.checkpoint else None,  # the flow sampler's (recorded since 2026-11-28)
        "label": args.label,
        "max_steps": max_steps,
        "sim_backend": args.sim_backend,
        "sim_grasp": args.sim_grasp if args.sim_backend == "isaac_lab" else None,
        "event_targets": event_targets,
        "home_after_events": args.home_after_events,
        "regrasp_guard_m": args.regrasp_guard_m,
        "grasp_gate_m": args.grasp_gate_m,
        "event_order_wait": args.event_order_wait if args.event_order else None,
        "event_order_call": args.event_order_call if args.event_order else None,
        "grasp_refinement_m": args.grasp_refinement_m,
        "grasp_conflict_m": args.grasp_conflict_m if event_targets == "demonstration" else None,
        "grasp_match_m": args.grasp_match_m if event_targets == "demonstration" else None,
        "first_grasp_match_m": args.first_grasp_match_m if event_targets == "demonstration" else None,
        "keypoints": args.keypoints or None,
        **scored,
        "outcomes": outcomes,
        "rollouts": len(lines),
        "mean_rollout_wall_s": (sum(line["wall_s"] for line in lines) / len(lines)) if lines else None,
        "timing": timing,
        "workers": args.workers,
    }
    _write_summary(out, summary)
    return summary


def _entries(spec: BenchmarkSpec, bank: OracleBank, why: str) -> dict[tuple[str, int, str], BankEntry]:
    """Every bank entry of the spec, keyed (garment, seed, context label); EvaluationError naming
    the first incomplete one and `why` it should not be."""
    entries = {}
    for key in spec.bank_keys():
        entry = bank.load(key)
        if entry is None:
            raise EvaluationError(f"oracle bank {bank.root}: {key} is incomplete {why}")
        entries[(key.garment, key.seed, key.context.label)] = entry
    return entries


def _records(spec: BenchmarkSpec, lines: list[dict[str, Any]]) -> dict[tuple[Init, str], FoldRecord]:
    """The fold records of the rollout lines (in job order), keyed as `score_rows` takes them."""
    return {
        (j.init, j.context.label): FoldRecord.from_json(line["record"])
        for j, line in zip(spec.jobs(), lines, strict=True)
    }


def _score(
    spec: BenchmarkSpec,
    entries: dict[tuple[str, int, str], BankEntry],
    rollouts: dict[tuple[Init, str], FoldRecord] | None,
    out: Path,
) -> dict[str, Any]:
    """Score every row, write `scores.jsonl` into `out`; the summary's scored keys: `rows` (the row
    summaries), `contexts` and `garments` (the breakdowns) and `notes`."""
    fams = families(spec, entries)
    rows = score_rows(spec, fams, rollouts)
    summaries = summarize_rows(rows, oracle_uv(fams))
    with (out / "scores.jsonl").open("w") as f:
        for row, scored in rows.items():
            for split, s, extra in scored:
                f.write(json.dumps(score_line(row, split, s, extra)) + "\n")
    return {
        "rows": summaries,
        "contexts": summarize_contexts(rows),
        "garments": summarize_garments(rows),
        "notes": notes(fams, summaries),
    }


def _write_summary(out: Path, summary: dict[str, Any]) -> None:
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    (out / "table.md").write_text(report(summary))


def rescore(run_dir: Path, out: Path, bank: str = "") -> dict[str, Any]:
    """Score a finished run's rollouts again with the current metrics into `out`, simulating
    nothing: a metric added after the run (the event errors, say) is reported for it without
    rerunning its rollouts (an hour on the CPU benchmark), and the run itself is left as it was
    (`out` must be another folder). `out` gets the run's `run.json` and `rollouts.jsonl` (a
    complete results directory, which `evaluate` resumes and `rescore` reads like the run), and
    new `scores.jsonl`, `summary.json` (the run's, with new rows, notes and `rescored_from`) and
    `table.md`. The bank is the run's unless `bank` names another; it must hold every entry the
    spec needs (a re-score builds nothing)."""
    if out.resolve() == run_dir.resolve():
        raise EvaluationError(f"{out}: a re-score writes to another folder, never over the run it reads")
    old = read_summary(run_dir)
    try:
        run = json.loads((run_dir / "run.json").read_text())
        spec = BenchmarkSpec.from_dict(run["benchmark"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise EvaluationError(f"{run_dir}: no readable run.json with the benchmark spec ({exc})") from None
    bank_root = Path(bank or old["bank"])
    bank_used = OracleBank.open(bank_root)
    entries = _entries(spec, bank_used, "(a re-score builds nothing: complete it with evaluate)")
    lines: list[dict[str, Any]] = []
    rollouts = None
    if old.get("checkpoint"):
        done = {line.get("id"): line for line in _read_jsonl(run_dir / "rollouts.jsonl")}
        missing = [j.id for j in spec.jobs() if j.id not in done]
        if missing:
            raise EvaluationError(
                f"{run_dir}: {len(missing)} of {len(spec.jobs())} rollouts missing (first: {missing[0]}); "
                "finish the run with evaluate first"
            )
        lines = [done[j.id] for j in spec.jobs()]
        rollouts = _records(spec, lines)
    out.mkdir(parents=True, exist_ok=True)
    _check_run(out, run)
    if lines:
        _rewrite_jsonl(out / "rollouts.jsonl", lines)
    summary = (
        old
        | _score(spec, entries, rollouts, out)
        | {
            "bank": str(bank_root),
            "bank_runs": bank_used.runs,  # the executions per context scored against (a grown bank: more than the spec's)
            "rescored_from": str(run_dir),
        }
    )
    _write_summary(out, summary)
    return summary


def row_labels(summary: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The table rows of one summary, labelled with the run's label (reference rows: `REFERENCE_LABELS`)."""
    name = summary.get("label") or Path(summary.get("checkpoint") or "reference").name
    out = []
    for row in ROWS:
        if row in summary["rows"]:
            label = name if row == "policy" else f"{name}: {row}" if row == "wrong-demo" else REFERENCE_LABELS[row]
            out.append((label, summary["rows"][row]))
    return out


def tables(rows: list[tuple[str, dict[str, Any]]]) -> str:
    """Table 1 of these rows, then their first-grasp and event errors and the fold halves they
    recognise, where any row has them."""
    extra = (grasp_table(rows), event_table(rows), primitive_table(rows))
    return table(rows) + "".join(f"\n{t}" for t in extra if t)


def report(summary: dict[str, Any]) -> str:
    """The tables of one run: Table 1 and its error tables, then the per-context table (runs
    scored before it existed have none; `rescore` adds it)."""
    spec = summary.get("benchmark") or {}
    per_context = context_table(summary.get("contexts") or {}, [*spec.get("seen", []), *spec.get("heldout", [])])
    return tables(row_labels(summary)) + (f"\n{per_context}" if per_context else "")


def read_summary(run_dir: Path) -> dict[str, Any]:
    """The `summary.json` of an evaluate run, from its folder or the file itself (e.g. a copy in
    docs/results); EvaluationError naming the path when there is none (an empty or unfinished run)
    or it is not a summary."""
    path = run_dir / "summary.json" if run_dir.is_dir() else run_dir
    try:
        summary = json.loads(path.read_text())
    except FileNotFoundError:
        raise EvaluationError(
            f"{run_dir}: no summary.json (not an evaluate run, or one that has not finished)"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EvaluationError(f"{path}: unreadable ({exc})") from exc
    if not isinstance(summary, dict) or not isinstance(summary.get("rows"), dict):
        raise EvaluationError(f"{path}: not an evaluate summary (no 'rows')")
    return summary


def merge_tables(run_dirs: list[str]) -> str:
    """One table from several runs: every run's policy and wrong-demo rows, the reference rows once."""
    return tables(merged_rows([read_summary(Path(d)) for d in run_dirs]))


def merged_rows(summaries: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The rows of `merge_tables` from runs' summaries already read (e.g. the JSONs the docs quote)."""
    rows: list[tuple[str, dict[str, Any]]] = []
    reference: list[tuple[str, dict[str, Any]]] = []
    for summary in summaries:
        for label, splits in row_labels(summary):
            target = reference if label in REFERENCE_LABELS.values() else rows
            if not any(label == existing for existing, _ in target):
                target.append((label, splits))
    return rows + reference


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m instant_fold_evaluation.evaluate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--benchmark", default="cpu", help="benchmark spec: a YAML file or a name in config/benchmarks")
    p.add_argument("--checkpoint", default="", help="policy directory (none: the reference rows only)")
    p.add_argument("--encoder", default="", help="cloth encoder directory (default: the installed models/encoder)")
    p.add_argument("--out", required=True, help="results directory (resumed when it exists)")
    p.add_argument("--label", default="", help="row label in the table (default: the checkpoint's folder name)")
    p.add_argument(
        "--bank",
        default="",
        help="oracle bank directory (default: the installed models/oracle_banks/<benchmark>, else "
        "data/oracle_banks/<benchmark>; a cut's (part_of) under its whole's name)",
    )
    p.add_argument(
        "--grow-bank",
        action="store_true",
        help="raise a bank of fewer executions per context to the spec's oracle_runs, keeping its executions "
        "(run k uses noise seed k: they are the first ones of the larger bank)",
    )
    p.add_argument(
        "--demo-dir",
        default="",
        help="demonstration cache directory (default data/benchmark_demos/<benchmark>, a cut's under its whole's name)",
    )
    p.add_argument("--max-steps", type=int, default=0, help="policy queries per rollout (default: the spec's)")
    p.add_argument("--workers", type=int, default=1, help="parallel processes (Ray when > 1)")
    p.add_argument("--address", default=None, help="Ray cluster address to join (default: local)")
    p.add_argument("--device", default="cpu", help="policy and encoder device (auto, cpu, cuda)")
    p.add_argument("--seed", type=int, default=0, help="flow-sampler seed (reseeded per rollout)")
    p.add_argument("--video", action="store_true", help="write an MP4 and a keyframe strip per rollout")
    p.add_argument(
        "--rrd",
        action="store_true",
        help="write a Rerun recording per rollout (videos/<id>.rrd: camera, mask, tokens, chunks, arm path, "
        "oracle keypoints, latencies; docs/rerun.md)",
    )
    p.add_argument(
        "--sim-backend",
        default="newton",
        choices=("newton", *BRIDGE_BACKENDS),
        help="simulator of the policy's rollouts (isaac_lab: docs/isaac_lab.md); the oracle bank stays Newton's",
    )
    p.add_argument("--sim-device", default="cpu", help="the bridge backend's device: cpu or cuda:0")
    p.add_argument(
        "--sim-grasp",
        default=DEFAULT_GRASP,
        choices=GRASP_MODELS,
        help="isaac_lab: held cloth follows the simulated fingers (default) or the commanded target (the first model)",
    )
    p.add_argument(
        "--event-targets",
        default="policy",
        choices=(AUTO, *EVENT_TARGETS),
        help="where the arms grasp and let go: the policy's targets read from the cloth at each query (policy, "
        "the default); a carry's release read right after its grasp (latched); the demonstration's release "
        "registered at each grasp (demonstration_releases); and also the demonstration's grasp, registered, "
        "when the policy aims near it (demonstration); auto: demonstration for an anchored-head policy conditioned "
        "on demonstrations, else policy (the deployment's choice, config/policy.yaml). Anchored keypose head only; "
        "docs/policy.md",
    )
    p.add_argument(
        "--home-after-events",
        action="store_true",
        help="once the demonstration's gripper events are done, grippers open, the arms go home whatever the "
        "policy does next (the fold loop's home_after_events; docs/policy.md)",
    )
    p.add_argument(
        "--regrasp-guard-m",
        type=float,
        default=0.0,
        help="an arm that let go stays open until it has moved this far (x, y, metres) from where it let go "
        "(the fold loop's regrasp_guard_m; 0, the default: off; docs/policy.md)",
    )
    p.add_argument(
        "--grasp-gate-m",
        type=float,
        default=0.0,
        help="an open arm closes only at chunk steps within this (x, y, metres) of the grasp the chunk's keypose "
        'reports (the fold loop\'s grasp_gate_m; 0, the default: off; docs/policy.md, "Grasp gate")',
    )
    p.add_argument(
        "--event-order",
        action="store_true",
        help="each arm's gripper events wait for the other arm's as the demonstration orders them, the events of "
        'one keyframe made together (the fold loop\'s event_order; off by default; docs/policy.md, "Event order")',
    )
    p.add_argument(
        "--event-order-wait",
        type=int,
        default=FoldLoopConfig.event_order_wait,
        help="with --event-order: queries an arm waits at one event before it makes it whatever the other arm does "
        f"(the fold loop's event_order_wait; default {FoldLoopConfig.event_order_wait})",
    )
    p.add_argument(
        "--event-order-call",
        action="store_true",
        help="with --event-order: an open arm the other arm waits for (both arms' grasps in one keyframe) goes "
        "straight to the grasp its chunk's keypose reports and closes there (the fold loop's event_order_call)",
    )
    p.add_argument(
        "--grasp-conflict-m",
        type=float,
        default=GRASP_CONFLICT_M,
        help="demonstration event targets: two grasps the policy aims nearer than this (x, y, metres) to each other "
        "send each arm to its own demonstrated grasp (the policy server's grasp_conflict_m; 0: off, as every run "
        f'before 2026-11-28; default {GRASP_CONFLICT_M}; docs/policy.md, "Event targets")',
    )
    p.add_argument(
        "--grasp-match-m",
        type=float,
        default=GRASP_MATCH_M,
        help="demonstration event targets: a grasp the policy aims this close (x, y, metres) to where the arm's next "
        "demonstrated grasp maps onto the cloth is made at that mapped point (the policy server's grasp_match_m; "
        f'0: never; default {GRASP_MATCH_M}; docs/policy.md, "Event targets")',
    )
    p.add_argument(
        "--first-grasp-match-m",
        type=float,
        default=FIRST_GRASP_MATCH_M,
        help="--grasp-match-m for each arm's first grasp of a fold (the policy server's first_grasp_match_m; "
        f'default {FIRST_GRASP_MATCH_M}; docs/policy.md, "Event targets")',
    )
    p.add_argument(
        "--grasp-refinement-m",
        type=float,
        default=0.0,
        help="demonstration event targets: a demonstrated grasp mapped onto the cloth is refined on the tokens within "
        "this window (metres) around it (the policy server's grasp_refinement_m; 0, the default: off; "
        "docs/registration.md)",
    )
    p.add_argument(
        "--keypoints",
        default="",
        help="demonstration event targets: a keypoint detector directory (e.g. models/keypoints); a demonstrated "
        "grasp made at a keypoint is carried to that keypoint of the current cloth (the policy server's "
        "keypoint_detector; default: none, the registration alone; docs/registration.md)",
    )
    return p


def rescore_main(argv: list[str]) -> int:
    """`evaluate rescore RUN --out NEW [--bank DIR]` (`rescore`)."""
    p = argparse.ArgumentParser(
        prog="python -m instant_fold_evaluation.evaluate rescore",
        description="Score a finished evaluate run's rollouts again with the current metrics, simulating nothing.",
    )
    p.add_argument("run", help="results directory of a finished evaluate run (left as it is)")
    p.add_argument("--out", required=True, help="new results directory (not the run's)")
    p.add_argument("--bank", default="", help="oracle bank directory (default: the run's, from its summary.json)")
    a = p.parse_args(argv)
    try:
        summary = rescore(Path(a.run), Path(a.out), a.bank)
    except (ConfigError, OracleBankError, EvaluationError) as exc:
        print(f"evaluate rescore: {exc}", file=sys.stderr)
        return 2
    return _report("evaluate rescore", summary, Path(a.out))


def _report(prog: str, summary: dict[str, Any], out: Path) -> int:
    """Print a scored run's tables and notes and where they were written; exit code 0."""
    print(report(summary))
    for note in summary["notes"]:
        print(f"{prog}: note: {note}")
    print(f"{prog}: wrote {out / 'summary.json'}, table.md, scores.jsonl")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["rescore"]:
        return rescore_main(argv[1:])
    if argv[:1] == ["table"]:
        p = argparse.ArgumentParser(prog="python -m instant_fold_evaluation.evaluate table")
        p.add_argument("runs", nargs="+", help="result directories of evaluate runs")
        p.add_argument("--out", help="write the Markdown table here")
        a = p.parse_args(argv[1:])
        try:
            text = merge_tables(a.runs)
            if a.out:
                Path(a.out).write_text(text)
        except EvaluationError as exc:
            print(f"evaluate table: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            print(f"evaluate table: --out {a.out}: cannot write ({exc.strerror or exc})", file=sys.stderr)
            return 2
        print(text)
        return 0
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.workers < 1 or args.max_steps < 0:
        parser.error("--workers must be >= 1 and --max-steps >= 0")
    try:
        summary = evaluate(args)
    except (ConfigError, OracleBankError, EvaluationError, CheckpointError) as exc:
        print(f"evaluate: {exc}", file=sys.stderr)
        return 2
    return _report("evaluate", summary, Path(args.out))


if __name__ == "__main__":
    # Run the package module's main, not this __main__ copy: Ray workers find the job functions
    # (and the per-worker policy cache) by module name, which `__main__` does not give them.
    from instant_fold_evaluation.evaluate import main as package_main

    raise SystemExit(package_main())
