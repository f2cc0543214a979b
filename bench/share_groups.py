"""Share-group throughput: records/s read and acknowledged through Kafka share fetches
(KIP-932), against the raw-Redis ceiling of the same work, in one run.

  (a) raw:   XREADGROUP COUNT --batch + XACK from Python (redis-py asyncio), --workers
             consumers of one consumer group on the partition stream: the Redis calls a
             queue needs, with no leases, delivery limit or record encoding
  (b) share: --workers raw-protocol share members (tests/share_raw.py), each in its own
             thread: ShareFetch max_records=--batch, acknowledging the previous batch
             (accept) in the next fetch, as Kafka's client does
  (c) java:  (--java) one Kafka 4.2 KafkaShareConsumer (tests/java-share), explicit
             acknowledgement, commitSync after each poll

With --format batch the share and java phases read a `batch` topic (whole stored
batches; per-record state in lua/queue_inflight.lua); the raw phase stays on a record
topic as the ceiling. Results: docs/architecture.md ("Queue groups on `batch` topics").

Each phase reads --records records of --record-bytes from its own 1-partition topic
(produced beforehand with confluent-kafka) and checks every record came exactly once.
Starts its own redis-server and Skiff (ports free, both stopped at the end).

  .venv/bin/python bench/share_groups.py [--records 20000] [--workers 4] [--batch 500]
                                         [--record-bytes 100] [--java] [--json]
                                         [--format record|batch]
                                         [--cprofile OUT.prof]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import redis.asyncio as aioredis  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from share_raw import ACCEPT, ShareMember, acquired_offsets  # noqa: E402

from bench import create_topic, progress, start_redis, start_skiff, stop_process  # noqa: E402


def produce(bootstrap: str, topic: str, n: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    value = b"x" * size
    for i in range(n):
        producer.produce(topic, value=value, key=str(i).encode(), partition=0)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


async def raw_phase(url: str, topic: str, n: int, workers: int, batch: int) -> float:
    client = aioredis.from_url(url)
    stream = f"skiff:{{{topic}/0}}:log"
    await client.xgroup_create(stream, "bench-raw", id="0-0")
    seen: list[bytes] = []

    async def worker(name: str) -> None:
        while True:
            reply = await client.xreadgroup("bench-raw", name, {stream: ">"}, count=batch)
            if not reply or not reply[0][1]:
                return
            ids = [entry_id for entry_id, _ in reply[0][1]]
            await client.xack(stream, "bench-raw", *ids)
            seen.extend(ids)

    start = time.perf_counter()
    await asyncio.gather(*(worker(f"w{i}") for i in range(workers)))
    elapsed = time.perf_counter() - start
    await client.aclose()
    assert len(seen) == n == len(set(seen)), f"raw phase saw {len(seen)} of {n}"
    return elapsed


def configure(host: str, port: int, group: str) -> None:
    from rawkafka import RawKafka

    with RawKafka(host, port) as kafka:
        resp = kafka.request(
            44,
            1,
            {
                "resources": [
                    {
                        "resource_type": 32,
                        "resource_name": group,
                        "configs": [
                            {
                                "name": "share.auto.offset.reset",
                                "config_operation": 0,
                                "value": "earliest",
                            }
                        ],
                    }
                ],
                "validate_only": False,
            },
        )
    assert resp.responses[0].error_code == 0, resp


def _ranges(offsets: list[int]) -> list[tuple[int, int, list[int]]]:
    """Accept batches covering `offsets` (runs of consecutive offsets)."""
    out: list[tuple[int, int, list[int]]] = []
    for o in sorted(offsets):
        if out and out[-1][1] == o - 1:
            out[-1] = (out[-1][0], o, [ACCEPT])
        else:
            out.append((o, o, [ACCEPT]))
    return out


def share_phase(bootstrap: str, topic: str, n: int, workers: int, batch: int) -> float:
    host, port = bootstrap.split(":")
    group = f"bench-share-{uuid.uuid4().hex[:6]}"
    configure(host, int(port), group)
    members = [ShareMember(host, int(port), group) for _ in range(workers)]
    for m in members:
        m.join([topic])
    from rawkafka import RawKafka, metadata_request

    with RawKafka(host, int(port)) as kafka:
        tid = kafka.request(3, 12, metadata_request([topic])).topics[0].topic_id
    seen: list[int] = []
    lock = threading.Lock()
    done = threading.Event()

    def run(m: ShareMember) -> None:
        pending: list[tuple[int, int, list[int]]] = []
        while True:
            acks = {(tid, 0): pending} if pending else None
            resp = m.fetch({tid: [0]}, acks=acks, max_records=batch, max_wait_ms=100)
            got = [o for o, _ in acquired_offsets(resp).get((tid, 0), [])]
            pending = _ranges(got)
            with lock:
                seen.extend(got)
                if len(seen) >= n:
                    done.set()
            if not got and done.is_set():
                break
        m.fetch({}, epoch=-1, acks={(tid, 0): pending} if pending else None)

    start = time.perf_counter()
    threads = [threading.Thread(target=run, args=(m,)) for m in members]
    for t in threads:
        t.start()
    done.wait(600)
    elapsed = time.perf_counter() - start
    for t in threads:
        t.join(60)
    for m in members:
        m.close()
    assert len(seen) == n == len(set(seen)), f"share phase saw {len(seen)} ({len(set(seen))})"
    return elapsed


def java_phase(bootstrap: str, topic: str, n: int) -> float:
    from clients.java_share_client import ShareConsumer, build_tool

    build_tool()
    host, port = bootstrap.split(":")
    group = f"bench-java-{uuid.uuid4().hex[:6]}"
    configure(host, int(port), group)
    with ShareConsumer(bootstrap, group, [topic]) as c:
        c.poll(0)  # join first: the JVM's start-up is not measured
        start = time.perf_counter()
        answer = c.consume(n, "accept", timeout_ms=600_000, records=False)
        elapsed = time.perf_counter() - start
    assert answer["count"] == n and not answer["commit_errors"], answer
    return elapsed


def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {
        "records": args.records,
        "record_bytes": args.record_bytes,
        "workers": args.workers,
        "batch": args.batch,
        "format": args.format,
    }
    with tempfile.TemporaryDirectory(prefix="skiff-share-bench-") as tmp:
        redis_proc, url = start_redis(Path(tmp), unix_socket=False)
        skiff, bootstrap = start_skiff(url, Path(tmp) / "skiff.log", cprofile=args.cprofile)
        try:
            phases = ["raw", "share"] + (["java"] if args.java else [])
            for phase in phases:
                topic = f"bench-{phase}-{uuid.uuid4().hex[:6]}"
                fmt = "record" if phase == "raw" else args.format
                create_topic(bootstrap, topic, fmt=fmt)
                produce(bootstrap, topic, args.records, args.record_bytes)
                progress(f"{phase}: reading and acknowledging {args.records} records")
                if phase == "raw":
                    secs = asyncio.run(
                        raw_phase(url, topic, args.records, args.workers, args.batch)
                    )
                elif phase == "share":
                    secs = share_phase(bootstrap, topic, args.records, args.workers, args.batch)
                else:
                    secs = java_phase(bootstrap, topic, args.records)
                out[phase] = {
                    "seconds": round(secs, 3),
                    "records_per_s": round(args.records / secs),
                }
                progress(f"{phase}: {args.records / secs:,.0f} records/s")
        finally:
            stop_process(skiff)
            stop_process(redis_proc)
    if "share" in out:
        out["share_vs_raw"] = round(out["share"]["records_per_s"] / out["raw"]["records_per_s"], 3)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=20_000)
    p.add_argument("--record-bytes", type=int, default=100)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--java", action="store_true", help="also one Java KafkaShareConsumer")
    p.add_argument("--format", choices=("record", "batch"), default="record")
    p.add_argument("--json", action="store_true")
    p.add_argument("--cprofile", type=Path, help="profile the sidecar (bench/skiff_cprofile.py)")
    args = p.parse_args(argv)
    result = run(args)
    if args.json:
        print(json.dumps(result))
    else:
        for phase in ("raw", "share", "java"):
            if phase in result:
                r = result[phase]
                print(f"{phase:6} {r['records_per_s']:>9,} records/s ({r['seconds']} s)")
        if "share_vs_raw" in result:
            print(f"share fetch / raw Redis: {result['share_vs_raw']:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
