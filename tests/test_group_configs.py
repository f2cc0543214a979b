"""Group configs (resource type GROUP, 32): DescribeConfigs and IncrementalAlterConfigs
against a real Skiff. The expected answers are those of a Kafka 4.4.0 broker (its 21
listed group configs with their order, types, defaults, synonyms and documentation, and
its error codes and messages, recorded from a 4.4.0 broker); the last test runs Kafka
4.4.0's `kafka-configs` against Skiff and a reference Kafka 4.4.0 broker and compares
their output. Also: the configs Skiff applies take effect (share heartbeat interval,
share.auto.offset.reset=by_duration:<d>), the others are stored and described back, and
a server default outside Kafka's bounds widens them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import RedisServer, Skiff, start_skiff, stop_process
from kafka_tools import ToolsUnavailable, reference_kafka
from rawkafka import RawKafka
from share_raw import ShareMember

from sidecar.groups.group_config_docs import GROUP_DOCS

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, GROUP = 32, 44, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
GROUP_CONFIG, DEFAULT_CONFIG, STATIC_BROKER_CONFIG = 8, 5, 4
INVALID_CONFIG, INVALID_REQUEST, UNKNOWN_SERVER_ERROR = 40, 42, -1

# A Kafka 4.4.0 broker's DescribeConfigs of a group that sets nothing, in its order:
# (name, value, config_type, the broker config listed as its synonym).
KAFKA_44_GROUP_CONFIGS = [
    ("consumer.session.timeout.ms", "45000", 3, "group.consumer.session.timeout.ms"),
    ("streams.assignor.name", "sticky", 2, "group.streams.assignors"),
    ("consumer.assignment.interval.ms", "1000", 3, "group.consumer.assignment.interval.ms"),
    (
        "errors.deadletterqueue.copy.record.enable",
        "false",
        1,
        "errors.deadletterqueue.copy.record.enable",
    ),
    ("share.auto.offset.reset", "latest", 2, "share.auto.offset.reset"),
    ("streams.rack.aware.assignment.tags", "", 7, "group.streams.rack.aware.assignment.tags"),
    ("share.renew.acknowledge.enable", "true", 1, "share.renew.acknowledge.enable"),
    ("streams.initial.rebalance.delay.ms", "3000", 3, "group.streams.initial.rebalance.delay.ms"),
    ("share.session.timeout.ms", "45000", 3, "group.share.session.timeout.ms"),
    ("streams.assignment.interval.ms", "1000", 3, "group.streams.assignment.interval.ms"),
    ("share.heartbeat.interval.ms", "5000", 3, "group.share.heartbeat.interval.ms"),
    ("streams.heartbeat.interval.ms", "5000", 3, "group.streams.heartbeat.interval.ms"),
    ("share.delivery.count.limit", "5", 3, "group.share.delivery.count.limit"),
    ("errors.deadletterqueue.topic.name", "", 2, "errors.deadletterqueue.topic.name"),
    ("consumer.heartbeat.interval.ms", "5000", 3, "group.consumer.heartbeat.interval.ms"),
    ("share.record.lock.duration.ms", "30000", 3, "group.share.record.lock.duration.ms"),
    ("share.assignment.interval.ms", "1000", 3, "group.share.assignment.interval.ms"),
    ("share.isolation.level", "read_uncommitted", 2, "share.isolation.level"),
    ("streams.session.timeout.ms", "45000", 3, "group.streams.session.timeout.ms"),
    ("share.partition.max.record.locks", "2000", 3, "group.share.partition.max.record.locks"),
    ("streams.num.standby.replicas", "0", 3, "group.streams.num.standby.replicas"),
]

_RESET = (
    "Invalid value {v} for configuration share.auto.offset.reset: Invalid value `{v}` for "
    "configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or "
    "of the format 'by_duration:<PnDTnHnMn.nS>'."
)
# IncrementalAlterConfigs (validate_only) of one group: the ops and a Kafka 4.4.0
# broker's (error code, message).
KAFKA_44_ALTER_ANSWERS: list[tuple[list[tuple[str, int, str | None]], tuple[int, str | None]]] = [
    *(
        ([(name, SET, value)], (INVALID_CONFIG, f"{name} must be in the range {low} inclusive."))
        for name, value, low in (
            ("consumer.session.timeout.ms", "1", "45000 to 60000"),
            ("consumer.session.timeout.ms", "999999999", "45000 to 60000"),
            ("consumer.heartbeat.interval.ms", "1", "5000 to 15000"),
            ("consumer.heartbeat.interval.ms", "15001", "5000 to 15000"),
            ("consumer.assignment.interval.ms", "99999999", "0 to 15000"),
            ("share.session.timeout.ms", "1", "45000 to 60000"),
            ("share.heartbeat.interval.ms", "1", "5000 to 15000"),
            ("share.record.lock.duration.ms", "2000", "15000 to 60000"),
            ("share.record.lock.duration.ms", "60001", "15000 to 60000"),
            ("share.delivery.count.limit", "11", "2 to 10"),
            ("share.partition.max.record.locks", "10000", "100 to 4000"),
            ("share.assignment.interval.ms", "99999999", "0 to 15000"),
            ("streams.session.timeout.ms", "1", "45000 to 60000"),
            ("streams.heartbeat.interval.ms", "1", "5000 to 15000"),
            ("streams.assignment.interval.ms", "99999999", "0 to 15000"),
        )
    ),
    *(
        (
            [(name, SET, value)],
            (INVALID_CONFIG, f"Invalid value {value} for configuration {name}: {message}"),
        )
        for name, value, message in (
            ("consumer.heartbeat.interval.ms", "x", "Not a number of type INT"),
            ("consumer.heartbeat.interval.ms", " x ", "Not a number of type INT"),
            ("consumer.session.timeout.ms", "50000.0", "Not a number of type INT"),
            ("consumer.session.timeout.ms", "99999999999", "Not a number of type INT"),
            ("consumer.session.timeout.ms", "0", "Value must be at least 1"),
            ("share.record.lock.duration.ms", "1", "Value must be at least 1000"),
            ("share.delivery.count.limit", "1", "Value must be at least 2"),
            ("share.partition.max.record.locks", "1", "Value must be at least 100"),
            ("streams.initial.rebalance.delay.ms", "-1", "Value must be at least 0"),
            ("streams.num.standby.replicas", "-1", "Value must be at least 0"),
            ("consumer.assignment.interval.ms", "-5", "Value must be at least 0"),
            ("share.assignment.interval.ms", "-5", "Value must be at least 0"),
            ("streams.assignment.interval.ms", "-5", "Value must be at least 0"),
            (
                "share.isolation.level",
                "foo",
                "String must be one of: read_committed, read_uncommitted",
            ),
            (
                "share.isolation.level",
                "READ_COMMITTED",
                "String must be one of: read_committed, read_uncommitted",
            ),
            ("share.renew.acknowledge.enable", "yes", "Expected value to be either true or false"),
            (
                "errors.deadletterqueue.copy.record.enable",
                "maybe",
                "Expected value to be either true or false",
            ),
            ("streams.acceptable.recovery.lag", "x", "Not a number of type LONG"),
            ("streams.task.offset.interval.ms", "0", "Value must be at least 1"),
        )
    ),
    *(
        ([("share.auto.offset.reset", SET, value)], (INVALID_CONFIG, _RESET.format(v=value)))
        for value in (
            "foo",
            "EARLIEST",
            "none",
            "earliest:",
            "BY_DURATION:PT1H",
            "by_duration:-PT1H",
            "by_duration:PT-1H",
            "by_duration:xyz",
            "by_duration:",
            "by_duration:PT",
            "by_duration: PT1H",
            "by_duration:PT1H:5",
        )
    ),
    (
        [("share.isolation.level", SET, " foo ")],
        (
            INVALID_CONFIG,
            "Invalid value foo for configuration share.isolation.level: "
            "String must be one of: read_committed, read_uncommitted",
        ),
    ),
    (
        [("streams.num.standby.replicas", SET, "99")],
        (INVALID_CONFIG, "streams.num.standby.replicas must be less than or equal to 2"),
    ),
    (
        [("streams.num.warmup.replicas", SET, "99")],
        (INVALID_CONFIG, "streams.num.warmup.replicas must be less than or equal to 20"),
    ),
    (
        [("streams.task.offset.interval.ms", SET, "1000")],
        (INVALID_CONFIG, "streams.task.offset.interval.ms must be greater than or equal to 15000"),
    ),
    (
        [("streams.rack.aware.assignment.tags", SET, "a,a")],
        (INVALID_CONFIG, "streams.rack.aware.assignment.tags must not contain duplicate tag keys."),
    ),
    (
        [("streams.rack.aware.assignment.tags", SET, "a,,b")],
        (
            INVALID_CONFIG,
            "Configuration 'streams.rack.aware.assignment.tags' values must not be empty.",
        ),
    ),
    (
        [("streams.assignor.name", SET, "foo")],
        (
            INVALID_CONFIG,
            "streams.assignor.name 'foo' is not a registered task assignor. "
            "Registered assignors are: [sticky].",
        ),
    ),
    (
        [("errors.deadletterqueue.topic.name", SET, " __dlq")],
        (
            INVALID_CONFIG,
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'",
        ),
    ),
    ([("nope", SET, "1")], (INVALID_CONFIG, "Unknown group config name: nope")),
    ([("zzz", SET, "1"), ("aaa", SET, "1")], (INVALID_CONFIG, "Unknown group config name: aaa")),
    (
        [("consumer.session.timeout.ms", APPEND, "1")],
        (
            INVALID_CONFIG,
            "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST.",
        ),
    ),
    (
        [("streams.rack.aware.assignment.tags", SUBTRACT, "c")],
        (
            INVALID_CONFIG,
            "Can't SUBTRACT to key streams.rack.aware.assignment.tags "
            "because its type is not LIST.",
        ),
    ),
    (
        [("nope", SET, "1"), ("share.delivery.count.limit", APPEND, "1")],
        (
            INVALID_CONFIG,
            "Can't APPEND to key share.delivery.count.limit because its type is not LIST.",
        ),
    ),
    ([("consumer.session.timeout.ms", 7, "50000")], (UNKNOWN_SERVER_ERROR, None)),
    (
        [("share.record.lock.duration.ms", SET, None)],
        (INVALID_REQUEST, "Null value not supported for : share.record.lock.duration.ms"),
    ),
    (
        [("b", SET, None), ("a", SET, None)],
        (INVALID_REQUEST, "Null value not supported for : b, a"),
    ),
    (
        [("nope", SET, "1"), ("share.delivery.count.limit", SET, None)],
        (INVALID_REQUEST, "Null value not supported for : share.delivery.count.limit"),
    ),
    (
        [("share.delivery.count.limit", SET, "3"), ("share.delivery.count.limit", DELETE, None)],
        (INVALID_REQUEST, "Error due to duplicate config keys"),
    ),
    # several bad values: the first in GroupConfig's definition order, parsing first
    (
        [("share.delivery.count.limit", SET, "1"), ("consumer.session.timeout.ms", SET, "x")],
        (
            INVALID_CONFIG,
            "Invalid value x for configuration consumer.session.timeout.ms: "
            "Not a number of type INT",
        ),
    ),
    (
        [("share.delivery.count.limit", SET, "11"), ("consumer.heartbeat.interval.ms", SET, "1")],
        (
            INVALID_CONFIG,
            "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive.",
        ),
    ),
    (
        [("streams.rack.aware.assignment.tags", SET, "a,a"), ("nope", SET, "1")],
        (INVALID_CONFIG, "Unknown group config name: nope"),
    ),
    (
        [("streams.assignor.name", SET, "foo"), ("share.record.lock.duration.ms", SET, "2000")],
        (
            INVALID_CONFIG,
            "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive.",
        ),
    ),
    # accepted
    *(
        ([(name, SET, value)], (0, None))
        for name, value in (
            ("consumer.session.timeout.ms", " 50000 "),
            ("consumer.heartbeat.interval.ms", "+6000"),
            ("consumer.assignment.interval.ms", "0"),
            ("share.session.timeout.ms", "60000"),
            ("share.heartbeat.interval.ms", "15000"),
            ("share.record.lock.duration.ms", "15000"),
            ("share.delivery.count.limit", "2"),
            ("share.partition.max.record.locks", "100"),
            ("share.auto.offset.reset", " earliest "),
            ("share.auto.offset.reset", "by_duration:PT1H"),
            ("share.auto.offset.reset", "by_duration:pt1h"),
            ("share.auto.offset.reset", "by_duration:P1DT2H3M4.5S"),
            ("share.auto.offset.reset", "by_duration:PT1,5S"),
            ("share.auto.offset.reset", "by_duration:P1DT-1H"),
            ("share.auto.offset.reset", "by_duration:-PT-1H"),
            ("share.auto.offset.reset", "by_duration:PT0S"),
            ("share.isolation.level", "read_committed"),
            ("share.renew.acknowledge.enable", "FALSE"),
            ("errors.deadletterqueue.topic.name", ""),
            ("errors.deadletterqueue.copy.record.enable", "true"),
            ("streams.num.standby.replicas", "2"),
            ("streams.initial.rebalance.delay.ms", "999999999"),
            ("streams.rack.aware.assignment.tags", " a , b "),
            ("streams.rack.aware.assignment.tags", ""),
            ("streams.assignor.name", "sticky"),
            ("consumer.assignor.offload.enable", "false"),
            ("streams.num.warmup.replicas", "3"),
            ("streams.acceptable.recovery.lag", "5"),
        )
    ),
    ([("nope", DELETE, None)], (0, None)),
    ([("consumer.session.timeout.ms", DELETE, "7")], (0, None)),
]


def _alter(
    kafka: RawKafka, group: str, ops: list[tuple[str, int, str | None]], validate_only: bool
) -> tuple[int, str | None]:
    body = {
        "resources": [
            {
                "resource_type": GROUP,
                "resource_name": group,
                "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops],
            }
        ],
        "validate_only": validate_only,
    }
    [answer] = kafka.request(INCREMENTAL_ALTER_CONFIGS, 1, body).responses
    return answer.error_code, answer.error_message


def _describe(
    kafka: RawKafka,
    group: str,
    keys: list[str] | None = None,
    synonyms: bool = True,
    docs: bool = True,
) -> Any:
    body = {
        "resources": [{"resource_type": GROUP, "resource_name": group, "configuration_keys": keys}],
        "include_synonyms": synonyms,
        "include_documentation": docs,
    }
    [result] = kafka.request(DESCRIBE_CONFIGS, 4, body).results
    return result


def _entries(result: Any) -> list[tuple[Any, ...]]:
    return [
        (
            c.name,
            c.value,
            c.config_source,
            c.config_type,
            c.read_only,
            c.is_sensitive,
            [(s.name, s.value, s.source) for s in c.synonyms],
        )
        for c in result.configs
    ]


def _group(label: str) -> str:
    return f"gc-{label}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kafka(skiff: Skiff) -> Iterator[RawKafka]:
    with RawKafka("127.0.0.1", skiff.port) as client:
        yield client


def test_describe_lists_kafka_44s_group_configs(kafka: RawKafka) -> None:
    """A group that sets nothing (and need not exist): Kafka 4.4's 21 configs, in its
    order, with its types, defaults and synonyms, sources DEFAULT_CONFIG."""
    result = _describe(kafka, _group("new"))
    assert (result.error_code, result.error_message) == (0, "")
    assert _entries(result) == [
        (name, value, DEFAULT_CONFIG, kind, False, False, [(synonym, value, DEFAULT_CONFIG)])
        for name, value, kind, synonym in KAFKA_44_GROUP_CONFIGS
    ]
    # no synonyms asked: none; only the keys asked (unknown ones are left out)
    plain = _describe(kafka, _group("new"), synonyms=False)
    assert [(c.name, c.value, list(c.synonyms)) for c in plain.configs] == [
        (name, value, []) for name, value, _, _ in KAFKA_44_GROUP_CONFIGS
    ]
    some = _describe(kafka, _group("new"), keys=["share.delivery.count.limit", "nope", "x"])
    assert [c.name for c in some.configs] == ["share.delivery.count.limit"]
    empty = _describe(kafka, "")
    assert (empty.error_code, empty.error_message, list(empty.configs)) == (
        INVALID_REQUEST,
        "Group name must not be empty",
        [],
    )


def test_documentation_only_when_asked(kafka: RawKafka) -> None:
    """include_documentation: Kafka 4.4's texts; without it, null."""
    documented = _describe(kafka, _group("doc"), docs=True)
    assert [c.documentation for c in documented.configs] == [
        GROUP_DOCS[name] for name, _, _, _ in KAFKA_44_GROUP_CONFIGS
    ]
    assert documented.configs[0].documentation == (
        "The timeout to detect client failures when using the consumer group protocol."
    )
    assert documented.configs[-2].documentation == (
        "Share-group record lock limit per share-partition."
    )
    undocumented = _describe(kafka, _group("doc"), docs=False)
    assert [c.documentation for c in undocumented.configs] == [None] * 21


