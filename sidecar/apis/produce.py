"""Produce (key 0), v3-v11: decode each partition's v2 batch (CRC, decompression),
append it with one EVALSHA of lua/append.lua, answer with the base offset.
The response is hand-encoded: it is on the hot path."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..append_order import AppendOrder, Ticket
from ..broker import Broker
from ..protocol import errors
from ..protocol.framing import CloseConnection
from ..protocol.primitives import EMPTY_TAGS, array_len, pack_i16, pack_i32, pack_i64, string
from ..protocol.record_batch import InvalidBatch, decode_batch, single_batch
from ..storage.store import PreparedAppend, StoreError
from ..topics import invalid_name_reason

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 11
# ApiVersions advertises Produce from v0, as Kafka 4 does since KAFKA-18659: older
# librdkafka silently stops compressing when the advertised minimum is not 0
# (librdkafka issue 4956). v0-v2 requests themselves are still refused.
ADVERTISED_MIN_VERSION = 0

log = logging.getLogger(__name__)


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


def _prepare(
    broker: Broker, topic: str, index: int, records: bytes | None
) -> PreparedAppend | PartitionResult:
    """Decode and validate a partition's batch and pack its append (CPU only), or the
    error result when the data is bad: nothing of a bad batch is stored."""
    log_append = broker.settings.message_timestamp_type == "LogAppendTime"
    try:
        if records is None:
            raise InvalidBatch("INVALID_RECORD", "null records")
        batch = decode_batch(single_batch(records), log_append)
    except InvalidBatch as exc:
        log.warning("rejected batch for %s-%d: %s", topic, index, exc)
        return PartitionResult(index, errors.code(exc.code), message=str(exc))
    args: list[Any] = [
        batch.count,
        1 if log_append else 0,
        batch.max_timestamp,
        batch.max_timestamp_delta,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
    ]
    args += batch.records
    return broker.store.prepare_append(topic, index, args)


async def _append(
    broker: Broker, ticket: Ticket, topic: str, index: int, prepared: PreparedAppend
) -> PartitionResult:
    key = (topic, index)
    await ticket.turn(key)
    try:
        r = await broker.store.append(prepared)
        return PartitionResult(index, errors.NONE, r.base_offset, r.append_time, r.log_start_offset)
    except StoreError as exc:
        return PartitionResult(index, errors.code(exc.code), message=str(exc))
    finally:
        ticket.done(key)


async def handle(broker: Broker, request: Any) -> bytes | None:
    ticket: Ticket = request.ticket or AppendOrder().ticket()
    try:
        return await _handle(broker, request, ticket)
    finally:
        ticket.release()


async def _handle(broker: Broker, request: Any, ticket: Ticket) -> bytes | None:
    body = request.body
    version = request.header.api_version
    acks = body.acks
    # Per topic: its name and, per partition, a result or the appends to run.
    work: list[tuple[str, list[PartitionResult | tuple[int, PreparedAppend]]]] = []
    for topic in body.topic_data:
        name = topic.name
        items: list[PartitionResult | tuple[int, PreparedAppend]] = []
        if acks not in (0, 1, -1):
            error = errors.INVALID_REQUIRED_ACKS
        elif invalid_name_reason(name):
            error = errors.INVALID_TOPIC_EXCEPTION
        else:
            error = errors.NONE
            info = await broker.topic_for_produce_or_metadata(name)
        for p in topic.partition_data:
            if error:
                items.append(PartitionResult(p.index, error))
            elif info is None or not 0 <= p.index < info.partitions:
                items.append(PartitionResult(p.index, errors.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                prepared = _prepare(broker, name, p.index, p.records)
                items.append(
                    prepared if isinstance(prepared, PartitionResult) else (p.index, prepared)
                )
        work.append((name, items))

    await ticket.claim(
        (name, item[0]) for name, items in work for item in items if isinstance(item, tuple)
    )
    results = await asyncio.gather(
        *(
            _append(broker, ticket, name, item[0], item[1])
            if isinstance(item, tuple)
            else _done(item)
            for name, items in work
            for item in items
        )
    )
    if acks == 0:
        failed = [r for r in results if r.error]
        if failed:
            # An acks=0 producer reads no response: Kafka closes the connection so the
            # producer notices, refreshes metadata and retries elsewhere.
            raise CloseConnection(
                f"acks=0 produce failed with error {failed[0].error}: {failed[0].message or ''}"
            )
        return None
    return _encode(version, [(name, len(items)) for name, items in work], results)


async def _done(result: PartitionResult) -> PartitionResult:
    return result


def _encode(version: int, work: list[tuple[str, int]], results: list[PartitionResult]) -> bytes:
    flexible = version >= 9
    parts = [array_len(len(work), flexible)]
    it = iter(results)
    for name, count in work:
        parts.append(string(name, flexible))
        parts.append(array_len(count, flexible))
        for _ in range(count):
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
