"""`--remote-parquet`: each archived segment also as a Parquet file beside it
(`<segment>.parquet`, the Kafka source's columns: key, value, topic, partition, offset,
timestamp, timestampType, headers), so any engine that reads Parquet from the object
store (Spark, DuckDB, Trino, pandas) can query a topic's history. Needs pyarrow (the
`spark` extra); decoding the records runs in a thread, off the event loop."""

from __future__ import annotations

import asyncio
import io


def available() -> str | None:
    """None when Parquet files can be written, else what to install."""
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return "--remote-parquet needs pyarrow: pip install -e '.[spark]'"
    return None


def path_for(segment_path: str) -> str:
    return segment_path.removesuffix(".log") + ".parquet"


def _encode(topic: str, partition: int, data: bytes) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.arrow_rows import ARROW_SCHEMA
    from pipeline.skiff_logs import segment_record_batches

    table = pa.Table.from_batches(
        list(segment_record_batches(topic, partition, data)), schema=ARROW_SCHEMA
    )
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd")
    return out.getvalue()


async def encode(topic: str, partition: int, data: bytes) -> bytes:
    return await asyncio.to_thread(_encode, topic, partition, data)
