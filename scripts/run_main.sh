#!/usr/bin/env bash
# The README's main job: fold a simulated garment from one demonstration, sim in the loop.
# Sets up the workspace (idempotent), then starts the fold graph (sim node as camera and robot,
# tokenizer, policy server, controller: separate processes over DDS) with the default models in
# models/ and the bundled demonstration, runs one ExecuteFold, scores the result against the
# oracle from the same start, and writes outputs/sim_fold/{metrics.json,rollout.mp4,fold_strip.png}.
# `--rrd` adds fold.rrd (a Rerun recording of the fold); `--view` writes it and then serves it in
# Rerun's web viewer on 127.0.0.1, printing the URL (Ctrl-C stops it; docs/rerun.md); `--view live`
# starts that viewer first and streams the fold to it while it runs.
# Extra arguments go to `python -m instant_fold.sim_fold` (see --help); relative paths in them
# (--demo, --out, --checkpoint, ...) are relative to the directory this script was called from.
set -euo pipefail
caller_dir="$PWD"
# shellcheck source=scripts/workspace.sh
source "$(dirname "${BASH_SOURCE[0]}")/workspace.sh"  # enters $ROOT
cd "$caller_dir"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"  # one thread per node: the nodes share the CPU
# exec: the job is this process, so a signal to the script (SIGTERM, SIGKILL) reaches the job and,
# through it, the graph's nodes; a child Python kept folding after its wrapper was killed.
exec python -m instant_fold.sim_fold --out "$ROOT/outputs/sim_fold" "$@"
