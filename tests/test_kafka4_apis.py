"""Kafka 4.x client-facing APIs Skiff serves at Kafka 4.4's versions: DescribeTopicPartitions
(75), OffsetForLeaderEpoch (23), ListConfigResources (74), GetTelemetrySubscriptions (71)
and PushTelemetry (72). The expected answers are those a Kafka 4.4.0 broker gave to the same
requests (apart from the leader epoch, -1 as Skiff's Metadata reports it)."""

from __future__ import annotations

import contextlib
import gzip
import json
import re
import socket
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cramjam
import pytest
import zstandard
from conftest import RedisServer, Skiff, start_redis, start_skiff, stop_process
from formats import FORMATS
from log_helpers import create, produce, read_from, wait_for
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from rawkafka import RawKafka, Rec, build_batch
from telemetry_helpers import scrape
from telemetry_helpers import value as metric_value

OFFSET_FOR_LEADER_EPOCH, API_VERSIONS, METADATA = 23, 18, 3
GET_TELEMETRY, PUSH_TELEMETRY, LIST_CONFIG_RESOURCES, DESCRIBE_TOPIC_PARTITIONS = 71, 72, 74, 75
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION, INVALID_REQUEST = 0, 3, 17, 42
UNSUPPORTED_VERSION, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 35, 74, 75
UNSUPPORTED_COMPRESSION_TYPE, INVALID_RECORD = 76, 87
UNKNOWN_SUBSCRIPTION_ID, TELEMETRY_TOO_LARGE = 117, 118
ALL_TOPIC_OPERATIONS = 3576  # Kafka 4.4 without an authorizer: READ..ALTER_CONFIGS
NOT_REQUESTED = -(2**31)
ZERO_UUID = uuid.UUID(int=0)


@pytest.fixture
def kafka(skiff: Skiff) -> Iterator[RawKafka]:
    with RawKafka("127.0.0.1", skiff.port) as client:
        yield client


def _node_id(kafka: RawKafka) -> int:
    [broker] = kafka.request(
        METADATA, 12, {"topics": [], "allow_auto_topic_creation": False}
    ).brokers
    return int(broker.node_id)


def _partitions(topic: Any) -> list[int]:
    return [int(p.partition_index) for p in topic.partitions]


