"""Dynamic broker configs (KIP-226): DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs on BROKER resources ("" the cluster default, "<node id>" one
sidecar) against real sidecars sharing a real Redis.

Every answer pinned here (values, read_only, sources, synonyms and their order, error
codes and messages) is the one a Kafka 4.4.0 broker (single KRaft node, formatted with
min.insync.replicas=1) gave to the same request, with its node id 1 replaced by the
sidecar's; the exceptions are marked: the configs a sidecar cannot change at run time
(listeners, ssl.*, sasl.*, thread pools, ...), which Kafka takes and Skiff refuses.
Effects are checked too: a cluster default reaches a topic on another sidecar (its
retention.ms expires records, its message.max.bytes refuses a batch), a broker's own
value wins over it, DELETE restores, and Kafka's `kafka-configs` 4.4 tool prints the same
as against Kafka 4.4."""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import RedisServer, Skiff, start_skiff, stop_process
from faults_harness import PersistentRedis
from kafka_tools import ToolsUnavailable, kafka_cli, reference_kafka
from rawkafka import RawKafka, build_batch, produce_request

PRODUCE, LIST_OFFSETS, METADATA, CREATE_TOPICS, INIT_PRODUCER_ID = 0, 2, 3, 19, 22
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS, DESCRIBE_PRODUCERS = 32, 33, 44, 61
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
NONE, REQUEST_TIMED_OUT, MESSAGE_TOO_LARGE, INVALID_CONFIG, INVALID_REQUEST = 0, 7, 10, 40, 42
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5
KAFKA4 = "4.4.0"
LONG_MAX = str(2**63 - 1)


# -- helpers ---------------------------------------------------------------------------------


def node_of(client: RawKafka) -> str:
    """The node id of the sidecar `client` talks to."""
    meta = client.request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
    port = client.sock.getpeername()[1]
    return str(next(b.node_id for b in meta.brokers if b.port == port))


def named(client: RawKafka, resource: str) -> str:
    """ "N" is the sidecar the client talks to."""
    return node_of(client) if resource == "N" else resource


def incremental(
    client: RawKafka, resource: str, ops: list[tuple[str, int, str | None]], vo: bool = False
) -> tuple[int, str | None]:
    body = {
        "resources": [
            {
                "resource_type": BROKER,
                "resource_name": named(client, resource),
                "configs": [{"name": n, "config_operation": o, "value": v} for n, o, v in ops],
            }
        ],
        "validate_only": vo,
    }
    [r] = client.request(INCREMENTAL_ALTER_CONFIGS, 1, body).responses
    return int(r.error_code), r.error_message


def legacy(
    client: RawKafka, resource: str, pairs: list[tuple[str, str | None]], vo: bool = False
) -> tuple[int, str | None]:
    body = {
        "resources": [
            {
                "resource_type": BROKER,
                "resource_name": named(client, resource),
                "configs": [{"name": n, "value": v} for n, v in pairs],
            }
        ],
        "validate_only": vo,
    }
    [r] = client.request(ALTER_CONFIGS, 2, body).responses
    return int(r.error_code), r.error_message


Entry = tuple[str | None, bool, int, bool, list[tuple[str, str | None, int]]]


def describe(
    client: RawKafka, kind: int, name: str, keys: list[str] | None = None
) -> dict[str, Entry]:
    """{config: (value, read_only, source, is_sensitive, synonyms)}."""
    body = {
        "resources": [
            {
                "resource_type": kind,
                "resource_name": named(client, name),
                "configuration_keys": keys,
            }
        ],
        "include_synonyms": True,
        "include_documentation": False,
    }
    [r] = client.request(DESCRIBE_CONFIGS, 4, body).results
    assert r.error_code == NONE, r
    return {
        c.name: (
            c.value,
            c.read_only,
            int(c.config_source),
            c.is_sensitive,
            [(s.name, s.value, int(s.source)) for s in c.synonyms],
        )
        for c in r.configs
    }


