"""Produce (key 0), v0-v13: decode each partition's v2 batch (CRC, decompression),
or for v0-v2 its legacy message set (protocol/message_set.py), append it with one
EVALSHA of lua/append.lua, answer with the base offset. v13 names topics by id
(KIP-516), in the request and the response; otherwise it is v12.
The response is hand-encoded: it is on the hot path."""

from __future__ import annotations

import asyncio
import datetime
import logging
import struct
import uuid
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from sidecar import connection_context
from sidecar.append_order import AppendOrder, Ticket
from sidecar.broker import Broker
from sidecar.config.topic import effective_config
from sidecar.maintenance.log_bytes import batch_bytes
from sidecar.protocol import errors, stored_batch
from sidecar.protocol.framing import CloseConnection
from sidecar.protocol.kio_codec import ms
from sidecar.protocol.message_set import decode_message_set, first_magic
from sidecar.protocol.primitives import (
    EMPTY_TAGS,
    Reader,
    array_len,
    pack_i16,
    pack_i32,
    pack_i64,
    string,
)
from sidecar.protocol.record_batch import InvalidBatch, decode_batch, single_batch
from sidecar.quotas import PRODUCER_BYTE_RATE
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage import keys, resilience
from sidecar.storage.store import PreparedAppend, StoreError, TopicInfo
from sidecar.telemetry import requests as telemetry
from sidecar.telemetry.logs import RateLimitedLog
from sidecar.validation import produce_limits as limits
from sidecar.validation.topic_names import invalid_name_reason

API_KEY = 0
# v0-v2 carry message sets (magic 0, and magic 1 from v2). Older librdkafka also
# silently stops compressing when the advertised minimum is not 0 (librdkafka 4956).
MIN_VERSION = 0
MAX_VERSION = 13

log = logging.getLogger(__name__)


class PartitionResult:
    __slots__ = (
        "index",
        "error",
        "base_offset",
        "append_time",
        "log_start",
        "message",
        "record_errors",
    )

    def __init__(
        self,
        index: int,
        error: int = errors.NONE,
        base_offset: int = -1,
        append_time: int = -1,
        log_start: int = -1,
        message: str | None = None,
        record_errors: list[tuple[int, str]] | None = None,
    ) -> None:
        self.index = index
        self.error = error
        self.base_offset = base_offset
        self.append_time = append_time
        self.log_start = log_start
        self.message = message
        self.record_errors = record_errors or []


def _prepare(
    broker: Broker,
    topic: str,
    index: int,
    records: bytes | None,
    legacy: bool = False,
    info: TopicInfo | None = None,
) -> PreparedAppend | PartitionResult:
    """Decode and validate a partition's batch against the topic's configs (limits.py)
    and pack its append (CPU only), or the error result when the data is bad or over a
    limit: nothing of a refused batch is stored. A `batch` topic's v2 batch is checked
    and stored as sent (protocol/stored_batch.py)."""
    config = info.config if info is not None else broker.store.topic_defaults
    log_append = config["message.timestamp.type"] == "LogAppendTime"
    retention = config["retention.bytes"] if "delete" in config["cleanup.policy"] else -1
    view: memoryview | None = None
    try:
        if records is None:
            raise InvalidBatch("INVALID_RECORD", "null records")
        if legacy and first_magic(records) < 2:  # v0-v2 (which Kafka lets carry v2 too)
            legacy_batch = decode_message_set(
                records, log_append, lambda n: limits.check_size(n, config, topic, index)
            )
            if legacy_batch is None:  # no complete message: as Kafka, append nothing
                return PartitionResult(index)
            batch = legacy_batch
        else:
            view = single_batch(records)
            limits.check_size(len(view), config, topic, index)
            if info is not None and info.batch_format:
                checked = stored_batch.check(view, config, topic, index)
                limits.check_segment(len(view), config, topic, index)
                telemetry.batch_decoded(topic, index, len(records), checked)
                return broker.store.prepare_batch(
                    topic, index, checked, retention, _is_transactional(records)
                )
            batch = decode_batch(view, log_append)
        limits.check_keys(batch, config, topic, index)
        limits.check_batch(batch, len(records), config, topic, index)
        telemetry.batch_decoded(topic, index, len(records), batch)
    except InvalidBatch as exc:
        log.warning("rejected batch for %s-%d: %s", topic, index, exc)
        return PartitionResult(
            index, errors.code(exc.code), message=str(exc), record_errors=exc.record_errors
        )
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
    if info is not None and info.batch_format:  # a legacy message set, as one v2 batch
        return broker.store.prepare_records(info, index, args, 0, retention)
    return broker.store.prepare_append(
        topic,
        index,
        args,
        batch_bytes(view, batch.records),
        retention,
        transactional=_is_transactional(records),
    )