def test_alter_answers_are_kafka_44s(kafka: RawKafka) -> None:
    """Every case of KAFKA_44_ALTER_ANSWERS, validate_only; then the same bad ones for
    real change nothing."""
    group = _group("alter")
    got = [(ops, _alter(kafka, group, ops, True)) for ops, _ in KAFKA_44_ALTER_ANSWERS]
    assert got == KAFKA_44_ALTER_ANSWERS
    for ops, answer in KAFKA_44_ALTER_ANSWERS:
        if answer[0] != 0:
            assert _alter(kafka, group, ops, False) == answer
    assert {c.config_source for c in _describe(kafka, group).configs} == {DEFAULT_CONFIG}
    # a group name is needed; checked after the operations, before the names
    assert _alter(kafka, "", [("nope", SET, "1")], True) == (
        INVALID_REQUEST,
        "Default group resources are not allowed.",
    )
    assert _alter(kafka, "", [("x", APPEND, "1")], False) == (
        INVALID_CONFIG,
        "Can't APPEND to key x because its type is not LIST.",
    )


def test_set_configs_are_described_back_as_kafka_does(kafka: RawKafka) -> None:
    """SET: GROUP_CONFIG, the value as Kafka prints it again (numbers, booleans and lists
    normalised; internal configs as sent, listed first), the broker's default as the
    second synonym; DELETE goes back to the default; validate_only and a refused resource
    change nothing."""
    group = _group("set")
    sets = [
        ("consumer.session.timeout.ms", SET, "50000"),
        ("consumer.heartbeat.interval.ms", SET, " +6000 "),
        ("share.delivery.count.limit", SET, "7"),
        ("share.auto.offset.reset", SET, "by_duration:PT1H"),
        ("share.renew.acknowledge.enable", SET, "FALSE"),
        ("streams.rack.aware.assignment.tags", SET, " a , b "),
        ("streams.assignor.name", SET, "sticky"),
        ("errors.deadletterqueue.topic.name", SET, " dlq "),
        ("streams.num.standby.replicas", SET, "1"),
        ("share.partition.max.record.locks", SET, "0500"),
        ("consumer.assignor.offload.enable", SET, "FALSE"),
        ("streams.acceptable.recovery.lag", SET, " 5 "),
    ]
    assert _alter(kafka, group, sets, True) == (0, None)
    assert {c.config_source for c in _describe(kafka, group).configs} == {DEFAULT_CONFIG}
    assert _alter(kafka, group, sets, False) == (0, None)
    expected_values = {
        "consumer.assignor.offload.enable": "FALSE",  # internal: as sent
        "streams.acceptable.recovery.lag": " 5 ",
        "consumer.session.timeout.ms": "50000",
        "consumer.heartbeat.interval.ms": "6000",
        "share.delivery.count.limit": "7",
        "share.auto.offset.reset": "by_duration:PT1H",
        "share.renew.acknowledge.enable": "false",
        "streams.rack.aware.assignment.tags": "a,b",
        "streams.assignor.name": "sticky",
        "errors.deadletterqueue.topic.name": "dlq",
        "streams.num.standby.replicas": "1",
        "share.partition.max.record.locks": "500",
    }
    defaults = {name: (value, synonym) for name, value, _, synonym in KAFKA_44_GROUP_CONFIGS}
    defaults["consumer.assignor.offload.enable"] = (
        "true",
        "group.consumer.assignor.offload.enable",
    )
    defaults["streams.acceptable.recovery.lag"] = ("10000", "group.streams.acceptable.recovery.lag")
    result = _describe(kafka, group)
    names = [c.name for c in result.configs]
    assert names == [
        "consumer.assignor.offload.enable",
        "streams.acceptable.recovery.lag",
        *(name for name, _, _, _ in KAFKA_44_GROUP_CONFIGS),
    ]
    for c in result.configs:
        default, synonym = defaults[c.name]
        synonyms = [(s.name, s.value, s.source) for s in c.synonyms]
        if c.name in expected_values:
            value = expected_values[c.name]
            assert (c.value, c.config_source) == (value, GROUP_CONFIG), c.name
            assert synonyms == [(c.name, value, GROUP_CONFIG), (synonym, default, DEFAULT_CONFIG)]
        else:
            assert (c.value, c.config_source) == (default, DEFAULT_CONFIG), c.name
    assert _describe(kafka, group, keys=["consumer.assignor.offload.enable"]).configs[0].value == (
        "FALSE"
    )
    # a refused resource changes nothing, nor does DELETE of what is not set
    bad = [("share.delivery.count.limit", DELETE, None), ("streams.num.standby.replicas", SET, "3")]
    assert _alter(kafka, group, bad, False)[0] == INVALID_CONFIG
    deletes = [
        ("share.delivery.count.limit", DELETE, None),
        ("streams.rack.aware.assignment.tags", DELETE, None),
        ("errors.deadletterqueue.topic.name", DELETE, None),
        ("consumer.assignor.offload.enable", DELETE, None),
        ("share.isolation.level", DELETE, None),
        ("nope", DELETE, None),
    ]
    assert _alter(kafka, group, deletes, False) == (0, None)
    now = {c.name: (c.value, c.config_source) for c in _describe(kafka, group).configs}
    assert "consumer.assignor.offload.enable" not in now
    for name in (
        "share.delivery.count.limit",
        "streams.rack.aware.assignment.tags",
        "errors.deadletterqueue.topic.name",
        "share.isolation.level",
    ):
        assert now[name] == (defaults[name][0], DEFAULT_CONFIG), name
    assert now["streams.num.standby.replicas"] == ("1", GROUP_CONFIG)


