"""Raw-protocol helpers shared by the retention, compaction and DeleteRecords tests."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from conftest import RedisServer
from rawkafka import RawKafka, Rec, fetch_request, fetched_records, produce_request

PRODUCE, FETCH, LIST_OFFSETS, CREATE_TOPICS, DELETE_TOPICS = 0, 1, 2, 19, 20
DELETE_RECORDS, DESCRIBE_LOG_DIRS = 21, 35
NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_RECORD = 87
POLICY_VIOLATION = 44
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


def new_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def stored_values(client: Any, key: str) -> list[bytes | None]:
    """The record values a partition's stream holds, in offset order, in either storage
    format: a `record` entry's field v, or every record of a `batch` entry's batch b."""
    values: list[bytes | None] = []
    for _, fields in client.xrange(key):
        if b"b" in fields:
            values += [r.value for r in fetched_records(fields[b"b"])]
        else:
            values.append(fields[b"v"])
    return values


def create(
    kafka: RawKafka, name: str, configs: dict[str, str] | None = None, partitions: int = 1
) -> None:
    result = create_result(kafka, name, configs, partitions)
    assert result.error_code == NONE, result


def create_result(
    kafka: RawKafka, name: str, configs: dict[str, str] | None = None, partitions: int = 1
) -> Any:
    """CreateTopics v7 of one topic: its result (error_code, error_message, ...)."""
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
        ],
        "timeout": 10000,
        "validate_only": False,
    }
    [result] = kafka.request(CREATE_TOPICS, 7, body).topics
    return result


def produce(kafka: RawKafka, topic: str, batch: bytes, partition: int = 0) -> Any:
    """Produce v9; the partition's response (error_code, base_offset, log_start_offset)."""
    resp = kafka.request(PRODUCE, 9, produce_request(topic, {partition: batch}))
    return resp.responses[0].partition_responses[0]


def fetch(kafka: RawKafka, topic: str, offset: int, partition: int = 0, version: int = 12) -> Any:
    """One Fetch; the partition's response."""
    resp = kafka.request(FETCH, version, fetch_request(topic, {partition: offset}))
    return resp.responses[0].partitions[0]


def read_from(kafka: RawKafka, topic: str, offset: int, partition: int = 0) -> list[Rec]:
    """Every record from `offset` to the high watermark (Fetch v12 in a loop)."""
    out: list[Rec] = []
    while True:
        p = fetch(kafka, topic, offset, partition)
        assert p.error_code == NONE, p
        recs = fetched_records(p.records)
        recs = [r for r in recs if r.offset is not None and r.offset >= offset]
        if not recs:
            return out
        out += recs
        offset = recs[-1].offset + 1  # type: ignore[operator]
        if offset >= p.high_watermark:
            return out


def list_offset(kafka: RawKafka, topic: str, ts: int, partition: int = 0) -> tuple[int, int]:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "timestamp": ts}]}
        ],
    }
    [p] = kafka.request(LIST_OFFSETS, 7, body).topics[0].partitions
    assert p.error_code == NONE, p
    return int(p.offset), int(p.timestamp)


def delete_records(
    kafka: RawKafka, topic: str, offsets: dict[int, int], version: int = 2
) -> dict[int, tuple[int, int]]:
    """{partition: (error_code, low_watermark)}."""
    body = {
        "topics": [
            {
                "name": topic,
                "partitions": [{"partition_index": p, "offset": o} for p, o in offsets.items()],
            }
        ],
        "timeout": 10000,
    }
    [t] = kafka.request(DELETE_RECORDS, version, body).topics
    return {p.partition_index: (int(p.error_code), int(p.low_watermark)) for p in t.partitions}


def wait_for(check: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def partition_keys(redis: RedisServer, topic: str) -> list[bytes]:
    """Every Redis key of the topic's partitions."""
    return sorted(redis.client().scan_iter(match=f"skiff:{{{topic}/*", count=1000))
