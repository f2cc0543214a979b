#!/usr/bin/env bash
# Runs ./test.sh (arguments go to pytest) with two CPU hogs (`yes >/dev/null`) beside it,
# as on a loaded CI machine: the suite must pass so (tests wait for conditions with
# deadlines, never for a fixed time). The hogs are stopped by pid, however the run ends.
set -euo pipefail
cd "$(dirname "$0")/.."
hogs=()
stop_hogs() {
    for pid in "${hogs[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
}
trap stop_hogs EXIT
for _ in 1 2; do
    yes >/dev/null &
    hogs+=("$!")
done
echo "[test-loaded] CPU hogs running: pids ${hogs[*]}" >&2
./test.sh "$@"