def _topic_ids(kafka: RawKafka, *names: str) -> dict[str, uuid.UUID]:
    body = {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": False}
    return {t.name: t.topic_id for t in kafka.request(METADATA, 12, body).topics}


def test_describe_topic_partitions_pages(kafka: RawKafka) -> None:
    prefix = f"dtp-{uuid.uuid4().hex[:10]}"
    a, b = f"{prefix}-a", f"{prefix}-b"
    create(kafka, a, partitions=3)
    create(kafka, b, partitions=2)
    ids = _topic_ids(kafka, a, b)
    node = _node_id(kafka)

    def ask(body: dict[str, Any]) -> Any:
        return kafka.request(DESCRIBE_TOPIC_PARTITIONS, 0, body)

    # Named topics, sorted, paged at 2 partitions.
    resp = ask({"topics": [{"name": b}, {"name": a}], "response_partition_limit": 2})
    [ta] = resp.topics
    assert (ta.error_code, ta.name, ta.topic_id, ta.is_internal) == (NONE, a, ids[a], False)
    assert ta.topic_authorized_operations == ALL_TOPIC_OPERATIONS
    assert _partitions(ta) == [0, 1]
    p0 = ta.partitions[0]
    assert (p0.error_code, p0.leader_id, p0.leader_epoch) == (NONE, node, -1)
    assert (p0.replica_nodes, p0.isr_nodes, p0.offline_replicas) == ((node,), (node,), ())
    assert (p0.eligible_leader_replicas, p0.last_known_elr) == ((), ())
    assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == (a, 2)
    # From the cursor: a's last partition, then the limit is used up: cursor at b's start.
    cursor = {"topic_name": a, "partition_index": 2}
    resp = ask(
        {"topics": [{"name": a}, {"name": b}], "response_partition_limit": 1, "cursor": cursor}
    )
    assert [(t.name, _partitions(t)) for t in resp.topics] == [(a, [2])]
    assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == (b, 0)
    # A limit of 0 counts as 1; a cursor past a topic's partitions gives it none.
    cursor = {"topic_name": a, "partition_index": 7}
    resp = ask(
        {"topics": [{"name": a}, {"name": b}], "response_partition_limit": 0, "cursor": cursor}
    )
    assert [(t.name, _partitions(t)) for t in resp.topics] == [(a, []), (b, [0])]
    assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == (b, 1)
    # Everything fits: no cursor. All topics from a cursor (other tests' topics sort elsewhere).
    resp = ask(
        {
            "topics": [],
            "cursor": {"topic_name": a, "partition_index": 1},
            "response_partition_limit": 3,
        }
    )
    assert [(t.name, _partitions(t)) for t in resp.topics] == [(a, [1, 2]), (b, [0])]
    assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == (b, 1)
    resp = ask({"topics": [{"name": a}, {"name": b}]})
    assert [(t.name, _partitions(t)) for t in resp.topics] == [(a, [0, 1, 2]), (b, [0, 1])]
    assert resp.next_cursor is None


def test_describe_topic_partitions_errors(kafka: RawKafka) -> None:
    known = f"dtp-{uuid.uuid4().hex[:10]}"
    create(kafka, known, partitions=2)
    missing = f"{known}-zz"
    resp = kafka.request(
        DESCRIBE_TOPIC_PARTITIONS,
        0,
        {
            "topics": [{"name": missing}, {"name": known}, {"name": "a b"}],
            "response_partition_limit": 1,
        },
    )
    # Errors take no partitions of the limit; authorized operations are given to every topic.
    got = [
        (t.error_code, t.name, t.topic_id, _partitions(t), t.topic_authorized_operations)
        for t in resp.topics
    ]
    ids = _topic_ids(kafka, known)
    assert got == [
        (INVALID_TOPIC_EXCEPTION, "a b", None, [], ALL_TOPIC_OPERATIONS),
        (NONE, known, ids[known], [0], ALL_TOPIC_OPERATIONS),
    ]
    assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == (known, 1)
    resp = kafka.request(
        DESCRIBE_TOPIC_PARTITIONS,
        0,
        {
            "topics": [{"name": missing}, {"name": known}],
            "cursor": {"topic_name": known, "partition_index": 0},
        },
    )
    assert [(t.error_code, t.name, t.topic_id) for t in resp.topics] == [
        (NONE, known, ids[known]),
        (UNKNOWN_TOPIC_OR_PARTITION, missing, None),
    ]
    # The cursor's topic must be among the named ones, and its partition not negative:
    # INVALID_REQUEST for every named topic (an all-topics request has none to name).
    for cursor in (
        {"topic_name": "a", "partition_index": 0},
        {"topic_name": known, "partition_index": -1},
    ):
        resp = kafka.request(
            DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": known}], "cursor": cursor}
        )
        assert [
            (t.error_code, t.name, t.topic_id, t.topic_authorized_operations) for t in resp.topics
        ] == [(INVALID_REQUEST, known, None, NOT_REQUESTED)]
        assert resp.next_cursor is None
    resp = kafka.request(
        DESCRIBE_TOPIC_PARTITIONS,
        0,
        {"topics": [], "cursor": {"topic_name": known, "partition_index": -1}},
    )
    assert (resp.topics, resp.next_cursor) == ((), None)


@pytest.mark.parametrize("storage_format", FORMATS)
@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch(kafka: RawKafka, storage_format: str, version: int) -> None:
    topic = f"ofle-{uuid.uuid4().hex[:10]}"
    create(kafka, topic, {"skiff.storage.format": storage_format}, partitions=2)
    assert produce(kafka, topic, build_batch([Rec(b"k", b"v")] * 3)).error_code == NONE

    def ask(
        current: int, epoch: int, partition: int = 0, name: str = topic
    ) -> tuple[int, int, int]:
        body = {
            "replica_id": -1,
            "topics": [
                {
                    "topic": name,
                    "partitions": [
                        {
                            "partition": partition,
                            "current_leader_epoch": current,
                            "leader_epoch": epoch,
                        }
                    ],
                }
            ],
        }
        [t] = kafka.request(OFFSET_FOR_LEADER_EPOCH, version, body).topics
        [p] = t.partitions
        assert (t.topic, p.partition) == (name, partition)
        return int(p.error_code), int(p.leader_epoch), int(p.end_offset)

    # One epoch, 0, from offset 0: it ends at the log end offset.
    assert ask(-1, 0) == (NONE, 0, 3)
    assert ask(0, 0) == (NONE, 0, 3)
    assert ask(-1, 0, partition=1) == (NONE, 0, 0)
    assert ask(1, 0) == (UNKNOWN_LEADER_EPOCH, -1, -1)
    assert ask(-5, 0) == (FENCED_LEADER_EPOCH, -1, -1)
    assert ask(-1, 1) == (NONE, -1, -1)
    assert ask(-1, 5) == (NONE, -1, -1)
    assert ask(-1, -1) == (NONE, -1, -1)
    assert ask(-1, -3) == (NONE, -3, 0)
    assert ask(-1, 0, partition=9) == (UNKNOWN_TOPIC_OR_PARTITION, -1, -1)
    assert ask(-1, 0, name=f"{topic}-missing") == (UNKNOWN_TOPIC_OR_PARTITION, -1, -1)


def test_list_config_resources(kafka: RawKafka) -> None:
    topic = f"lcr-{uuid.uuid4().hex[:10]}"
    create(kafka, topic)
    node = str(_node_id(kafka))

    def ask(version: int, types: list[int]) -> tuple[int, list[tuple[str, int]]]:
        resp = kafka.request(LIST_CONFIG_RESOURCES, version, {"resource_types": types})
        kinds = [
            (r.resource_name, int(getattr(r, "resource_type", 16))) for r in resp.config_resources
        ]
        return int(resp.error_code), kinds

    # a group with a config of its own is listed after the brokers
    group = f"lcr-g-{uuid.uuid4().hex[:10]}"
    alter = {
        "resources": [
            {
                "resource_type": 32,
                "resource_name": group,
                "configs": [
                    {
                        "name": "consumer.heartbeat.interval.ms",
                        "config_operation": 0,
                        "value": "6000",
                    }
                ],
            }
        ],
        "validate_only": False,
    }
    assert [r.error_code for r in kafka.request(44, 1, alter).responses] == [NONE]
    code, listed = ask(1, [4, 8, 32])
    assert code == NONE and listed[:2] == [(node, 8), (node, 4)] and (group, 32) in listed
    assert {k for _, k in listed[2:]} == {32}
    assert ask(1, [16]) == (NONE, [])
    assert ask(1, [99]) == (UNSUPPORTED_VERSION, [])
    code, listed = ask(1, [2])
    assert code == NONE and (topic, 2) in listed and {k for _, k in listed} == {2}
    assert [n for n, _ in listed] == sorted(n for n, _ in listed)
    code, listed = ask(1, [])
    assert code == NONE and listed[:2] == [(node, 8), (node, 4)] and (topic, 2) in listed
    for types in ([16], [], [2]):  # v0: client-metrics resources only, and there are none
        assert ask(0, types) == (NONE, [])


# -- KIP-714 client telemetry ------------------------------------------------------------


@pytest.fixture
def telemetry_skiff(own_redis: RedisServer, tmp_path: Path) -> Iterator[Skiff]:
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--client-metrics",
        "org.apache.kafka.consumer.,test.",
        "--client-metrics-push-interval-ms",
        "1000",
    )
    yield server
    stop_process(server.proc)


