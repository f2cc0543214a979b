"""Topic administration against Skiff and, for the same calls, a real Apache Kafka 4.4.0
broker: Kafka's own `kafka-topics` tool (TopicCommand, the Java AdminClient) and
confluent-kafka's AdminClient create, describe, grow and delete topics and describe
the cluster; bad input is refused with Kafka's codes and messages and leaves nothing in
Redis; new partitions start at offset 0 and existing data is untouched; two sidecars
growing one topic at once lose nothing.

The reference broker runs once per module (tests/kafka_tools.py; java and mvn needed,
the tests are skipped without them).
"""

from __future__ import annotations

import json
import re
import struct
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from clients import java_client
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from conftest import RedisServer, Skiff, start_skiff, stop_process
from kafka_tools import ToolsUnavailable, kafka_topics, reference_kafka
from rawkafka import RawKafka, build_batch, produce_request


@pytest.fixture(scope="module")
def kafka() -> Iterator[str]:
    try:
        with reference_kafka(version="4.4.0") as bootstrap:
            yield bootstrap
    except ToolsUnavailable as exc:
        pytest.skip(f"no reference Kafka: {exc}")


def name(label: str) -> str:
    return f"adm-{label}-{uuid.uuid4().hex[:8]}"


def redis_keys(skiff_redis: RedisServer, topic: str) -> list[bytes]:
    """Every Redis key that mentions the topic, and its registry entry if any."""
    r = skiff_redis.client()
    found = list(r.scan_iter(match=f"*{topic}*"))
    if r.hexists("skiff:topics", topic):
        found.append(b"skiff:topics[" + topic.encode() + b"]")
    return found


# -- kafka-topics -------------------------------------------------------------------------------


def _describe_lines(stdout: str) -> list[str]:
    """kafka-topics --describe output without what must differ between brokers (topic
    ids, node ids, and ELR columns: Skiff does not serve DescribeTopicPartitions, so the
    tool falls back to Metadata and prints N/A)."""
    out = []
    for line in stdout.splitlines():
        line = re.sub(r"TopicId: \S+", "TopicId: <id>", line)
        line = re.sub(r"(Leader|Replicas|Isr): \d+", r"\1: <node>", line)
        line = re.sub(r"\tElr:.*", "", line)
        out.append(line.rstrip())
    return out


def _error_line(result: Any) -> str:
    """The tool's error line (kafka-topics prints it on stdout)."""
    for line in (result.stdout + result.stderr).splitlines():
        if line.startswith("Error while executing topic command"):
            return line
    return ""


def test_kafka_topics_create_describe_alter_delete_like_kafka(
    kafka: str, skiff: Skiff, redis_server: RedisServer
) -> None:
    topic = name("kt")
    steps = [
        ("--create", "--topic", topic, "--partitions", "2", "--config", "retention.ms=1000"),
        ("--create", "--topic", topic, "--partitions", "2"),  # exists: refused
        ("--describe", "--topic", topic),
        ("--alter", "--topic", topic, "--partitions", "4"),
        ("--alter", "--topic", topic, "--partitions", "3"),  # shrinking: refused
        ("--alter", "--topic", topic, "--partitions", "4"),  # same count: refused
        ("--describe", "--topic", topic),
        ("--delete", "--topic", topic),
    ]
    answers: dict[str, list[tuple[int, list[str], str]]] = {}
    for side, bootstrap in (("kafka", kafka), ("skiff", skiff.bootstrap)):
        answers[side] = []
        for args in steps:
            result = kafka_topics(bootstrap, *args)
            answers[side].append(
                (result.returncode, _describe_lines(result.stdout), _error_line(result))
            )
    assert answers["skiff"] == answers["kafka"]
    codes = [a[0] for a in answers["skiff"]]
    assert codes == [0, 1, 0, 0, 1, 1, 0, 0]
    assert answers["skiff"][0][1] == [f"Created topic {topic}."]
    assert answers["skiff"][1][2].endswith(f"Topic '{topic}' already exists.")
    assert answers["skiff"][4][2].endswith(
        f"The topic {topic} currently has 4 partition(s); 3 would not be an increase."
    )
    assert answers["skiff"][5][2].endswith("Topic already has 4 partition(s).")
    described = answers["skiff"][6][1]
    assert described[0] == (
        f"Topic: {topic}\tTopicId: <id>\tPartitionCount: 4\tReplicationFactor: 1\t"
        # min.insync.replicas: a dynamic cluster default on Kafka 4 (KIP-966), so listed
        "Configs: min.insync.replicas=1,retention.ms=1000"
    )
    assert len(described) == 5
    assert redis_keys(redis_server, topic) == []  # deleted: no key left