async def _append(
    broker: Broker,
    ticket: Ticket,
    topic: str,
    index: int,
    prepared: PreparedAppend,
    wait: tuple[int, int] | None,
) -> PartitionResult:
    key = (topic, index)
    if ticket.waits(key):
        await ticket.turn(key)
    try:
        r = await broker.store.append(prepared, wait)
        telemetry.batch_appended(topic, index, r.duplicate)
        return PartitionResult(index, errors.NONE, r.base_offset, r.append_time, r.log_start_offset)
    except StoreError as exc:
        if exc.code == "NOT_ENOUGH_REPLICAS_AFTER_APPEND":
            _log_short_of_replicas(topic, index, f"{exc.code}: {exc}")
        return PartitionResult(index, errors.code(exc.code), message=str(exc))
    finally:
        ticket.done(key)


async def handle(broker: Broker, request: Any) -> bytes | None:
    ticket: Ticket = request.ticket or AppendOrder().ticket()
    # Redis retries end at half the request's timeout_ms (the client's request.timeout.ms,
    # usually), so a retriable error reaches the client before it gives up.
    timeout_ms = ms(request.body.timeout)
    bound = resilience.request_deadline(timeout_ms / 2000) if timeout_ms > 0 else nullcontext()
    try:
        with bound:
            return await _handle(broker, request, ticket)
    finally:
        ticket.release()


