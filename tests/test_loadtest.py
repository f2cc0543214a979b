"""The locust load test (loadtest/) runs headless against a local Skiff: 60 s of mixed
produce and consume through confluent-kafka, locust's CSV report shows zero failures,
and every acknowledged record is in the log exactly once, at the offset its delivery
report named; the locust consumers read the same records without gaps."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from conftest import ROOT, RedisServer, start_skiff, stop_process

PARTITIONS = 6


def _read_jsonl(directory: Path, kind: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for path in sorted(directory.glob(f"{kind}-*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines()]
    return rows


def _read_log(bootstrap: str, topic: str) -> dict[tuple[int, int], str]:
    """Every record of the topic: (partition, offset) -> the id at the head of its value."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False}
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
            for p in range(PARTITIONS)
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        log: dict[tuple[int, int], str] = {}
        deadline = time.monotonic() + 120
        while sum(ends.values()) > len(log) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1):
                assert msg.error() is None, msg.error()
                key = (msg.partition(), msg.offset())
                assert key not in log
                log[key] = b":".join(msg.value().split(b":", 2)[:2]).decode()
        assert len(log) == sum(ends.values())
        return log
    finally:
        consumer.close()


def test_locust_mixed_scenario_no_failures_no_loss(own_redis: RedisServer, tmp_path: Path) -> None:
    skiff = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url)
    topic, report, records = "loadcheck", tmp_path / "report", tmp_path / "records"
    try:
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "loadtest",
                "--bootstrap",
                skiff.bootstrap,
                "--scenario",
                "mixed",
                "--users",
                "4",
                "--spawn-rate",
                "4",
                "--run-time",
                "60s",
                "--partitions",
                str(PARTITIONS),
                "--report-dir",
                str(report),
                "--",
                "--topic",
                topic,
                "--group",
                "loadcheck-group",
                "--record-log",
                str(records),
                "--produce-batch",
                "50",
                "--task-wait-ms",
                "50",
                "--message-size",
                "200",
                "--key-spread",
                "100",
                "--acks",
                "all",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
        assert (report / "skiff.html").stat().st_size > 0

        with open(report / "skiff_stats.csv") as f:
            stats = {(row["Type"], row["Name"]): row for row in csv.DictReader(f)}
        assert int(stats[("", "Aggregated")]["Failure Count"]) == 0
        produced_count = int(stats[("produce", topic)]["Request Count"])
        consumed_polls = int(stats[("consume", topic)]["Request Count"])
        assert produced_count > 0 and consumed_polls > 0
        assert int(stats[("produce", topic)]["Failure Count"]) == 0
        assert int(stats[("consume", topic)]["Failure Count"]) == 0
        # No request failed and no task raised: both files hold their header only.
        assert len((report / "skiff_failures.csv").read_text().splitlines()) == 1
        assert len((report / "skiff_exceptions.csv").read_text().splitlines()) == 1

        # Every delivery report locust counted is an acknowledged record, and the log holds
        # exactly those: none lost, none duplicated, each at the offset it was told.
        produced = {(r["p"], r["o"]): r["id"] for r in _read_jsonl(records, "produced")}
        assert len(produced) == produced_count
        assert len(set(produced.values())) == produced_count
        log = _read_log(skiff.bootstrap, topic)
        assert log == produced

        # The locust consumers (one group) read records that are in the log, at their
        # offsets, and per partition without a gap from offset 0.
        consumed = _read_jsonl(records, "consumed")
        assert consumed
        seen: dict[int, set[int]] = {}
        for r in consumed:
            assert log[(r["p"], r["o"])] == r["id"]
            seen.setdefault(int(r["p"]), set()).add(int(r["o"]))
        for offsets in seen.values():
            assert offsets == set(range(max(offsets) + 1))
    finally:
        stop_process(skiff.proc)