@pytest.mark.parametrize(
    "args",
    [
        ("--topic", "bad/name", "--partitions", "1"),
        ("--topic", "x" * 250, "--partitions", "1"),
        ("--topic", "..", "--partitions", "1"),
        ("--topic", "{topic}", "--partitions", "0"),
        ("--topic", "{topic}", "--partitions", "1", "--replication-factor", "3"),
        ("--topic", "{topic}", "--partitions", "1", "--config", "retention.ms=soon"),
        ("--topic", "{topic}", "--partitions", "1", "--config", "no.such.config=1"),
        ("--topic", "{topic}", "--partitions", "1", "--config", "cleanup.policy=sometimes"),
    ],
    ids=[
        "illegal-chars",
        "250-chars",
        "dotdot",
        "zero-partitions",
        "replication-3",
        "config-wrong-type",
        "config-unknown",
        "config-bad-choice",
    ],
)
def test_kafka_topics_refuses_bad_input_like_kafka(
    kafka: str, skiff: Skiff, redis_server: RedisServer, args: tuple[str, ...]
) -> None:
    topic = name("bad")
    args = tuple(a.replace("{topic}", topic) for a in args)
    got = {}
    for side, bootstrap in (("kafka", kafka), ("skiff", skiff.bootstrap)):
        result = kafka_topics(bootstrap, "--create", *args)
        got[side] = (result.returncode, _error_line(result))
    assert got["skiff"] == got["kafka"]
    assert got["skiff"][0] == 1 and got["skiff"][1]
    assert redis_keys(redis_server, topic) == []
    listed = kafka_topics(skiff.bootstrap, "--list")
    assert topic not in listed.stdout.split()


# -- confluent-kafka's AdminClient -----------------------------------------------------------


def _outcome(future: Any) -> tuple[str, str]:
    """(error name, message) of an AdminClient future; ("NO_ERROR", "") when it worked."""
    try:
        future.result(timeout=30)
    except KafkaException as exc:
        err = exc.args[0]
        return err.name(), err.str()
    return "NO_ERROR", ""


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})