async def _handle(broker: Broker, request: Any, ticket: Ticket) -> bytes | None:
    body = request.body
    version = request.header.api_version
    acks = body.acks
    # v13 names each topic by id (KIP-516): as Kafka, an unknown id (or the zero id,
    # which kio reads as None) has no name and gets UNKNOWN_TOPIC_ID; a known one is
    # authorized and served by its name, as in v12.
    by_id = version >= 13
    found: list[TopicInfo | None] = []
    if by_id:
        for t in body.topic_data:
            found.append(await broker.store.topic_by_id(t.topic_id))
        names: list[str | None] = [info.name if info else None for info in found]
    else:
        names = [t.name for t in body.topic_data]
    # Per topic: its name and, per partition, a result or the appends to run.
    work: list[tuple[str, list[PartitionResult | tuple[int, PreparedAppend]]]] = []
    waits: dict[str, tuple[int, int] | None] = {}
    # Kafka: transactional records need WRITE on the transactional id (or every
    # partition fails), then every topic WRITE.
    txn_id = body.transactional_id
    txn_denied = _transactional(body) and (
        txn_id is None
        or not checks.allowed(broker, request, Operation.WRITE, checks.TRANSACTIONAL_ID, txn_id)
    )
    writable = checks.allowed_topics(broker, request, Operation.WRITE, names)
    unverified: dict[tuple[str, int], int] = {}
    if txn_id is not None and not txn_denied and _transactional(body):
        unverified = await _verify_transaction(broker, body, names, txn_id, version, writable)
    for i, topic in enumerate(body.topic_data):
        name = names[i] or ""
        info = found[i] if by_id else None
        items: list[PartitionResult | tuple[int, PreparedAppend]] = []
        if txn_denied:
            error = checks.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif by_id and info is None:
            error = errors.UNKNOWN_TOPIC_ID
        elif name not in writable:
            error = checks.TOPIC_AUTHORIZATION_FAILED
        elif acks not in (0, 1, -1):
            error = errors.INVALID_REQUIRED_ACKS
        elif invalid_name_reason(name):
            error = errors.INVALID_TOPIC_EXCEPTION
        else:
            error = errors.NONE
            if not by_id:
                info = broker.store.cached_topic(name)
                if info is None:
                    info = await broker.store.get_topic(name)
            # Skiff auto-creates on Produce by name too; that needs CREATE, as on Metadata.
            if info is None and not by_id and checks.may_create_topic(broker, request, name):
                info = await broker.topic_for_produce_or_metadata(name)
            if info is not None and acks == -1:
                error, waits[name] = await _replication(broker, info, ms(body.timeout))
        for p in topic.partition_data:
            if error:
                items.append(PartitionResult(p.index, error))
            elif info is None or not 0 <= p.index < info.partitions:
                items.append(PartitionResult(p.index, errors.UNKNOWN_TOPIC_OR_PARTITION))
            elif (name, p.index) in unverified:
                items.append(
                    PartitionResult(
                        p.index,
                        unverified[(name, p.index)],
                        message=_UNVERIFIED_MESSAGE
                        if unverified[(name, p.index)] == errors.INVALID_TXN_STATE
                        else None,
                    )
                )
            elif (wait := waits.get(name)) is not None and await _shard_short_of_replicas(
                broker, name, p.index, wait
            ):
                items.append(PartitionResult(p.index, errors.NOT_ENOUGH_REPLICAS))
            else:
                prepared = _prepare(broker, name, p.index, p.records, version < 3, info)
                items.append(
                    prepared if isinstance(prepared, PartitionResult) else (p.index, prepared)
                )
        work.append((name, items))

    claims = ((name, item[0]) for name, items in work for item in items if isinstance(item, tuple))
    if ticket.ready():
        ticket.claim_now(claims)
    else:
        await ticket.claim(claims)
    runs = [
        _append(broker, ticket, name, item[0], item[1], waits.get(name))
        if isinstance(item, tuple)
        else _done(item)
        for name, items in work
        for item in items
    ]
    # One partition (the usual request of a partitioning producer): no task for it.
    results = [await runs[0]] if len(runs) == 1 else await asyncio.gather(*runs)
    if any(r.record_errors for r in results):
        await _record_error_log_starts(broker, work, results)
    telemetry.partition_errors(r.error for r in results)
    # Kafka counts the whole request against producer_byte_rate, acks=0 too (KIP-219:
    # the answer carries the throttle time and the connection is muted for it).
    throttle_ms = broker.quotas.record(
        PRODUCER_BYTE_RATE,
        request.security.principal.name,
        request.header.client_id or "",
        request.size,
    )
    if throttle_ms > 0:
        connection_context.mute(throttle_ms)
    if acks == 0:
        failed = [r for r in results if r.error]
        if failed:
            # An acks=0 producer reads no response: Kafka closes the connection so the
            # producer notices, refreshes metadata and retries elsewhere.
            raise CloseConnection(
                f"acks=0 produce failed with error {failed[0].error}: {failed[0].message or ''}"
            )
        return None
    # The response names each topic as the request did: by name, or from v13 by id.
    topics = zip(body.topic_data, work, strict=True)
    return _encode(
        version,
        [(topic_key(version, t), len(items)) for t, (_, items) in topics],
        results,
        throttle_ms,
    )


def topic_key(version: int, topic: Any) -> str | uuid.UUID | None:
    """What a response names a request's topic by: its name, from v13 its id."""
    return topic.topic_id if version >= 13 else topic.name


def _is_transactional(records: bytes | None) -> bool:
    """Whether a partition's data starts with a v2 batch flagged transactional
    (attributes bit 4)."""
    return (
        records is not None and len(records) >= 61 and records[16] == 2 and bool(records[22] & 0x10)
    )


def _transactional(body: Any) -> bool:
    return any(_is_transactional(p.records) for t in body.topic_data for p in t.partition_data)


_UNVERIFIED_MESSAGE = "the partition is not in the producer's open transaction"
_PRODUCER = struct.Struct(">qh")  # producer id and epoch, at byte 43 of a v2 batch


