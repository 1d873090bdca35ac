#!/usr/bin/env bash
# Train the default models of models/ from nothing, with the project's CLIs only:
#   1. generate           simulated folds of the training garments (Ray, both cores), resumable
#   2. pretrain_encoder   temporal contrastive pretraining of the cloth tokenizer on that store
#   3. tokenize_episodes  every frame through the tokenizer (failed oracle folds dropped); the start
#                         states the CPU evaluation benchmark rolls out from (k = 3, 4, 5) are kept
#                         out of training, in a held-out directory
#   4. train_policy       demonstration-conditioned policy on the training tokens
#   5. evaluate_policy    offline action error and first grasps on training and held-out starts
# then copy the encoder and the policy to models/ (model cards are kept; update them from $WORK).
# The closed-loop table of the model cards comes from `python -m instant_fold_training.evaluate`.
#
# Usage (inside the workspace environment, `source scripts/env.sh`):
#   scripts/train_default_models.sh [--paper] [WORK_DIR]
# Rerunning on the same WORK_DIR resumes every step (finished steps and episodes are skipped).
# --paper: the paper's scale for a GPU machine (paper simulator, encoder and policy presets, batched
# worlds, the paper's step counts); the default is cpu-small, sized for a 2-core CPU (~2.5 h).
# Environment overrides: MODES (generate --modes), HELDOUT_STARTS (episode-name glob of the start states
# kept out of training), EPISODES_PER, ENCODER_STEPS, POLICY_STEPS, WORKERS, WORLDS, DEVICE,
# NPROC (policy training processes under torchrun, DDP; 2 on cpu-small: one per core),
# OMP_NUM_THREADS (1 by default: much faster than 2 on a shared 2-core machine), TOKENIZER (an
# existing tokenizer directory, e.g. models/encoder: stage 2 is skipped and the policy is trained
# on that tokenizer's tokens), STORE (an existing episode store, e.g. generated on another machine:
# stage 1 is skipped and the later stages read it in place).
set -euo pipefail

scale=cpu-small
if [[ "${1:-}" == "--paper" ]]; then
  scale=paper
  shift
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${1:-$root/runs/default_models}
if [[ $scale == paper ]]; then
  sim=paper encoder=paper policy=paper
  episodes_per=${EPISODES_PER:-50} encoder_steps=${ENCODER_STEPS:-20000} policy_steps=${POLICY_STEPS:-225000}
  workers=${WORKERS:-1} worlds=${WORLDS:-16} device=${DEVICE:-cuda} nproc=${NPROC:-1}
  policy_train="batch_size: 64, noise_samples: 1, frame_stride: 1, demos_per_batch: 0, frames: all, se2_prob: 0.5"
  policy_model="{}"
else
  sim=cpu-small encoder=cpu-small policy=cpu-small
  episodes_per=${EPISODES_PER:-11} encoder_steps=${ENCODER_STEPS:-600} policy_steps=${POLICY_STEPS:-6000}
  workers=${WORKERS:-2} worlds=${WORLDS:-1} device=${DEVICE:-cpu} nproc=${NPROC:-2}
  # docs/policy.md "Default models": why these (throughput: benchmarks/bench_policy_train.py).
  policy_train="batch_size: 32, noise_samples: 8, frame_stride: 2, demos_per_batch: 4, ema_decay: 0.995, decision_weight: 3.0, recovery_prob: 0.5, recovery_noise_m: 0.05, recovery_mode: rejoin, frames: all, se2_prob: 0.5"
  # The cloth-anchored head with demonstration registration (issue 28, docs/policy.md).
  policy_model="{demo_alignment: registration, registration_rotations: 16, keypose_head: anchored, cloth_geometry: true, rope_min_wavelength_m: 0.04, rope_max_wavelength_m: 1.0}"
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export PYTHONPATH="$root/src/instant_fold_core:$root/src/instant_fold_sim:$root/src/instant_fold_training${PYTHONPATH:+:$PYTHONPATH}"
py=${PYTHON:-python}
store=${STORE:-$work/store.zarr}
mkdir -p "$work"

stamp() { date -u +%H:%M:%S; }
# Stage start times (and the end) go to $WORK/timings.jsonl: the model cards' wall times come from it.
stage() {
  echo "[$(stamp)] $1"
  printf '{"stage": "%s", "utc": "%s"}\n' "$1" "$(date -u +%FT%TZ)" >> "$work/timings.jsonl"
}

# The default policy's folds: one sleeves-first, two body-first (a side fold and a bottom-up fold),
# so that only the demonstration tells the policy which garment part to grasp first.
# MODES=training-folds: the 16 training contexts of the fold split (docs/sim.md, "The fold split").
modes=${MODES:-sleeves_down__bottom_up/S,body_bottom_up__sleeves_down/S,body_side_fold_L__sleeves_down/L}
if [[ -n "${STORE:-}" ]]; then
  stage "1/5 episodes: using $store (STORE), not generated here"
else
  stage "1/5 generating $episodes_per start states x 7 garments x modes $modes ($sim) into $store"
  "$py" -m instant_fold_sim.generate --out "$store" --preset "$sim" --garments proc:0:8 --split train \
    --modes "$modes" --episodes-per "$episodes_per" --seed 0 --workers "$workers" --worlds "$worlds"
fi