def _advertised(port: int) -> set[int]:
    with RawKafka("127.0.0.1", port) as kafka:
        body = {"client_software_name": "t", "client_software_version": "1"}
        return {int(k.api_key) for k in kafka.request(API_VERSIONS, 4, body).api_keys}


def _metrics_data(points: list[tuple[str, float, bool]]) -> bytes:
    metrics = []
    for name, value, delta in points:
        point = NumberDataPoint(
            as_double=value,
            attributes=[
                KeyValue(key="topic", value=AnyValue(string_value="t1")),
                KeyValue(key="client_id", value=AnyValue(string_value="c")),
            ],
        )
        if delta:
            temporality = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
            metrics.append(
                Metric(
                    name=name,
                    sum=Sum(
                        data_points=[point], aggregation_temporality=temporality, is_monotonic=True
                    ),
                )
            )
        else:
            metrics.append(Metric(name=name, gauge=Gauge(data_points=[point])))
    data = MetricsData(
        resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=metrics)])]
    )
    return data.SerializeToString()


def _xerial_snappy(data: bytes) -> bytes:
    block = bytes(cramjam.snappy.compress_raw(data))
    return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block


def test_telemetry_apis_offered_only_with_client_metrics(
    skiff: Skiff, telemetry_skiff: Skiff
) -> None:
    assert {GET_TELEMETRY, PUSH_TELEMETRY}.isdisjoint(_advertised(skiff.port))
    assert {GET_TELEMETRY, PUSH_TELEMETRY} <= _advertised(telemetry_skiff.port)
    # Answered anyway, as Kafka 4.4 answers it: an empty subscription.
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        resp = kafka.request(GET_TELEMETRY, 0, {"client_instance_id": ZERO_UUID})
    assert (resp.error_code, resp.requested_metrics, resp.accepted_compression_types) == (
        NONE,
        (),
        (4, 2, 1),
    )
    assert (
        resp.push_interval.total_seconds(),
        resp.telemetry_max_bytes,
        resp.delta_temporality,
    ) == (300, 1048576, True)
    assert resp.client_instance_id not in (None, ZERO_UUID)


