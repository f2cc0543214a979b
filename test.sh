#!/usr/bin/env bash
# Sets up everything the tests need, then lints and runs the test suite.
# Extra arguments go to pytest, e.g. ./test.sh -k roundtrip
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh --test
echo "[test] ruff check" >&2
.venv/bin/ruff check sidecar tests bench tools pipeline loadtest
# Tests mostly wait on processes (redis-server, JVMs), so workers overlap the waits.
# --dist loadfile keeps a file's tests (and its module fixtures) on one worker.
# SKIFF_TEST_WORKERS=1 runs them in this process, one after another.
workers="${SKIFF_TEST_WORKERS:-4}"
parallel=()
if [ "$workers" != 1 ]; then
  parallel=(-n "$workers" --dist loadfile)
fi
echo "[test] pytest (workers: $workers)" >&2
exec .venv/bin/pytest -ra "${parallel[@]}" "$@"
