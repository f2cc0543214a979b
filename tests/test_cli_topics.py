"""`skiff topics list|create|describe|alter|delete` and `skiff records delete-before`
(sidecar/cli/topics.py) run as a subprocess, each test against Skiff and against a real
Apache Kafka broker (started from the jars tools/kafka_reference caches), so the
commands and their answers are checked to be the same on both.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import ROOT, start_redis, start_skiff, stop_process

KAFKA_VERSION = "4.4.0"


@dataclass(frozen=True)
class Target:
    name: str  # "skiff" or "kafka"
    bootstrap: str


def _kafka(tmp: Path) -> Iterator[Target]:
    if shutil.which("java") is None:
        pytest.skip("java is not installed (apt-get install openjdk-17-jre-headless)")
    jars = Path.home() / ".cache" / "skiff" / f"kafka-{KAFKA_VERSION}" / "lib"
    if not (jars / ".complete").exists() and shutil.which("mvn") is None:
        pytest.skip("no cached Kafka jars and no mvn to fetch them")
    sys.path.insert(0, str(ROOT / "tools"))
    import kafka_reference  # tools/kafka_reference: the broker start-up it uses

    with kafka_reference.running_kafka(KAFKA_VERSION, tmp, 120) as (port, _):
        yield Target("kafka", f"127.0.0.1:{port}")


@pytest.fixture(scope="module", params=["skiff", "kafka"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    with tempfile.TemporaryDirectory(prefix=f"topics-cli-{request.param}-") as tmp_dir:
        tmp = Path(tmp_dir)
        if request.param == "kafka":
            yield from _kafka(tmp)
            return
        redis_server = start_redis(tmp / "redis")
        server = start_skiff(tmp / "skiff.log", "--redis-url", redis_server.url)
        try:
            yield Target("skiff", server.bootstrap)
        finally:
            stop_process(server.proc)
            stop_process(redis_server.proc)


@pytest.fixture
def name() -> str:
    return f"cli-{uuid.uuid4().hex[:10]}"


# -- helpers -----------------------------------------------------------------------------------


def skiff(target: Target, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", *args, "--bootstrap", target.bootstrap],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check:
        assert proc.returncode == 0, f"{args}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def skiff_json(target: Target, *args: str) -> Any:
    return json.loads(skiff(target, *args, "--json").stdout)


def fails(target: Target, *args: str) -> str:
    """stderr of a command that must exit 1."""
    proc = skiff(target, *args, check=False)
    assert proc.returncode == 1, f"{args}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stderr


def refused(target: Target, *args: str) -> str:
    """stderr of a command refused before any request: exit 2, one line."""
    proc = skiff(target, *args, check=False)
    assert proc.returncode == 2, f"{args}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc.stderr


def produce(target: Target, topic: str, counts: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 5})
    for partition, count in counts.items():
        for i in range(count):
            producer.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


def listed(target: Target) -> dict[str, Any]:
    return {t["topic"]: t for t in skiff_json(target, "topics", "list")}


def describe(target: Target, topic: str) -> dict[str, Any]:
    [found] = skiff_json(target, "topics", "describe", topic)
    return dict(found)


def configs(target: Target, topic: str) -> dict[str, tuple[str | None, str]]:
    return {c["name"]: (c["value"], c["source"]) for c in describe(target, topic)["configs"]}


# -- create, list, describe, delete --------------------------------------------------------------


def test_create_list_describe_delete(target: Target, name: str) -> None:
    created = skiff_json(
        target, "topics", "create", name, "--partitions", "3", "--config", "retention.ms=3600000"
    )
    assert created["created"] is True
    assert (created["topic"], created["partitions"], created["replication_factor"]) == (name, 3, 1)
    assert len(created["topic_id"]) == 22  # Kafka's base64 form
    given = {c["name"]: (c["value"], c["source"]) for c in created["configs"]}
    assert given["retention.ms"] == ("3600000", "DYNAMIC_TOPIC_CONFIG")
    assert given["cleanup.policy"] == ("delete", "DEFAULT_CONFIG")

    produce(target, name, {0: 5, 1: 2})
    found = listed(target)[name]
    assert found == {
        "topic": name,
        "partitions": 3,
        "topic_id": created["topic_id"],
        "internal": False,
    }
    text = skiff(target, "topics", "list").stdout
    assert text.splitlines()[0].split() == ["TOPIC", "PARTITIONS", "TOPIC-ID"]
    assert [name, "3", created["topic_id"]] in [line.split() for line in text.splitlines()]

    described = describe(target, name)
    assert described["topic_id"] == created["topic_id"]
    assert described["replication_factor"] == 1
    assert [
        (p["partition"], p["log_start_offset"], p["high_watermark"])
        for p in described["partitions"]
    ] == [(0, 0, 5), (1, 0, 2), (2, 0, 0)]
    for p in described["partitions"]:
        assert p["leader"] >= 0 and p["replicas"] == [p["leader"]] == p["isr"]
    text = skiff(target, "topics", "describe", name).stdout
    lines = text.splitlines()
    assert lines[0].split() == [
        "Topic:",
        name,
        "TopicId:",
        created["topic_id"],
        "Partitions:",
        "3",
        "ReplicationFactor:",
        "1",
        # Skiff's storage format (a broker that does not report it: not shown)
        *(["Format:", "batch"] if target.name == "skiff" else []),
    ]
    header = lines.index(next(line for line in lines if line.startswith("PARTITION")))
    assert lines[header].split() == [
        "PARTITION",
        "LEADER",
        "REPLICAS",
        "ISR",
        "LOG-START",
        "HIGH-WATERMARK",
    ]
    leader = str(described["partitions"][0]["leader"])
    assert lines[header + 1].split() == ["0", leader, leader, leader, "0", "5"]

    assert skiff(target, "topics", "delete", name).stdout == f"Deleted topic {name!r}.\n"
    assert name not in listed(target)
    error = fails(target, "topics", "describe", name)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in error
    # A new topic of the same name starts empty, with a new id.
    again = skiff_json(target, "topics", "create", name)
    assert again["partitions"] == 1 and again["topic_id"] != created["topic_id"]
    assert [p["high_watermark"] for p in describe(target, name)["partitions"]] == [0]
    skiff(target, "topics", "delete", name)


def test_storage_format(target: Target, name: str) -> None:
    """create --format (or --config skiff.storage.format) sets it, describe shows it,
    alter refuses it before sending; Kafka refuses the name."""
    if target.name == "kafka":
        error = fails(target, "topics", "create", name, "--format", "batch")
        assert "Unknown topic config name: skiff.storage.format" in error
        return
    created = skiff_json(target, "topics", "create", name, "--format", "batch")
    given = {c["name"]: (c["value"], c["source"]) for c in created["configs"]}
    assert given["skiff.storage.format"] == ("batch", "DYNAMIC_TOPIC_CONFIG")
    assert describe(target, name)["storage_format"] == "batch"
    first = skiff(target, "topics", "describe", name).stdout.splitlines()[0]
    assert first.split()[-2:] == ["Format:", "batch"]
    assert configs(target, name)["skiff.storage.format"] == ("batch", "DYNAMIC_TOPIC_CONFIG")
    plain = name + "-r"
    skiff(target, "topics", "create", plain, "--config", "skiff.storage.format=record")
    assert configs(target, plain)["skiff.storage.format"] == ("record", "DYNAMIC_TOPIC_CONFIG")
    error = refused(target, "topics", "alter", name, "--config", "skiff.storage.format=record")
    assert "INVALID_CONFIG (skiff.storage.format is fixed when a topic is created" in error
    error = refused(
        target, "topics", "create", name + "-x", "--format", "batch",
        "--config", "skiff.storage.format=record",
    )  # fmt: skip
    assert "--format batch and --config skiff.storage.format=record disagree" in error
    for topic in (name, plain):
        skiff(target, "topics", "delete", topic)


def test_create_refusals(target: Target, name: str) -> None:
    skiff(target, "topics", "create", name)
    error = fails(target, "topics", "create", name)
    assert f"TOPIC_ALREADY_EXISTS (Topic '{name}' already exists.)" in error
    assert "--if-not-exists" in error
    assert skiff(target, "topics", "create", name, "--if-not-exists").stdout == (
        f"Topic {name!r} exists already.\n"
    )
    cases = [
        ((f"{name}-p", "--partitions", "0"), "INVALID_PARTITIONS"),
        ((f"{name}-r", "--replication-factor", "3"), "INVALID_REPLICATION_FACTOR"),
    ]
    for args, code in cases:
        error = fails(target, "topics", "create", *args)
        assert f": {code}" in error, error
        assert len(error.strip().splitlines()) == 2, error  # the error, then what to do
    # What the broker would refuse by its rules alone is refused before any request
    # (sidecar/validation): one line, exit 2.
    local = [
        (("bad/name",), "INVALID_TOPIC_EXCEPTION"),
        (("x" * 250,), "INVALID_TOPIC_EXCEPTION"),
        ((f"{name}-c", "--config", "no.such.config=1"), "INVALID_CONFIG"),
        ((f"{name}-v", "--config", "retention.ms=soon"), "INVALID_CONFIG"),
    ]
    for args, code in local:
        error = refused(target, "topics", "create", *args)
        assert f": {code}" in error, error
    valid = skiff(target, "topics", "create", f"{name}-vo", "--partitions", "2", "--validate-only")
    assert "could be created (nothing was)" in valid.stdout
    topics = listed(target)
    assert name in topics
    assert not {f"{name}-p", f"{name}-r", f"{name}-c", f"{name}-v", f"{name}-vo"} & set(topics)

    error = fails(target, "topics", "delete", f"{name}-missing")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in error
    gone = skiff(target, "topics", "delete", f"{name}-missing", name, "--if-exists")
    assert gone.stdout == f"Topic '{name}-missing' does not exist.\nDeleted topic {name!r}.\n"


def test_unreachable_broker_says_what_to_do() -> None:
    proc = skiff(Target("skiff", "127.0.0.1:1"), "topics", "list", "--timeout", "5", check=False)
    assert proc.returncode == 1
    assert "cannot connect to 127.0.0.1:1" in proc.stderr
    assert "Is Skiff running at 127.0.0.1:1?" in proc.stderr


# -- configs -------------------------------------------------------------------------------------


def test_describe_configs(target: Target, name: str) -> None:
    skiff(target, "topics", "create", name, "--config", "retention.ms=3600000")
    found = configs(target, name)
    assert found["retention.ms"] == ("3600000", "DYNAMIC_TOPIC_CONFIG")
    assert found["cleanup.policy"] == ("delete", "DEFAULT_CONFIG")
    assert found["max.message.bytes"] == ("1048588", "DEFAULT_CONFIG")
    text = skiff(target, "topics", "describe", name).stdout
    rows = [line.split() for line in text.splitlines()]
    assert ["CONFIG", "VALUE", "SOURCE"] in rows
    assert ["retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"] in rows
    assert ["cleanup.policy", "delete", "DEFAULT_CONFIG"] not in rows  # defaults hidden
    everything = skiff(target, "topics", "describe", name, "--all-configs").stdout
    assert ["cleanup.policy", "delete", "DEFAULT_CONFIG"] in [
        line.split() for line in everything.splitlines()
    ]
    skiff(target, "topics", "delete", name)


def test_alter_configs(target: Target, name: str) -> None:
    skiff(target, "topics", "create", name)
    out = skiff(
        target,
        "topics",
        "alter",
        name,
        "--config",
        "retention.ms=1000",
        "--config",
        "cleanup.policy=compact",
    ).stdout
    assert out == f"Altered: topic {name!r}: set retention.ms=1000; set cleanup.policy=compact\n"
    found = configs(target, name)
    assert found["retention.ms"] == ("1000", "DYNAMIC_TOPIC_CONFIG")
    assert found["cleanup.policy"] == ("compact", "DYNAMIC_TOPIC_CONFIG")
    skiff(target, "topics", "alter", name, "--append-config", "cleanup.policy=delete")
    assert configs(target, name)["cleanup.policy"] == ("compact,delete", "DYNAMIC_TOPIC_CONFIG")
    skiff(target, "topics", "alter", name, "--subtract-config", "cleanup.policy=compact")
    assert configs(target, name)["cleanup.policy"] == ("delete", "DYNAMIC_TOPIC_CONFIG")
    skiff(target, "topics", "alter", name, "--delete-config", "retention.ms")
    assert configs(target, name)["retention.ms"] == ("604800000", "DEFAULT_CONFIG")

    error = refused(target, "topics", "alter", name, "--config", "retention.ms=soon")
    assert "INVALID_CONFIG" in error
    error = refused(target, "topics", "alter", name, "--config", "no.such.config=1")
    assert "INVALID_CONFIG" in error
    checked = skiff(
        target, "topics", "alter", name, "--config", "retention.ms=5000", "--validate-only"
    )
    assert checked.stdout.startswith("Valid (nothing applied)")
    assert configs(target, name)["retention.ms"] == ("604800000", "DEFAULT_CONFIG")
    error = fails(target, "topics", "alter", f"{name}-missing", "--config", "retention.ms=1")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in error
    skiff(target, "topics", "delete", name)


# -- partitions ---------------------------------------------------------------------------------


def test_alter_partitions(target: Target, name: str) -> None:
    skiff(target, "topics", "create", name, "--partitions", "2")
    out = skiff(target, "topics", "alter", name, "--partitions", "4").stdout
    assert out == f"Altered: topic {name!r}: partitions: 4\n"
    assert len(describe(target, name)["partitions"]) == 4
    produce(target, name, {3: 2})
    assert describe(target, name)["partitions"][3]["high_watermark"] == 2
    error = fails(target, "topics", "alter", name, "--partitions", "3")
    assert "INVALID_PARTITIONS" in error and "can only be added" in error
    skiff(target, "topics", "alter", name, "--partitions", "6", "--validate-only")
    assert len(describe(target, name)["partitions"]) == 4
    skiff(target, "topics", "delete", name)


# -- records delete-before ---------------------------------------------------------------------


def test_records_delete_before(target: Target, name: str) -> None:
    skiff(target, "topics", "create", name, "--partitions", "2")
    produce(target, name, {0: 10, 1: 4})
    result = skiff_json(
        target, "records", "delete-before", name, "--partition", "0", "--offset", "6"
    )
    assert result == {
        "topic": name,
        "partitions": [
            {"partition": 0, "old_log_start_offset": 0, "log_start_offset": 6, "error": None}
        ],
    }
    starts = [
        (p["log_start_offset"], p["high_watermark"]) for p in describe(target, name)["partitions"]
    ]
    assert starts == [(6, 10), (0, 4)]
    consumer = Consumer(  # offset 0 is now out of range: auto.offset.reset applies
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": name,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(name, 0, 0)])
    values = []
    while len(values) < 4:
        msg = consumer.poll(10)
        assert msg is not None
        if msg.error() is None:
            values.append((msg.offset(), msg.value()))
    consumer.close()
    assert values == [(i, f"0-{i}".encode()) for i in range(6, 10)]

    text = skiff(target, "records", "delete-before", name, "--all").stdout
    assert [line.split() for line in text.splitlines()] == [
        ["TOPIC", "PARTITION", "OLD-LOG-START", "LOG-START", "ERROR"],
        [name, "0", "6", "10", "-"],
        [name, "1", "0", "4", "-"],
    ]
    error = fails(target, "records", "delete-before", name, "--offset", "100")
    assert "OFFSET_OUT_OF_RANGE" in error and "--all" in error
    error = fails(target, "records", "delete-before", name, "--partition", "7", "--offset", "1")
    assert f"topic {name!r} has no partition 7" in error
    skiff(target, "topics", "delete", name)
