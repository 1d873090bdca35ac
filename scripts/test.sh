#!/usr/bin/env bash
# The README's test command: set up the workspace (idempotent), then lint, type-check, lint the
# Dockerfile and run the default test suite (everything not marked `slow`).
# Extra arguments go to pytest, e.g. `scripts/test.sh -m slow` or `scripts/test.sh -k tokens`.
set -euo pipefail
# shellcheck source=scripts/workspace.sh
source "$(dirname "${BASH_SOURCE[0]}")/workspace.sh"
echo "[test] ruff"
ruff check --quiet .
ruff format --check --quiet .
echo "[test] mypy"
mypy
echo "[test] hadolint"
hadolint docker/Dockerfile
echo "[test] pytest"
exec python -m pytest -m "not slow" "$@"
