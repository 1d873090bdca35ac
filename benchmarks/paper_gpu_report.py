"""Gather the stages of `bench_paper_gpu.sh` into OUT_DIR/bench_paper_gpu.json: the rates measured
there, and the paper's 20,000 encoder and 225,000 policy steps projected from them.

    python benchmarks/paper_gpu_report.py OUT_DIR WORK

WORK holds the stages' runs (`pretrain/`, `recipe/`), their benchmark JSONs and each stage's exit
status (`<stage>.rc`); a stage that did not run leaves its entries null rather than failing the report.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from instant_fold_learning.trainer import LOG_FILE, read_log

STAGES = ("pretrain", "recipe", "bench_policy_fp32", "bench_policy_bf16", "bench_tokenizer")
PAPER_ENCODER_STEPS = 20_000
PAPER_POLICY_STEPS = 225_000


def _train_records(path: Path) -> list[dict[str, Any]]:
    return [r for r in read_log(path) if r.get("event") == "train"] if path.is_file() else []


def _exit_code(work: Path, stage: str) -> int | None:
    path = work / f"{stage}.rc"
    return int(path.read_text()) if path.is_file() else None


def _load(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def encoder_pretraining(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Seconds per step between the first and the last logged step (the first pays for compilation
    and caches, so it is left out of the rate)."""
    if len(records) < 2:
        return None
    first, last = records[0], records[-1]
    seconds_per_step = (last["elapsed_s"] - first["elapsed_s"]) / (last["step"] - first["step"])
    return {
        "batch": "12 cloths x 8 trajectories x 15 frames (synthetic)",
        "steps": last["step"],
        "seconds_per_step": seconds_per_step,
        "tokens_per_s": last["tokens_per_s"],
        f"projected_hours_{PAPER_ENCODER_STEPS}_steps": PAPER_ENCODER_STEPS * seconds_per_step / 3600,
        "first_loss": first["loss"],
        "last_loss": last["loss"],
    }


def policy_training(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Mean steps/s over the second half of the logged steps (the steady rate)."""
    if not records:
        return None
    steady = records[len(records) // 2 :]
    steps_per_s = sum(r["steps_per_s"] for r in steady) / len(steady)
    return {
        "steps": records[-1]["step"],
        "steps_per_s": steps_per_s,
        f"projected_hours_{PAPER_POLICY_STEPS}_steps": PAPER_POLICY_STEPS / steps_per_s / 3600,
        "first_loss": records[0]["loss"],
        "last_loss": records[-1]["loss"],
    }


def report(work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "exit_codes": {stage: _exit_code(work, stage) for stage in STAGES},
    }
    if (encoder := encoder_pretraining(_train_records(work / "pretrain" / LOG_FILE))) is not None:
        out["encoder_pretraining"] = encoder
    if (policy := policy_training(_train_records(work / "recipe" / "policy" / LOG_FILE))) is not None:
        out["policy_training"] = policy
    out["recipe_summary"] = _load(work / "recipe" / "summary.json")
    out["policy_query"] = {
        dtype: _load(work / f"bench_policy_{tag}.json") for dtype, tag in (("float32", "fp32"), ("bfloat16", "bf16"))
    }
    out["tokenizer"] = _load(work / "bench_tokenizer.json")
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="where bench_paper_gpu.json goes")
    parser.add_argument("work", type=Path, help="the stages' runs and benchmark JSONs")
    args = parser.parse_args(argv)
    result = report(args.work)
    (args.out / "bench_paper_gpu.json").write_text(json.dumps(result, indent=1) + "\n")
    shown = ("gpu", "exit_codes", "encoder_pretraining", "policy_training")
    print(json.dumps({k: v for k, v in result.items() if k in shown}, indent=1))
    return result


if __name__ == "__main__":
    main()
