#!/usr/bin/env bash
# Re-resolve requirements/*.lock from requirements/*.in (run after editing a .in file).
# The locks are universal (one file for Python 3.10-3.12 on every platform uv knows).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/bootstrap.sh" >/dev/null 2>&1 || true  # provides .venv/bin/uv
UV="$ROOT/.venv/bin/uv"
export UV_PYTHON_DOWNLOADS=never
cd "$ROOT/requirements"
"$UV" pip compile --quiet --universal --python-version 3.10 python.in -o python.lock
"$UV" pip compile --quiet --universal --python-version 3.10 ros-wheels.in -c python.lock -o ros-wheels.lock
echo "locks updated; run scripts/bootstrap.sh to install them"
