#!/usr/bin/env python3
"""What the bounds check in front of kio (sidecar/protocol/bounds.py) costs on the hot
path, next to kio's own decoding of the same Produce and Fetch bodies.

    .venv/bin/python bench/decode_bounds.py [--repeat 40] [--number 2000]

CPU only, the best of --repeat timings of --number calls each (a loaded machine
inflates every figure; the best is the least disturbed). Results are in
docs/architecture.md ("Requests").
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from rawkafka import (  # noqa: E402 - tests/ holds the request builders
    Rec,
    build_batch,
    encode,
    fetch_request,
    make,
    produce_request,
    request_type,
)

from sidecar.protocol.bounds import check_request  # noqa: E402
from sidecar.protocol.kio_codec import decode_request  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--number", type=int, default=2000)
    args = parser.parse_args()
    batch = build_batch([Rec(b"x" * 100)] * 10)
    cases = {
        "Produce v9, 1 partition": (0, 9, produce_request("t", {0: batch})),
        "Produce v9, 16 partitions": (0, 9, produce_request("t", dict.fromkeys(range(16), batch))),
        "Fetch v12, 1 partition": (1, 12, fetch_request("t", {0: 0})),
        "Fetch v12, 16 partitions": (1, 12, fetch_request("t", dict.fromkeys(range(16), 0))),
    }
    print(f"{'request':28s} {'bytes':>7s} {'decode (us)':>12s} {'of it the check':>16s}")
    for name, (key, version, data) in cases.items():
        entity = request_type(key, version)
        body = encode(make(entity, data))

        def best(call: object) -> float:
            times = timeit.repeat(call, number=args.number, repeat=args.repeat)  # type: ignore[arg-type]
            return min(times) / args.number * 1e6

        total = best(lambda: decode_request(key, version, body, 0))  # noqa: B023
        check = best(lambda: check_request(entity, body, 0))  # noqa: B023
        print(f"{name:28s} {len(body):7d} {total:12.2f} {check:16.2f}")


if __name__ == "__main__":
    main()
