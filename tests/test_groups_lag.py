"""Consumer lag as clients compute it: after a group consumer commits C of P records, the
lag is P - C per partition and in total, whether read through confluent-kafka's
AdminClient (list_consumer_group_offsets + watermarks), the Java AdminClient
(listConsumerGroupOffsets + listOffsets) or `skiff groups describe`.

SKIFF_TEST_KAFKA_BOOTSTRAP=HOST:PORT runs it against a real Kafka broker instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import ROOT, start_redis, start_skiff, stop_process

KAFKA_ENV = "SKIFF_TEST_KAFKA_BOOTSTRAP"
PRODUCED = {0: 40, 1: 25, 2: 35}  # P = 100
CONSUMED = 60  # C


@pytest.fixture(scope="module")
def bootstrap(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    external = os.environ.get(KAFKA_ENV)
    if external:
        yield external
        return
    redis_server = start_redis(tmp_path_factory.mktemp("lag-redis"))
    log = tmp_path_factory.mktemp("skiff-lag") / "skiff.log"
    server = start_skiff(
        log,
        "--redis-url",
        redis_server.url,
        env={"SKIFF_GROUP_INITIAL_REBALANCE_DELAY_MS": "200"},
    )
    yield server.bootstrap
    stop_process(server.proc)
    stop_process(redis_server.proc)


@pytest.fixture(scope="module")
def lagging_group(bootstrap: str) -> tuple[str, str, dict[int, int]]:
    """(topic, group, committed offsets): PRODUCED records in 3 partitions, of which a
    closed group consumer read the first CONSUMED it was given and committed its position
    in every partition (0 where it read nothing, so each partition has a lag)."""
    topic, group = f"lag-{uuid.uuid4().hex[:8]}", f"lag-group-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, len(PRODUCED), 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, count in PRODUCED.items():
        for i in range(count):
            producer.produce(topic, value=b"v%d" % i, partition=partition)
    assert producer.flush(30) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    positions = dict.fromkeys(PRODUCED, 0)
    read, deadline = 0, time.monotonic() + 60
    while read < CONSUMED:
        assert time.monotonic() < deadline, f"read {read} of {CONSUMED}"
        msg = consumer.poll(0.2)
        if msg is None or msg.error() is not None:
            continue
        read += 1
        positions[msg.partition()] = msg.offset() + 1
    consumer.commit(
        offsets=[CTopicPartition(topic, p, o) for p, o in positions.items()], asynchronous=False
    )
    consumer.close()
    return topic, group, positions


def expected_lag(positions: dict[int, int]) -> dict[int, int]:
    return {p: PRODUCED[p] - positions[p] for p in PRODUCED}


TOTAL_LAG = sum(PRODUCED.values()) - CONSUMED  # P - C


def test_confluent_admin_client_sees_the_lag(
    bootstrap: str, lagging_group: tuple[str, str, dict[int, int]]
) -> None:
    topic, group, positions = lagging_group
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = [ConsumerGroupTopicPartitions(group)]
    result = admin.list_consumer_group_offsets(request)[group].result(30)
    committed = {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic}
    assert committed == positions

    watcher = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{group}-watcher"})
    try:
        ends = {
            p: watcher.get_watermark_offsets(CTopicPartition(topic, p), timeout=30)[1]
            for p in committed
        }
    finally:
        watcher.close()
    lag = {p: ends[p] - committed[p] for p in committed}
    assert lag == expected_lag(positions)
    assert sum(lag.values()) == TOTAL_LAG


def test_skiff_groups_describe_reports_the_same_lag(
    bootstrap: str, lagging_group: tuple[str, str, dict[int, int]]
) -> None:
    topic, group, positions = lagging_group
    proc = subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", "groups", "describe", group, "--json"]
        + ["--bootstrap", bootstrap],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    described = json.loads(proc.stdout)
    lag = {r["partition"]: r["lag"] for r in described["partitions"] if r["topic"] == topic}
    assert lag == expected_lag(positions)
    assert described["total_lag"] == TOTAL_LAG


def test_java_admin_client_sees_the_lag(
    bootstrap: str, lagging_group: tuple[str, str, dict[int, int]]
) -> None:
    java = shutil.which("java")
    if java is None or shutil.which("mvn") is None:
        pytest.skip("java and mvn are needed for the Java client tool")
    from clients.java_client import build_tool

    topic, group, positions = lagging_group
    proc = subprocess.run(
        [java, "-jar", str(build_tool()), "lag", "--bootstrap", bootstrap, "--group", group],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = [r for r in answer["partitions"] if r["topic"] == topic]
    assert {r["partition"]: r["committed"] for r in rows} == positions
    assert {r["partition"]: r["end"] for r in rows} == PRODUCED
    assert {r["partition"]: r["lag"] for r in rows} == expected_lag(positions)
    assert answer["total"] == TOTAL_LAG
