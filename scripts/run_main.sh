#!/usr/bin/env bash
# The README's main job: fold a simulated garment from one demonstration, sim in the loop.
# Sets up the workspace (idempotent), then starts the fold graph (sim node as camera and robot,
# tokenizer, policy server, controller: separate processes over DDS) with the default models in
# models/ and the bundled demonstration, runs one ExecuteFold, scores the result against the
# oracle from the same start, and writes outputs/sim_fold/{metrics.json,rollout.mp4,fold_strip.png}.
# Extra arguments go to `python -m instant_fold.sim_fold` (see --help).
set -euo pipefail
# shellcheck source=scripts/workspace.sh
source "$(dirname "${BASH_SOURCE[0]}")/workspace.sh"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"  # one thread per node: the nodes share the CPU
python -m instant_fold.sim_fold --out "$ROOT/outputs/sim_fold" "$@"
