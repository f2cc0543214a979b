#!/usr/bin/env python3
"""What Fetch spends building batches, per record, for each compression.type.

    .venv/bin/python bench/fetch_encoding.py [--records 1000] [--size 100] [--repeat 200]

Encodes one XRANGE-shaped reply of N stream entries (as Fetch gets it from Redis) with
sidecar.protocol.record_batch.encode_entries_sized, CPU only (no Redis, no network), for
two kinds of values: JSON-like text (compresses about 3x) and random bytes (does not
compress). `producer` rows are records stored with that producer codec and a topic on
compression.type=producer (Skiff's fast levels); the others use Kafka's default levels
(gzip 6, lz4 9, zstd 3). Results are in docs/architecture.md.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sidecar.config.topic import PRODUCER_COMPRESSION  # noqa: E402
from sidecar.protocol.record_batch import (  # noqa: E402
    CODEC_IDS,
    CODEC_SHIFT,
    Compression,
    encode_entries_sized,
)


def json_value(rng: random.Random, i: int, size: int) -> bytes:
    doc = {
        "id": i,
        "user": f"user-{rng.randrange(10_000)}",
        "event": rng.choice(["click", "view", "buy", "scroll"]),
        "ts": 1_700_000_000_000 + i,
        "pad": "",
    }
    raw = json.dumps(doc).encode()
    return (raw + b" " * size)[:size] if len(raw) < size else raw[:size]


def entries(kind: str, n: int, size: int, codec: int) -> list[list[object]]:
    rng = random.Random(1)
    out: list[list[object]] = []
    for i in range(n):
        value = json_value(rng, i, size) if kind == "json" else rng.randbytes(size)
        fields = [
            b"t",
            str(1_700_000_000_000 + i).encode(),
            b"k",
            f"key-{i % 100}".encode(),
            b"v",
            value,
            b"h",
            b"",
            b"f",
            str(codec << CODEC_SHIFT).encode(),
        ]
        out.append([f"0-{i + 1}".encode(), fields])
    return out


def measure(reply: list[list[object]], compression: Compression, repeat: int) -> tuple[float, int]:
    encode_entries_sized(reply, 64 << 20, compression)
    start = time.perf_counter()
    for _ in range(repeat):
        data, taken, _ = encode_entries_sized(reply, 64 << 20, compression)
    elapsed = (time.perf_counter() - start) / repeat
    assert taken == len(reply)
    return elapsed / len(reply) * 1e6, len(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--size", type=int, default=100, help="value bytes per record")
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    print(f"{args.records} records of {args.size}-byte values per fetch, CPU only")
    header = ("compression.type", "json us/rec", "bytes", "random us/rec", "bytes")
    print(f"{header[0]:26} {header[1]:>11} {header[2]:>8} {header[3]:>11} {header[4]:>8}")
    rows: list[tuple[str, int, Compression]] = [("uncompressed", 0, Compression(0))]
    for name in ("gzip", "snappy", "lz4", "zstd"):
        rows.append((name, 0, Compression(CODEC_IDS[name])))
    for name in ("none", "gzip", "snappy", "lz4", "zstd"):
        rows.append((f"producer ({name} records)", CODEC_IDS[name], PRODUCER_COMPRESSION))
    for label, stored_codec, compression in rows:
        cells = []
        for kind in ("json", "random"):
            reply = entries(kind, args.records, args.size, stored_codec)
            us, size = measure(reply, compression, args.repeat)
            cells.append(f"{us:>11.2f} {size:>8}")
        print(f"{label:26} {cells[0]} {cells[1]}")


if __name__ == "__main__":
    main()
