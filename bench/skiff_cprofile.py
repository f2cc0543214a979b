"""Run `skiff ...` in-process under cProfile and write the stats when it exits
(stop it with SIGINT or SIGTERM: Skiff shuts down cleanly on both).

  .venv/bin/python bench/skiff_cprofile.py OUT.prof [--wall] serve --redis-url ... --listen ...

The timer is the process CPU clock unless --wall: time spent waiting for a core (2 cores
shared by Redis, Skiff and the client) or for Redis is then not charged to the function
that happened to be running. bench.py --cprofile FILE uses this. Read the result with
  .venv/bin/python -m pstats OUT.prof   (then: sort tottime, stats 30)
"""

from __future__ import annotations

import cProfile
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sidecar.cli.main import main  # noqa: E402


def run(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    out, rest = argv[0], argv[1:]
    wall = bool(rest) and rest[0] == "--wall"
    if wall:
        rest = rest[1:]
    profile = cProfile.Profile(time.perf_counter if wall else time.process_time)
    profile.enable()
    try:
        return main(rest)
    finally:
        profile.disable()
        profile.dump_stats(out)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
