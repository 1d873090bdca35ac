# Sourced by the entry-point scripts: set the workspace up (idempotent) and enter it.
# shellcheck shell=bash
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/bootstrap.sh"
set +u  # activate scripts and colcon's setup files read unset variables
# shellcheck source=scripts/env.sh
source "$ROOT/scripts/env.sh"
set -u
cd "$ROOT" || exit 1