async def _verify_transaction(
    broker: Broker,
    body: Any,
    names: list[str | None],
    txn_id: str,
    version: int,
    writable: set[str],
) -> dict[tuple[str, int], int]:
    """Kafka's produce-side transaction verification (KIP-890 part 1): a transactional
    batch is appended only by the id's current producer and epoch, to a partition added
    to its open transaction (AddPartitionsToTxn). From v12 (transaction version 2,
    KIP-890 part 2) a partition not in the transaction is added to it here, opening one
    if none is, as Kafka's partition leader asks its coordinator. Returns the
    partitions refused (`names`: the request's topics', None for an unknown id)."""
    batches = [
        (name, p.index, p.records)
        for name, t in zip(names, body.topic_data, strict=True)
        if name in writable
        for p in t.partition_data
        if _is_transactional(p.records)
    ]
    wanted = [(name, index) for name, index, _ in batches]
    txns = broker.transactions.txns
    pid, epoch, state, inside = await txns.producer(txn_id, wanted)
    refused = {}
    missing = []
    for (name, index, records), member in zip(batches, inside, strict=True):
        got_pid, got_epoch = _PRODUCER.unpack_from(records, 43)  # type: ignore[arg-type]
        if got_pid != pid:
            refused[(name, index)] = errors.INVALID_PRODUCER_ID_MAPPING
        elif got_epoch != epoch:
            refused[(name, index)] = errors.INVALID_PRODUCER_EPOCH
        elif state != b"Ongoing" or not member:
            missing.append((name, index))
    if missing and version >= 12:
        code = await _add_partitions(broker, txn_id, pid, epoch, missing)
        missing = [] if code == errors.NONE else missing
        refused |= dict.fromkeys(missing, code)
    refused |= dict.fromkeys(missing, errors.INVALID_TXN_STATE)
    return refused


# Kafka's partition leader retries CONCURRENT_TRANSACTIONS (the previous transaction
# completing) for add.partitions.to.txn.retry.backoff.max.ms before answering it.
_ADD_RETRIES, _ADD_BACKOFF_S = 5, 0.02


async def _add_partitions(
    broker: Broker, txn_id: str, pid: int, epoch: int, partitions: list[tuple[str, int]]
) -> int:
    """Produce v12+: add the partitions to the producer's transaction (lua/txn.lua add)."""
    members = [keys.offset_field(t, p) for t, p in partitions]
    for attempt in range(_ADD_RETRIES):
        try:
            await broker.transactions.txns.add(txn_id, pid, epoch, "p", members)
            return errors.NONE
        except StoreError as exc:
            if exc.code == "CONCURRENT_TRANSACTIONS" and attempt < _ADD_RETRIES - 1:
                await asyncio.sleep(_ADD_BACKOFF_S)
                continue
            if exc.code == "PRODUCER_FENCED":
                return errors.INVALID_PRODUCER_EPOCH
            return errors.code(exc.code)
    return errors.CONCURRENT_TRANSACTIONS


async def _record_error_log_starts(
    broker: Broker,
    work: list[tuple[str, list[PartitionResult | tuple[int, PreparedAppend]]]],
    results: list[PartitionResult],
) -> None:
    """A batch refused for its records' errors (Kafka's RecordValidationException)
    answers with the partition's log start, as Kafka does; other refusals answer -1."""
    it = iter(results)
    for name, items in work:
        for _ in items:
            r = next(it)
            if r.record_errors:
                try:
                    r.log_start = (await broker.store.watermarks(name, r.index))[0]
                except StoreError:
                    pass


async def _replication(
    broker: Broker, info: TopicInfo, timeout_ms: int
) -> tuple[int, tuple[int, int] | None]:
    """acks=-1: (error, WAIT arguments). The Redis primary counts as one in-sync
    replica, its replicas as the others: with fewer connected than
    min.insync.replicas - 1, NOT_ENOUGH_REPLICAS and nothing is appended; otherwise
    each append is followed by WAIT for that many replicas."""
    min_isr = min_insync_replicas(broker, info)
    if min_isr <= 1:
        return errors.NONE, None
    per_shard = broker.store.replicas_per_partition  # Redis Cluster: checked per partition
    if not per_shard:
        connected = await broker.store.connected_replicas()
        if connected < min_isr - 1:
            _log_short_of_replicas(info.name, None, _short(connected + 1, min_isr))
            return errors.NOT_ENOUGH_REPLICAS, None
    return errors.NONE, (min_isr - 1, max(timeout_ms, 0))