def eventually(probe: Callable[[], Any], expected: Any, timeout: float = 5.0) -> Any:
    """`probe()` once it returns `expected` (another sidecar hears a change within a
    moment), else its last answer."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def new_topic(client: RawKafka, label: str) -> str:
    name = f"bc-{label}-{uuid.uuid4().hex[:8]}"
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        "timeout_ms": 10000,
        "validate_only": False,
    }
    [t] = client.request(CREATE_TOPICS, 7, body).topics
    assert t.error_code == NONE, t
    return name


def produce(client: RawKafka, topic: str, size: int, timestamp: int | None = None) -> int:
    batch = build_batch([b"x" * size], base_timestamp=timestamp)
    [p] = (
        client.request(PRODUCE, 9, produce_request(topic, {0: batch}))
        .responses[0]
        .partition_responses
    )
    return int(p.error_code)


def log_start(client: RawKafka, topic: str) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -2}]}],
    }
    [p] = client.request(LIST_OFFSETS, 7, body).topics[0].partitions
    return int(p.offset)


@pytest.fixture
def two(own_redis: RedisServer, tmp_path: Path) -> Iterator[tuple[Skiff, Skiff]]:
    """Two sidecars on a Redis of their own (they change cluster-wide configs)."""
    args = ("--redis-url", own_redis.url, "--log-retention-check-interval-ms", "200")
    a = start_skiff(tmp_path / "a.log", *args)
    try:
        b = start_skiff(tmp_path / "b.log", *args)
    except BaseException:
        stop_process(a.proc)
        raise
    try:
        yield a, b
    finally:
        stop_process(a.proc)
        stop_process(b.proc)


# Kafka 4.4.0's answers for a broker with no dynamic configs but the formatted
# min.insync.replicas: the node resource and a topic (no overrides).
NODE_KEYS = [
    "min.insync.replicas",
    "message.max.bytes",
    "log.retention.ms",
    "log.retention.bytes",
    "log.cleanup.policy",
    "producer.id.expiration.ms",
    "log.roll.ms",
    "log.flush.interval.ms",
    "log.roll.jitter.ms",
]
NODE: dict[str, Entry] = {
    "min.insync.replicas": (
        "1",
        False,
        DYNAMIC_DEFAULT,
        False,
        [("min.insync.replicas", "1", DYNAMIC_DEFAULT), ("min.insync.replicas", "1", DEFAULT)],
    ),
    "message.max.bytes": ("1048588", False, DEFAULT, False, [("message.max.bytes", "1048588", 5)]),
    "log.retention.ms": (None, False, DEFAULT, False, []),
    "log.retention.bytes": ("-1", False, DEFAULT, False, [("log.retention.bytes", "-1", 5)]),
    "log.cleanup.policy": ("delete", False, DEFAULT, False, [("log.cleanup.policy", "delete", 5)]),
    "producer.id.expiration.ms": (
        "86400000",
        False,
        DEFAULT,
        False,
        [("producer.id.expiration.ms", "86400000", 5)],
    ),
    "log.roll.ms": (None, False, DEFAULT, False, []),
    "log.flush.interval.ms": (None, False, DEFAULT, False, []),
    "log.roll.jitter.ms": (None, False, DEFAULT, False, []),
}
TOPIC_KEYS = [
    "min.insync.replicas",
    "cleanup.policy",
    "retention.ms",
    "max.message.bytes",
    "retention.bytes",
    "segment.ms",
    "flush.ms",
]
TOPIC_CONFIGS: dict[str, Entry] = {
    "min.insync.replicas": NODE["min.insync.replicas"],
    "cleanup.policy": ("delete", False, DEFAULT, False, [("log.cleanup.policy", "delete", 5)]),
    "retention.ms": ("604800000", False, DEFAULT, False, []),
    "max.message.bytes": ("1048588", False, DEFAULT, False, [("message.max.bytes", "1048588", 5)]),
    "retention.bytes": ("-1", False, DEFAULT, False, [("log.retention.bytes", "-1", 5)]),
    "segment.ms": ("604800000", False, DEFAULT, False, []),
    "flush.ms": (LONG_MAX, False, DEFAULT, False, []),
}
CLUSTER_DEFAULT: dict[str, Entry] = {
    "min.insync.replicas": (
        "1",
        False,
        DYNAMIC_DEFAULT,
        False,
        [("min.insync.replicas", "1", DYNAMIC_DEFAULT)],
    ),
}


# -- describing ------------------------------------------------------------------------------


def test_describe_node_cluster_default_and_topic_as_kafka(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url)
    try:
        with RawKafka("127.0.0.1", server.port) as client:
            topic = new_topic(client, "describe")
            assert describe(client, BROKER, "") == CLUSTER_DEFAULT
            assert describe(client, BROKER, "N", NODE_KEYS) == NODE
            assert describe(client, TOPIC, topic, TOPIC_KEYS) == TOPIC_CONFIGS
            # Static configs are read-only, as in Kafka; listeners and the security
            # settings too, where Kafka says false: a sidecar cannot change them.
            static = describe(
                client, BROKER, "N", ["num.partitions", "listeners", "ssl.client.auth"]
            )
            assert {n: e[1] for n, e in static.items()} == {
                "num.partitions": True,
                "listeners": True,
                "ssl.client.auth": True,
            }
    finally:
        stop_process(server.proc)


def test_min_insync_replicas_is_the_flag_as_if_formatted_with_it(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """Kafka 4 writes min.insync.replicas as a cluster default when formatted (KIP-966):
    a sidecar's --min-insync-replicas is that value until someone alters it."""
    server = start_skiff(
        tmp_path / "skiff.log", "--redis-url", own_redis.url, "--min-insync-replicas", "2"
    )
    try:
        with RawKafka("127.0.0.1", server.port) as client:
            topic = new_topic(client, "mir")
            chain = [
                ("min.insync.replicas", "2", DYNAMIC_DEFAULT),
                ("min.insync.replicas", "2", STATIC),
                ("min.insync.replicas", "1", DEFAULT),
            ]
            expected = ("2", False, DYNAMIC_DEFAULT, False, chain)
            assert describe(client, BROKER, "")["min.insync.replicas"] == (
                "2",
                False,
                DYNAMIC_DEFAULT,
                False,
                chain[:1],
            )
            assert describe(client, BROKER, "N", ["min.insync.replicas"]) == {
                "min.insync.replicas": expected
            }
            assert describe(client, TOPIC, topic, ["min.insync.replicas"]) == {
                "min.insync.replicas": expected
            }
            assert incremental(client, "", [("min.insync.replicas", SET, "3")]) == (NONE, None)
            altered = [("min.insync.replicas", "3", DYNAMIC_DEFAULT), *chain[1:]]
            assert describe(client, TOPIC, topic, ["min.insync.replicas"]) == {
                "min.insync.replicas": ("3", False, DYNAMIC_DEFAULT, False, altered)
            }
    finally:
        stop_process(server.proc)


