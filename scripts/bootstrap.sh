#!/usr/bin/env bash
# Idempotent set-up of the workspace on a machine without ROS 2:
#   1. a virtual environment in .venv (Python 3.10-3.12),
#   2. pinned dependencies from requirements/*.lock (real rclpy and the ROS build tooling from
#      the Python registry, torch, ...), installed with uv,
#   3. the ROS wheels' exported CMake files pointed at this environment's Python and numpy,
#      and the hand tracker's model bundle packed from mediapipe==0.10.21 (scripts/hand_model.py),
#   4. the colcon workspace built into install/.
# A second run only re-installs when a lock file changed and only rebuilds what colcon finds
# changed. Where ROS 2 is installed from apt (ROS_DISTRO set), steps 2-3 skip the ROS wheels.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
UV_VERSION="0.13.8"
export UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1
# sam2 builds as pure Python (its optional CUDA extension only post-processes masks).
export SAM2_BUILD_CUDA=0

log() { printf '[bootstrap] %s\n' "$*"; }

pick_python() {
  if [[ -n "${PYTHON:-}" ]]; then echo "$PYTHON"; return; fi
  local candidate
  for candidate in python3 python3.12 python3.11 python3.10; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(not ((3, 10) <= sys.version_info[:2] <= (3, 12)))'; then
      echo "$candidate"; return
    fi
  done
  echo "error: need Python 3.10-3.12 (set PYTHON=/path/to/python3.x)" >&2
  exit 1
}

