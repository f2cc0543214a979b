#!/usr/bin/env python3
"""Sidecar and Redis CPU per record of Fetch alone, with a raw client that reads one
partition from start to end in Fetch v4 requests, over and over.

    .venv/bin/python bench/fetch_loop.py [--records 1000000] [--passes 5]
        [--partition-bytes 1048576] [--slow]

Fills one `batch` topic (1,000-record batches of 100 B values) through a private
redis-server and Skiff, then times each pass: the CPU of both processes (schedstat,
nanoseconds) per record read. Without a consumer library in the way, the figures are
repeatable to ~10% on a quiet machine, where vs_kafka.py's consume rows vary more.
--slow reads each response in 64 KB pieces with a 0.5 ms pause between them, as a
consumer that processes as it reads (confluent-kafka's pace here): Skiff then writes
each response over many more event-loop turns.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench import (  # noqa: E402
    BenchError,
    producer_config,
    start_redis,
    start_skiff,
    stop_process,
)

TOPIC = "fetch-loop"
REQUEST_LIMIT = 52_428_800  # Fetch max_bytes (the consumer default)


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of `pid` (schedstat: nanoseconds on a CPU)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/schedstat") as f:
            total += int(f.read().split()[0])
    return total / 1e9


def medians(sidecar: list[float], redis_us: list[float]) -> str:
    """The summary line of per-pass CPU figures (us per record)."""
    return (
        f"median: sidecar {sorted(sidecar)[len(sidecar) // 2]:.3f} redis "
        f"{sorted(redis_us)[len(redis_us) // 2]:.3f} us/record"
    )


class RawFetcher:
    def __init__(self, bootstrap: str, partition_bytes: int, slow: bool) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.partition_bytes = partition_bytes
        self.slow = slow
        self.correlation = 0

    def fetch(self, offset: int) -> bytes:
        name = TOPIC.encode()
        body = (
            struct.pack(">iiiib", -1, 0, 1, REQUEST_LIMIT, 0)  # replica, wait, min, max, iso
            + struct.pack(">ih", 1, len(name))
            + name
            + struct.pack(">iiqi", 1, 0, offset, self.partition_bytes)
        )
        self.correlation += 1
        message = struct.pack(">hhih", 1, 4, self.correlation, 5) + b"bench" + body
        self.sock.sendall(struct.pack(">i", len(message)) + message)
        (size,) = struct.unpack(">i", self._read(4))
        return self._read(size)

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(min(n - len(out), 65536 if self.slow else 1 << 20))
            if not chunk:
                raise BenchError("Skiff closed the connection")
            out += chunk
            if self.slow:
                time.sleep(0.0005)
        return bytes(out)


def next_offset(response: bytes, offset: int) -> int:
    """The offset after the last whole batch of a one-partition Fetch v4 response."""
    pos = 4 + 4 + 4 + 2 + len(TOPIC) + 4  # correlation id, throttle, topics, name, partitions
    (error,) = struct.unpack_from(">h", response, pos + 4)
    if error:
        raise BenchError(f"Fetch error {error} at offset {offset}")
    pos += 4 + 2 + 8 + 8  # partition, error, high watermark, last stable offset
    (aborted,) = struct.unpack_from(">i", response, pos)
    pos += 4 + max(aborted, 0) * 16
    (size,) = struct.unpack_from(">i", response, pos)
    pos += 4
    end = pos + size
    while pos + 12 <= end:
        base, length = struct.unpack_from(">qi", response, pos)
        if pos + 12 + length > end:
            break
        (last_delta,) = struct.unpack_from(">i", response, pos + 23)
        offset = base + last_delta + 1
        pos += 12 + length
    return offset


def fill(bootstrap: str, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(TOPIC, 1, 1, config={"skiff.storage.format": "batch"})
    for future in admin.create_topics([topic]).values():
        future.result(30)
    producer = Producer({**producer_config(bootstrap, 1000, 100), "log_level": 3})
    value = b"v" * 100
    for _ in range(records):
        while True:
            try:
                producer.produce(TOPIC, value, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120) != 0:
        raise BenchError("filling the topic did not complete in 120 s")


def run(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="skiff-fetch-loop-"))
    redis_proc, redis_url = start_redis(work, False)
    skiff = None
    try:
        skiff, bootstrap = start_skiff(redis_url, work / "skiff.log")
        fill(bootstrap, args.records)
        fetcher = RawFetcher(bootstrap, args.partition_bytes, args.slow)
        fetcher.fetch(0)  # first use: imports, caches
        print(f"load average {os.getloadavg()[0]:.2f}; {args.records:,} records of 100 B")
        sidecar, redis_us = [], []
        for n in range(args.passes):
            s0, r0, t0 = cpu_seconds(skiff.pid), cpu_seconds(redis_proc.pid), time.monotonic()
            offset, fetches = 0, 0
            while offset < args.records:
                offset = next_offset(fetcher.fetch(offset), offset)
                fetches += 1
            s1, r1, t1 = cpu_seconds(skiff.pid), cpu_seconds(redis_proc.pid), time.monotonic()
            sidecar.append((s1 - s0) / args.records * 1e6)
            redis_us.append((r1 - r0) / args.records * 1e6)
            print(
                f"pass {n}: {fetches} fetches, sidecar {sidecar[-1]:.3f} redis "
                f"{redis_us[-1]:.3f} us/record, {args.records / (t1 - t0):,.0f} records/s"
            )
        print(medians(sidecar, redis_us))
    finally:
        stop_process(skiff)
        stop_process(redis_proc)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--partition-bytes", type=int, default=1 << 20)
    parser.add_argument("--slow", action="store_true", help="read as a slow consumer")
    args = parser.parse_args()
    try:
        run(args)
    except BenchError as exc:
        print(f"fetch_loop: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