def test_confluent_admin_create_grow_delete_like_kafka(
    kafka: str, skiff: Skiff, redis_server: RedisServer
) -> None:
    base = name("ck")
    got: dict[str, list[tuple[str, str]]] = {}
    for side, bootstrap in (("kafka", kafka), ("skiff", skiff.bootstrap)):
        admin = _admin(bootstrap)
        out = got[side] = []
        creates = [
            NewTopic(base, 2, 1, config={"retention.ms": "1000"}),
            NewTopic(f"{base}-bad name", 1, 1),
            NewTopic(f"{base}-rf", 1, 3),
            NewTopic(f"{base}-cfg", 1, 1, config={"max.message.bytes": "big"}),
            NewTopic(f"{base}-unknown-cfg", 1, 1, config={"segment.color": "red"}),
        ]
        out += [_outcome(f) for f in admin.create_topics(creates).values()]
        out += [_outcome(f) for f in admin.create_topics([NewTopic(base, 2, 1)]).values()]
        out += [_outcome(f) for f in admin.create_partitions([NewPartitions(base, 5)]).values()]
        out += [_outcome(f) for f in admin.create_partitions([NewPartitions(base, 3)]).values()]
        out += [
            _outcome(f)
            for f in admin.create_partitions([NewPartitions(base, 6)], validate_only=True).values()
        ]
        # A KRaft broker's metadata cache catches up with CreatePartitions asynchronously
        # (under load it answered 2 for a while): wait for the grown count, up to a
        # deadline, then record what is seen.
        deadline = time.monotonic() + 30
        while True:
            meta = admin.list_topics(base, timeout=30)
            seen = len(meta.topics[base].partitions)
            if seen == 5 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        out.append(("partitions", str(seen)))
        cluster = admin.describe_cluster().result(timeout=30)
        out.append(("cluster", f"{len(cluster.nodes)} node(s), {cluster.controller is not None}"))
        out += [_outcome(f) for f in admin.delete_topics([base]).values()]
        out += [_outcome(f) for f in admin.delete_topics([f"{base}-never"]).values()]
    assert got["skiff"] == got["kafka"]
    assert got["skiff"][:5] == [
        ("NO_ERROR", ""),
        (
            "TOPIC_EXCEPTION",
            f"Topic name is invalid: '{base}-bad name' contains one or more characters other "
            "than ASCII alphanumerics, '.', '_' and '-'",
        ),
        (
            "INVALID_REPLICATION_FACTOR",
            "Unable to replicate the partition 3 time(s): The target replication factor of 3 "
            "cannot be reached because only 1 broker(s) are registered or some brokers have "
            "all their log directories cordoned.",
        ),
        (
            "INVALID_CONFIG",
            "Invalid value big for configuration max.message.bytes: Not a number of type INT",
        ),
        ("INVALID_CONFIG", "Unknown topic config name: segment.color"),
    ]
    assert got["skiff"][5] == ("TOPIC_ALREADY_EXISTS", f"Topic '{base}' already exists.")
    assert got["skiff"][7][0] == "INVALID_PARTITIONS"
    assert got["skiff"][9] == ("partitions", "5")
    for suffix in ("-bad name", "-rf", "-cfg", "-unknown-cfg"):
        assert redis_keys(redis_server, base + suffix) == []
    assert redis_keys(redis_server, base) == []


def test_describe_cluster_lists_every_sidecar(own_redis: RedisServer, tmp_path: Path) -> None:
    sidecars = [
        start_skiff(tmp_path / f"s{i}.log", "--redis-url", own_redis.url, "--node-id", str(i))
        for i in (3, 5)
    ]
    try:
        for s in sidecars:
            admin = _admin(s.bootstrap)  # keep the client alive while its future runs
            deadline = time.monotonic() + 30
            while True:  # a sidecar sees the other once it re-reads the registry (2 s)
                cluster = admin.describe_cluster().result(timeout=30)
                if len(cluster.nodes) == 2 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert sorted((n.id, n.port) for n in cluster.nodes) == [
                (3, sidecars[0].port),
                (5, sidecars[1].port),
            ]
            assert cluster.controller.id == 3  # the lowest live node id, on every sidecar
            assert cluster.cluster_id == own_redis.client().get("skiff:cluster_id").decode()
            # v2 (KIP-1073) may ask for fenced brokers: a live sidecar is never fenced.
            with RawKafka("127.0.0.1", s.port) as kafka:
                body = {"include_cluster_authorized_operations": False}
                resp = kafka.request(60, 2, {**body, "include_fenced_brokers": True})
            assert sorted((b.broker_id, b.is_fenced) for b in resp.brokers) == [
                (3, False),
                (5, False),
            ]
    finally:
        for s in sidecars:
            stop_process(s.proc)


# -- partitions: data, offsets, concurrency ---------------------------------------------------