def test_push_telemetry_shows_on_metrics(telemetry_skiff: Skiff) -> None:
    with RawKafka("127.0.0.1", telemetry_skiff.port) as kafka:
        sub = kafka.request(GET_TELEMETRY, 0, {"client_instance_id": ZERO_UUID})
        assert (sub.error_code, sub.requested_metrics) == (
            NONE,
            ("org.apache.kafka.consumer.", "test."),
        )
        assert sub.push_interval.total_seconds() == 1.0
        client = sub.client_instance_id
        again = kafka.request(GET_TELEMETRY, 0, {"client_instance_id": client})
        assert (again.client_instance_id, again.subscription_id) == (client, sub.subscription_id)

        def push(
            payload: bytes,
            codec: int,
            subscription: int = sub.subscription_id,
            instance: uuid.UUID = client,
        ) -> int:
            body = {
                "client_instance_id": instance,
                "subscription_id": subscription,
                "terminating": False,
                "compression_type": codec,
                "metrics": payload,
            }
            return int(kafka.request(PUSH_TELEMETRY, 0, body).error_code)

        first = _metrics_data([("test.gauge", 2.5, False), ("test.bytes", 10, True)])
        assert push(first, 0) == NONE
        second = _metrics_data([("test.gauge", 4.0, False), ("test.bytes", 5, True)])
        assert push(gzip.compress(second), 1) == NONE
        assert push(_xerial_snappy(second), 2) == NONE
        assert push(zstandard.ZstdCompressor().compress(second), 4) == NONE
        # Checked before anything is recorded.
        assert push(first, 0, subscription=sub.subscription_id + 1) == UNKNOWN_SUBSCRIPTION_ID
        assert push(first, 0, instance=ZERO_UUID) == INVALID_REQUEST
        assert push(first, 3) == UNSUPPORTED_COMPRESSION_TYPE
        assert push(b"\xff" * 10, 0) == INVALID_RECORD
        assert push(gzip.compress(b"\0" * (17 << 20)), 1) == INVALID_RECORD  # inflates too far
        assert push(b"\0" * ((1 << 20) + 1), 0) == TELEMETRY_TOO_LARGE
    samples = scrape(telemetry_skiff.http_port)
    ours = {
        labels["metric"]: (labels["client_id"], labels["attributes"], v)
        for (name, label_set), v in samples.items()
        if name == "skiff_client_metric"
        and (labels := dict(label_set))["client_instance_id"] == str(client)
    }
    # The gauge keeps its latest value; the delta sum adds up (10 + 5 + 5 + 5).
    assert ours == {
        "test.gauge": ("rawkafka", "client_id=c,topic=t1", 4.0),
        "test.bytes": ("rawkafka", "client_id=c,topic=t1", 25.0),
    }


