"""bench/vs_kafka.py end to end: a tiny run of one row on a real redis-server, Skiff and
Apache Kafka broker (jars from Maven Central, the cache the other Kafka tests share), and
its failure line for a --rows filter that matches nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

BENCH = ROOT / "bench" / "vs_kafka.py"
KAFKA_VERSION = "4.2.0"  # bench/vs_kafka.py's KAFKA_VERSION


def _run(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_one_row_against_kafka_gives_verified_counts_and_ratios() -> None:
    if shutil.which("java") is None:
        pytest.skip("java is not installed (apt-get install openjdk-17-jre-headless)")
    jars = Path.home() / ".cache" / "skiff" / f"kafka-{KAFKA_VERSION}" / "lib"
    if not (jars / ".complete").exists() and shutil.which("mvn") is None:
        pytest.skip("no cached Kafka jars and no mvn to fetch them")
    out = _run(
        "--records", "2000", "--rows", "p1-none-produce-acks1", "--repeat", "2", "--json",
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout)  # stdout is the JSON object alone
    assert result["records"] == 2000
    assert result["kafka_version"] == KAFKA_VERSION
    assert result["redis_persistence"] == "none (no RDB, no AOF)"
    assert result["skiff_formats"] == ["default"]
    [row] = result["rows"]
    assert row["row"] == "p1-none-produce-acks1"
    assert (row["partitions"], row["compression"], row["kind"]) == (1, "none", "produce-acks1")
    for side in ("skiff", "kafka"):
        assert row[side]["verified_records"] == 2000
        assert row[side]["records_per_s"] > 0
        # two runs each, alternating; of two, the "median" is the faster
        runs = row[side]["runs"]
        assert len(runs) == 2
        assert row[side]["records_per_s"] == max(r["records_per_s"] for r in runs)
        # 2,000 records of 100 B: at least the values are stored, on either broker
        assert row[side]["stored_bytes"] >= 200_000
    assert set(row["skiff"]["cpu_s"]) == {"sidecar", "redis"}
    assert set(row["kafka"]["cpu_s"]) == {"jvm"}
    assert row["ratio_throughput"] == pytest.approx(
        row["skiff"]["records_per_s"] / row["kafka"]["records_per_s"], rel=1e-2
    )
    assert row["ratio_stored_bytes"] == pytest.approx(
        row["skiff"]["stored_bytes"] / row["kafka"]["stored_bytes"], rel=1e-2
    )
    # the Kafka JVM did some work in a timed produce (a CPU tick is 10 ms)
    assert row["kafka"]["cpu_s"]["jvm"] > 0 and row["ratio_cpu_per_record"] is not None
    assert set(row["loadavg_1m"]) == {"before", "after"}
    assert "p1-none-produce-acks1" in out.stderr  # the table, on stderr with --json


def test_rows_matching_nothing_fail_with_one_line() -> None:
    out = _run("--rows", "p3-*", timeout=60)
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.splitlines() == [
        "bench FAILED: --rows p3-* matches no row (p1-none-produce-acks1, ...)"
    ]
