#!/usr/bin/env python3
"""Sidecar and Redis CPU per record of Produce alone, with a raw client that sends one
pre-built 1,000-record batch over and over, several requests in flight.

    .venv/bin/python bench/produce_loop.py [--requests 2000] [--passes 5]
        [--records-per-batch 1000] [--in-flight 5] [--acks 1] [--format batch]

Each request is a Produce v7 of one partition's v2 batch (100 B values, no key, no
compression, no producer id), built once with aiokafka's builder. A pass sends
--requests of them, keeping --in-flight unanswered (librdkafka's default is 5), and
checks every answer: error 0 and base offsets that follow each other. CPU comes from
schedstat (nanoseconds on a CPU) of the sidecar and redis-server. Without a producer
library in the way, the figures are repeatable to ~10% on a quiet machine, where
vs_kafka.py's produce rows vary more.
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

import redis  # noqa: E402
from aiokafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from fetch_loop import cpu_seconds, medians  # noqa: E402

from bench import BenchError, start_redis, start_skiff, stop_process  # noqa: E402

TOPIC = "produce-loop"


def build_batch(records: int, value_bytes: int) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2**31 - 1)
    now = int(time.time() * 1000)
    value = b"v" * value_bytes
    for offset in range(records):
        builder.append(offset, timestamp=now, key=None, value=value, headers=[])
    return bytes(builder.build())


class RawProducer:
    def __init__(self, bootstrap: str, batch: bytes, acks: int) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        name = TOPIC.encode()
        self.body = (
            struct.pack(">hhi", -1, acks, 30_000)  # transactional id null, acks, timeout
            + struct.pack(">ih", 1, len(name))
            + name
            + struct.pack(">iii", 1, 0, len(batch))
            + batch
        )
        self.correlation = 0
        self.buffer = bytearray()

    def send(self) -> None:
        self.correlation += 1
        message = struct.pack(">hhih", 0, 7, self.correlation, 5) + b"bench" + self.body
        self.sock.sendall(struct.pack(">i", len(message)) + message)

    def receive(self) -> tuple[int, int]:
        """(error, base offset) of the next answer."""
        (size,) = struct.unpack(">i", self._read(4))
        response = self._read(size)
        pos = 4 + 4 + 2 + len(TOPIC) + 4  # correlation, topics, name, partitions
        _, error, base = struct.unpack_from(">ihq", response, pos)
        return error, base

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise BenchError("Skiff closed the connection")
            self.buffer += chunk
        out = bytes(self.buffer[:n])
        del self.buffer[:n]
        return out


def run(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="skiff-produce-loop-"))
    redis_proc, redis_url = start_redis(work, False)
    skiff = None
    try:
        skiff, bootstrap = start_skiff(redis_url, work / "skiff.log")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = NewTopic(TOPIC, 1, 1, config={"skiff.storage.format": args.format})
        for future in admin.create_topics([topic]).values():
            future.result(30)
        batch = build_batch(args.records_per_batch, 100)
        producer = RawProducer(bootstrap, batch, args.acks)
        expected = 0
        producer.send()  # first use: imports, caches
        error, base = producer.receive()
        if error:
            raise BenchError(f"Produce error {error}")
        expected = base + args.records_per_batch
        print(
            f"load average {os.getloadavg()[0]:.2f}; {args.requests:,} requests of "
            f"{args.records_per_batch:,} records, {args.in_flight} in flight, acks={args.acks}, "
            f"{args.format} topic"
        )
        sidecar, redis_us = [], []
        records = args.requests * args.records_per_batch
        probe = redis.Redis.from_url(redis_url)
        probe.config_resetstat()
        for n in range(args.passes):
            s0, r0, t0 = cpu_seconds(skiff.pid), cpu_seconds(redis_proc.pid), time.monotonic()
            sent = answered = 0
            while answered < args.requests:
                while sent < args.requests and sent - answered < args.in_flight:
                    producer.send()
                    sent += 1
                error, base = producer.receive()
                if error or base != expected:
                    raise BenchError(f"answer {answered}: error {error}, base {base} != {expected}")
                expected += args.records_per_batch
                answered += 1
            s1, r1, t1 = cpu_seconds(skiff.pid), cpu_seconds(redis_proc.pid), time.monotonic()
            sidecar.append((s1 - s0) / records * 1e6)
            redis_us.append((r1 - r0) / records * 1e6)
            print(
                f"pass {n}: sidecar {sidecar[-1]:.3f} redis {redis_us[-1]:.3f} us/record, "
                f"{records / (t1 - t0):,.0f} records/s",
                flush=True,
            )
        total = args.requests * args.passes
        stats = probe.info("commandstats")
        print("redis commands per request (calls, us per request):")
        for name, stat in sorted(stats.items(), key=lambda kv: -kv[1]["usec"]):
            if stat["calls"] >= total // 2:
                name = name.removeprefix("cmdstat_")
                print(f"  {name:16} {stat['calls'] / total:6.2f} {stat['usec'] / total:8.1f}")
        print(medians(sidecar, redis_us))
    finally:
        stop_process(skiff)
        stop_process(redis_proc)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--records-per-batch", type=int, default=1000)
    parser.add_argument("--in-flight", type=int, default=5)
    parser.add_argument("--acks", type=int, default=1, choices=(1, -1))
    parser.add_argument("--format", default="batch", choices=("batch", "record"))
    args = parser.parse_args()
    try:
        run(args)
    except BenchError as exc:
        print(f"produce_loop: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
