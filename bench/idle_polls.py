#!/usr/bin/env python3
"""What idle long-polling consumers cost Redis: commands per second, from INFO
commandstats, with no consumer and with --consumers of them polling empty partitions.

    .venv/bin/python bench/idle_polls.py [--consumers 50] [--seconds 10] [--wait-ms 500]
        [--group] [--skiff-root DIR]

Starts its own redis-server and one sidecar (both stopped by pid at the end). Each
consumer is a confluent-kafka Consumer with fetch.wait.max.ms --wait-ms, assigned its
own partition of an empty topic at offset 0 (with --group: all subscribe as one consumer
group instead, so group heartbeats are counted too). The window opens once every
consumer has fetched twice (librdkafka's statistics) and lasts --seconds. Prints Redis
commands/s in total and per command, and the Fetch requests/s the consumers sent.
--skiff-root runs the sidecar of another checkout (e.g. `git archive main` unpacked) for
before/after figures. Results: docs/performance.md, "Idle long polls".
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench import BenchError, free_port, start_redis, stop_process, wait_for_port  # noqa: E402


def start_skiff(root: Path, redis_url: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "sidecar.cli.main",
        "serve",
        "--redis-url",
        redis_url,
        "--listen",
        f"127.0.0.1:{port}",
        "--http-listen",
        "none",
    ]
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd, cwd=root, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    wait_for_port(port, proc, "Skiff", log, timeout=120)  # a first run compiles everything
    return proc, f"127.0.0.1:{port}"


def calls(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


def window(client: redis.Redis, seconds: float) -> tuple[dict[str, float], float]:
    """Commands/s per command over `seconds` (the INFO calls themselves left out)."""
    before = calls(client)
    start = time.monotonic()
    time.sleep(seconds)
    after = calls(client)
    elapsed = time.monotonic() - start
    rates = {c: (n - before.get(c, 0)) / elapsed for c, n in after.items()}
    rates["info"] = rates.get("info", 1 / elapsed) - 1 / elapsed
    return {c: r for c, r in rates.items() if r > 0}, elapsed


def wait_until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out waiting for {what}")
        time.sleep(0.1)


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    redis_proc, url = start_redis(work, unix_socket=False)
    skiff_proc = None
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        skiff_proc, bootstrap = start_skiff(Path(args.skiff_root or ROOT), url, work / "skiff.log")
        client = redis.Redis.from_url(url)
        n = args.consumers
        topic = "idle-polls"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, max(n, 1), 1)])[topic].result(30)
        idle, _ = window(client, args.seconds)
        fetches = [0] * n
        errors: list[str] = []

        def consume(i: int) -> None:
            def stats(raw: str) -> None:
                brokers = json.loads(raw).get("brokers", {}).values()
                fetches[i] = sum(b.get("req", {}).get("Fetch", 0) for b in brokers)

            consumer = Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": "idle" if args.group else f"idle-{i}",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                    "fetch.wait.max.ms": args.wait_ms,
                    "statistics.interval.ms": 500,
                    "stats_cb": stats,
                    "error_cb": lambda e: errors.append(str(e)),
                }
            )
            if args.group:
                consumer.subscribe([topic])
            else:
                consumer.assign([TopicPartition(topic, i, 0)])
            try:
                while not stop.is_set():
                    if consumer.poll(0.2) is not None:
                        errors.append("a record arrived on an empty topic")
            finally:
                consumer.close()

        threads = [threading.Thread(target=consume, args=(i,), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        wait_until(lambda: min(fetches, default=2) >= 2, 120, "every consumer to fetch")
        sent = sum(fetches)
        busy, elapsed = window(client, args.seconds)
        fetch_rate = (sum(fetches) - sent) / elapsed
        if errors:
            raise BenchError(f"consumer errors: {errors[:3]}")
        return {
            "consumers": n,
            "group": args.group,
            "seconds": args.seconds,
            "wait_ms": args.wait_ms,
            "idle": idle,
            "busy": busy,
            "fetches_per_s": fetch_rate,
        }
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        stop_process(skiff_proc)
        stop_process(redis_proc)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--consumers", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--wait-ms", type=int, default=500)
    parser.add_argument(
        "--group", action="store_true", help="one consumer group (subscribe) instead of assign"
    )
    parser.add_argument("--skiff-root", help="run the sidecar of this checkout")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.consumers < 1 or args.seconds <= 0 or args.wait_ms <= 0:
        print("idle_polls: --consumers, --seconds and --wait-ms must be positive", file=sys.stderr)
        return 2
    try:
        with tempfile.TemporaryDirectory(prefix="skiff-idle-") as tmp:
            result = run(args, Path(tmp))
    except BenchError as exc:
        print(f"bench FAILED: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for label, key in (("0 consumers", "idle"), (f"{args.consumers} consumers", "busy")):
        rates = result[key]
        top = ", ".join(f"{c} {r:.1f}" for c, r in sorted(rates.items(), key=lambda x: -x[1])[:8])
        print(f"{label:>14}: {sum(rates.values()):7.1f} Redis commands/s  ({top or 'none'})")
    print(f"{'':>14}  {result['fetches_per_s']:7.1f} Fetch requests/s from the consumers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
