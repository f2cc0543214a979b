"""The sample pipeline on embedded defaults, in one command (README):

    ./pipeline-demo [--orders 5000] [--source skiff|kafka] [--work-dir ./pipeline-demo-data]

Starts Skiff with its embedded Redis (`skiff serve --data-dir <work-dir>/skiff`, as
`./skiff serve` does) on a free port, generates order events into the topic `orders`,
runs pipeline/revenue.py's job on a local Spark until it has caught up with the topic,
and prints the revenue per product and window from the Parquet
output, checked against the same aggregation computed in plain Python. The work dir
(Skiff's data, Parquet, checkpoints) is emptied at the start of each run.

Exit status: 0 the check passed, 1 it did not (or Skiff failed), 2 a bad argument,
130 interrupted (Ctrl-C stops Skiff and Spark and prints one line).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import orders as orders_mod
from .revenue import Job, run

WINDOW_MS, WATERMARK_MS = 60_000, 120_000


@dataclass
class Outcome:
    spark_rows: dict[orders_mod.Key, dict]  # from the Parquet output
    expected: dict[orders_mod.Key, dict]  # plain Python over the same orders
    topic_records: int  # aggregates written to the output topic


def run_pipeline(
    spark: Any,
    bootstrap: str,
    redis_url: str | None,
    work: Path,
    *,
    count: int = 5000,
    source: str = "skiff",
    input_topic: str = "orders",
    output_topic: str = "revenue",
    seed: int = 7,
) -> Outcome:
    """Generates the orders, runs the job once over them and collects both answers."""
    start_ms = 1_700_000_000_000
    events = orders_mod.generate(
        count, start_ms, span_ms=10 * WINDOW_MS, disorder_ms=30_000, seed=seed
    )
    orders_mod.produce(bootstrap, input_topic, events)
    job = Job(
        bootstrap,
        redis_url,
        input_topic,
        output_topic,
        str(work / "revenue.parquet"),
        str(work / "checkpoints"),
        source=source,
        window="1 minute",
        watermark="2 minutes",
    )
    run(spark, job)
    rows = spark.read.parquet(job.parquet_dir).selectExpr(
        "unix_millis(window_start) AS start", "product", "revenue", "orders", "quantity"
    )
    got = {
        (r.start, r.product): {"revenue": r.revenue, "orders": r.orders, "quantity": r.quantity}
        for r in rows.collect()
    }
    out_fmt = "skiff" if source == "skiff" else "kafka"
    reader = spark.read.format(out_fmt).option("kafka.bootstrap.servers", bootstrap)
    reader = (
        reader.option("topics", output_topic)
        if out_fmt == "skiff"
        else reader.option("subscribe", output_topic)
    )
    written = reader.load().count()
    return Outcome(got, orders_mod.expected_revenue(events, WINDOW_MS, WATERMARK_MS), written)


def same(got: dict, expected: dict) -> bool:
    if got.keys() != expected.keys():
        return False
    return all(
        got[k]["revenue"] == expected[k]["revenue"]
        and got[k]["orders"] == expected[k]["orders"]
        and got[k]["quantity"] == expected[k]["quantity"]
        for k in got
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_embedded_skiff(data_dir: Path, log: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    """`skiff serve` without --redis-url: its own redis-server on a unix socket in data_dir."""
    port = _free_port()
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sidecar.cli.main", "serve", "--listen", f"127.0.0.1:{port}",
             "--data-dir", str(data_dir), "--http-listen", "none"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        _wait_listening(proc, port, log)
    except BaseException:  # Ctrl-C included: no Skiff left behind
        _stop(proc)
        raise
    return proc, f"127.0.0.1:{port}", f"unix://{(data_dir / 'redis.sock').resolve()}"


def _wait_listening(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"skiff exited ({proc.returncode}); see {log}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"skiff did not listen on {port}; see {log}") from None
            time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main() -> None:
    try:
        sys.exit(_main())
    except KeyboardInterrupt:
        print("[demo] interrupted; Skiff stopped", file=sys.stderr)
        sys.exit(130)
    except RuntimeError as exc:  # Skiff did not start
        print(f"[demo] error: {exc}", file=sys.stderr)
        sys.exit(1)


def _main() -> int:
    parser = argparse.ArgumentParser(prog="pipeline-demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=_positive, default=5000)
    parser.add_argument("--source", choices=("skiff", "kafka"), default="skiff")
    parser.add_argument("--work-dir", type=Path, default=Path("pipeline-demo-data"))
    args = parser.parse_args()
    work: Path = args.work_dir.resolve()
    shutil.rmtree(work, ignore_errors=True)
    try:
        work.mkdir(parents=True)
    except OSError as exc:
        print(
            f"pipeline-demo: error: --work-dir {str(work)!r}: {exc.strerror or exc}; "
            "pick a directory you can write",
            file=sys.stderr,
        )
        return 2
    print(f"[demo] starting Skiff with its embedded Redis in {work / 'skiff'}", flush=True)
    proc, bootstrap, redis_url = start_embedded_skiff(work / "skiff", work / "skiff.log")
    try:
        from .session import local_session

        spark = local_session("local[2]", "skiff-demo")
        spark.sparkContext.setLogLevel("ERROR")
        print(f"[demo] {args.orders} orders -> topic orders; job source: {args.source}", flush=True)
        outcome = run_pipeline(
            spark, bootstrap, redis_url, work, count=args.orders, source=args.source
        )
        (
            spark.read.parquet(str(work / "revenue.parquet"))
            .orderBy("window_start", "product")
            .show(20, truncate=False)
        )
        spark.stop()
    finally:
        _stop(proc)
    ok = same(outcome.spark_rows, outcome.expected)
    print(
        f"[demo] {len(outcome.spark_rows)} (window, product) aggregates in "
        f"{work / 'revenue.parquet'}, {outcome.topic_records} records in topic revenue; "
        f"plain-Python check: {'OK' if ok else 'MISMATCH'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    main()