def test_java_client_pushes_telemetry(telemetry_skiff: Skiff) -> None:
    """A Java consumer (kafka-clients pushes metrics by default since 3.7) in a group: its
    org.apache.kafka.consumer.* metrics appear on /metrics."""
    from clients.cli_tool import CliToolError
    from clients.java_client import group_member_cmd

    topic = f"tel-{uuid.uuid4().hex[:10]}"
    with RawKafka("127.0.0.1", telemetry_skiff.port) as kafka:
        create(kafka, topic)
    try:
        cmd = group_member_cmd(
            telemetry_skiff.bootstrap, f"g-{topic}", topic, client_id="telemetry-test"
        )
    except CliToolError as exc:
        pytest.skip(f"no Java client tool: {exc}")
    member = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 120
        pushed: list[tuple[str, str]] = []
        while time.monotonic() < deadline and not pushed:
            pushed = [
                (labels["metric"], labels["client_id"])
                for (name, label_set), _ in scrape(telemetry_skiff.http_port).items()
                if name == "skiff_client_metric"
                and (labels := dict(label_set))["metric"].startswith("org.apache.kafka.consumer.")
            ]
            if not pushed:
                assert member.poll() is None, "the Java consumer exited"
                time.sleep(0.5)
        assert pushed, "no consumer metric was pushed within 120 s"
        assert {client_id for _, client_id in pushed} == {"telemetry-test"}, pushed
    finally:
        stop_process(member)


# -- Kafka 4.4's kafka-topics --describe (DescribeTopicPartitions, paged) -----------------

KAFKA4 = "4.4.0"


def _kafka_topics4(bootstrap: str, args: list[str]) -> tuple[int, list[str]]:
    """Kafka 4.4's kafka-topics, one JVM a run (tools/ToolBatch.java does not compile
    against Kafka 4.x's jars: org.apache.kafka.common.utils.Exit is gone)."""
    import kafka_cli  # tools/kafka_cli.py (on sys.path through kafka_tools)

    main_class = kafka_cli.tool_class("kafka-topics", KAFKA4)
    cmd = kafka_cli.command(main_class, ["--bootstrap-server", bootstrap, *args], "ERROR", KAFKA4)
    done = subprocess.run(
        cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120
    )
    return done.returncode, _by_topic(_normalised(done.stdout))


def _by_topic(lines: list[str]) -> list[str]:
    """Topic blocks (a topic's line and its partitions' lines) sorted by name: neither
    broker promises an order for topics matched by a regular expression."""
    blocks: list[list[str]] = []
    for line in lines:
        if line.startswith("Topic: ") or not blocks:
            blocks.append([line])
        else:
            blocks[-1].append(line)
    return [line for block in sorted(blocks, key=lambda b: b[0]) for line in block]


def _normalised(stdout: str) -> list[str]:
    """Topic ids and node ids differ between brokers; Kafka 4.4 lists min.insync.replicas
    among every topic's configs (KIP-966, the issue's "reported configs" part), Skiff not yet."""
    out = []
    for line in stdout.splitlines():
        line = re.sub(r"(Configs: )min\.insync\.replicas=1,?", r"\1", line)
        line = re.sub(r"TopicId: \S+", "TopicId: <id>", line)
        line = re.sub(r"(Leader|Replicas|Isr): \d+", r"\1: <node>", line)
        out.append(line.rstrip())
    return out


def _settled(bootstrap: str, args: list[str], lines: int) -> tuple[int, list[str]]:
    """kafka-topics' answer once it has `lines` lines, every partition with a leader."""
    deadline = time.monotonic() + 60
    while True:
        answer = _kafka_topics4(bootstrap, args)
        complete = len(answer[1]) == lines and not any("Leader: none" in x for x in answer[1])
        if complete or time.monotonic() > deadline:
            return answer
        time.sleep(0.5)