# -- altering and its effects -------------------------------------------------------------


def test_cluster_default_retention_reaches_every_sidecar_and_expires_records(
    two: tuple[Skiff, Skiff],
) -> None:
    a, b = two
    with RawKafka("127.0.0.1", a.port) as on_a, RawKafka("127.0.0.1", b.port) as on_b:
        topic = new_topic(on_a, "retention")
        old = int(time.time() * 1000) - 60_000
        assert [produce(on_a, topic, 10, old) for _ in range(3)] == [NONE] * 3
        assert incremental(on_a, "", [("log.retention.ms", SET, "1000")]) == (NONE, None)
        # Kafka 4.4.0's answers after that change:
        retention = (
            "1000",
            False,
            DYNAMIC_DEFAULT,
            False,
            [("log.retention.ms", "1000", DYNAMIC_DEFAULT), ("log.retention.hours", "168", 5)],
        )
        expected_default = {
            "log.retention.ms": (
                "1000",
                False,
                DYNAMIC_DEFAULT,
                False,
                [("log.retention.ms", "1000", DYNAMIC_DEFAULT)],
            ),
            **CLUSTER_DEFAULT,
        }
        assert eventually(lambda: describe(on_b, BROKER, ""), expected_default) == (
            expected_default
        )
        assert describe(on_b, BROKER, "N", ["log.retention.ms"]) == {"log.retention.ms": retention}
        assert describe(on_b, TOPIC, topic, ["retention.ms"]) == {"retention.ms": retention}
        # The sweep of whichever sidecar leads the partition removes the old records.
        assert eventually(lambda: log_start(on_b, topic), 3, timeout=10) == 3
        # A broker's own value wins over the cluster default, on that sidecar only.
        assert incremental(on_b, "N", [("log.retention.ms", SET, "2000")]) == (NONE, None)
        own = (
            "2000",
            False,
            DYNAMIC_BROKER,
            False,
            [
                ("log.retention.ms", "2000", DYNAMIC_BROKER),
                ("log.retention.ms", "1000", DYNAMIC_DEFAULT),
                ("log.retention.hours", "168", 5),
            ],
        )
        assert describe(on_b, BROKER, "N", ["log.retention.ms"]) == {"log.retention.ms": own}
        assert describe(on_b, TOPIC, topic, ["retention.ms"]) == {"retention.ms": own}
        time.sleep(0.5)
        assert describe(on_a, TOPIC, topic, ["retention.ms"]) == {"retention.ms": retention}
        # CreateTopics v7 reports the sources too (Kafka: min.insync.replicas 3, and
        # retention.ms 2 on the broker that has its own).
        body = {
            "topics": [
                {
                    "name": f"bc-create-{uuid.uuid4().hex[:8]}",
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 10000,
            "validate_only": True,
        }
        [created] = on_b.request(CREATE_TOPICS, 7, body).topics
        assert [
            (c.name, c.value, int(c.config_source))
            for c in created.configs
            if c.config_source != DEFAULT
        ] == [("min.insync.replicas", "1", DYNAMIC_DEFAULT), ("retention.ms", "2000", 2)]
        # DELETE restores the defaults everywhere.
        assert incremental(on_b, "N", [("log.retention.ms", DELETE, None)]) == (NONE, None)
        assert incremental(on_a, "", [("log.retention.ms", DELETE, None)]) == (NONE, None)
        for client in (on_a, on_b):
            topic_retention = {"retention.ms": TOPIC_CONFIGS["retention.ms"]}
            assert (
                eventually(
                    lambda c=client: describe(c, TOPIC, topic, ["retention.ms"]), topic_retention
                )
                == topic_retention
            )
            assert describe(client, BROKER, "") == CLUSTER_DEFAULT


def test_message_max_bytes_set_on_one_sidecar_refuses_a_batch_on_another(
    two: tuple[Skiff, Skiff],
) -> None:
    a, b = two
    with RawKafka("127.0.0.1", a.port) as on_a, RawKafka("127.0.0.1", b.port) as on_b:
        topic = new_topic(on_a, "max-bytes")
        assert produce(on_b, topic, 3000) == NONE
        assert incremental(on_a, "", [("message.max.bytes", SET, "2000")]) == (NONE, None)
        # Kafka 4.4.0 refuses the larger batch with MESSAGE_TOO_LARGE.
        assert eventually(lambda: produce(on_b, topic, 3000), MESSAGE_TOO_LARGE) == (
            MESSAGE_TOO_LARGE
        )
        assert produce(on_b, topic, 1000) == NONE
        assert incremental(on_a, "", [("message.max.bytes", DELETE, None)]) == (NONE, None)
        assert eventually(lambda: produce(on_b, topic, 3000), NONE) == NONE


def test_producer_id_expiration_ms_is_applied(own_redis: RedisServer, tmp_path: Path) -> None:
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url)
    try:
        with RawKafka("127.0.0.1", server.port) as client:
            topic = new_topic(client, "pid")
            init = {
                "transactional_id": None,
                "transaction_timeout": 60000,
                "producer_id": -1,
                "producer_epoch": -1,
            }
            resp = client.request(INIT_PRODUCER_ID, 4, init)
            batch = build_batch(
                [b"x"],
                producer_id=resp.producer_id,
                producer_epoch=resp.producer_epoch,
                base_sequence=0,
            )
            client.request(PRODUCE, 9, produce_request(topic, {0: batch}))

            def producers() -> int:
                body = {"topics": [{"name": topic, "partition_indexes": [0]}]}
                [p] = client.request(DESCRIBE_PRODUCERS, 0, body).topics[0].partitions
                return len(p.active_producers)

            assert producers() == 1
            assert incremental(client, "N", [("producer.id.expiration.ms", SET, "500")]) == (
                NONE,
                None,
            )
            # Kafka 4.4.0's entry after the change:
            assert describe(client, BROKER, "N", ["producer.id.expiration.ms"]) == {
                "producer.id.expiration.ms": (
                    "500",
                    False,
                    DYNAMIC_BROKER,
                    False,
                    [
                        ("producer.id.expiration.ms", "500", DYNAMIC_BROKER),
                        ("producer.id.expiration.ms", "86400000", 5),
                    ],
                )
            }
            assert eventually(producers, 0) == 0  # expired after half a second
            assert incremental(client, "N", [("producer.id.expiration.ms", DELETE, None)]) == (
                NONE,
                None,
            )
            assert producers() == 1
    finally:
        stop_process(server.proc)


def test_append_subtract_legacy_and_unknown_names_as_kafka(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url)
    try:
        with RawKafka("127.0.0.1", server.port) as client:
            topic = new_topic(client, "lists")

            def cleanup(where: str) -> Entry:
                if where == "topic":
                    return describe(client, TOPIC, topic, ["cleanup.policy"])["cleanup.policy"]
                return describe(client, BROKER, where, ["log.cleanup.policy"])["log.cleanup.policy"]

            # APPEND starts from Kafka's default; then SUBTRACT down to the empty list.
            default_chain = [("log.cleanup.policy", "delete", 5)]
            for op, value, now in (
                (APPEND, "compact", "delete,compact"),
                (SUBTRACT, "delete", "compact"),
                (SUBTRACT, "compact", ""),
            ):
                assert incremental(client, "", [("log.cleanup.policy", op, value)]) == (NONE, None)
                mine = [("log.cleanup.policy", now, DYNAMIC_DEFAULT)]
                assert cleanup("") == (now, False, DYNAMIC_DEFAULT, False, mine)
                assert cleanup("N") == (now, False, DYNAMIC_DEFAULT, False, mine + default_chain)
                assert cleanup("topic") == (
                    now,
                    False,
                    DYNAMIC_DEFAULT,
                    False,
                    mine + default_chain,
                )
            assert incremental(client, "", [("log.cleanup.policy", DELETE, None)]) == (NONE, None)
            # A broker's APPEND starts from Kafka's default, not the cluster default's.
            assert incremental(client, "", [("log.cleanup.policy", SET, "compact")]) == (NONE, None)
            assert incremental(client, "N", [("log.cleanup.policy", APPEND, "compact")]) == (
                NONE,
                None,
            )
            assert cleanup("N") == (
                "delete,compact",
                False,
                DYNAMIC_BROKER,
                False,
                [
                    ("log.cleanup.policy", "delete,compact", DYNAMIC_BROKER),
                    ("log.cleanup.policy", "compact", DYNAMIC_DEFAULT),
                    ("log.cleanup.policy", "delete", 5),
                ],
            )
            # A value is stored as given, and shown parsed in the broker's own entry.
            assert incremental(
                client, "N", [("log.cleanup.policy", SET, " compact , delete ")]
            ) == (
                NONE,
                None,
            )
            assert cleanup("N") == (
                "compact,delete",
                False,
                DYNAMIC_BROKER,
                False,
                [
                    ("log.cleanup.policy", " compact , delete ", DYNAMIC_BROKER),
                    ("log.cleanup.policy", "compact", DYNAMIC_DEFAULT),
                    ("log.cleanup.policy", "delete", 5),
                ],
            )
            # AlterConfigs replaces a resource's whole set (the cluster default must keep
            # min.insync.replicas).
            assert legacy(client, "", [("log.retention.bytes", "99999")]) == (
                INVALID_CONFIG,
                "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
            )
            assert legacy(
                client, "", [("min.insync.replicas", "1"), ("log.retention.bytes", "99999")]
            ) == (NONE, None)
            assert describe(client, BROKER, "") == {
                "log.retention.bytes": (
                    "99999",
                    False,
                    DYNAMIC_DEFAULT,
                    False,
                    [("log.retention.bytes", "99999", DYNAMIC_DEFAULT)],
                ),
                **CLUSTER_DEFAULT,
            }
            assert legacy(
                client, "N", [("log.retention.bytes", "5555"), ("message.max.bytes", "3000")]
            ) == (NONE, None)
            assert describe(client, BROKER, "N", ["log.retention.bytes", "message.max.bytes"]) == {
                "log.retention.bytes": (
                    "5555",
                    False,
                    DYNAMIC_BROKER,
                    False,
                    [
                        ("log.retention.bytes", "5555", DYNAMIC_BROKER),
                        ("log.retention.bytes", "99999", DYNAMIC_DEFAULT),
                        ("log.retention.bytes", "-1", 5),
                    ],
                ),
                "message.max.bytes": (
                    "3000",
                    False,
                    DYNAMIC_BROKER,
                    False,
                    [
                        ("message.max.bytes", "3000", DYNAMIC_BROKER),
                        ("message.max.bytes", "1048588", 5),
                    ],
                ),
            }
            assert legacy(client, "N", []) == (NONE, None)
            # (the cluster default's log.cleanup.policy went with its replaced set)
            assert cleanup("N") == ("delete", False, DEFAULT, False, default_chain)
            # Names Kafka does not know are stored and listed without a value.
            assert incremental(client, "", [("foo.bar", SET, "1")]) == (NONE, None)
            assert incremental(client, "N", [("foo.baz", SET, "2")]) == (NONE, None)
            assert describe(client, BROKER, "", ["foo.bar"]) == {
                "foo.bar": (None, True, DYNAMIC_DEFAULT, True, [("foo.bar", None, DYNAMIC_DEFAULT)])
            }
            assert describe(client, BROKER, "N", ["foo.bar", "foo.baz"]) == {
                "foo.baz": (None, True, DYNAMIC_BROKER, True, [("foo.baz", None, DYNAMIC_BROKER)]),
                "foo.bar": (
                    None,
                    True,
                    DYNAMIC_DEFAULT,
                    True,
                    [("foo.bar", None, DYNAMIC_DEFAULT)],
                ),
            }
    finally:
        stop_process(server.proc)


# -- refusals --------------------------------------------------------------------------------

# (resource, operations, Kafka 4.4.0's error code and message), all with validate_only;
# "N" is the sidecar's node id, {node} in a message too.
REFUSALS: list[tuple[str, list[tuple[str, int, str | None]], int, str]] = [
    (
        "",
        [("log.retention.ms", SET, "abc")],
        42,
        "Invalid value abc for configuration log.retention.ms: Not a number of type LONG",
    ),
    (
        "N",
        [("min.insync.replicas", SET, "0")],
        42,
        "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
    ),
    (
        "",
        [("log.segment.bytes", SET, "1")],
        42,
        "Invalid value 1 for configuration log.segment.bytes: Value must be at least 1048576",
    ),
    (
        "N",
        [("compression.type", SET, "foo")],
        42,
        "Invalid value foo for configuration compression.type: String must be one of: "
        "uncompressed, zstd, lz4, snappy, gzip, producer",
    ),
    (
        "",
        [("log.cleaner.min.cleanable.ratio", SET, "2")],
        42,
        "Invalid value 2.0 for configuration log.cleaner.min.cleanable.ratio: Value must be no "
        "more than 1",
    ),
    (
        "",
        [("producer.id.expiration.ms", SET, "0")],
        42,
        "Invalid value 0 for configuration producer.id.expiration.ms: Value must be at least 1",
    ),
    (
        "",
        [("log.preallocate", SET, " 5 ")],
        42,
        "Invalid value  5  for configuration log.preallocate: Expected value to be either true "
        "or false",
    ),
    (  # the first bad value in Kafka's definition order
        "",
        [("log.retention.ms", SET, "abc"), ("message.max.bytes", SET, "abc")],
        42,
        "Invalid value abc for configuration message.max.bytes: Not a number of type INT",
    ),
    (
        "",
        [("log.cleanup.policy", SET, "compact,compact")],
        42,
        "Configuration 'log.cleanup.policy' values must not be duplicated.",
    ),
    (
        "N",
        [("log.cleanup.policy", SET, "compact,")],
        42,
        "Configuration 'log.cleanup.policy' values must not be empty.",
    ),
    (
        "",
        [
            ("auto.create.topics.enable", SET, "x"),
            ("num.partitions", SET, "3"),
            ("node.id", SET, "3"),
        ],
        42,
        "Cannot update these configs dynamically: [node.id, num.partitions, "
        "auto.create.topics.enable]",
    ),
    (
        "N",
        [("log.retention.hours", SET, "1")],
        42,
        "Cannot update these configs dynamically: [log.retention.hours]",
    ),
    (
        "N",
        [
            ("ssl.truststore.location", SET, "x"),
            ("ssl.keystore.type", SET, "PKCS12"),
            ("ssl.key.password", SET, "p"),
            ("ssl.keystore.location", SET, "y"),
        ],
        42,
        "These security configs can be dynamically updated only per-listener using the listener "
        "prefix: [ssl.keystore.type, ssl.truststore.location, ssl.key.password, "
        "ssl.keystore.location]",
    ),
    (
        "",
        [("listeners", SET, "PLAINTEXT://:9999")],
        42,
        "Cannot update these configs at default cluster level, broker id must be specified: "
        "[listeners]",
    ),
    (
        "",
        [("sasl.enabled.mechanisms", SET, "PLAIN")],
        42,
        "Cannot update these configs at default cluster level, broker id must be specified: "
        "[sasl.enabled.mechanisms]",
    ),
    ("N", [("log.retention.ms", SET, None)], 42, "Null value not supported for : log.retention.ms"),
    (
        "",
        [("log.retention.ms", SET, "5"), ("log.retention.ms", DELETE, None)],
        42,
        "Error due to duplicate config keys",
    ),
    (
        "",
        [("log.retention.ms", APPEND, "5")],
        40,
        "Config value append is not allowed for config key: log.retention.ms",
    ),
    (
        "N",
        [("log.retention.ms", SUBTRACT, "5")],
        40,
        "Config value subtract is not allowed for config key: log.retention.ms",
    ),
    ("", [("foo.bar", APPEND, "x")], 40, "Unknown config name: foo.bar"),
    (
        "N",
        [("log.cleanup.policy", APPEND, "bogus")],
        42,
        "Invalid value bogus for configuration log.cleanup.policy: String must be one of: "
        "compact, delete",
    ),
    ("", [("log.retention.ms", 7, "5")], 42, "Unknown operations type 7"),
    (
        "",
        [("log.retention.ms", SET, "0")],
        42,
        "requirement failed: log.retention.ms must be unlimited (-1) or, greater than or equal "
        "to 1",
    ),
    (
        "N",
        [("log.roll.jitter.ms", SET, "-1"), ("log.retention.ms", SET, "0")],
        42,
        "requirement failed: log.roll.jitter.ms must be greater than or equal to 0",
    ),
    (
        "",
        [("log.local.retention.ms", SET, "999999999999999")],
        42,
        "Invalid value org.apache.kafka.common.config.ConfigException: Invalid value "
        "999999999999999 for configuration log.local.retention.ms: Value must not be more than "
        "log.retention.ms property value: 604800000 for configuration Invalid dynamic "
        "configuration",
    ),
    (
        "N",
        [("log.local.retention.bytes", SET, "-1"), ("log.retention.bytes", SET, "100")],
        42,
        "Invalid value org.apache.kafka.common.config.ConfigException: Invalid value -1 for "
        "configuration log.local.retention.bytes: Value must not be -1 as log.retention.bytes "
        "value is set as 100. for configuration Invalid dynamic configuration",
    ),
    (
        "",
        [("log.remote.copy.lag.ms", SET, "10000"), ("log.local.retention.ms", SET, "5000")],
        42,
        "Invalid value org.apache.kafka.common.config.ConfigException: Invalid value 10000 for "
        "configuration log.remote.copy.lag.ms: Value must not exceed log.local.retention.ms "
        "(effective value: 5000) for configuration Invalid dynamic configuration",
    ),
    (
        "",
        [("min.insync.replicas", DELETE, None)],
        40,
        "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
    ),
    (
        "N",
        [("min.insync.replicas", SET, "1")],
        40,
        "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
    ),
    (
        "77",
        [("log.retention.ms", SET, "5")],
        42,
        "Unexpected broker id, expected {node}, but received 77",
    ),
    ("abc", [("log.retention.ms", SET, "5")], 42, "Node id must be an integer, but it is: abc"),
    (" 1", [("log.retention.ms", SET, "5")], 42, "Node id must be an integer, but it is:  1"),
    ("77", [("a", SET, None)], 42, "Null value not supported for : a"),
]
# Kafka 4.4 takes these; a sidecar cannot change them while it runs (Skiff's answer).
SKIFF_REFUSALS: list[tuple[str, list[tuple[str, int, str | None]], str]] = [
    ("N", [("listeners", SET, "PLAINTEXT://:9999")], "[listeners]"),
    ("N", [("ssl.client.auth", SET, "required")], "[ssl.client.auth]"),
    ("", [("log.cleaner.threads", SET, "2")], "[log.cleaner.threads]"),
    (
        "",
        [("leader.replication.throttled.rate", SET, "1000")],
        "[leader.replication.throttled.rate]",
    ),
    (
        "N",
        [("listener.name.plaintext.max.connections", SET, "5")],
        "[listener.name.plaintext.max.connections]",
    ),
]
# And the ones Kafka accepts that Skiff accepts too (validate_only).
ACCEPTED: list[tuple[str, list[tuple[str, int, str | None]]]] = [
    ("", [("log.retention.ms", SET, "-5")]),
    ("N", [("compression.gzip.level", SET, " 5 ")]),
    ("", [("log.cleanup.policy", SET, "")]),
    ("", [("num.partitions", DELETE, None), ("leader.replication.throttled.rate", DELETE, None)]),
    (
        "",
        [
            ("log.cleaner.min.compaction.lag.ms", SET, "10"),
            ("log.cleaner.max.compaction.lag.ms", SET, "5"),
        ],
    ),
    ("N", [("no.such.config", SET, "1"), ("Log.Retention.Ms", SET, "x")]),
    ("", [("min.insync.replicas", SET, "5")]),
    ("", [("log.local.retention.ms", SET, "5000"), ("log.retention.ms", SET, "-1")]),
]


def test_refusals_as_kafka(own_redis: RedisServer, tmp_path: Path) -> None:
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url)
    try:
        with RawKafka("127.0.0.1", server.port) as client:
            node = node_of(client)
            for resource, ops, code, message in REFUSALS:
                expected = (code, message.replace("{node}", node))
                assert incremental(client, resource, ops, vo=True) == expected, (resource, ops)
            for resource, ops, names in SKIFF_REFUSALS:
                assert incremental(client, resource, ops, vo=True) == (
                    INVALID_REQUEST,
                    f"Cannot update these configs dynamically: {names}",
                ), (resource, ops)
            for resource, ops in ACCEPTED:
                assert incremental(client, resource, ops, vo=True) == (NONE, None), (resource, ops)
            # AlterConfigs checks the given set alike.
            assert legacy(client, "N", [("min.insync.replicas", "1")], vo=True) == (
                INVALID_CONFIG,
                "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
            )
            assert legacy(
                client,
                "",
                [("min.insync.replicas", "1"), ("num.partitions", "3"), ("node.id", "4")],
            ) == (
                INVALID_REQUEST,
                "Cannot update these configs dynamically: [node.id, num.partitions]",
            )
            # A resource named twice in one IncrementalAlterConfigs: both refused.
            body = {
                "resources": [
                    {"resource_type": BROKER, "resource_name": "", "configs": []},
                    {"resource_type": BROKER, "resource_name": "", "configs": []},
                    {"resource_type": BROKER, "resource_name": node, "configs": []},
                ],
                "validate_only": True,
            }
            got = client.request(INCREMENTAL_ALTER_CONFIGS, 1, body).responses
            assert [(r.resource_name, r.error_code, r.error_message) for r in got] == [
                ("", 42, "Each resource must appear at most once."),
                ("", 42, "Each resource must appear at most once."),
                (node, 0, None),
            ]
            # validate_only changed nothing.
            assert describe(client, BROKER, "") == CLUSTER_DEFAULT
            assert describe(client, BROKER, "N", NODE_KEYS) == NODE
    finally:
        stop_process(server.proc)