if [[ -n "${TOKENIZER:-}" ]]; then
  tokenizer=$TOKENIZER
  stage "2/5 encoder: using $tokenizer (TOKENIZER), not pretrained here"
else
  tokenizer=$work/encoder/tokenizer
  stage "2/5 encoder pretraining ($encoder_steps steps)"
  "$py" -m instant_fold_training.pretrain_encoder --config "$encoder" --data "$store" --split train \
    --steps "$encoder_steps" --device "$device" --out "$work/encoder" --resume
fi

stage "3/5 tokenising"
# Start states kept out of training: config/benchmarks/cpu.yaml start_ks (HELDOUT_STARTS: another glob).
benchmark_starts=${HELDOUT_STARTS:-'*__e00[345]'}
tok=(--store "$store" --tokenizer "$tokenizer" --max-oracle-error 0.15 --policy-config "$policy"
  --device "$device" --no-progress)
# One shard per worker (the tokenizer runs on one thread): the training episodes on every core.
shards=()
for ((k = 0; k < workers; k++)); do
  "$py" -m instant_fold_training.tokenize_episodes "${tok[@]}" --out "$work/tokens_train" --exclude "$benchmark_starts" \
    --shard "$k/$workers" &
  shards+=($!)
done
for pid in "${shards[@]}"; do wait "$pid"; done  # a failed shard fails the script (set -e)
"$py" -m instant_fold_training.tokenize_episodes "${tok[@]}" --out "$work/tokens_heldout" --match "$benchmark_starts"

stage "4/5 policy training ($policy_steps steps)"
cat > "$work/policy.yaml" <<EOF
preset: $policy
model: $policy_model
train: {steps: $policy_steps, $policy_train, log_every: 50, checkpoint_every: 500}
EOF
train_policy=("$py" -m instant_fold_training.train_policy)
if ((nproc > 1)); then  # DDP (gloo on CPU): the global batch is split over the processes
  train_policy=("$py" -m torch.distributed.run --standalone --nproc_per_node "$nproc" -m instant_fold_training.train_policy)
fi
"${train_policy[@]}" --config "$work/policy.yaml" --data "$work/tokens_train" \
  --out "$work/policy" --device "$device" --resume --plot "$work/policy_training_curves.png"

stage "5/5 offline evaluation"
"$py" -m instant_fold_training.evaluate_policy --checkpoint "$work/policy/checkpoint" --data "$work/tokens_train" \
  --heldout "$work/tokens_heldout" --out "$work/policy_eval.json"

# Replace the checkpoint files, keep the model cards (README.md).
for pair in "$tokenizer:encoder" "$work/policy/checkpoint:policy"; do
  src="${pair%%:*}" dst="$root/models/${pair##*:}"
  [[ "$(cd "$src" && pwd)" == "$(cd "$dst" 2>/dev/null && pwd)" ]] && continue  # TOKENIZER=models/encoder
  mkdir -p "$dst"
  find "$dst" -maxdepth 1 -type f ! -name README.md -delete
  cp "$src"/* "$dst/"
done
stage "done"
# One summary JSON (what the model cards quote): stage wall times, data, training end, offline results.
"$py" - "$work" "$store" <<'PY'
import json, sys
from datetime import datetime
from pathlib import Path

from instant_fold_sim.generate import cost_by_context

work = Path(sys.argv[1])
stages = [json.loads(line) for line in (work / "timings.jsonl").read_text().splitlines()]
first = {}
for s in stages:  # a resumed run appends again; the first start of every stage counts
    first.setdefault(s["stage"].split(" ")[0], datetime.fromisoformat(s["utc"].replace("Z", "+00:00")))
keys = list(first)
minutes = {k: round((first[b] - first[k]).total_seconds() / 60, 1) for k, b in zip(keys, keys[1:])}
log = [json.loads(line) for line in (work / "policy" / "log.jsonl").read_text().splitlines()]
# Encoder runs begun before the shared training scaffold logged to metrics.jsonl (records without "event").
logs = [work / "encoder" / name for name in ("metrics.jsonl", "log.jsonl")]
encoder = [json.loads(line) for path in logs if path.is_file() for line in path.read_text().splitlines()]
encoder = [r for r in encoder if r.get("event", "train") == "train"]
evaluation = json.loads((work / "policy_eval.json").read_text())
store = Path(sys.argv[2])
summary = {
    "stage_minutes": minutes,
    "total_minutes": round((first[keys[-1]] - first[keys[0]]).total_seconds() / 60, 1),
    "episodes": {d: len(list((work / d).glob("*.npz"))) for d in ("tokens_train", "tokens_heldout")},
    "generation_by_context": cost_by_context(store) if store.is_dir() else None,
    "encoder": {"first_loss": encoder[0]["loss"], "last": encoder[-1]} if encoder else "not pretrained (TOKENIZER)",
    "policy_start": next(r for r in log if r["event"] == "start"),
    "policy_end": [r for r in log if r["event"] == "end"][-1],
    "offline": {k: {x: v for x, v in evaluation[k].items() if x != "first_grasp_episodes"} for k in ("train", "heldout")},
}
(work / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
print(json.dumps(summary["stage_minutes"]), summary["total_minutes"], "min")
PY
echo "[$(stamp)] models/encoder, models/policy ($(du -sh "$root/models" | cut -f1)); results in $work"