def test_kafka4_topics_describe_like_kafka(skiff: Skiff) -> None:
    """Kafka 4.x's TopicCommand describes through DescribeTopicPartitions (with ELR columns);
    --partition-size-limit-per-response 1 makes it page partition by partition."""
    from kafka_tools import ToolsUnavailable, reference_kafka

    prefix = f"k4d-{uuid.uuid4().hex[:8]}"
    a, b = f"{prefix}-a", f"{prefix}-b"
    describe = ["--describe", "--topic", f"{prefix}.*"]
    runs = [
        ["--create", "--topic", a, "--partitions", "3", "--config", "retention.ms=1000"],
        ["--create", "--topic", b, "--partitions", "2"],
        describe,
        [*describe, "--partition-size-limit-per-response", "1"],  # a page per partition
        ["--describe", "--topic", f"{prefix}-none"],
    ]
    answers = {}
    try:
        with reference_kafka(version=KAFKA4) as kafka:
            for side, bootstrap in (("kafka", kafka), ("skiff", skiff.bootstrap)):
                answers[side] = [_kafka_topics4(bootstrap, r) for r in runs[:2]]
                # A broker may describe a just-created topic before every partition has
                # its leader (Kafka's metadata propagates): wait for the whole answer.
                answers[side].append(_settled(bootstrap, runs[2], 7))
                answers[side] += [_kafka_topics4(bootstrap, r) for r in runs[3:]]
    except ToolsUnavailable as exc:
        pytest.skip(f"no Kafka {KAFKA4}: {exc}")
    assert answers["skiff"] == answers["kafka"]
    head = "Topic: {}\tTopicId: <id>\tPartitionCount: {}\tReplicationFactor: 1\tConfigs: {}"
    row = "\tTopic: {}\tPartition: {}\tLeader: <node>\tReplicas: <node>\tIsr: <node>\t"
    row += "Elr: \tLastKnownElr:"
    expected = [
        head.format(a, 3, "retention.ms=1000"),
        *(row.format(a, p) for p in range(3)),
        head.format(b, 2, ""),
        *(row.format(b, p) for p in range(2)),
    ]
    assert answers["skiff"][2] == (0, [line.rstrip() for line in expected])
    assert answers["skiff"][3] == answers["skiff"][2]
    assert answers["skiff"][4][0] == 1


class SwitchingRelay:
    """A TCP relay at one address whose upstream can be switched to another sidecar, with
    the open connections cut: clients find another broker where theirs was, without a
    moment when nothing answers there (which would make them bootstrap again anyway)."""

    def __init__(self) -> None:
        self.target_port = 0  # nothing until the first switch
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def switch(self, target_port: int) -> None:
        self.target_port = target_port
        with self._lock:
            cut, self._open = self._open, []
        for sock in cut:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._server.close()
        self.switch(self.target_port)


def test_kafka44_producer_rebootstraps_when_another_cluster_answers(tmp_path: Path) -> None:
    """KIP-1242 with a real client: a Kafka 4.4 producer with metadata.cluster.check.enable
    names Skiff's cluster and the node when it connects to a node (ApiVersions v5). When a
    sidecar of another Skiff cluster (another Redis) answers at that node's address, the
    producer is told REBOOTSTRAP_REQUIRED, looks the cluster up again and produces there
    (tests/test_protocol.py has every refusal)."""
    from kafka_tools import ToolsUnavailable, kafka_cli

    topic = f"k4c-{uuid.uuid4().hex[:8]}"
    redis_servers = [start_redis(tmp_path / "first"), start_redis(tmp_path / "second")]
    sidecars: list[Skiff] = []
    relay: SwitchingRelay | None = None
    producer: subprocess.Popen[bytes] | None = None
    try:
        # Both sidecars advertise the relay's address, as two brokers behind one name.
        relay = SwitchingRelay()
        for i, redis_server in enumerate(redis_servers):
            sidecars.append(
                start_skiff(
                    tmp_path / f"sidecar-{i}.log",
                    "--redis-url",
                    redis_server.url,
                    "--advertise",
                    f"127.0.0.1:{relay.port}",
                )
            )
        relay.switch(sidecars[0].port)
        args = ["--bootstrap-server", f"127.0.0.1:{relay.port}", "--topic", topic]
        args += ["--command-property", "metadata.cluster.check.enable=true"]
        try:
            cmd = kafka_cli.command("org.apache.kafka.tools.ConsoleProducer", args, "ERROR", KAFKA4)
        except ToolsUnavailable as exc:
            pytest.skip(f"no Kafka {KAFKA4}: {exc}")
        producer = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        assert producer.stdin is not None

        def values(sidecar: Skiff) -> list[bytes | None]:
            assert producer is not None and producer.poll() is None, "the producer exited"
            with RawKafka("127.0.0.1", sidecar.port) as kafka:
                body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
                [found] = kafka.request(METADATA, 12, body).topics
                if found.error_code != NONE:
                    return []  # not created there yet
                return [r.value for r in read_from(kafka, topic, 0)]

        producer.stdin.write(b"one\n")
        producer.stdin.flush()
        wait_for(lambda: values(sidecars[0]) == [b"one"], 120, "the first record")
        relay.switch(sidecars[1].port)
        producer.stdin.write(b"two\n")
        producer.stdin.flush()
        wait_for(lambda: values(sidecars[1]) == [b"two"], 120, "the second record")
        assert values(sidecars[0]) == [b"one"]
        refused = metric_value(
            scrape(sidecars[1].http_port),
            "skiff_request_errors_total",
            api="api_versions",
            version="5",
            error="REBOOTSTRAP_REQUIRED",
        )
        assert refused >= 1
    finally:
        if producer is not None:
            stop_process(producer)
        if relay is not None:
            relay.close()
        for sidecar in sidecars:
            stop_process(sidecar.proc)
        for redis_server in redis_servers:
            stop_process(redis_server.proc)