# -- Redis down ----------------------------------------------------------------------------


def test_redis_down_alterations_time_out_and_describe_answers_from_memory(
    tmp_path: Path,
) -> None:
    store = PersistentRedis(tmp_path / "redis").start()
    server = start_skiff(
        tmp_path / "skiff.log", "--redis-url", store.url, "--redis-retry-ms", "600"
    )
    try:
        with RawKafka("127.0.0.1", server.port) as client:
            assert incremental(client, "", [("log.retention.ms", SET, "1000")]) == (NONE, None)
            node = node_of(client)
            before = describe(client, BROKER, "N", ["log.retention.ms"])
            store.stop()
            # As a Kafka broker whose request to the controller times out.
            assert incremental(client, "", [("log.retention.ms", SET, "2000")]) == (
                REQUEST_TIMED_OUT,
                "Redis is unavailable",
            )
            assert legacy(client, node, [("message.max.bytes", "5000")]) == (
                REQUEST_TIMED_OUT,
                "Redis is unavailable",
            )
            assert describe(client, BROKER, "N", ["log.retention.ms"]) == before
            assert describe(client, BROKER, "")["log.retention.ms"][0] == "1000"
            store.start()
            assert eventually(
                lambda: incremental(client, "", [("log.retention.ms", DELETE, None)]),
                (NONE, None),
                timeout=15,
            ) == (NONE, None)
            assert describe(client, BROKER, "") == CLUSTER_DEFAULT
    finally:
        stop_process(server.proc)
        store.stop()


