"""Records/s Spark reads from a Skiff topic through each path (docs/spark.md):

  kafka-connector  Spark's own Kafka source (JVM, kafka-clients) through the sidecar
  skiff-redis      the `skiff` Python data source reading the streams with XRANGE
  skiff-kafka      the `skiff` Python data source reading through the sidecar (confluent-kafka)

Starts its own redis-server and Skiff on free ports (stopped by pid at the end), produces
--records records of --record-bytes into a topic of --partitions partitions, then for each
--cores value runs a local[cores] Spark that reads the whole topic per path, every column
materialized (count and sum of value lengths, checked against what was produced). Each
path runs once to warm up (JVM, Python workers), then --runs timed runs; the best is kept.

Besides wall-clock records/s it reports CPU: the CPU seconds of Spark's processes (the
driver, its JVM, the Python workers: the process tree, from /proc) and of Skiff's (the
sidecar and redis-server) during the run, and records per CPU-second of both together,
the "records/s per core" of docs/spark.md, which does not depend on how many cores the
machine has or what else runs on it.

  .venv/bin/python bench/spark_read.py [--records 1000000] [--record-bytes 100]
      [--partitions 4] [--cores 1,2] [--runs 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from conftest import start_redis, start_skiff, stop_process  # noqa: E402

PATHS = ("kafka-connector", "skiff-redis", "skiff-kafka")


def say(message: str) -> None:
    print(f"[spark-bench] {message}", file=sys.stderr, flush=True)


def produce(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 10000}
    )
    value = b"x" * size
    start = time.monotonic()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300):
        raise RuntimeError("records left undelivered")
    return time.monotonic() - start


def reader(spark: Any, path: str, topic: str, bootstrap: str, redis_url: str) -> Any:
    if path == "kafka-connector":
        return (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("includeHeaders", "true")
            .load()
        )
    options = {"topics": topic, "kafka.bootstrap.servers": bootstrap, "redis.url": redis_url}
    options["readPath"] = path.removeprefix("skiff-")
    return spark.read.format("skiff").options(**options).load()


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def cpu_snapshot(skiff_pids: list[int]) -> tuple[dict[int, float], dict[int, float]]:
    spark = {pid: cpu_seconds(pid) for pid in descendants(os.getpid())}
    return spark, {pid: cpu_seconds(pid) for pid in skiff_pids}


def cpu_delta(before: dict[int, float], skiff_pids: list[int], is_skiff: bool) -> float:
    now = (
        {pid: cpu_seconds(pid) for pid in skiff_pids}
        if is_skiff
        else {pid: cpu_seconds(pid) for pid in descendants(os.getpid())}
    )
    return sum(t - before.get(pid, 0.0) for pid, t in now.items())


def time_read(df: Any, records: int, size: int, skiff_pids: list[int]) -> dict[str, float]:
    spark_before, skiff_before = cpu_snapshot(skiff_pids)
    start = time.monotonic()
    row = df.selectExpr("count(*) AS n", "sum(length(value)) AS b", "max(offset) AS o").first()
    elapsed = time.monotonic() - start
    if row.n != records or row.b != records * size:
        raise RuntimeError(f"read {row.n} records / {row.b} bytes, expected {records}")
    spark_cpu = cpu_delta(spark_before, skiff_pids, False)
    skiff_cpu = cpu_delta(skiff_before, skiff_pids, True)
    return {
        "seconds": elapsed,
        "records_per_s": records / elapsed,
        "spark_cpu_s": spark_cpu,
        "skiff_cpu_s": skiff_cpu,
        "records_per_cpu_s": records / (spark_cpu + skiff_cpu),
    }


def run_cores(
    cores: int, args: argparse.Namespace, topic: str, bootstrap: str, url: str, pids: list[int]
) -> dict:
    """One Spark per core count, in a child process: a JVM's master is fixed at start."""
    cmd = [
        sys.executable,
        __file__,
        "--child",
        json.dumps(
            {"cores": cores, "topic": topic, "bootstrap": bootstrap, "url": url, "pids": pids}
        ),
        "--records",
        str(args.records),
        "--record-bytes",
        str(args.record_bytes),
        "--runs",
        str(args.runs),
    ]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE).stdout
    return dict(json.loads(out))


def child(args: argparse.Namespace) -> None:
    conf = json.loads(args.child)
    from pipeline.session import local_session

    spark = local_session(f"local[{conf['cores']}]", "skiff-bench")
    spark.sparkContext.setLogLevel("ERROR")
    results: dict[str, dict[str, float]] = {}
    for path in PATHS:
        df = reader(spark, path, conf["topic"], conf["bootstrap"], conf["url"])
        time_read(df, args.records, args.record_bytes, conf["pids"])  # warm-up
        runs = [
            time_read(df, args.records, args.record_bytes, conf["pids"]) for _ in range(args.runs)
        ]
        best = results[path] = min(runs, key=lambda r: r["seconds"])
        say(
            f"local[{conf['cores']}] {path}: {best['records_per_s']:,.0f} records/s, "
            f"CPU s Spark {best['spark_cpu_s']:.2f} + Skiff {best['skiff_cpu_s']:.2f} "
            f"-> {best['records_per_cpu_s']:,.0f} records/CPU-s"
        )
    spark.stop()
    print(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--cores", default="1,2")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    work = Path(tempfile.mkdtemp(prefix="skiff-spark-bench-"))
    redis_server = start_redis(work / "redis")
    skiff = None
    try:
        skiff = start_skiff(work / "skiff.log", "--redis-url", redis_server.url)
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        seconds = produce(skiff.bootstrap, topic, args.partitions, args.records, args.record_bytes)
        say(f"produced {args.records:,} records of {args.record_bytes} B in {seconds:.1f} s")
        pids = [skiff.proc.pid, redis_server.proc.pid]
        results = {
            f"local[{cores}]": run_cores(
                int(cores), args, topic, skiff.bootstrap, redis_server.url, pids
            )
            for cores in args.cores.split(",")
        }
    finally:
        if skiff is not None:
            stop_process(skiff.proc)
        stop_process(redis_server.proc)
    summary = {"records": args.records, "record_bytes": args.record_bytes, "results": results}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{'':10} {'path':16} {'records/s':>10} {'Spark CPU s':>12} {'Skiff CPU s':>12} "
              f"{'records/CPU-s':>14}")  # fmt: skip
        for master, paths in results.items():
            for path, r in paths.items():
                print(
                    f"{master:10} {path:16} {r['records_per_s']:10,.0f} {r['spark_cpu_s']:12.2f} "
                    f"{r['skiff_cpu_s']:12.2f} {r['records_per_cpu_s']:14,.0f}"
                )


if __name__ == "__main__":
    main()
