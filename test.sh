#!/usr/bin/env bash
# Sets up everything the tests need, then lints and runs the test suite.
# Extra arguments go to pytest, e.g. ./test.sh -k roundtrip
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh --test
echo "[test] ruff check" >&2
.venv/bin/ruff check sidecar tests bench tools pipeline loadtest
echo "[test] pytest" >&2
exec .venv/bin/pytest -ra "$@"
