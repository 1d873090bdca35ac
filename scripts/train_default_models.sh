#!/usr/bin/env bash
# Train the default cpu-small models of models/ from an episode store, with the project's CLIs only:
#   1. pretrain_encoder   temporal contrastive pretraining of the cloth tokenizer on the store
#   2. tokenize_episodes  every frame of the store through that tokenizer (bad-oracle episodes dropped);
#                         start states k = HELDOUT_K of every garment go to a held-out directory
#   3. train_policy       cpu-small policy on the training tokens (modes together, context demos)
#   4. evaluate_policy    action error and first-grasp rollouts on training and held-out starts
# and copy the results to models/encoder and models/policy (the model cards are written by hand
# from $WORK/*.json and the logs).
#
# Usage (inside the workspace environment, `source scripts/env.sh`):
#   scripts/train_default_models.sh STORE [WORK_DIR]
# Rerunning on the same WORK_DIR resumes every step (finished steps are skipped).
# Environment: ENCODER_STEPS (300), POLICY_STEPS (3000), HELDOUT_K (002, '' = hold nothing out),
#              DEVICE (cpu), OMP_NUM_THREADS (1: much faster than 2 on a shared 2-core machine).
set -euo pipefail

store=${1:?usage: $0 STORE [WORK_DIR]}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${2:-$root/runs/default_models}
encoder_steps=${ENCODER_STEPS:-300}
policy_steps=${POLICY_STEPS:-3000}
heldout_k=${HELDOUT_K-002}
device=${DEVICE:-cpu}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export PYTHONPATH="$root/src/instant_fold_core:$root/src/instant_fold_training${PYTHONPATH:+:$PYTHONPATH}"
py=${PYTHON:-python}
mkdir -p "$work"

stamp() { date -u +%H:%M:%S; }

echo "[$(stamp)] 1/4 encoder pretraining ($encoder_steps steps) on $store"
"$py" -m instant_fold_training.pretrain_encoder --config cpu-small --data "$store" --split train \
  --steps "$encoder_steps" --device "$device" --output "$work/encoder" --resume auto --no-progress

echo "[$(stamp)] 2/4 tokenising"
tok=(--store "$store" --tokenizer "$work/encoder/tokenizer" --max-oracle-error 0.15 --policy-config cpu-small
  --device "$device" --no-progress)
if [[ -n "$heldout_k" ]]; then
  "$py" -m instant_fold_training.tokenize_episodes "${tok[@]}" --out "$work/tokens_train" --exclude "*__e$heldout_k"
  "$py" -m instant_fold_training.tokenize_episodes "${tok[@]}" --out "$work/tokens_heldout" --match "*__e$heldout_k"
else
  "$py" -m instant_fold_training.tokenize_episodes "${tok[@]}" --out "$work/tokens_train"
fi

echo "[$(stamp)] 3/4 policy training ($policy_steps steps)"
cat > "$work/policy.yaml" <<EOF
preset: cpu-small
train: {steps: $policy_steps, noise_samples: 8, frames: all, ema_decay: 0.99, log_every: 50, checkpoint_every: 500}
EOF
"$py" -m instant_fold_training.train_policy --config "$work/policy.yaml" --data "$work/tokens_train" \
  --out "$work/policy" --device "$device" --resume --plot "$work/policy_training_curves.png"

echo "[$(stamp)] 4/4 evaluation"
eval_args=(--checkpoint "$work/policy/checkpoint" --data "$work/tokens_train" --out "$work/policy_eval.json")
[[ -n "$heldout_k" ]] && eval_args+=(--heldout "$work/tokens_heldout")
"$py" -m instant_fold_training.evaluate_policy "${eval_args[@]}"

# Replace the checkpoint files, keep the model cards (README.md).
for pair in "encoder/tokenizer:encoder" "policy/checkpoint:policy"; do
  src="$work/${pair%%:*}" dst="$root/models/${pair##*:}"
  mkdir -p "$dst"
  find "$dst" -maxdepth 1 -type f ! -name README.md -delete
  cp "$src"/* "$dst/"
done
echo "[$(stamp)] done: models/encoder, models/policy ($(du -sh "$root/models" | cut -f1)); results in $work"
