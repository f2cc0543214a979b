"""Topic configs: CreateTopics `configs` validated and stored as Kafka does, CreateTopics
v5+ listing every config of a new topic, server defaults from flags, and the limits
Produce enforces (max.message.bytes, segment.bytes, timestamps, LogAppendTime).

Expected answers (error codes, messages, defaults, config sources) are what Apache
Kafka 4.4.0 returned for the same requests (tools/kafka_reference starts one).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, RedisServer, Skiff, start_skiff, stop_process
from log_helpers import stored_values
from rawkafka import (
    RawKafka,
    Rec,
    build_batch,
    fetch_request,
    metadata_request,
    produce_request,
    read_batches,
)

PRODUCE, FETCH, METADATA, CREATE_TOPICS = 0, 1, 3, 19
NONE = 0
MESSAGE_TOO_LARGE = 10
RECORD_LIST_TOO_LARGE = 18
INVALID_TIMESTAMP = 32
TOPIC_ALREADY_EXISTS = 36
INVALID_CONFIG = 40
TOPIC_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 3, 4, 5
# Kafka 4 formats a cluster with min.insync.replicas as a cluster-wide dynamic config
# (KIP-966), so a topic without its own shows that source.
MIN_ISR = "min.insync.replicas"


def server_source(name: str, static: bool = False) -> int:
    if name == MIN_ISR:
        return DYNAMIC_DEFAULT_BROKER_CONFIG
    return STATIC_BROKER_CONFIG if static else DEFAULT_CONFIG


LONG_MAX = str(2**63 - 1)

# Every topic config of Kafka 4.4.0 with its default, as its CreateTopics v7 answer lists
# them (sorted by name).
KAFKA_DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.type": "producer",
    "compression.zstd.level": "3",
    "delete.retention.ms": "86400000",
    "errors.deadletterqueue.group.enable": "false",
    "file.delete.delay.ms": "60000",
    "flush.messages": LONG_MAX,
    "flush.ms": LONG_MAX,
    "follower.replication.throttled.replicas": "",
    "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": LONG_MAX,
    "max.decompressed.message.bytes": "2147483639",
    "max.message.bytes": "1048588",
    "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": LONG_MAX,
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "remote.copy.lag.bytes": "-1",
    "remote.copy.lag.ms": "0",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
}


@pytest.fixture
def kafka(skiff: Skiff) -> Iterator[RawKafka]:
    with RawKafka("127.0.0.1", skiff.port) as client:
        yield client


def new_topic(prefix: str = "cfg") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def create_request(
    name: str,
    configs: list[tuple[str, str | None]],
    partitions: int = 1,
    validate_only: bool = False,
) -> dict[str, Any]:
    return {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": n, "value": v} for n, v in configs],
            }
        ],
        "timeout": 10000,
        "validate_only": validate_only,
    }


def create(
    kafka: RawKafka, name: str, configs: list[tuple[str, str | None]], version: int = 7, **kw: Any
) -> Any:
    [result] = kafka.request(CREATE_TOPICS, version, create_request(name, configs, **kw)).topics
    return result


def create_ok(kafka: RawKafka, configs: list[tuple[str, str]], prefix: str = "cfg") -> str:
    name = new_topic(prefix)
    result = create(kafka, name, configs)
    assert result.error_code == NONE, result
    return name


def listed(result: Any) -> dict[str, tuple[str | None, int]]:
    return {c.name: (c.value, c.config_source) for c in result.configs}


def stored(redis: RedisServer, name: str) -> dict[str, Any] | None:
    raw = redis.client().hget("skiff:topics", name)
    return json.loads(raw) if raw else None


def produce(kafka: RawKafka, topic: str, batch: bytes, version: int = 9, acks: int = -1) -> Any:
    resp = kafka.request(PRODUCE, version, produce_request(topic, {0: batch}, acks=acks))
    return resp.responses[0].partition_responses[0]


def log_length(redis: RedisServer, topic: str) -> int:
    """Records stored in partition 0, in either storage format."""
    return len(stored_values(redis.client(), f"skiff:{{{topic}/0}}:log"))


def high_watermark(redis: RedisServer, topic: str) -> int:
    return int(redis.client().hget(f"skiff:{{{topic}/0}}:meta", "hw"))


def now_ms() -> int:
    return int(time.time() * 1000)


# -- CreateTopics -----------------------------------------------------------------------------

FORMAT = "skiff.storage.format"


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_stores_configs_and_v5_lists_them(
    kafka: RawKafka, redis_server: RedisServer, version: int
) -> None:
    name = new_topic()
    given = [
        ("max.message.bytes", "2000"),
        ("segment.bytes", "1048576"),  # accepted and stored: Skiff has no segments
        ("retention.ms", " 86400000 "),  # Kafka trims to parse, stores as given
        ("compression.type", "lz4"),
        ("cleanup.policy", "delete,compact"),
        ("min.insync.replicas", "1"),
        ("min.insync.replicas", "2"),  # the last of a repeated name wins, as in Kafka
    ]
    result = create(kafka, name, given, version)
    assert result.error_code == NONE, result
    overrides = {
        "max.message.bytes": "2000",
        "segment.bytes": "1048576",
        "retention.ms": " 86400000 ",
        "compression.type": "lz4",
        "cleanup.policy": "delete,compact",
        "min.insync.replicas": "2",
    }
    assert stored(redis_server, name)["configs"] == overrides  # type: ignore[index]
    if version >= 5:
        # Kafka's configs and Skiff's skiff.storage.format (the server default: record),
        # read-only as it cannot be altered
        assert [c.name for c in result.configs] == sorted([*KAFKA_DEFAULTS, FORMAT])
        expected = {
            n: (overrides[n], TOPIC_CONFIG) if n in overrides else (v, server_source(n))
            for n, v in KAFKA_DEFAULTS.items()
        }
        assert listed(result) == {**expected, FORMAT: ("batch", DEFAULT_CONFIG)}
        assert [c.name for c in result.configs if c.read_only or c.is_sensitive] == [FORMAT]
        assert (result.num_partitions, result.replication_factor) == (1, 1)


def test_a_topic_without_configs_stores_none_and_lists_kafka_defaults(
    kafka: RawKafka, redis_server: RedisServer
) -> None:
    name = new_topic()
    result = create(kafka, name, [])
    assert result.error_code == NONE
    assert listed(result) == {
        **{n: (v, server_source(n)) for n, v in KAFKA_DEFAULTS.items()},
        FORMAT: ("batch", DEFAULT_CONFIG),
    }
    assert "configs" not in stored(redis_server, name)  # type: ignore[operator]


def test_validate_only_lists_configs_and_creates_nothing(
    kafka: RawKafka, redis_server: RedisServer
) -> None:
    name = new_topic()
    result = create(kafka, name, [("retention.ms", "5")], validate_only=True)
    assert result.error_code == NONE
    assert listed(result)["retention.ms"] == ("5", TOPIC_CONFIG)
    assert len(result.configs) == len(KAFKA_DEFAULTS) + 1  # and skiff.storage.format
    assert stored(redis_server, name) is None
    result = create(kafka, name, [(FORMAT, "batch")], validate_only=True)
    assert listed(result)[FORMAT] == ("batch", TOPIC_CONFIG)
    assert stored(redis_server, name) is None
    result = create(kafka, name, [("retention.ms", "x")], validate_only=True)
    assert result.error_code == INVALID_CONFIG


# (configs, Kafka 4.4.0's error message)
INVALID = [
    ([("foo.bar", "1")], "Unknown topic config name: foo.bar"),
    ([("log.retention.ms", "3")], "Unknown topic config name: log.retention.ms"),
    ([("retention.ms", None)], "Null value not supported for topic configs: retention.ms"),
    (
        [("retention.ms", "abc")],
        "Invalid value abc for configuration retention.ms: Not a number of type LONG",
    ),
    (
        [("retention.ms", "1e3")],
        "Invalid value 1e3 for configuration retention.ms: Not a number of type LONG",
    ),
    (
        [("retention.ms", "-5")],
        "Invalid value -5 for configuration retention.ms: Value must be at least -1",
    ),
    (
        [("max.message.bytes", "-1")],
        "Invalid value -1 for configuration max.message.bytes: Value must be at least 0",
    ),
    (
        [("max.message.bytes", "3000000000")],
        "Invalid value 3000000000 for configuration max.message.bytes: Not a number of type INT",
    ),
    (
        [("max.message.bytes", "")],
        "Invalid value  for configuration max.message.bytes: Not a number of type INT",
    ),
    (
        [("compression.type", "GZIP")],
        "Invalid value GZIP for configuration compression.type: String must be one of: "
        "uncompressed, zstd, lz4, snappy, gzip, producer",
    ),
    (
        [("message.timestamp.type", "logappendtime")],
        "Invalid value logappendtime for configuration message.timestamp.type: String must "
        "be one of: CreateTime, LogAppendTime",
    ),
    (
        [("preallocate", "yes")],
        "Invalid value yes for configuration preallocate: Expected value to be either true "
        "or false",
    ),
    (
        [("min.cleanable.dirty.ratio", "2")],
        "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no "
        "more than 1",
    ),
    (
        [("cleanup.policy", "delete,")],
        "Configuration 'cleanup.policy' values must not be empty.",
    ),
    (
        [("cleanup.policy", "foo")],
        "Invalid value foo for configuration cleanup.policy: String must be one of: "
        "compact, delete",
    ),
    (
        [("segment.bytes", "10")],
        "Invalid value 10 for configuration segment.bytes: Value must be at least 1048576",
    ),
    (
        [("min.insync.replicas", "0")],
        "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
    ),
    (
        [("message.timestamp.before.max.ms", "-1")],
        "Invalid value -1 for configuration message.timestamp.before.max.ms: Value must be "
        "at least 0",
    ),
    (
        [("compression.gzip.level", "10")],
        "Invalid value 10 for configuration compression.gzip.level: Value must be between 1 "
        "and 9 or equal to -1",
    ),
    (
        [("compression.zstd.level", "23")],
        "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22",
    ),
    (
        [("segment.bytes", "1048575")],
        "Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576",
    ),
    (
        [("remote.copy.lag.ms", "-2")],
        "Invalid value -2 for configuration remote.copy.lag.ms: Value must be at least -1",
    ),
    (
        [("max.decompressed.message.bytes", "0")],
        "Invalid value 0 for configuration max.decompressed.message.bytes: Value must be at "
        "least 1",
    ),
    (
        [("internal.segment.bytes", "x")],
        "Invalid value x for configuration internal.segment.bytes: Not a number of type INT",
    ),
    # Kafka 4 removed these three.
    ([("message.format.version", "3.0")], "Unknown topic config name: message.format.version"),
    (
        [("message.downconversion.enable", "true")],
        "Unknown topic config name: message.downconversion.enable",
    ),
    (
        [("message.timestamp.difference.max.ms", "5")],
        "Unknown topic config name: message.timestamp.difference.max.ms",
    ),
    (
        [("follower.replication.throttled.replicas", "0:1,x")],
        "Invalid value [0:1, x] for configuration follower.replication.throttled.replicas: "
        "follower.replication.throttled.replicas must be the literal '*' or a list of "
        "replicas in the following format: [partitionId]:[brokerId],[partitionId]:"
        "[brokerId],...",
    ),
    (
        [("remote.storage.enable", "true")],
        "Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
        "with remote log storage.",
    ),
    (
        [("min.compaction.lag.ms", "10"), ("max.compaction.lag.ms", "5")],
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
    ),
    # Kafka parses in its own definition order: retention.ms before max.message.bytes.
    (
        [("max.message.bytes", "y"), ("retention.ms", "x")],
        "Invalid value x for configuration retention.ms: Not a number of type LONG",
    ),
]


@pytest.mark.parametrize(
    ("configs", "message"), INVALID, ids=[f"{c[0][0]}={c[0][1]}" for c, _ in INVALID]
)
def test_invalid_configs_are_refused_and_nothing_is_created(
    kafka: RawKafka, redis_server: RedisServer, configs: list[tuple[str, str | None]], message: str
) -> None:
    name = new_topic()
    for version in (2, 7):
        result = create(kafka, name, configs, version)
        assert (result.error_code, result.error_message) == (INVALID_CONFIG, message)
        if version >= 5:
            assert result.configs == () and result.num_partitions == -1
    assert stored(redis_server, name) is None
    meta = kafka.request(METADATA, 12, metadata_request([name], False)).topics[0]
    assert meta.error_code != NONE


# Values Kafka accepts (stored as given).
ACCEPTED = [
    ("max.message.bytes", " 2000 "),
    ("compression.type", " gzip"),
    ("preallocate", "TRUE"),
    ("cleanup.policy", ""),
    ("retention.ms", "+5"),
    ("retention.bytes", "-7"),
    ("follower.replication.throttled.replicas", "*"),
    ("leader.replication.throttled.replicas", " 0:1 , 2:3 "),
    ("min.cleanable.dirty.ratio", "1e-1"),
    ("remote.copy.lag.bytes", "-1"),
    ("max.decompressed.message.bytes", "1"),
    ("errors.deadletterqueue.group.enable", "true"),
    ("internal.segment.bytes", "13"),  # Kafka's internal config: no lower bound
    ("flush.ms", LONG_MAX),
]


@pytest.mark.parametrize(("name", "value"), ACCEPTED)
def test_values_kafka_accepts_are_stored_as_given(
    kafka: RawKafka, redis_server: RedisServer, name: str, value: str
) -> None:
    topic = create_ok(kafka, [(name, value)])
    assert stored(redis_server, topic)["configs"] == {name: value}  # type: ignore[index]


def test_config_errors_come_after_existence_and_before_partitions(kafka: RawKafka) -> None:
    name = create_ok(kafka, [])
    result = create(kafka, name, [("foo", "1")])
    assert result.error_code == TOPIC_ALREADY_EXISTS
    result = create(kafka, new_topic(), [("foo", "1")], partitions=0)
    assert result.error_code == INVALID_CONFIG


# -- limits on Produce ---------------------------------------------------------------------------


def test_max_message_bytes_is_the_batch_size_as_sent(
    kafka: RawKafka, redis_server: RedisServer
) -> None:
    batch = build_batch([b"x" * 100])
    fits = create_ok(kafka, [("max.message.bytes", str(len(batch)))])
    assert produce(kafka, fits, batch).error_code == NONE
    too_small = create_ok(kafka, [("max.message.bytes", str(len(batch) - 1))])
    for version in (3, 7, 9, 11):
        p = produce(kafka, too_small, batch, version)
        assert p.error_code == MESSAGE_TOO_LARGE
        assert p.base_offset == -1
        if version >= 8:
            assert p.error_message == (
                f"The record batch size in the append to {too_small}-0 is {len(batch)} bytes "
                f"which exceeds the maximum configured value of {len(batch) - 1}."
            )
    assert log_length(redis_server, too_small) == 0
    assert high_watermark(redis_server, too_small) == 0
    # A compressed batch is measured compressed (its records are 40 times larger).
    gz = build_batch([b"y" * 4000] * 10, compression=1)
    assert len(gz) < 400
    small = create_ok(kafka, [("max.message.bytes", str(len(gz)))])
    assert produce(kafka, small, gz).error_code == NONE
    assert log_length(redis_server, small) == 10


def test_a_batch_larger_than_segment_bytes_is_record_list_too_large(
    kafka: RawKafka, redis_server: RedisServer
) -> None:
    # segment.bytes is at least 1 MiB: Kafka's internal.segment.bytes sets a smaller one.
    batch = build_batch([b"x" * 100])
    topic = create_ok(kafka, [("internal.segment.bytes", str(len(batch) - 1))])
    p = produce(kafka, topic, batch)
    assert p.error_code == RECORD_LIST_TOO_LARGE
    assert p.error_message == (
        f"Message batch size is {len(batch)} bytes in append to partition {topic}-0, which "
        f"exceeds the maximum configured segment size of {len(batch) - 1}."
    )
    assert log_length(redis_server, topic) == 0
    # It wins over segment.bytes, as Kafka's LogConfig.segmentSize.
    fits = create_ok(kafka, [("segment.bytes", "1048576"), ("internal.segment.bytes", "100000")])
    assert produce(kafka, fits, batch).error_code == NONE
    # max.message.bytes is checked first, as in Kafka.
    both = create_ok(
        kafka,
        [
            ("internal.segment.bytes", str(len(batch) - 1)),
            ("max.message.bytes", str(len(batch) - 2)),
        ],
    )
    assert produce(kafka, both, batch).error_code == MESSAGE_TOO_LARGE


TIMESTAMP_ERROR = re.compile(
    r"Timestamp (-?\d+) of message with offset (\d+) is out of range\. "
    r"The timestamp should be within \[(-?\d+), (-?\d+)\]"
)


def test_timestamps_outside_before_and_after_max_ms_are_refused(
    kafka: RawKafka, redis_server: RedisServer
) -> None:
    topic = create_ok(
        kafka,
        [("message.timestamp.before.max.ms", "60000"), ("message.timestamp.after.max.ms", "60000")],
    )
    now = now_ms()
    old, future = now - 120_000, now + 120_000
    batch = build_batch(
        [
            Rec(b"a", timestamp=now),
            Rec(b"b", timestamp=old),
            Rec(b"c", timestamp=future),
            Rec(b"d", timestamp=-1),  # no timestamp: never refused
        ]
    )
    p = produce(kafka, topic, batch, version=11)
    assert p.error_code == INVALID_TIMESTAMP
    assert p.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in p.record_errors] == [1, 2]
    for e, ts in zip(p.record_errors, (old, future), strict=True):
        m = TIMESTAMP_ERROR.fullmatch(e.batch_index_error_message)
        assert m, e.batch_index_error_message
        assert int(m[1]) == ts and int(m[2]) == e.batch_index
        low, high = int(m[3]), int(m[4])
        assert high - low == 120_000 and abs(low + 60_000 - now) < 30_000
    assert produce(kafka, topic, batch, version=7).error_code == INVALID_TIMESTAMP
    assert log_length(redis_server, topic) == 0
    ok = build_batch([Rec(b"a", timestamp=now_ms() - 30_000), Rec(b"d", timestamp=-1)])
    assert produce(kafka, topic, ok).error_code == NONE
    assert log_length(redis_server, topic) == 2


def test_by_default_a_timestamp_over_an_hour_ahead_is_refused(
    kafka: RawKafka, redis_server: RedisServer
) -> None:
    """Kafka 4's message.timestamp.after.max.ms default is 1 h (before: unbounded)."""
    topic = create_ok(kafka, [])
    ahead = now_ms() + 2 * 3_600_000
    batch = build_batch([Rec(b"a", timestamp=now_ms()), Rec(b"b", timestamp=ahead)])
    p = produce(kafka, topic, batch, version=11)
    assert p.error_code == INVALID_TIMESTAMP and [e.batch_index for e in p.record_errors] == [1]
    assert log_length(redis_server, topic) == 0
    soon, old = now_ms() + 1_800_000, 978_307_200_000  # half an hour ahead; 2001
    batch = build_batch([Rec(b"a", timestamp=soon), Rec(b"b", timestamp=old)])
    assert produce(kafka, topic, batch).error_code == NONE
    assert log_length(redis_server, topic) == 2


