#!/usr/bin/env python3
"""CPU of `stored_batch.check` (sidecar/protocol/stored_batch.py), the validation of a
produced batch on a `batch` topic, per record: ~1,000-record batches of ~100 B records,
keyed, per codec, on a delete topic (the default) and a compacted one.

    .venv/bin/python bench/batch_check.py [--records 1000] [--repeat 15] [--number 200]

CPU time of this process (time.process_time), the best of --repeat timings of
--number calls (a loaded machine still inflates every figure; the best is the least
disturbed). Results: docs/architecture.md
("Storage formats").
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from rawkafka import Rec, build_batch  # noqa: E402 - tests/ holds the batch builder

from sidecar.config.topic import CODEC_IDS  # noqa: E402
from sidecar.protocol import stored_batch  # noqa: E402

CONFIG = {
    "message.timestamp.type": "CreateTime",
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "message.timestamp.before.max.ms": 2**63 - 1,
    "message.timestamp.after.max.ms": 2**63 - 1,
    "message.timestamp.difference.max.ms": 2**63 - 1,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--number", type=int, default=200)
    args = parser.parse_args()
    n = args.records
    recs = [
        Rec(value=b'{"id": %06d, "pad": "%s"}' % (i, b"x" * 76), key=b"k%05d" % i) for i in range(n)
    ]
    print(f"load average {os.getloadavg()[0]:.2f}; {n} records of ~100 B per batch")
    for codec in ("none", "lz4", "zstd"):
        batch = memoryview(build_batch(recs, compression=CODEC_IDS[codec]))
        for policy in ("delete", "compact"):
            config = {**CONFIG, "cleanup.policy": policy}
            stored_batch.check(batch, config, "t", 0)
            best = min(
                timeit.repeat(
                    lambda b=batch, c=config: stored_batch.check(b, c, "t", 0),
                    repeat=args.repeat,
                    number=args.number,
                    timer=time.process_time,
                )
            )
            us = best / args.number / n * 1e6
            print(f"{codec:5} {policy:8} {len(batch):7} B  {us:.3f} us/record")


if __name__ == "__main__":
    main()
