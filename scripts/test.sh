#!/usr/bin/env bash
# The README's test command: set up the workspace (idempotent), then lint, type-check, lint the
# Dockerfile and run the default test suite (everything not marked `slow`).
# Extra arguments go to pytest, e.g. `scripts/test.sh -m slow` or `scripts/test.sh -k tokens`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/bootstrap.sh"
set +u
# shellcheck source=scripts/env.sh
source "$ROOT/scripts/env.sh"
set -u
cd "$ROOT"
echo "[test] ruff"
ruff check --quiet .
ruff format --check --quiet .
echo "[test] mypy"
mypy
echo "[test] hadolint"
hadolint docker/Dockerfile
echo "[test] pytest"
exec python -m pytest -m "not slow" "$@"
