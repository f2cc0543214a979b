"""Drive aiokafka against Skiff with the adapters' common (synchronous) API.

    meta = produce("127.0.0.1:9092", "t", records, compression="lz4")
    got = consume("127.0.0.1:9092", "t", 0, meta[0]["offset"], len(records))
    list_offsets("127.0.0.1:9092", "t", 0, "earliest")  # {"offset": ..., "timestamp": ...}

Each call runs its own event loop (asyncio.run), so it must not be called from a
running loop. A record is ``{"partition": int | None, "key": bytes | None, "value":
bytes | None, "headers": [(str, bytes | None)], "timestamp": int | None}``
(tests/records.py). aiokafka compresses through cramjam: every codec is available.

Quirk: ``send()`` asserts that key and value are not both None ("Need at least one: key
or value"), which Kafka allows; such a key goes through a key_serializer that turns a
sentinel into None, so the record on the wire has a null key and a null value.

Quirk: for CreateTime topics the RecordMetadata of every record in a batch carries the
timestamp of the batch's first record (``MessageBatch.done`` in
aiokafka/producer/message_accumulator.py overwrites its ``timestamp`` variable in the
loop), so the "timestamp" ``produce`` returns is not the record's own;
``PRODUCE_METADATA_TIMESTAMPS`` is False.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.codec import has_gzip, has_lz4, has_snappy, has_zstd

from clients.common import consumer_record

NAME = "aiokafka"
CODECS = tuple(
    name
    for name, available in (
        ("none", True),
        ("gzip", has_gzip()),
        ("snappy", has_snappy()),
        ("lz4", has_lz4()),
        ("zstd", has_zstd()),
    )
    if available
)
NULL_HEADER_VALUES = True
PRODUCE_METADATA_TIMESTAMPS = False  # see the module docstring
_NULL_KEY = object()


def _serialize_key(key: Any) -> bytes | None:
    return None if key is _NULL_KEY else key


class AiokafkaClientError(RuntimeError):
    pass


async def _produce(
    bootstrap: str,
    topic: str,
    records: Sequence[Mapping[str, Any]],
    compression: str,
    timeout_s: float,
    opts: Mapping[str, Any],
) -> list[dict[str, Any]]:
    config: dict[str, Any] = {"acks": "all", **opts}
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if compression == "none" else compression,
        key_serializer=_serialize_key,
        **config,
    )
    await producer.start()
    try:
        futures = []
        for rec in records:
            # send() returns once the record is in a batch; the future resolves on the ack.
            futures.append(
                await producer.send(
                    topic,
                    value=rec.get("value"),
                    key=_NULL_KEY
                    if rec.get("key") is None and rec.get("value") is None
                    else rec.get("key"),
                    partition=rec.get("partition"),
                    timestamp_ms=rec.get("timestamp"),
                    headers=list(rec.get("headers") or []) or None,
                )
            )
        await producer.flush()
        done = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), timeout_s)
    finally:
        await producer.stop()
    out = []
    for i, meta in enumerate(done):
        if isinstance(meta, BaseException):
            raise AiokafkaClientError(f"record #{i}: {meta!r}") from meta
        out.append(
            {"partition": meta.partition, "offset": meta.offset, "timestamp": meta.timestamp}
        )
    return out


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[Mapping[str, Any]],
    compression: str = "none",
    timeout_s: float = 120.0,
    **opts: Any,
) -> list[dict[str, Any]]:
    """Produce records in order (acks=all, idempotence at aiokafka's default: off) and
    return ``[{"partition", "offset", "timestamp"}]`` in input order from the send
    futures. ``opts`` are AIOKafkaProducer keyword arguments (e.g. ``linger_ms``)."""
    return asyncio.run(_produce(bootstrap, topic, records, compression, timeout_s, opts))


def _consumer(bootstrap: str, **opts: Any) -> AIOKafkaConsumer:
    config: dict[str, Any] = {
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "none",
        "check_crcs": True,
        **opts,
    }
    return AIOKafkaConsumer(bootstrap_servers=bootstrap, **config)


async def _consume(
    bootstrap: str,
    topic: str,
    partition: int,
    offset: int,
    count: int,
    timeout_ms: int,
    opts: Mapping[str, Any],
) -> list[dict[str, Any]]:
    consumer = _consumer(bootstrap, **opts)
    tp = TopicPartition(topic, partition)
    got: list[dict[str, Any]] = []
    await consumer.start()
    try:
        consumer.assign([tp])
        consumer.seek(tp, offset)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while len(got) < count:
            left = deadline - loop.time()
            if left <= 0:
                raise AiokafkaClientError(
                    f"timed out after {timeout_ms} ms: got {len(got)} of {count} records "
                    f"from {topic}-{partition} at offset {offset}"
                )
            batches = await consumer.getmany(
                tp, timeout_ms=int(min(left, 1.0) * 1000), max_records=count - len(got)
            )
            got.extend(consumer_record(r) for r in batches.get(tp, []))
    finally:
        await consumer.stop()
    return got[:count]


def consume(
    bootstrap: str,
    topic: str,
    partition: int,
    offset: int,
    count: int,
    timeout_ms: int = 60000,
    **opts: Any,
) -> list[dict[str, Any]]:
    """Read exactly ``count`` records from ``offset`` with assign + seek (no group).
    Raises AiokafkaClientError on a timeout."""
    return asyncio.run(_consume(bootstrap, topic, partition, offset, count, timeout_ms, opts))


async def _list_offsets(
    bootstrap: str, topic: str, partition: int, spec: str | int
) -> dict[str, Any]:
    consumer = _consumer(bootstrap)
    tp = TopicPartition(topic, partition)
    await consumer.start()
    try:
        if spec == "earliest":
            return {"offset": (await consumer.beginning_offsets([tp]))[tp], "timestamp": -1}
        if spec == "latest":
            return {"offset": (await consumer.end_offsets([tp]))[tp], "timestamp": -1}
        found = (await consumer.offsets_for_times({tp: int(spec)}))[tp]
        if found is None:
            return {"offset": -1, "timestamp": -1}
        return {"offset": found.offset, "timestamp": found.timestamp}
    finally:
        await consumer.stop()


def list_offsets(bootstrap: str, topic: str, partition: int, spec: str | int) -> dict[str, Any]:
    """beginning_offsets / end_offsets / offsets_for_times. Returns ``{"offset",
    "timestamp"}``; -1 where the client gives None (no record with a timestamp >= the one
    asked for); timestamp -1 for earliest/latest (these calls do not report one)."""
    return asyncio.run(_list_offsets(bootstrap, topic, partition, spec))