def test_log_append_time_topic_stamps_the_append_time(
    kafka: RawKafka, redis_server: RedisServer
) -> None:
    topic = create_ok(
        kafka,
        [
            ("message.timestamp.type", "LogAppendTime"),
            ("message.timestamp.before.max.ms", "1000"),
            (FORMAT, "record"),  # its stream entries are read below (batch: test_batch_format)
        ],
    )
    before = now_ms()
    # Timestamps are not checked on a LogAppendTime topic: the append time replaces them.
    p = produce(kafka, topic, build_batch([Rec(b"a", timestamp=1), Rec(b"b", timestamp=2)]))
    assert p.error_code == NONE
    append_time = int(p.log_append_time.timestamp() * 1000)
    assert before - 1000 <= append_time <= now_ms() + 1000
    entries = redis_server.client().xrange(f"skiff:{{{topic}/0}}:log")
    assert [int(f[b"t"]) for _, f in entries] == [append_time] * 2
    assert all(int(f[b"f"]) & 4 for _, f in entries)
    resp = kafka.request(FETCH, 12, fetch_request(topic, {0: 0}))
    [batch] = read_batches(resp.responses[0].partitions[0].records)
    assert batch.timestamp_type == 1 and batch.crc_ok
    assert [r.timestamp for r in batch.records] == [append_time] * 2