def test_elect_leaders_is_never_needed(kafka: RawKafka) -> None:
    """ElectLeaders: each partition's one copy always leads, so, as Kafka answers for a
    partition whose preferred leader leads, ELECTION_NOT_NEEDED (84); unknown topics and
    partitions with Kafka's texts; with no partitions named every topic is listed
    without partitions (Kafka leaves out those that needed no election)."""
    topic = f"el-{uuid.uuid4().hex[:10]}"
    create(kafka, topic, partitions=2)

    def elect(version: int, named: Any, election_type: int = 0) -> Any:
        body = {"election_type": election_type, "topic_partitions": named, "timeout": 30_000}
        return kafka.request(43, version, body)

    named = [
        {"topic": topic, "partitions": [0, 1, 7]},
        {"topic": f"{topic}-missing", "partitions": [0]},
    ]
    for version in (0, 1, 2):
        for election_type in (0, 1) if version else (0,):
            resp = elect(version, named, election_type)
            got = [
                (r.topic, p.partition_id, int(p.error_code), p.error_message)
                for r in resp.replica_election_results
                for p in r.partition_result
            ]
            assert got == [
                (topic, 0, 84, None),
                (topic, 1, 84, None),
                (topic, 7, 3, f"No such partition as {topic}-7"),
                (f"{topic}-missing", 0, 3, f"No such topic as {topic}-missing"),
            ], (version, election_type)
    everything = elect(2, None)
    assert everything.error_code == NONE
    listed = {r.topic: r.partition_result for r in everything.replica_election_results}
    assert listed[topic] == ()
    bad = elect(2, named, election_type=5)
    assert int(bad.error_code) == 42  # INVALID_REQUEST


@pytest.mark.parametrize("version", [1, 2])
def test_alter_replica_log_dirs_never_moves_anything(kafka: RawKafka, version: int) -> None:
    """A sidecar's one log dir is its Redis: naming it is a move already done (NONE), any
    other dir LOG_DIR_NOT_FOUND; a partition named twice goes to the later dir, and the
    answer is grouped by topic, as Kafka 4.4's (checked against 4.4.0)."""
    topic = f"arld-{uuid.uuid4().hex[:10]}"
    create(kafka, topic, partitions=2)
    here = kafka.request(35, 4, {"topics": None}).results[0].log_dir  # the Redis dir
    assert _leaders(kafka, topic) == [_node_id(kafka)] * 2  # this sidecar holds both
    body = {
        "dirs": [
            {
                "path": here,
                "topics": [
                    {"name": topic, "partitions": [0, 1, 7]},
                    {"name": f"{topic}-missing", "partitions": [0, 1]},
                ],
            },
            {
                "path": "/nonexistent",
                "topics": [
                    {"name": topic, "partitions": [0]},
                    {"name": f"{topic}-missing", "partitions": [0]},
                ],
            },
        ]
    }
    resp = kafka.request(34, version, body)
    got = {
        r.topic_name: {p.partition_index: int(p.error_code) for p in r.partitions}
        for r in resp.results
    }
    assert len(resp.results) == 2  # one entry a topic
    assert got == {
        topic: {0: 57, 1: NONE, 7: UNKNOWN_TOPIC_OR_PARTITION},
        f"{topic}-missing": {0: 57, 1: UNKNOWN_TOPIC_OR_PARTITION},
    }