def test_server_defaults_are_static_broker_configs_and_widen_the_bounds(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """A server flag that differs from Kafka's default is the group configs' default, a
    static broker config (4) with Kafka's default as second synonym, as Skiff describes
    its broker; outside Kafka's bounds it widens them. Kafka's session > heartbeat check
    takes the server defaults for what the group does not set."""
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        redis_server.url,
        "--group-share-record-lock-duration-ms",
        "5000",
        "--group-share-delivery-count-limit",
        "12",
        "--group-consumer-session-timeout-ms",
        "1500",
        "--group-consumer-heartbeat-interval-ms",
        "500",
    )
    try:
        with RawKafka("127.0.0.1", server.port) as kafka:
            group = _group("flags")
            described = {c.name: c for c in _describe(kafka, group).configs}
            lock = described["share.record.lock.duration.ms"]
            assert (lock.value, lock.config_source) == ("5000", STATIC_BROKER_CONFIG)
            assert [(s.name, s.value, s.source) for s in lock.synonyms] == [
                ("group.share.record.lock.duration.ms", "5000", STATIC_BROKER_CONFIG),
                ("group.share.record.lock.duration.ms", "30000", DEFAULT_CONFIG),
            ]
            share_session = described["share.session.timeout.ms"]
            assert (share_session.value, share_session.config_source) == ("45000", DEFAULT_CONFIG)
            lock_name, limit = "share.record.lock.duration.ms", "share.delivery.count.limit"
            session, hb = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
            for ops, answer in (
                ([(lock_name, SET, "5000")], (0, None)),
                (
                    [(lock_name, SET, "4999")],
                    (INVALID_CONFIG, f"{lock_name} must be in the range 5000 to 60000 inclusive."),
                ),
                ([(limit, SET, "12")], (0, None)),
                (
                    [(limit, SET, "13")],
                    (INVALID_CONFIG, f"{limit} must be in the range 2 to 12 inclusive."),
                ),
                ([(session, SET, "1500"), (hb, SET, "500")], (0, None)),
                ([(hb, SET, "1500")], (INVALID_CONFIG, f"{session} must be greater than {hb}")),
                ([(hb, SET, "1000")], (0, None)),
            ):
                assert _alter(kafka, group, ops, True) == answer, ops
            # the group's own session timeout counts once set
            assert _alter(kafka, group, [(session, SET, "3000")], False) == (0, None)
            assert _alter(kafka, group, [(hb, SET, "2999")], True) == (0, None)
            assert _alter(kafka, group, [(hb, SET, "3000")], True) == (
                INVALID_CONFIG,
                f"{session} must be greater than {hb}",
            )
    finally:
        stop_process(server.proc)