async def _shard_short_of_replicas(
    broker: Broker, topic: str, partition: int, wait: tuple[int, int] | None
) -> bool:
    """On a Redis Cluster: whether the primary holding the partition has fewer replicas
    connected than acks=-1 waits for (each shard has its own)."""
    if wait is None or not broker.store.replicas_per_partition:
        return False
    connected = await broker.store.connected_replicas(topic, partition)
    if connected >= wait[0]:
        return False
    _log_short_of_replicas(topic, partition, _short(connected + 1, wait[0] + 1))
    return True


SHORT_LOG_INTERVAL_S = 10.0
_short_log = RateLimitedLog(log, SHORT_LOG_INTERVAL_S)


def _log_short_of_replicas(topic: str, partition: int | None, what: str) -> None:
    """One line per SHORT_LOG_INTERVAL_S about acks=all produces refused (or appended
    but not replicated in time) for want of Redis replicas: the clients see
    NOT_ENOUGH_REPLICAS (or NOT_ENOUGH_REPLICAS_AFTER_APPEND) and retry."""
    where = topic if partition is None else f"{topic}-{partition}"
    _short_log.warning("acks=all produce to %s: %s", where, what)


def _short(in_sync: int, min_isr: int) -> str:
    return (
        f"NOT_ENOUGH_REPLICAS: {in_sync} in-sync replica(s) (the Redis primary and its "
        f"connected replicas), min.insync.replicas is {min_isr}; nothing appended"
    )


def min_insync_replicas(broker: Broker, info: TopicInfo) -> int:
    """The topic's min.insync.replicas (its server default: --min-insync-replicas)."""
    return int(effective_config(info, "min.insync.replicas"))


_ZERO_ID = uuid.UUID(int=0)


async def _done(result: PartitionResult) -> PartitionResult:
    return result


def _encode(
    version: int,
    work: list[tuple[Any, int]],
    results: list[PartitionResult],
    throttle_ms: int = 0,
) -> bytes:
    """`work`: per topic, its topic_key (a name, from v13 an id, None the zero id) and
    how many of `results` are its partitions'."""
    flexible = version >= 9
    parts = [array_len(len(work), flexible)]
    it = iter(results)
    for key, count in work:
        if version >= 13:
            parts.append((key or _ZERO_ID).bytes)
        else:
            parts.append(string(key, flexible))
        parts.append(array_len(count, flexible))
        for _ in range(count):
            r = next(it)
            parts.append(pack_i32(r.index) + pack_i16(r.error) + pack_i64(r.base_offset))
            if version >= 2:
                parts.append(pack_i64(r.append_time))
            if version >= 5:
                parts.append(pack_i64(r.log_start))
            if version >= 8:
                parts.append(array_len(len(r.record_errors), flexible))
                for batch_index, text in r.record_errors:
                    parts.append(pack_i32(batch_index) + string(text, flexible))
                    if flexible:
                        parts.append(EMPTY_TAGS)
                parts.append(string(r.message if r.error else None, flexible))
            if flexible:
                parts.append(EMPTY_TAGS)
        if flexible:
            parts.append(EMPTY_TAGS)
    if version >= 1:
        parts.append(pack_i32(throttle_ms))
    if flexible:
        parts.append(EMPTY_TAGS)
    return b"".join(parts)


# -- v0-v2: kio 0.6.5 has no schema for them ------------------------------------------


@dataclass(frozen=True, slots=True)
class LegacyPartitionData:
    index: int
    records: bytes | None


@dataclass(frozen=True, slots=True)
class LegacyTopicData:
    name: str
    partition_data: tuple[LegacyPartitionData, ...]


@dataclass(frozen=True, slots=True)
class LegacyProduceRequest:
    """Named like kio's ProduceRequest, so one handler serves every version."""

    acks: int
    timeout: datetime.timedelta
    topic_data: tuple[LegacyTopicData, ...]
    transactional_id: None = None


def decode_legacy(buf: bytes, pos: int) -> LegacyProduceRequest:
    r = Reader(buf, pos)
    acks = r.i16()
    timeout = datetime.timedelta(milliseconds=r.i32())
    topics = r.array(
        lambda: LegacyTopicData(
            r.string(), r.array(lambda: LegacyPartitionData(r.i32(), r.nbytes()))
        )
    )
    return LegacyProduceRequest(acks, timeout, topics)


DECODERS = {0: decode_legacy, 1: decode_legacy, 2: decode_legacy}