# -- Kafka's tool ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kafka() -> Iterator[str]:
    try:
        with reference_kafka(version=KAFKA4) as bootstrap:
            yield bootstrap
    except ToolsUnavailable as exc:
        pytest.skip(f"no reference Kafka: {exc}")


def _configs_tool(bootstrap: str, node: str, runs: list[list[str]]) -> list[tuple[int, list[str]]]:
    """Kafka 4.4's kafka-configs, once per run (tools/ToolBatch.java does not build against
    4.4's jars): exit code and what it says (its output, or the exception's cause)."""
    try:
        main_class = kafka_cli.tool_class("kafka-configs", KAFKA4)
        cmds = [
            kafka_cli.command(main_class, ["--bootstrap-server", bootstrap, *r], "ERROR", KAFKA4)
            for r in runs
        ]
    except ToolsUnavailable as exc:
        pytest.skip(f"no Kafka {KAFKA4} tools: {exc}")
    done = [
        subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
        for cmd in cmds
    ]
    out = []
    for result in done:
        lines = result.stdout.splitlines() if result.returncode == 0 else result.stderr.splitlines()
        if result.returncode != 0:
            lines = [ln for ln in lines if ln.startswith(("Caused by:", "Error"))][-1:]
        out.append(
            (
                result.returncode,
                [re.sub(rf"\bbroker {node}\b", "broker <node>", ln.rstrip()) for ln in lines],
            )
        )
    return out