def test_create_time_topic_keeps_producer_timestamps(kafka: RawKafka) -> None:
    topic = create_ok(kafka, [("message.timestamp.type", "CreateTime")])
    p = produce(kafka, topic, build_batch([Rec(b"a", timestamp=1234)]))
    assert p.error_code == NONE and p.log_append_time is None
    resp = kafka.request(FETCH, 12, fetch_request(topic, {0: 0}))
    [batch] = read_batches(resp.responses[0].partitions[0].records)
    assert batch.timestamp_type == 0 and [r.timestamp for r in batch.records] == [1234]


# -- server defaults from flags ---------------------------------------------------------------


def test_bad_default_flags_are_refused() -> None:
    for args, says in (
        (["--compression-type", "brotli"], "invalid choice"),
        (["--message-max-bytes", "-1"], "must be at least 0"),
        (["--log-message-timestamp-before-max-ms", "x"], "expected an integer"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "sidecar.cli.main", "serve", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.returncode == 2, args
        assert says in proc.stderr, proc.stderr


def test_flags_set_server_defaults_and_topic_configs_override_them(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    a = start_skiff(
        tmp_path / "a.log",
        "--redis-url",
        own_redis.url,
        "--compression-type",
        "gzip",
        "--min-insync-replicas",
        "2",
        "--log-message-timestamp-before-max-ms",
        "60000",
        "--log-message-timestamp-after-max-ms",
        "60000",
        env={"SKIFF_MESSAGE_MAX_BYTES": "300"},
    )
    b: Skiff | None = None
    try:
        with RawKafka("127.0.0.1", a.port) as kafka:
            plain = new_topic()
            result = create(kafka, plain, [])
            assert result.error_code == NONE
            changed = {
                "compression.type": "gzip",
                "max.message.bytes": "300",
                "min.insync.replicas": "2",
                "message.timestamp.before.max.ms": "60000",
                "message.timestamp.after.max.ms": "60000",
            }
            assert listed(result) == {
                **{
                    n: (changed[n], server_source(n, True))
                    if n in changed
                    else (v, server_source(n))
                    for n, v in KAFKA_DEFAULTS.items()
                },
                FORMAT: ("batch", DEFAULT_CONFIG),
            }
            own = create_ok(
                kafka,
                [
                    ("max.message.bytes", "100000"),
                    ("message.timestamp.type", "LogAppendTime"),
                    ("compression.type", "producer"),
                ],
            )
            tight = create_ok(kafka, [("max.message.bytes", "200")])

            big = build_batch([b"z" * 400], compression=0)
            # acks=1: min.insync.replicas=2 would make acks=-1 wait for a Redis replica.
            assert produce(kafka, plain, big, acks=1).error_code == MESSAGE_TOO_LARGE
            assert produce(kafka, own, big, acks=1).error_code == NONE
            old = build_batch([Rec(b"old", timestamp=now_ms() - 3_600_000)])
            assert produce(kafka, plain, old, acks=1).error_code == INVALID_TIMESTAMP
            assert produce(kafka, own, old, acks=1).error_code == NONE  # LogAppendTime
            assert produce(kafka, plain, build_batch([b"v" * 50] * 3), acks=1).error_code == NONE
            # The server's compression.type applies to topics without their own.
            data = kafka.request(FETCH, 12, fetch_request(plain, {0: 0}))
            raw = data.responses[0].partitions[0].records
            assert raw[22] & 0x07 == 1  # gzip
            assert [r.value for r in read_batches(raw)[0].records] == [b"v" * 50] * 3
            own_data = kafka.request(FETCH, 12, fetch_request(own, {0: 0}))
            own_batches = read_batches(own_data.responses[0].partitions[0].records)
            # Both records, LogAppendTime (one batch each on `batch` topics, as produced).
            assert {bt.timestamp_type for bt in own_batches} == {1}
            assert sum(len(bt.records) for bt in own_batches) == 2

        # A second sidecar without those flags: the topics' own configs come from Redis
        # and hold there too, its server defaults are its own (as a Kafka broker's
        # static configs are).
        b = start_skiff(tmp_path / "b.log", "--redis-url", own_redis.url)
        with RawKafka("127.0.0.1", b.port) as kafka:
            assert produce(kafka, tight, build_batch([b"z" * 400])).error_code == MESSAGE_TOO_LARGE
            assert produce(kafka, plain, big).error_code == NONE
            # Topic configs are cached with the topic: producing does not read the
            # topic registry from Redis on every request.
            assert produce(kafka, own, big).error_code == NONE
            client = own_redis.client()
            client.config_resetstat()
            for _ in range(50):
                assert produce(kafka, own, big).error_code == NONE
            hget = client.info("commandstats").get("cmdstat_hget", {}).get("calls", 0)
            assert hget <= 5, f"{hget} HGETs for 50 produces"
    finally:
        stop_process(a.proc)
        if b is not None:
            stop_process(b.proc)
