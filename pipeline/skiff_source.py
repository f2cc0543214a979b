"""The `skiff` PySpark data source (Spark 4 Python Data Source API): Skiff topics as
batch and streaming DataFrames with the Kafka source's columns, and as sinks.

    from pipeline.skiff_source import SkiffDataSource
    spark.dataSource.register(SkiffDataSource)
    spark.read.format("skiff").option("redis.url", "redis://...").option("topics", "orders")

Options (docs/spark.md): `topics` (comma-separated), `redis.url` (read the streams
straight from Redis) and/or `kafka.bootstrap.servers` (read through a sidecar; needed
for writes), `readPath` (redis|kafka, default redis when redis.url is given),
`startingOffsets` / `endingOffsets` (earliest, latest, or JSON as the Kafka source's),
`minPartitions`, `maxRecordsPerTrigger`, `remote.storage` (tiered storage: the
sidecars' --remote-storage URL, to read archived segments straight from the object
store); for writes `topic`; `kafka.<property>` goes to
confluent-kafka. One Spark task per topic-partition (or per offset range with
minPartitions), each reading its range in chunks of 10,000 records as Arrow batches."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from .arrow_rows import SCHEMA_DDL
from .offsets import (
    EARLIEST,
    LATEST,
    OffsetRange,
    Positions,
    cap,
    ranges,
    resolve,
    split_at,
)
from .skiff_logs import PartitionLog, open_log
from .skiff_writer import SkiffStreamWriter, SkiffWriter


class SkiffDataSource(DataSource):
    def __init__(self, options: dict[str, str]) -> None:
        # Spark hands a case-insensitive dict; a plain one with lower-case keys pickles simply.
        self.options = {k.lower(): v for k, v in options.items()}

    @classmethod
    def name(cls) -> str:
        return "skiff"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return SkiffReader(self.options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SkiffStreamReader(self.options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return SkiffWriter(self.options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return SkiffStreamWriter(self.options)


def _topics(options: dict[str, str]) -> list[str]:
    topics = [t.strip() for t in options.get("topics", "").split(",") if t.strip()]
    if not topics:
        raise ValueError("the skiff source needs the option topics (comma-separated)")
    return topics


def read_range(options: dict[str, str], partition: InputPartition) -> Iterator[pa.RecordBatch]:
    assert isinstance(partition, OffsetRange)
    log = open_log(options)
    try:
        yield from log.read(partition.topic, partition.partition, partition.start, partition.end)
    finally:
        log.close()


def _segment_cuts(log: PartitionLog, found: list[OffsetRange]) -> dict[tuple[str, int], list[int]]:
    """Tiered storage, Redis read path: where each partition's archived segments end."""
    ends = getattr(log, "segment_ends", None)
    if ends is None:
        return {}
    return {(r.topic, r.partition): ends(r.topic, r.partition) for r in found}


class SkiffReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        topics = _topics(self.options)
        log = open_log(self.options)
        try:
            start = resolve(self.options.get("startingoffsets", ""), topics, log, EARLIEST)
            end = resolve(self.options.get("endingoffsets", ""), topics, log, LATEST)
            found = ranges(start, end, int(self.options.get("minpartitions", "0")))
            found = split_at(found, _segment_cuts(log, found))
        finally:
            log.close()
        # Spark needs at least one partition; an empty range reads nothing.
        return found or [OffsetRange(topics[0], 0, 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(self.options, partition)


class SkiffStreamReader(DataSourceStreamReader):
    """Offsets are {"topic": {"partition": next offset}}. The reader remembers where the
    query stands (`_position`): Spark hands it the last planned end through partitions(),
    also on restart from a checkpoint (setLatestSeenOffset calls partitions(end, end)),
    and maxRecordsPerTrigger counts from there."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self._position: Positions | None = None

    def _log(self) -> PartitionLog:
        return open_log(self.options)

    def initialOffset(self) -> dict:
        log = self._log()
        try:
            spec = self.options.get("startingoffsets", "latest")
            self._position = resolve(spec, _topics(self.options), log, LATEST)
        finally:
            log.close()
        return self._position

    def latestOffset(self) -> dict:
        log = self._log()
        try:
            latest = resolve("latest", _topics(self.options), log, LATEST)
            start = self._position or {}
            for topic, parts in latest.items():  # partitions added since: from their start
                for p in parts:
                    if p not in start.get(topic, {}):
                        start.setdefault(topic, {})[p] = log.watermarks(topic, int(p))[0]
        finally:
            log.close()
        limit = int(self.options.get("maxrecordspertrigger", "0"))
        return cap(start, latest, limit) if limit > 0 else latest

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        self._position = {t: dict(parts) for t, parts in end.items()}
        found = ranges(start, end, int(self.options.get("minpartitions", "0")))
        log = self._log()
        try:
            return split_at(found, _segment_cuts(log, found))
        finally:
            log.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(self.options, partition)

    def commit(self, end: dict) -> None:
        pass  # nothing to release: positions live in Spark's checkpoint
