"""Produce (key 0), v3-v11: decode each partition's v2 batch (CRC, decompression),
append it with one EVALSHA of lua/append.lua, answer with the base offset.
The response is hand-encoded: it is on the hot path."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..broker import Broker
from ..protocol import errors
from ..protocol.framing import CloseConnection
from ..protocol.primitives import EMPTY_TAGS, array_len, pack_i16, pack_i32, pack_i64, string
from ..protocol.record_batch import InvalidBatch, decode_batch, split_batches
from ..storage.store import StoreError
from ..topics import invalid_name_reason

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 11
# ApiVersions advertises Produce from v0, as Kafka 4 does since KAFKA-18659: older
# librdkafka silently stops compressing when the advertised minimum is not 0
# (librdkafka issue 4956). v0-v2 requests themselves are still refused.
ADVERTISED_MIN_VERSION = 0

log = logging.getLogger(__name__)
LOG_APPEND_FLAG = 4


class PartitionResult:
    __slots__ = ("index", "error", "base_offset", "append_time", "log_start", "message")

    def __init__(
        self,
        index: int,
        error: int = errors.NONE,
        base_offset: int = -1,
        append_time: int = -1,
        log_start: int = -1,
        message: str | None = None,
    ) -> None:
        self.index = index
        self.error = error
        self.base_offset = base_offset
        self.append_time = append_time
        self.log_start = log_start
        self.message = message


async def _append_partition(
    broker: Broker, topic: str, index: int, records: bytes | None
) -> PartitionResult:
    log_append = broker.settings.message_timestamp_type == "LogAppendTime"
    try:
        if records is None:
            raise InvalidBatch("INVALID_RECORD", "null records")
        decoded = [decode_batch(raw) for raw in split_batches(records)]
        result = None
        for batch in decoded:
            flat = batch.records
            if log_append:
                for i in range(4, len(flat), 5):
                    flat[i] = int(flat[i]) | LOG_APPEND_FLAG
            args: list[Any] = [
                batch.count,
                1 if log_append else 0,
                batch.max_timestamp,
                batch.max_timestamp_delta,
                batch.producer_id,
                batch.producer_epoch,
                batch.base_sequence,
            ]
            args += flat
            appended = await broker.store.append(topic, index, args)
            if result is None:
                result = appended
        assert result is not None
        return PartitionResult(
            index, errors.NONE, result.base_offset, result.append_time, result.log_start_offset
        )
    except InvalidBatch as exc:
        log.warning("rejected batch for %s-%d: %s", topic, index, exc)
        return PartitionResult(index, errors.code(exc.code), message=str(exc))
    except StoreError as exc:
        return PartitionResult(index, errors.code(exc.code), message=str(exc))


async def handle(broker: Broker, request: Any) -> bytes | None:
    body = request.body
    version = request.header.api_version
    acks = body.acks
    work: list[tuple[str, list[Any]]] = []
    for topic in body.topic_data:
        name = topic.name
        futures: list[Any] = []
        if acks not in (0, 1, -1):
            futures = [
                _done(PartitionResult(p.index, errors.INVALID_REQUIRED_ACKS))
                for p in topic.partition_data
            ]
        elif invalid_name_reason(name):
            futures = [
                _done(PartitionResult(p.index, errors.INVALID_TOPIC_EXCEPTION))
                for p in topic.partition_data
            ]
        else:
            info = await broker.topic_for_produce_or_metadata(name)
            for p in topic.partition_data:
                if info is None or not 0 <= p.index < info.partitions:
                    futures.append(
                        _done(PartitionResult(p.index, errors.UNKNOWN_TOPIC_OR_PARTITION))
                    )
                else:
                    futures.append(_append_partition(broker, name, p.index, p.records))
        work.append((name, futures))
    results = await asyncio.gather(*(f for _, fs in work for f in fs))
    if acks == 0:
        failed = [r for r in results if r.error]
        if failed:
            # An acks=0 producer reads no response: Kafka closes the connection so the
            # producer notices, refreshes metadata and retries elsewhere.
            raise CloseConnection(
                f"acks=0 produce failed with error {failed[0].error}: {failed[0].message or ''}"
            )
        return None
    return _encode(version, work, results)


async def _done(result: PartitionResult) -> PartitionResult:
    return result


def _encode(
    version: int, work: list[tuple[str, list[Any]]], results: list[PartitionResult]
) -> bytes:
    flexible = version >= 9
    parts = [array_len(len(work), flexible)]
    it = iter(results)
    for name, futures in work:
        parts.append(string(name, flexible))
        parts.append(array_len(len(futures), flexible))
        for _ in futures:
            r = next(it)
            parts.append(pack_i32(r.index) + pack_i16(r.error) + pack_i64(r.base_offset))
            parts.append(pack_i64(r.append_time))
            if version >= 5:
                parts.append(pack_i64(r.log_start))
            if version >= 8:
                parts.append(array_len(0, flexible))  # record_errors
                parts.append(string(r.message if r.error else None, flexible))
            if flexible:
                parts.append(EMPTY_TAGS)
        if flexible:
            parts.append(EMPTY_TAGS)
    parts.append(pack_i32(0))  # throttle_time_ms
    if flexible:
        parts.append(EMPTY_TAGS)
    return b"".join(parts)
