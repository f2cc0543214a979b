"""The Kafka source's columns as an Arrow record batch: the Python Data Source API takes
Arrow batches from `read()` as they are, where tuples would be converted one value at
a time (measured: docs/spark.md)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

# Spark's Kafka source schema (with includeHeaders=true), column for column.
SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int, "
    "headers array<struct<key: string, value: binary>>"
)

HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])
ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", pa.list_(HEADER)),
    ]
)

Header = tuple[str, bytes | None]


def record_batch(
    topic: str,
    partition: int,
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    offsets: Sequence[int],
    timestamps_ms: Sequence[int],
    timestamp_types: Sequence[int],
    headers: Sequence[list[Header] | None],
) -> pa.RecordBatch:
    n = len(offsets)
    ts = pa.array(timestamps_ms, pa.int64())
    columns = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),  # dictionary-free constant column
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        pc.multiply(ts, 1000).cast(pa.timestamp("us", tz="UTC")),
        pa.array(timestamp_types, pa.int32()),
        pa.array(headers, pa.list_(HEADER)),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def decode_headers(raw: bytes) -> list[Header]:
    """Headers as Skiff stores them (Kafka's record encoding: zigzag varint count, then
    varint-length key and value, -1 for a null value). Same as
    sidecar.protocol.record_batch.decode_headers, repeated so that the data source needs
    only redis, pyarrow and confluent-kafka on a Spark cluster."""
    count, pos = _zigzag(raw, 0)
    out: list[Header] = []
    for _ in range(count):
        klen, pos = _zigzag(raw, pos)
        key = raw[pos : pos + klen].decode()
        pos += klen
        vlen, pos = _zigzag(raw, pos)
        if vlen < 0:
            out.append((key, None))
        else:
            out.append((key, raw[pos : pos + vlen]))
            pos += vlen
    return out


def _zigzag(raw: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = raw[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
