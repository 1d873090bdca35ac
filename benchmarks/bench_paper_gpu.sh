#!/usr/bin/env bash
# The paper configuration on one GPU, in minutes: what a user with a GPU gets from
# `scripts/train_default_models.sh --recipe paper`, measured short and projected to the paper's step counts.
#
#   benchmarks/bench_paper_gpu.sh STORE OUT_DIR
#
# 1. Encoder pretraining at the paper's batch (P = 12 cloths x K = 8 trajectories, synthetic cloth
#    episodes of 15 frames; ENCODER_STEPS, default 30): seconds per step.
# 2. `scripts/train_default_models.sh --recipe paper` on STORE (an episode store made elsewhere, so the GPU
#    machine needs no simulator) with that encoder: tokenising, policy training (POLICY_STEPS, default
#    1000, the paper's batch of 64) and the offline evaluation, all on CUDA.
# (DEVICE=cpu runs the same stages on the CPU.)
# 3. Policy query and tokenizer latency (bench_policy.py in float32 and bfloat16, bench_tokenizer.py).
# OUT_DIR/bench_paper_gpu.json gathers them, with the paper's 20,000 encoder and 225,000 policy steps
# projected from the measured rates, and OUT_DIR/bench_paper_gpu.log their logs; the runs themselves
# go to WORK (default OUT_DIR/work). Each stage has a time limit so a slow one cannot eat the rest.
set -uo pipefail

store=${1:?usage: bench_paper_gpu.sh STORE OUT_DIR}
out=${2:?usage: bench_paper_gpu.sh STORE OUT_DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=(instant_fold_core instant_fold_learning instant_fold_sim instant_fold_evaluation instant_fold_ros instant_fold)
PYTHONPATH="$(printf "$root/src/%s:" "${src[@]}")${PYTHONPATH:-}"
export PYTHONPATH
export PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
device=${DEVICE:-cuda}
work=${WORK:-$out/work}
mkdir -p "$work" "$out"

run() {  # run NAME LIMIT_S COMMAND...: output appended to the log, exit status to WORK/NAME.rc
  local name=$1 limit=$2
  shift 2
  echo "[$(date -u +%H:%M:%S)] $name" | tee -a "$out/bench_paper_gpu.log"
  timeout "$limit" "$@" > "$work/$name.log" 2>&1
  echo $? > "$work/$name.rc"
  cat "$work/$name.log" >> "$out/bench_paper_gpu.log"
  tail -3 "$work/$name.log"
}

run pretrain "${PRETRAIN_LIMIT_S:-150}" "$py" -m instant_fold_learning.pretrain_encoder --config paper \
  --synthetic 12 8 15 --steps "${ENCODER_STEPS:-20}" --device "$device" --out "$work/encoder"
run recipe "${RECIPE_LIMIT_S:-240}" "$py" -m instant_fold.pipeline "$work/recipe" --recipe paper \
  --set "device=$device" --set "generate.store=$store" --set "pretrain.tokenizer=$work/encoder/tokenizer" \
  --set "train.steps=${POLICY_STEPS:-1000}" --set install=false
run bench_policy_fp32 60 "$py" "$root/benchmarks/bench_policy.py" --device "$device" --dtype float32 \
  --out "$work/bench_policy_fp32.json"
run bench_policy_bf16 60 "$py" "$root/benchmarks/bench_policy.py" --device "$device" --dtype bfloat16 \
  --out "$work/bench_policy_bf16.json"
run bench_tokenizer 60 "$py" "$root/benchmarks/bench_tokenizer.py" --device "$device" --batches 1 8 \
  --out "$work/bench_tokenizer.json"

"$py" - "$out" "$work" <<'PY'
"""Gather the stages into bench_paper_gpu.json (rates measured here, paper step counts projected)."""
import json
import sys
from pathlib import Path

import torch

out, work = Path(sys.argv[1]), Path(sys.argv[2])


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def rc(name: str) -> int | None:
    path = work / f"{name}.rc"
    return int(path.read_text()) if path.is_file() else None


def load(name: str):
    path = work / name
    return json.loads(path.read_text()) if path.is_file() else None


report = {
    "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    "torch": torch.__version__,
    "exit_codes": {n: rc(n) for n in ("pretrain", "recipe", "bench_policy_fp32", "bench_policy_bf16", "bench_tokenizer")},
}
encoder = [r for r in jsonl(work / "encoder" / "log.jsonl") if r.get("event") == "train"]
if len(encoder) > 1:
    # the steady rate: the first step pays for compilation and caches
    seconds_per_step = (encoder[-1]["elapsed_s"] - encoder[0]["elapsed_s"]) / (encoder[-1]["step"] - encoder[0]["step"])
    report["encoder_pretraining"] = {
        "batch": "12 cloths x 8 trajectories x 15 frames (synthetic)",
        "steps": encoder[-1]["step"],
        "seconds_per_step": seconds_per_step,
        "tokens_per_s": encoder[-1]["tokens_per_s"],
        "projected_hours_20000_steps": 20000 * seconds_per_step / 3600,
        "first_loss": encoder[0]["loss"],
        "last_loss": encoder[-1]["loss"],
    }
policy = [r for r in jsonl(work / "recipe" / "policy" / "log.jsonl") if r.get("event") == "train"]
if policy:
    steady = policy[len(policy) // 2 :] or policy
    steps_per_s = sum(r["steps_per_s"] for r in steady) / len(steady)
    report["policy_training"] = {
        "steps": policy[-1]["step"],
        "steps_per_s": steps_per_s,
        "projected_hours_225000_steps": 225000 / steps_per_s / 3600,
        "first_loss": policy[0]["loss"],
        "last_loss": policy[-1]["loss"],
    }
report["recipe_summary"] = load("recipe/summary.json")
report["policy_query"] = {"float32": load("bench_policy_fp32.json"), "bfloat16": load("bench_policy_bf16.json")}
report["tokenizer"] = load("bench_tokenizer.json")
(out / "bench_paper_gpu.json").write_text(json.dumps(report, indent=1) + "\n")
print(json.dumps({k: v for k, v in report.items() if k in ("gpu", "exit_codes", "encoder_pretraining", "policy_training")}, indent=1))
PY