def _create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)


def _read(skiff: Skiff, group: str, topic: str) -> list[int]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{skiff.http_port}/v1/queues/{group}/records:read",
        json.dumps({"topics": [topic], "max_records": 100}).encode(),
        {"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return sorted(r["offset"] for r in json.loads(answer.read())["records"])


def test_share_configs_apply(skiff: Skiff, kafka: RawKafka) -> None:
    """share.heartbeat.interval.ms is the interval a share group's members are told;
    share.auto.offset.reset=by_duration:<d> starts a group at the first record at most
    <d> old; the queue-backed settings are the HTTP queue group's."""
    topic = f"gc-t-{uuid.uuid4().hex[:8]}"
    _create(skiff.bootstrap, topic)
    producer = Producer({"bootstrap.servers": skiff.bootstrap, "linger.ms": 0})
    now_ms = int(time.time() * 1000)
    for i in range(3):  # two hours old
        producer.produce(topic, value=f"old-{i}".encode(), timestamp=now_ms - 7_200_000)
    assert producer.flush(30) == 0
    for i in range(2):
        producer.produce(topic, value=f"new-{i}".encode())
    assert producer.flush(30) == 0
    starts = {"by_duration:PT1H": [3, 4], "by_duration:PT3H": [0, 1, 2, 3, 4], "latest": []}
    for reset, offsets in starts.items():
        group = _group("reset")
        assert _alter(kafka, group, [("share.auto.offset.reset", SET, reset)], False) == (0, None)
        assert _read(skiff, group, topic) == offsets, reset
    group = _group("hb")
    member = ShareMember("127.0.0.1", skiff.port, group)
    try:
        assert member.join([topic]).heartbeat_interval.total_seconds() * 1000 == 5000
        assert _alter(kafka, group, [("share.heartbeat.interval.ms", SET, "7000")], False) == (
            0,
            None,
        )
        beat = member.heartbeat(member.member_epoch)
        assert beat.heartbeat_interval.total_seconds() * 1000 == 7000
    finally:
        member.close()
    # The HTTP queue API sees (and sets) the queue-backed ones.
    group = _group("http")
    ops = [
        ("share.record.lock.duration.ms", SET, "20000"),
        ("share.isolation.level", SET, "read_committed"),
    ]
    assert _alter(kafka, group, ops, False) == (0, None)
    with urllib.request.urlopen(
        f"http://127.0.0.1:{skiff.http_port}/v1/queues/{group}", timeout=10
    ) as answer:
        cfg = json.loads(answer.read())
    assert (cfg["lock_ms"], cfg["isolation_level"]) == (20000, "read_committed")


# -- kafka-configs ----------------------------------------------------------------------


def _kafka_configs_44(runs: list[list[str]]) -> list[tuple[int, str]]:
    """Kafka 4.4.0's kafka-configs, once per argument list: (exit code, what it says:
    its output, or the exception's cause)."""
    tools = Path(__file__).resolve().parents[1] / "tools"
    if str(tools) not in sys.path:
        sys.path.insert(0, str(tools))
    import kafka_cli  # tools/kafka_cli.py

    def one(args: list[str]) -> tuple[int, str]:
        try:
            main_class = kafka_cli.tool_class("kafka-configs", "4.4.0")
            cmd = kafka_cli.command(main_class, args, "ERROR", "4.4.0")
        except ToolsUnavailable as exc:
            pytest.skip(f"no Kafka 4.4.0 tools: {exc}")
        done = subprocess.run(
            cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120
        )
        if done.returncode != 0:
            causes = [line for line in done.stderr.splitlines() if line.startswith("Caused by:")]
            return done.returncode, "\n".join(causes[-1:])
        return 0, done.stdout

    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(one, runs))


