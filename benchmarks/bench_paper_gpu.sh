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
# 3. Policy query and tokenization latency (bench_policy.py in float32 and bfloat16, bench_tokenizer.py).
# OUT_DIR/bench_paper_gpu.json gathers them (benchmarks/paper_gpu_report.py), with the paper's 20,000 encoder and 225,000 policy steps
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
  --synthetic 12 8 15 --steps "${ENCODER_STEPS:-20}" --device "$device" --out "$work/pretrain"
run recipe "${RECIPE_LIMIT_S:-240}" "$py" -m instant_fold.pipeline "$work/recipe" --recipe paper \
  --set "device=$device" --set "generate.store=$store" --set "pretrain.encoder=$work/pretrain/encoder" \
  --set "train.steps=${POLICY_STEPS:-1000}" --set install=false
run bench_policy_fp32 60 "$py" "$root/benchmarks/bench_policy.py" --device "$device" --dtype float32 \
  --out "$work/bench_policy_fp32.json"
run bench_policy_bf16 60 "$py" "$root/benchmarks/bench_policy.py" --device "$device" --dtype bfloat16 \
  --out "$work/bench_policy_bf16.json"
run bench_tokenizer 60 "$py" "$root/benchmarks/bench_tokenizer.py" --device "$device" --batches 1 8 \
  --out "$work/bench_tokenizer.json"

"$py" "$root/benchmarks/paper_gpu_report.py" "$out" "$work"