def test_kafka4_reassign_partitions_with_log_dirs(skiff: Skiff, tmp_path: Path) -> None:
    """Kafka 4.4's kafka-reassign-partitions with `log_dirs`: --execute sends
    AlterPartitionReassignments and AlterReplicaLogDirs, --verify reads the replica's
    log dir and clears the replication throttles (IncrementalAlterConfigs DELETE on the
    broker, a no-op here); a dir the sidecar does not have fails as on Kafka."""
    from kafka_tools import ToolsUnavailable, kafka_cli

    topic = f"rpl-{uuid.uuid4().hex[:10]}"
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, topic)
        here = kafka.request(35, 4, {"topics": None}).results[0].log_dir
        node = _node_id(kafka)
    plan = tmp_path / "plan.json"

    def reassign(log_dir: str, action: str) -> tuple[int, str]:
        move = {"topic": topic, "partition": 0, "replicas": [node], "log_dirs": [log_dir]}
        plan.write_text(json.dumps({"version": 1, "partitions": [move]}))
        args = ["--bootstrap-server", skiff.bootstrap, "--reassignment-json-file", str(plan)]
        try:
            cmd = kafka_cli.command(
                "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                [*args, action],
                "ERROR",
                KAFKA4,
            )
        except ToolsUnavailable as exc:
            pytest.skip(f"no Kafka {KAFKA4}: {exc}")
        done = subprocess.run(
            cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120
        )
        return done.returncode, done.stdout + done.stderr

    code, out = reassign(here, "--execute")
    assert code == 0, out
    assert f"Successfully started moving log directory to {here} for replica {topic}-0" in out
    code, out = reassign(here, "--verify")
    assert code == 0, out
    assert f"Reassignment of replica {topic}-0-{node} completed successfully." in out
    assert f"Clearing broker-level throttles on broker {node}" in out
    code, out = reassign("/elsewhere", "--execute")
    assert code == 1 and "LogDirNotFoundException" in out, out


def test_list_partition_reassignments_is_always_empty(kafka: RawKafka) -> None:
    topic = f"lpr-{uuid.uuid4().hex[:10]}"
    create(kafka, topic, partitions=2)
    for topics in (None, [{"name": topic, "partition_indexes": [0, 1]}]):
        resp = kafka.request(46, 0, {"timeout": 30_000, "topics": topics})
        assert (resp.error_code, resp.error_message, resp.topics) == (NONE, None, ())


def _leaders(kafka: RawKafka, topic: str) -> list[int]:
    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    [t] = kafka.request(METADATA, 12, body).topics
    return [p.leader_id for p in sorted(t.partitions, key=lambda p: p.partition_index)]


@pytest.mark.parametrize("version", [0, 1])
def test_alter_partition_reassignments_checks_as_kafka(kafka: RawKafka, version: int) -> None:
    topic = f"apr-{uuid.uuid4().hex[:10]}"
    create(kafka, topic, partitions=2)
    leader = _leaders(kafka, topic)[0]
    targets: list[tuple[str, int, list[int] | None]] = [
        (topic, 0, [leader]),  # the current replicas: nothing to do
        (topic, 1, None),  # cancel: nothing in progress
        (topic, 0, []),
        (topic, 0, [leader, leader]),
        (topic, 0, [9999]),
        (topic, 1, [leader, 9999]),
        (topic, 7, [leader]),
        ("apr-no-such-topic", 0, [leader]),
    ]
    body: dict[str, Any] = {
        "timeout": 30_000,
        "topics": [
            {"name": name, "partitions": [{"partition_index": index, "replicas": replicas}]}
            for name, index, replicas in targets
        ],
    }
    if version == 1:
        body["allow_replication_factor_change"] = False
    resp = kafka.request(45, version, body)
    assert (resp.error_code, resp.error_message) == (NONE, None)
    got = [(int(p.error_code), p.error_message) for t in resp.responses for p in t.partitions]
    no_broker = (
        "The manual partition assignment includes broker 9999, but no such broker is registered."
    )
    expected = [
        (NONE, None),
        (85, "No partition reassignment is in progress."),
        (39, "The manual partition assignment includes an empty replica list."),
        (39, f"The manual partition assignment includes the broker {leader} more than once."),
        (39, no_broker),
        (39, no_broker),
        (3, f"Unable to find partition {topic}:7."),
        (3, "Unable to find a topic named apr-no-such-topic."),
    ]
    assert got == expected
    # Nothing moved: the leaders are what they were.
    assert _leaders(kafka, topic)[0] == leader
