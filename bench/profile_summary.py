"""Summarise py-spy collapsed stacks (bench.py --py-spy DIR writes DIR/produce.txt and
DIR/fetch.txt): the share of samples spent waiting in the event loop, then the
functions with the most self time and the most inclusive time.

  .venv/bin/python bench/profile_summary.py DIR/produce.txt [DIR/fetch.txt ...] [--top 25]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def frame_name(frame: str) -> str:
    """'func (path/file.py:123)' -> 'func (path/file.py)': lines merged."""
    m = _FRAME.match(frame)
    return f"{m['func']} ({m['file']})" if m else frame


def is_idle(frames: list[str]) -> bool:
    leaf = frames[-1]
    return "selectors.py" in leaf and "select" in leaf


def summarise(path: Path, top: int) -> str:
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = idle = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [frame_name(f) for f in stack.split(";")]
        total += n
        if is_idle(frames):
            idle += n
            continue
        self_time[frames[-1]] += n
        for name in set(frames):
            inclusive[name] += n
    if not total:
        return f"{path}: no samples"
    busy = total - idle
    out = [
        f"== {path}: {total} samples, {idle / total:.0%} idle in the event loop's "
        f"select, {busy / total:.0%} busy",
        f"-- self time (% of busy samples), top {top}",
    ]
    for name, n in self_time.most_common(top):
        out.append(f"{100 * n / busy:6.1f}%  {name}")
    out.append(f"-- inclusive time (% of busy samples), top {top}, event-loop frames left out")
    shown = 0
    for name, n in inclusive.most_common():
        if any(s in name for s in ("runpy", "asyncio/", "sidecar/cli/main.py", "<module>")):
            continue
        out.append(f"{100 * n / busy:6.1f}%  {name}")
        shown += 1
        if shown >= top:
            break
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", type=Path, nargs="+")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    for path in args.files:
        if not path.exists():
            print(f"{path}: no such file", file=sys.stderr)
            return 1
        print(summarise(path, args.top))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
