#!/usr/bin/env bash
# The README's main job. Until the sim-in-the-loop fold lands, it runs the smallest real thing the
# workspace does end to end: the graph check (two node processes exchanging cloth tokens over a
# topic and action chunks over a service on DDS), and writes its report to outputs/.
set -euo pipefail
# shellcheck source=scripts/workspace.sh
source "$(dirname "${BASH_SOURCE[0]}")/workspace.sh"
mkdir -p "$ROOT/outputs"
report="$ROOT/outputs/graph_check.json"
params="$ROOT/outputs/graph_check_params.yaml"
printf 'graph_check_probe:\n  ros__parameters:\n    report: "%s"\n' "$report" > "$params"
python -m instant_fold.runner graph_check --params-file "$params"
echo "[main] report: $report"
