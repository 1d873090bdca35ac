"""The training scaffold shared by encoder pretraining and policy training.

Both trainers run on one process or under torchrun, resume exactly, log the same way and take the
same command-line vocabulary, so what is learnt about running one holds for the other:

* `init_distributed` joins torchrun's process group (gloo on CPU, NCCL on CUDA) and picks the rank's
  device; `close_distributed` leaves it.
* `learning_rate(step, ...)`: linear warm-up, then cosine decay to a floor: the one schedule.
* A run directory `<out>/` holds `train_state/` (what resuming needs: the model's weights as
  `model.*`, AdamW moments as `optim.<param>.<name>`, a trainer's own tensors under its own prefix,
  the trainer's config as `config.json`, `train_state.json` with the step and the optimizer's
  param groups, and the trainer's JSON side files), `log.jsonl` (one JSON record per line: `start`,
  `train` every `log_every` steps, `end`) and the trainer's deployable output.
* `add_run_arguments`: `--config --out --resume --device --steps`; `check_new_run` refuses to
  train into a run directory without `--resume` (nothing is ever overwritten by accident).
* `check_finite_loss` stops a run whose loss became NaN or infinite, and `save_train_state`
  refuses non-finite tensors, so a diverged run never replaces a good checkpoint with garbage.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
from collections.abc import Collection
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from instant_fold_core.checkpoint import CheckpointError, load_checkpoint, load_strict, read_json, save_checkpoint
from instant_fold_core.device import resolve_device
from instant_fold_core.errors import InstantFoldError

TRAIN_STATE_DIR = "train_state"
LOG_FILE = "log.jsonl"
MODEL_PREFIX = "model."
OPTIM_PREFIX = "optim."


class TrainingDiverged(InstantFoldError, RuntimeError):
    """The loss or the weights became NaN or infinite (a too high learning rate, bad data); the run
    stopped and nothing non-finite was saved."""


def check_finite_loss(loss: torch.Tensor, step: int) -> None:
    """Stop before a non-finite loss reaches the weights: after one such step every later loss is
    NaN too, and the run would otherwise end "successfully" with NaN weights."""
    if not bool(torch.isfinite(loss.detach()).all()):
        raise TrainingDiverged(
            f"step {step + 1}: the loss is {float(loss.detach())}; stopped without saving this step "
            "(the last saved step is kept): lower train.lr or check the data"
        )


def check_finite_tensors(tensors: dict[str, torch.Tensor], where: Path) -> None:
    """Refuse to write `tensors` to `where` when one holds NaN or infinite values."""
    bad = [name for name, t in tensors.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad:
        raise TrainingDiverged(
            f"{where}: not saved, {len(bad)} tensor(s) hold NaN or infinite values (e.g. {bad[0]}); "
            "the last saved step is kept"
        )


@dataclass(frozen=True)
class Distributed:
    """This process's place in a torchrun job (rank 0 of 1 without torchrun)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Rank 0 writes the log, the train state and the deployable output."""
        return self.rank == 0


def init_distributed(device: str = "auto") -> tuple[Distributed, torch.device]:
    """Join the torchrun process group when launched by torchrun (gloo on CPU, NCCL on CUDA) and
    return this rank's place and device (`cuda` becomes `cuda:<LOCAL_RANK>` under torchrun)."""
    resolved = resolve_device(device)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Distributed(), resolved
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if resolved.type == "cuda":
        if resolved.index is None:
            resolved = torch.device("cuda", local_rank)
        torch.cuda.set_device(resolved)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if resolved.type == "cuda" else "gloo")
    return Distributed(dist.get_rank(), dist.get_world_size(), local_rank), resolved


#: How long a rank waits at the exit barrier for the others (s) before leaving the group anyway.
EXIT_BARRIER_S = 60


def close_distributed() -> None:
    """Leave the process group, if one was joined (every CLI does this on the way out).

    Why the two steps before `destroy_process_group`: a DDP model keeps the group alive through
    reference cycles (its reducer's hooks) that only the cyclic collector frees, which otherwise
    happens while the interpreter shuts down, and one rank may tear its connections down while the
    other still finishes its last steps; a CPU run under torchrun once aborted a rank at exit
    ("terminate called without an active exception"). So: collect now, and on gloo leave together
    (`monitored_barrier`, which times out and raises instead of hanging on a rank that failed).
    """
    if not dist.is_initialized():
        return
    gc.collect()
    if dist.get_backend() == "gloo":
        try:
            dist.monitored_barrier(timeout=timedelta(seconds=EXIT_BARRIER_S))
        except RuntimeError as exc:  # a peer already failed: its error is the one to report
            print(f"close_distributed: leaving without the other ranks ({exc})", file=sys.stderr)
    dist.destroy_process_group()


