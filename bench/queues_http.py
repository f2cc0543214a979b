#!/usr/bin/env python3
"""Queue consumption through the HTTP queue API against the raw-Redis ceiling, in one run.

    .venv/bin/python bench/queues_http.py [--records 50000] [--workers 8] [--batch 100]
        [--record-bytes 100] [--in-flight 0] [--format record|batch] [--json]

Starts its own redis-server and one sidecar (both stopped by pid at the end), produces
`--records` records of `--record-bytes` to a 1-partition topic with confluent-kafka,
then times two phases over the same records:

(a) raw: `--workers` asyncio tasks on one redis-py client, each looping XREADGROUP
    COUNT `--batch` on the partition's stream (a consumer group of its own) and XACK of
    the ids it got: the least any queue on Redis Streams does per record.
(b) http: `--workers` asyncio tasks with aiohttp, each looping POST records:read
    (max_records `--batch`) and POST records:acknowledge of what it got, through the
    sidecar (JSON, leases, delivery counts, the lowest-unfinished bookkeeping).

With `--in-flight N`, a worker first takes N records in each phase and never
acknowledges them (leases of 10 minutes): the pending entries list then holds N
entries the whole time, which a queue must not scan on every read.

With `--format batch` the topic stores whole batches (skiff.storage.format) and the
queue's per-record state is lua/queue_inflight.lua's; the raw phase (per-entry Redis
consumer groups) then has no meaning and is left out. Either way the http phase also
reports Redis's CPU time per record (INFO cpu, main thread, over the phase) and the
Redis memory the `--in-flight` leases take per record (MEMORY USAGE of the state
before and after they are taken).

Each phase ends when every other record was acknowledged exactly once (checked).
Prints records/s per phase and (b)/(a). Results: docs/queues.md, docs/architecture.md
("Queue groups on `batch` topics").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import aiohttp  # noqa: E402
import redis.asyncio as aioredis  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from conftest import start_redis, start_skiff, stop_process  # noqa: E402


def produce(bootstrap: str, topic: str, n: int, size: int) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 1000}
    )
    value = b"x" * size
    for i in range(n):
        producer.produce(topic, value=value, key=str(i).encode(), partition=0)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


async def raw_phase(
    url: str, topic: str, n: int, workers: int, batch: int, in_flight: int
) -> float:
    client = aioredis.from_url(url)
    stream = f"skiff:{{{topic}/0}}:log"
    await client.xgroup_create(stream, "bench-raw", id="0-0")
    seen: set[bytes] = set()
    if in_flight:
        await client.xreadgroup("bench-raw", "holder", {stream: ">"}, count=in_flight)
    n -= in_flight

    async def worker(name: str) -> None:
        while len(seen) < n:
            reply = await client.xreadgroup("bench-raw", name, {stream: ">"}, count=batch)
            if not reply:
                return
            ids = [entry_id for entry_id, _ in reply[0][1]]
            await client.xack(stream, "bench-raw", *ids)
            seen.update(ids)

    start = time.perf_counter()
    await asyncio.gather(*(worker(f"w{i}") for i in range(workers)))
    elapsed = time.perf_counter() - start
    await client.aclose()
    assert len(seen) == n, f"raw phase saw {len(seen)} of {n}"
    return elapsed


async def _redis_cpu_s(client: aioredis.Redis) -> float:
    info = await client.info("cpu")
    return float(info["used_cpu_sys_main_thread"]) + float(info["used_cpu_user_main_thread"])


async def _state_bytes(client: aioredis.Redis, topic: str) -> int:
    """Redis memory of the partition's log stream (with its consumer groups' pending
    lists) and the bench group's batch-format state keys."""
    tag = f"skiff:{{{topic}/0}}"
    total = 0
    for key in (f"{tag}:log", f"{tag}:q:bench:lease", f"{tag}:q:bench:rec"):
        total += int(await client.memory_usage(key, samples=0) or 0)
    return total