def test_kafka_configs_44_prints_the_same_for_skiff_and_kafka(skiff: Skiff) -> None:
    """kafka-configs --entity-type groups (Kafka 4.4.0's tool): --describe --all of a
    new group, --alter (accepted and refused), --describe of what a group set and the
    groups with configs print the same against Skiff and a Kafka 4.4.0 broker."""
    g1, g2 = _group("cli-new"), _group("cli-set")

    def alters(bootstrap: str) -> list[list[str]]:
        common = ["--bootstrap-server", bootstrap, "--entity-type", "groups"]
        return [
            [*common, "--entity-name", g1, "--describe", "--all"],
            [
                *common,
                "--entity-name",
                g2,
                "--alter",
                "--add-config",
                "consumer.heartbeat.interval.ms=6000,share.auto.offset.reset=by_duration:PT1H,"
                "streams.num.standby.replicas=1,share.delivery.count.limit=7",
            ],
            [
                *common,
                "--entity-name",
                g2,
                "--alter",
                "--add-config",
                "share.delivery.count.limit=11",
            ],
            [*common, "--entity-name", g2, "--alter", "--add-config", "nope=1"],
            [
                *common,
                "--entity-name",
                g2,
                "--alter",
                "--delete-config",
                "streams.num.standby.replicas",
            ],
        ]

    def describes(bootstrap: str) -> list[list[str]]:
        common = ["--bootstrap-server", bootstrap, "--entity-type", "groups"]
        return [
            [*common, "--entity-name", g2, "--describe"],
            [*common, "--entity-name", g2, "--describe", "--all"],
        ]

    try:
        with reference_kafka(version="4.4.0") as kafka:
            first = _kafka_configs_44(alters(kafka) + alters(skiff.bootstrap))
            time.sleep(1)  # Kafka's describe reads metadata the alteration propagates to
            second = _kafka_configs_44(describes(kafka) + describes(skiff.bootstrap))
    except ToolsUnavailable as exc:
        pytest.skip(f"no reference Kafka: {exc}")
    n, m = len(first) // 2, len(second) // 2
    assert first[n:] == first[:n]
    assert second[m:] == second[:m]
    assert first[0][1].startswith(f"All configs for group {g1} are:\n  consumer.assignment")
    assert first[2] == (
        1,
        "Caused by: org.apache.kafka.common.errors.InvalidConfigurationException: "
        "share.delivery.count.limit must be in the range 2 to 10 inclusive.",
    )
    assert second[0] == (
        0,
        f"Dynamic configs for group {g2} are:\n"
        "  consumer.heartbeat.interval.ms=6000 sensitive=false synonyms="
        "{DYNAMIC_GROUP_CONFIG:consumer.heartbeat.interval.ms=6000, "
        "DEFAULT_CONFIG:group.consumer.heartbeat.interval.ms=5000}\n"
        "  share.auto.offset.reset=by_duration:PT1H sensitive=false synonyms="
        "{DYNAMIC_GROUP_CONFIG:share.auto.offset.reset=by_duration:PT1H, "
        "DEFAULT_CONFIG:share.auto.offset.reset=latest}\n"
        "  share.delivery.count.limit=7 sensitive=false synonyms="
        "{DYNAMIC_GROUP_CONFIG:share.delivery.count.limit=7, "
        "DEFAULT_CONFIG:group.share.delivery.count.limit=5}\n",
    )
