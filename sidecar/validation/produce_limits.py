"""Produce-time limits from a topic's effective config, as Kafka checks them
(UnifiedLog.analyzeAndValidateRecords, LogValidator, UnifiedLog.append), in Kafka's
order: batch size (MESSAGE_TOO_LARGE, before the CRC is checked), timestamps
(INVALID_TIMESTAMP), then the segment size (RECORD_LIST_TOO_LARGE). Each raises
InvalidBatch, so nothing of a refused batch is stored.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from sidecar.config.topic import segment_bytes, timestamp_bounds
from sidecar.protocol.record_batch import FLAG_KEY_NULL, DecodedBatch, InvalidBatch

NO_TIMESTAMP = -1


def check_size(size: int, config: Mapping[str, Any], topic: str, partition: int) -> None:
    """max.message.bytes against the batch as sent (compressed, header included)."""
    limit = config["max.message.bytes"]
    if size > limit:
        raise InvalidBatch(
            "MESSAGE_TOO_LARGE",
            f"The record batch size in the append to {topic}-{partition} is {size} bytes "
            f"which exceeds the maximum configured value of {limit}.",
        )


def check_keys(batch: DecodedBatch, config: Mapping[str, Any], topic: str, partition: int) -> None:
    """A compacted topic refuses records without a key (Kafka's LogValidator.validateKey)."""
    if "compact" not in config["cleanup.policy"]:
        return
    keyless = [i for i, f in enumerate(batch.records[4::5]) if f & FLAG_KEY_NULL]  # type: ignore[operator]
    if keyless:
        raise keyless_error(keyless, topic, partition)


def keyless_error(keyless: list[int], topic: str, partition: int) -> InvalidBatch:
    """What a compacted topic answers for the records (indexes) without a key."""
    why = (
        f"Compacted topic cannot accept message without key in topic partition {topic}-{partition}"
    )
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{why}')" for i in keyless[:3])
    return InvalidBatch(
        "INVALID_RECORD",
        f"One or more records have been rejected due to {len(keyless)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        [(i, why) for i in keyless],
    )


def check_batch(
    batch: DecodedBatch,
    size: int,
    config: Mapping[str, Any],
    topic: str,
    partition: int,
    now_ms: int | None = None,
) -> None:
    """A decoded batch's timestamps (CreateTime topics), then its size against
    segment.bytes (Kafka refuses a batch no segment could hold)."""
    bounds = timestamp_bounds(config)
    if bounds is not None:
        check_timestamps(
            batch.records[0::5],  # type: ignore[arg-type]
            bounds,
            int(time.time() * 1000) if now_ms is None else now_ms,
        )
    check_segment(size, config, topic, partition)


def check_segment(size: int, config: Mapping[str, Any], topic: str, partition: int) -> None:
    """Kafka refuses a batch no segment could hold (segment.bytes)."""
    segment = segment_bytes(config)
    if size > segment:
        raise InvalidBatch(
            "RECORD_LIST_TOO_LARGE",
            f"Message batch size is {size} bytes in append to partition {topic}-{partition}, "
            f"which exceeds the maximum configured segment size of {segment}.",
        )


def check_timestamps(stamps: list[int], bounds: tuple[int, int], now: int) -> None:
    """Each record's timestamp (in batch order) within (before, after) ms of now."""
    before, after = bounds
    # The common case costs two C-level passes; records are looked at one by one only
    # when some timestamp may be out of range (a NO_TIMESTAMP record, -1, is allowed).
    if now - min(stamps) <= before and max(stamps) - now <= after:  # type: ignore[operator]
        return
    low, high = _java_long(now - before), _java_long(now + after)
    bad = [
        (
            i,
            f"Timestamp {ts} of message with offset {i} is out of range. The timestamp "
            f"should be within [{low}, {high}]",
        )
        for i, ts in enumerate(stamps)
        if ts != NO_TIMESTAMP and (now - ts > before or ts - now > after)  # type: ignore[operator]
    ]
    if bad:
        raise InvalidBatch(
            "INVALID_TIMESTAMP",
            "One or more records have been rejected due to invalid timestamp",
            bad,
        )


def _java_long(value: int) -> int:
    """Kafka prints the range with Java long arithmetic (which wraps)."""
    return (value + 2**63) % 2**64 - 2**63