async def http_phase(
    port: int, url: str, topic: str, n: int, workers: int, batch: int, in_flight: int
) -> tuple[float, float, int]:
    """(seconds, Redis CPU seconds, Redis bytes of the in-flight leases)."""
    base = f"http://127.0.0.1:{port}/v1/queues/bench"
    done: list[int] = []
    client = aioredis.from_url(url)
    connector = aiohttp.TCPConnector(limit=workers * 2)
    async with aiohttp.ClientSession(connector=connector) as session:
        config = {"auto_offset_reset": "earliest", "lock_ms": 600_000}
        async with session.put(base, json=config) as resp:
            assert resp.status in (200, 201), await resp.text()
        held = 0
        async with session.post(
            base + "/records:read", json={"topics": [topic], "max_records": 1, "worker": "x"}
        ) as r:  # the group's state exists before the memory is measured
            assert len((await r.json())["records"]) == 1
        before = await _state_bytes(client, topic)
        while held < in_flight:
            body = {"topics": [topic], "max_records": min(in_flight - held, 10_000)}
            async with session.post(base + "/records:read", json={**body, "worker": "holder"}) as r:
                held += len((await r.json())["records"])
        lease_bytes = await _state_bytes(client, topic) - before
        first = in_flight + 1
        n -= in_flight + 1

        async def worker(name: str) -> None:
            while len(done) < n:
                body = {"topics": [topic], "max_records": batch, "worker": name, "wait_ms": 200}
                async with session.post(base + "/records:read", json=body) as resp:
                    assert resp.status == 200, await resp.text()
                    records = (await resp.json())["records"]
                if not records:
                    return
                refs = [{"topic": topic, "partition": 0, "offset": r["offset"]} for r in records]
                ack = {"worker": name, "records": refs}
                async with session.post(base + "/records:acknowledge", json=ack) as resp:
                    assert resp.status == 200, await resp.text()
                done.extend(r["offset"] for r in records)

        cpu = await _redis_cpu_s(client)
        start = time.perf_counter()
        await asyncio.gather(*(worker(f"w{i}") for i in range(workers)))
        elapsed = time.perf_counter() - start
        cpu = await _redis_cpu_s(client) - cpu
    await client.aclose()
    assert sorted(done) == list(range(first, first + n)), "http phase: records lost or repeated"
    return elapsed, cpu, lease_bytes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--in-flight", type=int, default=0)
    parser.add_argument("--format", choices=("record", "batch"), default="record")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="skiff-queues-bench-"))
    server = start_redis(tmp / "redis")
    skiff = None
    try:
        skiff = start_skiff(
            tmp / "skiff.log", "--redis-url", server.url, "--storage-format", args.format
        )
        topic = "bench-queue"
        print(f"producing {args.records} records ...", file=sys.stderr)
        produce(skiff.bootstrap, topic, args.records, args.record_bytes)
        work = (topic, args.records, args.workers, args.batch, args.in_flight)
        raw = asyncio.run(raw_phase(server.url, *work)) if args.format == "record" else 0.0
        http, cpu, lease_bytes = asyncio.run(http_phase(skiff.http_port, server.url, *work))
        done = args.records - args.in_flight
        result = {
            "format": args.format,
            "records": args.records,
            "workers": args.workers,
            "batch": args.batch,
            "record_bytes": args.record_bytes,
            "in_flight": args.in_flight,
            "raw_records_per_s": round(done / raw) if raw else None,
            "http_records_per_s": round((done - 1) / http),
            "http_over_raw": round(raw / http, 3) if raw else None,
            "redis_cpu_us_per_record": round(cpu * 1e6 / (done - 1), 1),
            "lease_bytes_per_record": round(lease_bytes / args.in_flight)
            if args.in_flight
            else None,
        }
        if args.json:
            print(json.dumps(result))
        else:
            if raw:
                print(
                    f"(a) raw XREADGROUP+XACK : {result['raw_records_per_s']:>9,} records/s\n"
                    f"(b)/(a)                 : {result['http_over_raw']:.3f}"
                )
            print(
                f"(b) HTTP read+ack       : {result['http_records_per_s']:>9,} records/s\n"
                f"Redis CPU per record    : {result['redis_cpu_us_per_record']} us\n"
                f"Redis bytes per lease   : {result['lease_bytes_per_record']}\n"
                f"({args.format} topic, {done} records of {args.record_bytes} B, "
                f"{args.workers} workers, batches of {args.batch}, {args.in_flight} more "
                "held unacknowledged)"
            )
        return 0
    finally:
        if skiff is not None:
            stop_process(skiff.proc)
        stop_process(server.proc)


if __name__ == "__main__":
    sys.exit(main())
