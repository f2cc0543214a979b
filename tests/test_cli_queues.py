"""`skiff queues list|describe|redrive` as a subprocess against a running sidecar's HTTP
endpoint, with records dead-lettered by rejecting them through the HTTP API."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any

import pytest
from conftest import ROOT, Skiff
from test_queues_http import Api, configure, create_topic, produce, read, settle


def skiff_queues(skiff: Skiff, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sidecar.cli.main",
            "queues",
            *args,
            "--http",
            f"http://127.0.0.1:{skiff.http_port}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check:
        assert proc.returncode == 0, f"{args}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def as_json(skiff: Skiff, *args: str) -> Any:
    return json.loads(skiff_queues(skiff, *args, "--json").stdout)


@pytest.mark.parametrize("fmt", ["record", "batch"])
def test_describe_and_redrive(skiff: Skiff, fmt: str) -> None:
    tag = uuid.uuid4().hex[:10]
    topic, group, dlq = f"ct-{tag}", f"cg-{tag}", f"ct-{tag}-dlq"
    create_topic(skiff.bootstrap, topic, fmt=fmt)
    produce(skiff.bootstrap, topic, [b"one", b"two", b"three", b"four"])
    api = Api(skiff.http_port)
    # A lock far longer than the test: offset 2 stays leased while the CLI runs (each
    # run starts a Python process, slow on a loaded machine).
    configure(api, group, dead_letter_topic=dlq, lock_ms=600_000)
    recs = read(api, group, topic, "w", 3)
    assert settle(api, group, "reject", "w", recs[:2])[0] == 200
    desc = as_json(skiff, "describe", group)
    (part,) = desc["partitions"]
    assert (part["committed_offset"], part["pending"], part["lag"]) == (2, 1, 2)
    assert part["holders"] == {"w": 1} and part["delivery_counts"] == {"1": 1}
    table = skiff_queues(skiff, "describe", group).stdout
    assert f"Queue group: {group}" in table and f"dead letters: {dlq}" in table
    row = next(line for line in table.splitlines() if line.startswith(topic))
    assert row.split()[:6] == [topic, "0", "2", "4", "2", "1"]
    assert group in as_json(skiff, "list")
    # Redrive: the two rejected records go back to the end of the topic, once.
    out = skiff_queues(skiff, "redrive", group, "--limit", "1").stdout
    assert out.startswith("Moved 1 record(s)")
    assert as_json(skiff, "redrive", group)["moved"] == 1
    assert as_json(skiff, "redrive", group)["moved"] == 0
    again = read(api, group, topic, "w2", 10)
    assert [(r["offset"], r["value"]) for r in again] == [(3, "four"), (4, "one"), (5, "two")]
    # Errors: unknown group, nothing listening.
    proc = skiff_queues(skiff, "describe", f"nope-{tag}", check=False)
    assert proc.returncode == 1 and "does not exist (GROUP_NOT_FOUND)" in proc.stderr
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sidecar.cli.main",
            "queues",
            "list",
            "--http",
            "http://127.0.0.1:1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and "cannot reach" in proc.stderr
    api.close()


def test_kafka_consumer_groups_shows_the_queue_depth(skiff: Skiff) -> None:
    """Kafka's own kafka-consumer-groups --describe: the queue group's current offset is
    its lowest unfinished offset, so LAG is the records not finished."""
    from kafka_tools import ToolsUnavailable, run_tool

    tag = uuid.uuid4().hex[:10]
    topic, group = f"kt-{tag}", f"kg-{tag}"
    create_topic(skiff.bootstrap, topic)
    produce(skiff.bootstrap, topic, [b"a", b"b", b"c", b"d", b"e"])
    api = Api(skiff.http_port)
    configure(api, group)
    recs = read(api, group, topic, "w", 3)
    assert settle(api, group, "acknowledge", "w", recs[:2])[0] == 200  # 0, 1 done; 2 held
    api.close()
    try:
        proc = run_tool(
            "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
            "--bootstrap-server",
            skiff.bootstrap,
            "--describe",
            "--group",
            group,
        )
    except ToolsUnavailable as exc:
        pytest.skip(f"no Kafka tools: {exc}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    row = next(line.split() for line in proc.stdout.splitlines() if topic in line)
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
    assert row[:6] == [group, topic, "0", "2", "5", "3"], proc.stdout