def test_kafka_configs_4_4_alters_and_describes_broker_configs_like_kafka(
    kafka: str, own_redis: RedisServer, tmp_path: Path
) -> None:
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url)
    default = ["--entity-type", "brokers", "--entity-default"]
    try:
        answers = {}
        for side, bootstrap, node in (("kafka", kafka, "1"), ("skiff", server.bootstrap, None)):
            if node is None:
                with RawKafka("127.0.0.1", server.port) as client:
                    node = node_of(client)
            broker = ["--entity-type", "brokers", "--entity-name", node]
            # Kafka applies a change a moment after it answers: the describes run in
            # another JVM, seconds later.
            altered = _configs_tool(
                bootstrap,
                node,
                [
                    ["--alter", *default, "--add-config", "log.retention.ms=1000"],
                    ["--alter", *broker, "--add-config", "message.max.bytes=2000000"],
                    ["--alter", *broker, "--add-config", "num.partitions=3"],
                ],
            )
            described = _configs_tool(
                bootstrap, node, [["--describe", *default], ["--describe", *broker]]
            )
            restored = _configs_tool(
                bootstrap,
                node,
                [
                    ["--alter", *default, "--delete-config", "log.retention.ms"],
                    ["--alter", *broker, "--delete-config", "message.max.bytes"],
                ],
            )
            answers[side] = altered + described + restored
        assert answers["skiff"] == answers["kafka"]
        got = answers["skiff"]
        assert got[0] == (0, ["Completed updating default config for brokers in the cluster."])
        assert got[2] == (
            1,
            [
                "Caused by: org.apache.kafka.common.errors.InvalidRequestException: "
                "Cannot update these configs dynamically: [num.partitions]"
            ],
        )
        assert got[3] == (
            0,
            [
                "Default configs for brokers in the cluster are:",
                "  log.retention.ms=1000 sensitive=false "
                "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=1000}",
                "  min.insync.replicas=1 sensitive=false "
                "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1}",
            ],
        )
        assert got[4] == (
            0,
            [
                "Dynamic configs for broker <node> are:",
                "  message.max.bytes=2000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
                "message.max.bytes=2000000, DEFAULT_CONFIG:message.max.bytes=1048588}",
            ],
        )
    finally:
        stop_process(server.proc)


