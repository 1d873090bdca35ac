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
# The optional LeRobot reader environment (docs/lerobot.md): lerobot pins its own torch and numpy.
"$UV" pip compile --quiet --universal --python-version 3.10 lerobot.in -o lerobot.lock
# The optional Isaac Lab environment (Python 3.12, Linux x86_64; omniverseclient ships manylinux_2_35 wheels).
PY312="${PYTHON312:-$(pyenv root 2>/dev/null)/versions/3.12.1/bin/python}"
if [[ -x "$PY312" ]]; then
  "$UV" pip compile --quiet --python "$PY312" --python-platform x86_64-manylinux_2_35 isaaclab.in -o isaaclab.lock
else
  echo "no Python 3.12 (set PYTHON312): isaaclab.lock not updated" >&2
fi
echo "locks updated; run scripts/bootstrap.sh (and scripts/bootstrap_isaaclab.sh) to install them"