def test_new_partitions_start_at_zero_and_old_data_stays(skiff: Skiff) -> None:
    topic = name("grow")
    admin = _admin(skiff.bootstrap)
    assert _outcome(admin.create_topics([NewTopic(topic, 1, 1)])[topic]) == ("NO_ERROR", "")
    first = [{"key": b"k", "value": f"v{i}".encode(), "partition": 0} for i in range(5)]
    java_client.produce(skiff.bootstrap, topic, first)
    assert _outcome(admin.create_partitions([NewPartitions(topic, 3)])[topic]) == ("NO_ERROR", "")
    later = [{"value": b"p1", "partition": 1}, {"value": b"p2", "partition": 2}]
    meta = java_client.produce(skiff.bootstrap, topic, later)
    assert [(m["partition"], m["offset"]) for m in meta] == [(1, 0), (2, 0)]
    old = java_client.consume(skiff.bootstrap, topic, 0, 0, 5)
    assert [(r["offset"], r["value"]) for r in old] == [(i, f"v{i}".encode()) for i in range(5)]
    for p, value in ((1, b"p1"), (2, b"p2")):
        [record] = java_client.consume(skiff.bootstrap, topic, p, 0, 1)
        assert (record["offset"], record["value"]) == (0, value)
    consumer = Consumer({"bootstrap.servers": skiff.bootstrap, "group.id": topic})
    try:
        marks = [consumer.get_watermark_offsets(TopicPartition(topic, p), 10) for p in range(3)]
    finally:
        consumer.close()
    assert marks == [(0, 5), (0, 1), (0, 1)]


def test_two_sidecars_growing_one_topic_at_once(own_redis: RedisServer, tmp_path: Path) -> None:
    """CreatePartitions from two sidecars in parallel: each grows by one from what it
    read, so with compare-and-set every request lands exactly once (or is refused as
    no longer an increase) and the count never goes down."""
    sidecars = [start_skiff(tmp_path / f"g{i}.log", "--redis-url", own_redis.url) for i in (0, 1)]
    topic = name("race")
    try:
        admin = _admin(sidecars[0].bootstrap)
        assert _outcome(admin.create_topics([NewTopic(topic, 1, 1)])[topic])[0] == "NO_ERROR"

        def grow(i: int) -> list[tuple[int, int]]:
            results = []
            with RawKafka("127.0.0.1", sidecars[i % 2].port) as client:
                for target in range(2, 42):
                    body = {
                        "topics": [{"name": topic, "count": target, "assignments": None}],
                        "timeout": 30_000,
                        "validate_only": False,
                    }
                    answer = client.request(37, 3, body)
                    results.append((target, int(answer.results[0].error_code)))
            return results

        with ThreadPoolExecutor(4) as pool:
            outcomes = [r for rs in pool.map(grow, range(4)) for r in rs]
        ok_targets = sorted(t for t, code in outcomes if code == 0)
        assert all(code in (0, 37) for _, code in outcomes)
        assert ok_targets == sorted(set(ok_targets))  # no count granted twice
        doc = own_redis.client().hget("skiff:topics", topic)
        assert json.loads(doc)["partitions"] == 41
        r = own_redis.client()
        for p in range(41):
            assert r.hmget(f"skiff:{{{topic}/{p}}}:meta", "hw", "lso") == [b"0", b"0"]
        assert not r.exists(f"skiff:{{{topic}/41}}:meta")
    finally:
        for s in sidecars:
            stop_process(s.proc)


# -- DeleteTopics v0 -------------------------------------------------------------------------


def test_delete_topics_v0(skiff: Skiff, redis_server: RedisServer) -> None:
    topic = name("del0")
    admin = _admin(skiff.bootstrap)
    assert _outcome(admin.create_topics([NewTopic(topic, 2, 1)])[topic])[0] == "NO_ERROR"
    with RawKafka("127.0.0.1", skiff.port) as client:
        client.request(0, 9, produce_request(topic, {1: build_batch([b"x"])}))
        body = struct.pack(">i", 2)
        for n in (topic, f"{topic}-missing"):
            body += struct.pack(">h", len(n)) + n.encode()
        body += struct.pack(">i", 30_000)
        client.send(20, 0, body)
        frame = client.recv_raw()
    pos = 4
    (count,) = struct.unpack_from(">i", frame, pos)
    pos += 4
    got = []
    for _ in range(count):
        (n,) = struct.unpack_from(">h", frame, pos)
        got_name = frame[pos + 2 : pos + 2 + n].decode()
        pos += 2 + n
        (code,) = struct.unpack_from(">h", frame, pos)
        pos += 2
        got.append((got_name, code))
    assert pos == len(frame)
    assert got == [(topic, 0), (f"{topic}-missing", 3)]
    assert redis_keys(redis_server, topic) == []


