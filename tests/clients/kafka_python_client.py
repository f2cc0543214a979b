"""Drive kafka-python (3.x) against Skiff with the adapters' common API.

    meta = produce("127.0.0.1:9092", "t", records, compression="gzip")
    got = consume("127.0.0.1:9092", "t", 0, meta[0]["offset"], len(records))
    list_offsets("127.0.0.1:9092", "t", 0, 1700000000000)  # {"offset": ..., "timestamp": ...}

A record is ``{"partition": int | None, "key": bytes | None, "value": bytes | None,
"headers": [(str, bytes | None)], "timestamp": int | None}`` (tests/records.py).
kafka-python compresses snappy, lz4 and zstd only with the python-snappy, lz4 and
zstandard packages installed; ``CODECS`` lists the codecs usable here.

Quirks worked around or reported here:
- ``send()`` refuses a record whose key and value are both None ("Need at least one:
  key or value"), which Kafka allows: such a key goes through a serializer that turns a
  sentinel into None, so the record on the wire has a null key and a null value.
- ``send()`` refuses a None header value (TypeError: headers must be (str, bytes)), and
  its record encoder would write one as an empty value anyway: ``NULL_HEADER_VALUES``
  is False, so tests give this client no null header values to produce. Consuming
  them works.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from clients.common import consumer_record

with warnings.catch_warnings():
    # kafka-python loads its protocol schemas with importlib.resources.read_text at import
    # time: ~200 DeprecationWarnings on Python 3.11 that say nothing about Skiff.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka import codec as _codec
    from kafka.serializer import Serializer

NAME = "kafka-python"
CODECS = tuple(
    name
    for name, available in (
        ("none", True),
        ("gzip", _codec.has_gzip()),
        ("snappy", _codec.has_snappy()),
        ("lz4", _codec.has_lz4()),
        ("zstd", _codec.has_zstd()),
    )
    if available
)
MISSING_CODECS = {
    name: package
    for name, package, available in (
        ("snappy", "python-snappy", _codec.has_snappy()),
        ("lz4", "lz4", _codec.has_lz4()),
        ("zstd", "zstandard", _codec.has_zstd()),
    )
    if not available
}


NULL_HEADER_VALUES = False  # see the module docstring
_NULL_KEY = object()


class _KeySerializer(Serializer):
    """Bytes as they are; the _NULL_KEY sentinel becomes a null key."""

    def serialize(self, topic: str, headers: Any, data: Any) -> bytes | None:
        return None if data is _NULL_KEY else data


class KafkaPythonClientError(RuntimeError):
    pass


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[Mapping[str, Any]],
    compression: str = "none",
    timeout_s: float = 120.0,
    **opts: Any,
) -> list[dict[str, Any]]:
    """Produce records in order (acks=all, idempotence at kafka-python's default: on)
    and return ``[{"partition", "offset", "timestamp"}]`` in input order from the send
    futures. ``opts`` are KafkaProducer keyword arguments (e.g. ``linger_ms``)."""
    config: dict[str, Any] = {"acks": "all", **opts}
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if compression == "none" else compression,
        key_serializer=_KeySerializer(),
        **config,
    )
    try:
        futures = [
            producer.send(
                topic,
                value=rec.get("value"),
                key=_NULL_KEY
                if rec.get("key") is None and rec.get("value") is None
                else rec.get("key"),
                headers=list(rec.get("headers") or []),
                partition=rec.get("partition"),
                timestamp_ms=rec.get("timestamp"),
            )
            for rec in records
        ]
        producer.flush(timeout=timeout_s)
        out = []
        for i, future in enumerate(futures):
            try:
                meta = future.get(timeout=timeout_s)
            except Exception as exc:
                raise KafkaPythonClientError(f"record #{i}: {exc!r}") from exc
            out.append(
                {"partition": meta.partition, "offset": meta.offset, "timestamp": meta.timestamp}
            )
        return out
    finally:
        producer.close(timeout=10)


def _consumer(bootstrap: str, **opts: Any) -> KafkaConsumer:
    config: dict[str, Any] = {
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "none",
        "check_crcs": True,
        **opts,
    }
    return KafkaConsumer(bootstrap_servers=bootstrap, **config)


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
    Raises KafkaPythonClientError on a timeout."""
    consumer = _consumer(bootstrap, **opts)
    tp = TopicPartition(topic, partition)
    got: list[dict[str, Any]] = []
    try:
        consumer.assign([tp])
        consumer.seek(tp, offset)
        deadline = time.monotonic() + timeout_ms / 1000
        while len(got) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                raise KafkaPythonClientError(
                    f"timed out after {timeout_ms} ms: got {len(got)} of {count} records "
                    f"from {topic}-{partition} at offset {offset}"
                )
            batches = consumer.poll(
                timeout_ms=int(min(left, 1.0) * 1000), max_records=count - len(got)
            )
            for r in batches.get(tp, []):
                got.append(consumer_record(r))
    finally:
        consumer.close()
    return got[:count]


def list_offsets(
    bootstrap: str, topic: str, partition: int, spec: str | int, timeout_ms: int = 30000
) -> dict[str, Any]:
    """beginning_offsets / end_offsets / offsets_for_times. Returns ``{"offset",
    "timestamp"}``; offset and timestamp are -1 where the client gives None (no record
    with a timestamp >= the one asked for), timestamp is -1 for earliest/latest (these
    calls do not report one)."""
    consumer = _consumer(bootstrap)
    tp = TopicPartition(topic, partition)
    try:
        if spec == "earliest":
            return {"offset": consumer.beginning_offsets([tp], timeout_ms)[tp], "timestamp": -1}
        if spec == "latest":
            return {"offset": consumer.end_offsets([tp], timeout_ms)[tp], "timestamp": -1}
        found = consumer.offsets_for_times({tp: int(spec)}, timeout_ms)[tp]
        if found is None:
            return {"offset": -1, "timestamp": -1}
        return {"offset": found.offset, "timestamp": found.timestamp}
    finally:
        consumer.close()