def learning_rate(step: int, lr: float, steps: int, warmup_steps: int, min_ratio: float) -> float:
    """The rate of 0-based `step`: linear warm-up to `lr` over `warmup_steps`, then cosine decay to
    `min_ratio * lr` at `steps` (held there after)."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, steps - warmup_steps)
    return lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


# ----------------------------------------------------------------------------- train state


def save_train_state(
    out: Path,
    step: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    config: dict[str, Any],
    tensors: dict[str, torch.Tensor] | None = None,
    extras: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """Write `<out>/train_state` (replacing the previous one): `model`'s weights, the optimizer's
    state, the trainer's own `tensors` (names carry their own prefix, e.g. `ema.`), `config` and
    the JSON side files `extras`. Raises TrainingDiverged, writing nothing, when a tensor is not
    finite: the previous state stays the one to resume from."""
    everything = {MODEL_PREFIX + k: v for k, v in model.state_dict().items()}
    everything.update(tensors or {})
    state = optimizer.state_dict()
    for index, entries in state["state"].items():
        for name, value in entries.items():
            everything[f"{OPTIM_PREFIX}{index}.{name}"] = torch.as_tensor(value)
    check_finite_tensors(everything, out / TRAIN_STATE_DIR)
    groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()} for g in state["param_groups"]]
    return save_checkpoint(
        out / TRAIN_STATE_DIR,
        everything,
        config,
        {"train_state": {"step": step, "param_groups": groups}, **(extras or {})},
    )


@dataclass
class TrainState:
    """A train state as read from disk; `restore` puts it into a model and an optimizer."""

    directory: Path
    step: int
    param_groups: list[dict[str, Any]]
    config: dict[str, Any]
    tensors: dict[str, torch.Tensor]

    def prefixed(self, prefix: str) -> dict[str, torch.Tensor]:
        """The tensors named `<prefix>...`, without the prefix."""
        return {k[len(prefix) :]: v for k, v in self.tensors.items() if k.startswith(prefix)}

    def json(self, name: str) -> dict[str, Any]:
        """A JSON side file of the train state (e.g. the policy's `normalizers`)."""
        return read_json(self.directory, name)

    def restore(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> int:
        """Load the weights (strictly) and the optimizer state; returns the step to continue from."""
        load_strict(model, self.prefixed(MODEL_PREFIX), self.directory)
        device = next(model.parameters()).device
        state: dict[int, dict[str, torch.Tensor]] = {}
        for key, value in self.prefixed(OPTIM_PREFIX).items():
            index, name = key.split(".", 1)
            state.setdefault(int(index), {})[name] = value.to(device) if name != "step" else value
        try:
            optimizer.load_state_dict({"state": state, "param_groups": self.param_groups})
        except (ValueError, KeyError) as exc:
            raise CheckpointError(
                f"checkpoint {self.directory}: optimizer state does not match the model ({exc})"
            ) from exc
        return self.step


def read_train_state(directory: Path) -> TrainState:
    """The train state in `directory` (`<out>/train_state`), or a CheckpointError naming what is wrong."""
    tensors, config = load_checkpoint(directory)
    meta = read_json(directory, "train_state")
    if "step" not in meta or "param_groups" not in meta:
        raise CheckpointError(f"checkpoint {directory}: train_state.json lacks step/param_groups")
    return TrainState(Path(directory), int(meta["step"]), meta["param_groups"], config, tensors)


def check_new_run(out: Path, resume: bool, outputs: Collection[str]) -> None:
    """Refuse to start a run in a directory that holds one (its `outputs`) unless resuming, or in
    a path that is not a directory."""
    if out.exists() and not out.is_dir():
        raise CheckpointError(f"--out {out}: exists and is not a directory")
    if not resume and any((out / name).exists() for name in (TRAIN_STATE_DIR, *outputs)):
        raise CheckpointError(
            f"{out} already holds a training run; pass --resume to continue it or choose another --out "
            "(nothing was overwritten)"
        )


# ----------------------------------------------------------------------------- log and CLI


class RunLog:
    """`<out>/log.jsonl`, appended by the main rank only; with `echo`, a line per record on stdout."""

    def __init__(self, out: Path, where: Distributed, name: str, echo: bool = True) -> None:
        self.path = out / LOG_FILE
        self.active = where.is_main
        self.name = name
        self.echo = echo
        if self.active:
            out.mkdir(parents=True, exist_ok=True)

    def write(self, record: dict[str, Any], summary: str | None = None) -> None:
        """Append `record`; echo `summary` (default: the record as JSON) as `[name] ...`."""
        if not self.active:
            return
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        if self.echo:
            print(f"[{self.name}] {summary or json.dumps(record)}", flush=True)


def read_log(path: Path) -> list[dict[str, Any]]:
    """The records of a `log.jsonl`."""
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def add_run_arguments(parser: argparse.ArgumentParser, presets: str, outputs: str) -> None:
    """The options every trainer takes: `--config --out --resume --device --steps`."""
    parser.add_argument("--config", default="cpu-small", help=f"preset ({presets}) or YAML file")
    parser.add_argument("--out", required=True, help=f"run directory ({outputs}, {TRAIN_STATE_DIR}/, {LOG_FILE})")
    parser.add_argument(
        "--resume", action="store_true", help=f"continue the run in --out from its {TRAIN_STATE_DIR}/ if present"
    )
    parser.add_argument("--device", default="auto", help="auto (cuda if available, else cpu), cpu, cuda, cuda:1")
    parser.add_argument("--steps", type=int, help="override the configured number of training steps")