# -- fuzzing ---------------------------------------------------------------------------------


def test_random_alterations_get_kafka_errors_and_stored_garbage_is_harmless() -> None:
    """Random operations through the checks an alteration runs (config/dynamic_broker.py)
    raise only Kafka's errors, and whatever Redis holds (written by hand: bad JSON, bad
    values, odd names) is described and applied without a failure."""
    import random

    from sidecar.config import broker as broker_config
    from sidecar.config import dynamic_broker
    from sidecar.config import topic as topic_config
    from sidecar.config.admin import AdminError, check_duplicates_and_nulls
    from sidecar.config.settings import Settings
    from sidecar.storage.broker_configs import _decode

    rng = random.Random(2026)
    names = [*dynamic_broker.DYNAMIC, "num.partitions", "listeners", "ssl.keystore.location"]
    names += ["foo.bar", "", "listener.name.x.ssl.client.auth", "log.retention.hours", "é"]
    values = ["", "x", "-1", "0", "1", "-2", "compact,delete", ",", " 5 ", "9" * 30, "1.5"]
    values += ["true", "delete,,compact", "\x00", "CreateTime", "NaN", "-9223372036854775809"]
    static = topic_config.server_defaults(Settings())
    for _ in range(3000):
        ops = [
            (rng.choice(names), rng.choice([0, 1, 2, 3, 7]), rng.choice([*values, None]))
            for _ in range(rng.randint(0, 4))
        ]
        per_broker = rng.random() < 0.5
        current = {rng.choice(names): rng.choice(values) for _ in range(rng.randint(0, 3))}
        layer = {rng.choice(names): rng.choice(values) for _ in range(rng.randint(0, 3))}
        try:
            check_duplicates_and_nulls([(n, v) for n, _, v in ops], set(), ", ")
            new = dynamic_broker.apply_ops(current, ops)
            layers = (layer, new) if per_broker else (new, layer)
            dynamic_broker.validate(new, per_broker, static, *layers)
            dynamic_broker.min_insync_rule(per_broker, [n for n, _, _ in ops], new)
        except AdminError as exc:
            assert exc.code in (INVALID_CONFIG, INVALID_REQUEST) and exc.message
        dynamic = broker_config.Dynamic(layer, current)
        broker_config.describe_broker(Settings(), 0, static, None, True, True, dynamic)
        broker_config.describe_cluster_default(layer, None, True, True)
        dynamic_broker.topic_defaults(static, layer, current)
    for name in ("9" * 5000, "0" * 5000 + "1", "+0", "-0", "2147483648", "\u0661", "1_0"):
        try:
            dynamic_broker.node_id_of(name, 1)
        except AdminError as exc:
            assert exc.code == INVALID_REQUEST
    for _ in range(2000):
        raw = bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
        raw = rng.choice(
            [raw, b'{"a": "b", "c": 1}', b"[]", b'{"x": null}', b"1e999999", b"[" * 100_000]
        )
        decoded = _decode(raw)
        assert decoded is None or all(isinstance(v, str) for v in decoded.values())