# A virtual environment is complete once its Python runs and its pip works: `python -m venv`
# installs pip last, so a set-up interrupted there (Ctrl-C) left one without pip, which every
# later run reused and failed on until .venv was deleted by hand.
venv_complete() { [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -m pip --version >/dev/null 2>&1; }

# Step 1: the virtual environment (system site-packages only when ROS 2 comes from apt, for its
# rclpy), rebuilt from scratch when an earlier run left it incomplete.
ensure_venv() {
  venv_complete && return 0
  if [[ -e "$VENV" ]]; then
    log "removing the incomplete $VENV (an interrupted set-up)"
    rm -rf "$VENV"
  fi
  local py
  py="$(pick_python)"
  log "creating $VENV with $($py --version)"
  local venv_args=()
  [[ -n "${ROS_DISTRO:-}" ]] && venv_args+=(--system-site-packages)
  if ! "$py" -m venv "${venv_args[@]}" "$VENV" || ! venv_complete; then
    echo "error: '$py -m venv' failed (on Debian/Ubuntu: apt-get install python3-venv)" >&2
    exit 1
  fi
}

# Sourced (the tests do, to run one step): define the steps only.
[[ "${BASH_SOURCE[0]}" == "$0" ]] || return 0

# 0. System libraries the Python wheels load at run time (pyrealsense2 needs libusb).
APT_LIBRARIES=(libusb-1.0-0:libusb-1.0.so.0)
missing=()
for entry in "${APT_LIBRARIES[@]}"; do
  ldconfig -p 2>/dev/null | grep -q "${entry#*:}" || missing+=("${entry%%:*}")
done
if ((${#missing[@]})); then
  if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
    log "installing system libraries: ${missing[*]}"
    apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null && apt-get install -y -qq "${missing[@]}" >/dev/null; }
  else
    echo "error: missing system libraries; run: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi

# Debian's Chromium: Playwright drives it in the correction page's browser test (no browser download).
if ! command -v chromium >/dev/null 2>&1; then
  if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
    log "installing chromium (browser tests)"
    apt-get install -y -qq chromium >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null; }
  else
    log "note: no chromium; the correction page's browser test is skipped (sudo apt-get install chromium)"
  fi
fi

# 1. Virtual environment.
ensure_venv
PY="$VENV/bin/python"
"$PY" -c 'import sysconfig, os, sys; inc = sysconfig.get_paths()["include"]; sys.exit(not os.path.isfile(os.path.join(inc, "Python.h")))' || {
  echo "error: Python headers missing for $($PY --version) (on Debian/Ubuntu: apt-get install python3-dev)" >&2; exit 1; }

# uv: fast, and it ignores the machine's pip configuration (which may point at wheel mirrors
# holding builds that do not match the pinned torch/torchvision pair).
if [[ "$("$VENV/bin/uv" --version 2>/dev/null)" != "uv $UV_VERSION"* ]]; then
  log "installing uv $UV_VERSION"
  "$PY" -m pip --isolated install --quiet --disable-pip-version-check "uv==$UV_VERSION"
fi
UV="$VENV/bin/uv"

# 2. Dependencies, re-installed only when the lock files (or this script) change.
locks=("$ROOT/requirements/python.lock")
[[ -z "${ROS_DISTRO:-}" ]] && locks+=("$ROOT/requirements/ros-wheels.lock")
stamp="$VENV/.instant_fold_deps"
digest="$(cat "${locks[@]}" "$ROOT/scripts/bootstrap.sh" | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]]; then
  log "installing pinned dependencies (${locks[*]##*/})"
  lock_args=()
  for lock in "${locks[@]}"; do lock_args+=(-r "$lock"); done
  if [[ -n "${ROS_DISTRO:-}" ]]; then
    # apt's rclpy and message packages are compiled against the system numpy: keep that one
    # (the locks are complete, so --no-deps installs exactly the pinned rest).
    grep -v '^numpy==' "$ROOT/requirements/python.lock" > "$VENV/python-without-numpy.lock"
    lock_args=(--no-deps -r "$VENV/python-without-numpy.lock")
  fi
  "$UV" pip install --python "$PY" --quiet "${lock_args[@]}"
  if [[ -z "${ROS_DISTRO:-}" ]]; then
    # 3. The ROS wheels were built in a manylinux container: their exported CMake files name
    #    that container's Python and numpy include folders. Point them at this environment.
    "$PY" "$ROOT/scripts/fix_ros_wheel_paths.py" "$VENV"
  fi
  echo "$digest" > "$stamp"
else
  log "dependencies up to date"
fi

# 3b. The hand tracker's model bundle (instant_fold_demo), packed once from the registry package
#     mediapipe==0.10.21 into the environment; never downloaded at run time (scripts/hand_model.py).
"$PY" "$ROOT/scripts/hand_model.py" "$VENV/share/instant_fold_demo" >"$VENV/hand_model.log" 2>&1 ||
  { cat "$VENV/hand_model.log"; echo "error: building the hand model bundle failed (scripts/hand_model.py)" >&2; exit 1; }

# 4. Build the colcon workspace, unless nothing under src/, launch/, config/ or models/ (files or folders,
#    so additions and deletions count) changed since the last successful build. Python sources
#    are symlinked into install/, so editing them needs no rebuild either way.
cd "$ROOT"
build_stamp="$ROOT/install/.instant_fold_build"
if [[ -f "$build_stamp" && -f "$ROOT/install/setup.bash" && "$stamp" -ot "$build_stamp" ]] &&
   [[ -z "$(find src launch config models colcon.meta -newer "$build_stamp" -print -quit)" ]]; then
  log "workspace up to date"
else
  set +u  # activate scripts and colcon's setup files read unset variables
  # shellcheck source=scripts/env.sh
  source "$ROOT/scripts/env.sh" --no-workspace
  set -u
  log "colcon build"
  touch "$ROOT/log/.build-start"
  colcon --log-base "$ROOT/log" build --base-paths src --build-base build --install-base install \
    --symlink-install --event-handlers console_cohesion- summary- status- desktop_notification- terminal_title- \
    >"$ROOT/log/colcon-build.out" 2>&1 || { cat "$ROOT/log/colcon-build.out"; echo "error: colcon build failed" >&2; exit 1; }
  # stamped with the build's start time: files edited during the build trigger the next one
  touch -r "$ROOT/log/.build-start" "$build_stamp"
fi
log "ready: source scripts/env.sh"
