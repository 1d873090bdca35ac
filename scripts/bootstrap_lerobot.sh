#!/usr/bin/env bash
# Idempotent set-up of the OPTIONAL LeRobot reader environment (docs/lerobot.md):
#   1. a virtual environment in .venv-lerobot (Python 3.10-3.12, the interpreter of .venv when
#      there is one),
#   2. the pinned requirements/lerobot.lock (lerobot 0.4.4 and its torch 2.10 / numpy 2.2 pins,
#      which conflict with the workspace's torch 2.13 / numpy 2.4, so it cannot share .venv).
# Only the test that reads an export back with LeRobot's own LeRobotDataset runs in it (as a
# subprocess); exporting and importing need nothing from it, and scripts/bootstrap.sh never calls
# this script (the CI budget has no room for a second torch). A second run only re-installs when
# the lock file or this script changed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${LEROBOT_VENV:-$ROOT/.venv-lerobot}"
LOCK="$ROOT/requirements/lerobot.lock"
UV_VERSION="0.13.8"
export UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1

log() { printf '[bootstrap_lerobot] %s\n' "$*"; }

pick_python() {
  if [[ -n "${PYTHON:-}" ]]; then echo "$PYTHON"; return; fi
  local candidate
  for candidate in "$ROOT/.venv/bin/python" python3 python3.12 python3.11 python3.10; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(not ((3, 10) <= sys.version_info[:2] <= (3, 12)))'; then
      # the base interpreter, not a venv's (a venv made from a venv's python is tied to it)
      "$candidate" -c 'import sys; print(sys._base_executable)'; return
    fi
  done
  echo "error: need Python 3.10-3.12 (set PYTHON=/path/to/python3.x)" >&2
  exit 1
}

# 1. Virtual environment.
if [[ ! -x "$VENV/bin/python" ]]; then
  py="$(pick_python)"
  log "creating $VENV with $($py --version)"
  "$py" -m venv "$VENV" || { echo "error: '$py -m venv' failed (on Debian/Ubuntu: apt-get install python3-venv)" >&2; exit 1; }
fi
PY="$VENV/bin/python"

# uv ignores the machine's pip configuration (local wheel mirrors with other torch builds).
if [[ "$("$VENV/bin/uv" --version 2>/dev/null)" != "uv $UV_VERSION"* ]]; then
  log "installing uv $UV_VERSION"
  "$PY" -m pip --isolated install --quiet --disable-pip-version-check "uv==$UV_VERSION"
fi
UV="$VENV/bin/uv"

# 2. Pinned dependencies. torch 2.10.0 from the Python registry is the CUDA build (it pulls the
#    nvidia-* runtime wheels, several GB); it runs on CPU too.
stamp="$VENV/.instant_fold_lerobot_deps"
digest="$(cat "$LOCK" "$ROOT/scripts/bootstrap_lerobot.sh" | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]]; then
  log "installing pinned dependencies (${LOCK##*/}); the first run downloads several GB"
  "$UV" pip install --python "$PY" --quiet -r "$LOCK"
  echo "$digest" > "$stamp"
else
  log "dependencies up to date"
fi

"$PY" -c 'import lerobot, torch, numpy; from lerobot.datasets.lerobot_dataset import LeRobotDataset; print("lerobot", lerobot.__version__, "torch", torch.__version__, "numpy", numpy.__version__)'
log "ready: the LeRobot reader test finds $VENV (docs/lerobot.md)"