# -- the Java AdminClient ---------------------------------------------------------------------


def test_java_admin_client_like_kafka(kafka: str, skiff: Skiff, redis_server: RedisServer) -> None:
    topic = name("java")
    ops: list[dict[str, Any]] = [
        {"op": "create", "name": topic, "partitions": 2, "configs": {"retention.ms": "1000"}},
        {"op": "create", "name": topic, "partitions": 2},
        {"op": "create", "name": f"{topic}.bad/name"},
        {"op": "create", "name": f"{topic}-rf", "replication": 3},
        {"op": "create", "name": f"{topic}-cfg", "configs": {"cleanup.policy": "sometimes"}},
        {"op": "create", "name": f"{topic}-vo", "validate_only": True},
        {"op": "grow", "name": topic, "count": 4},
        {"op": "grow", "name": topic, "count": 3},
        {"op": "grow", "name": topic, "count": 9, "validate_only": True},
        {"op": "grow", "name": f"{topic}-missing", "count": 9},
        {"op": "describe_topic", "name": topic},
        {
            "op": "alter",
            "name": topic,
            "ops": [["cleanup.policy", "APPEND", "compact"], ["retention.ms", "DELETE", None]],
        },
        {"op": "alter", "name": topic, "ops": [["segment.bytes", "SET", "1"]]},
        {
            "op": "alter",
            "name": topic,
            "ops": [["max.message.bytes", "SET", "9"]],
            "validate_only": True,
        },
        {"op": "describe_configs", "name": topic},
        {"op": "cluster"},
        {"op": "delete", "name": topic},
        {"op": "delete", "name": topic},
    ]
    # Kafka's broker learns a change from the controller a moment after answering it, so
    # the describes run in a new JVM (a second or more later) after the changes they read.
    batches = (ops[:10], ops[10:14], ops[14:])
    got = {
        side: [answer for batch in batches for answer in java_client.admin(bootstrap, batch)]
        for side, bootstrap in (("kafka", kafka), ("skiff", skiff.bootstrap))
    }
    # Skiff's own topic config skiff.storage.format is no Kafka config: compared without.
    described = got["skiff"][14]["configs"]
    assert described.pop("skiff.storage.format")["value"] == "batch"
    assert got["skiff"] == got["kafka"]
    results = got["skiff"]
    assert [r.get("error") for r in results[:6]] == [
        None,
        "TopicExistsException",
        "InvalidTopicException",
        "InvalidReplicationFactorException",
        "InvalidConfigurationException",
        None,
    ]
    assert results[7]["error"] == "InvalidPartitionsException"
    assert results[9]["error"] == "UnknownTopicOrPartitionException"
    assert (results[10]["partitions"], results[10]["replicas"]) == (4, 1)
    assert results[12]["message"] == (
        "Invalid value 1 for configuration segment.bytes: Value must be at least 1048576"
    )
    configs = results[14]["configs"]
    assert len(configs) == 37
    assert configs["cleanup.policy"]["value"] == "delete,compact"
    assert configs["cleanup.policy"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["max.message.bytes"]["value"] == "1048588"  # validate_only changed nothing
    assert configs["retention.ms"]["source"] == "DEFAULT_CONFIG"
    assert results[17]["error"] == "UnknownTopicOrPartitionException"
    for suffix in ("", "-rf", "-cfg", "-vo"):
        assert redis_keys(redis_server, topic + suffix) == []
