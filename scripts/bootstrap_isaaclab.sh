#!/usr/bin/env bash
# Idempotent set-up of the OPTIONAL Isaac Lab 3 sim backend (docs/isaac_lab.md):
#   1. a Python 3.12 virtual environment in .venv-isaaclab (Isaac Lab 3.0 needs 3.12; it pins
#      torch 2.11 / warp 1.17 / newton 1.6.1, so it cannot share the workspace's .venv),
#   2. the pinned requirements/isaaclab.lock (isaaclab 3.0.0 kit-less, example-robot-data),
#   3. the Franka Panda asset converted once from example-robot-data into a local asset folder
#      (.venv-isaaclab/assets), so nothing is fetched from NVIDIA's asset server at run time.
# The main workspace (.venv, scripts/bootstrap.sh) never needs this environment; the Isaac Lab
# process is started by the ROS-side adapter (instant_fold_sim.isaac_lab) as a separate process.
# A second run only re-installs when the lock file or this script changed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ISAACLAB_VENV:-$ROOT/.venv-isaaclab}"
LOCK="$ROOT/requirements/isaaclab.lock"
UV_VERSION="0.13.8"
export UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1

log() { printf '[bootstrap_isaaclab] %s\n' "$*"; }

pick_python() {
  if [[ -n "${PYTHON312:-}" ]]; then echo "$PYTHON312"; return; fi
  local candidate
  for candidate in python3.12 "$(pyenv root 2>/dev/null)/versions/3.12.1/bin/python" \
                   "$HOME/.pyenv/versions/3.12.1/bin/python" python3; do
    if [[ -n "$candidate" ]] && command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
      echo "$candidate"; return
    fi
  done
  echo "error: Isaac Lab 3.0 needs Python 3.12 (set PYTHON312=/path/to/python3.12; pyenv install 3.12)" >&2
  exit 1
}

# 1. Virtual environment.
if [[ ! -x "$VENV/bin/python" ]]; then
  py="$(pick_python)"
  log "creating $VENV with $($py --version)"
  "$py" -m venv "$VENV" || { echo "error: '$py -m venv' failed" >&2; exit 1; }
fi
PY="$VENV/bin/python"
"$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' || {
  echo "error: $VENV is not a Python 3.12 environment; remove it and re-run" >&2; exit 1; }

# uv ignores the machine's pip configuration (local wheel mirrors with other torch builds).
if [[ "$("$VENV/bin/uv" --version 2>/dev/null)" != "uv $UV_VERSION"* ]]; then
  log "installing uv $UV_VERSION"
  "$PY" -m pip --isolated install --quiet --disable-pip-version-check "uv==$UV_VERSION"
fi
UV="$VENV/bin/uv"

# 2. Pinned dependencies. torch 2.11.0 from the Python registry is the CUDA build (it pulls the
#    nvidia-* runtime wheels, ~3 GB); it runs on CPU too. A CPU-only index (download.pytorch.org)
#    is not reachable from every machine, so the registry build is the pinned one.
stamp="$VENV/.instant_fold_isaaclab_deps"
digest="$(cat "$LOCK" "$ROOT/scripts/bootstrap_isaaclab.sh" | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]]; then
  log "installing pinned dependencies (${LOCK##*/}); first run downloads several GB"
  "$UV" pip install --python "$PY" --quiet -r "$LOCK"
  echo "$digest" > "$stamp"
else
  log "dependencies up to date"
fi

# 3. Robot asset: Panda from example-robot-data -> $VENV/assets (ISAACSIM_ASSET_ROOT for the server).
"$PY" "$ROOT/src/instant_fold_sim/instant_fold_sim/isaac_lab/assets.py" --out "$VENV/assets"

"$PY" -c 'import isaaclab, warp, newton, torch; print("isaaclab", isaaclab.__version__ if hasattr(isaaclab, "__version__") else "?", "warp", warp.__version__, "newton", newton.__version__, "torch", torch.__version__)'
log "ready: the isaac_lab backend finds $VENV (docs/isaac_lab.md)"
