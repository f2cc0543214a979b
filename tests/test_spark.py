"""Skiff topics read and written by PySpark (local[2]), through Spark's own Kafka connector
(unmodified, jars from Maven Central: pipeline/spark_jars.py) and through the `skiff`
Python data source on both of its read paths (Redis streams, Kafka protocol), against
the session's real Skiff and Redis. One SparkSession serves the whole module."""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import RedisServer, Skiff
from formats import FORMATS

from pipeline import demo
from pipeline.offsets import cap, ranges
from pipeline.session import local_session
from sidecar.protocol import stored_batch

pytestmark = pytest.mark.timeout(300)

Rec = tuple[int, int, bytes | None, bytes | None, int, int, tuple[tuple[str, bytes | None], ...]]
BASE_TS = 1_700_000_000_000
READ_PATHS = ("kafka-connector", "skiff-redis", "skiff-kafka")


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    session = local_session("local[2]", "skiff-tests")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def new_topic(skiff: Skiff, partitions: int, config: dict[str, str] | None = None) -> str:
    name = f"spark-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": skiff.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)
    return name


def produce(
    skiff: Skiff,
    topic: str,
    count: int,
    partitions: int,
    first: int = 0,
    compression: str = "none",
    linger_ms: int = 2,
) -> set[Rec]:
    """Records with null and empty keys and values, headers (one with a null value) on
    some, explicit timestamps; returns them as Rec with the offsets Skiff acknowledged."""
    producer = Producer(
        {
            "bootstrap.servers": skiff.bootstrap,
            "linger.ms": linger_ms,
            "compression.type": compression,
        }
    )
    acked: set[Rec] = set()
    errors: list[Any] = []

    def on_delivery(headers: tuple[tuple[str, bytes | None], ...], err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
            return
        # (a delivery report does not carry the headers: they come from the caller)
        acked.add(
            (msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1], 0, headers)
        )

    for i in range(first, first + count):
        headers = (("h", f"x{i}".encode()), ("null", None)) if i % 3 == 0 else ()
        producer.produce(
            topic,
            key=None if i % 11 == 0 else f"k{i}".encode(),
            value=None if i % 13 == 5 else b"" if i % 17 == 3 else f"value-{i}".encode() * 3,
            partition=i % partitions,
            timestamp=BASE_TS + i * 7,
            headers=list(headers) or None,
            on_delivery=functools.partial(on_delivery, headers),
        )
    assert producer.flush(30) == 0 and not errors
    return acked


def rows(df: Any) -> list[Rec]:
    out = []
    for r in df.selectExpr(
        "partition", "offset", "key", "value", "unix_millis(timestamp) AS ts", "timestampType",
        "headers",
    ).collect():  # fmt: skip
        headers = tuple(
            (h.key, None if h.value is None else bytes(h.value)) for h in r.headers or []
        )
        key = None if r.key is None else bytes(r.key)
        value = None if r.value is None else bytes(r.value)
        out.append((r.partition, r.offset, key, value, r.ts, r.timestampType, headers))
    return out


def batch_reader(spark: Any, path: str, skiff: Skiff, redis: RedisServer, topic: str) -> Any:
    if path == "kafka-connector":
        return (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", skiff.bootstrap)
            .option("subscribe", topic)
            .option("includeHeaders", "true")
        )
    return (
        spark.read.format("skiff")
        .option("kafka.bootstrap.servers", skiff.bootstrap)
        .option("redis.url", redis.url)
        .option("readPath", path.removeprefix("skiff-"))
        .option("topics", topic)
    )


@pytest.fixture(scope="module")
def four_partitions(skiff: Skiff) -> tuple[str, set[Rec]]:
    topic = new_topic(skiff, 4, {"skiff.storage.format": "batch"})
    return topic, produce(skiff, topic, 400, 4)


@pytest.mark.parametrize("path", READ_PATHS)
def test_batch_read_returns_exactly_the_records(
    spark: Any, skiff: Skiff, redis_server: RedisServer, four_partitions: Any, path: str
) -> None:
    topic, produced = four_partitions
    df = batch_reader(spark, path, skiff, redis_server, topic).load()
    assert df.rdd.getNumPartitions() == 4  # one Spark task per topic-partition
    got = rows(df)
    assert len(got) == len(produced) == 400
    assert set(got) == produced


def inside_a_batch(redis: RedisServer, topic: str, partition: int) -> int:
    """An offset of the partition that is not its stored batch's first."""
    for entry_id, fields in redis.client().xrange(f"skiff:{{{topic}/{partition}}}:log"):
        base = stored_batch.base_offset(entry_id, fields[stored_batch.FIELD])
        if stored_batch.last_offset(entry_id) > base:
            return base + 1
    raise AssertionError(f"every stored batch of {topic}/{partition} holds one record")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("path", READ_PATHS)
def test_both_formats_read_exact_ranges(
    spark: Any, skiff: Skiff, redis_server: RedisServer, path: str, fmt: str
) -> None:
    """Both storage formats read alike on every read path, from zstd-compressed producer
    batches (a `batch` topic keeps them compressed in Redis): everything, ranges that
    start and end inside a stored batch, and after DeleteRecords moved the log start
    inside one."""
    topic = new_topic(skiff, 2, {"skiff.storage.format": fmt})
    # (linger: batches of several records, also when this process is slow)
    produced = produce(skiff, topic, 200, 2, compression="zstd", linger_ms=50)
    entries = sum(redis_server.client().xlen(f"skiff:{{{topic}/{p}}}:log") for p in (0, 1))
    assert entries < 200 if fmt == "batch" else entries == 200  # batches of several records
    if fmt == "batch":  # stored as the producer compressed it (librdkafka sends a batch
        # uncompressed when zstd would not shrink it, e.g. a lone record)
        codecs = {
            stored_batch.header(fields[stored_batch.FIELD])[5] & stored_batch.CODEC_MASK
            for p in (0, 1)
            for _, fields in redis_server.client().xrange(f"skiff:{{{topic}/{p}}}:log")
        }
        assert 4 in codecs and codecs <= {0, 4}, codecs  # zstd
    assert sorted(rows(batch_reader(spark, path, skiff, redis_server, topic).load())) == sorted(
        produced
    )
    starting = {topic: {"0": 13, "1": 50}}
    ending = {topic: {"0": 57, "1": 51}}
    df = (
        batch_reader(spark, path, skiff, redis_server, topic)
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .load()
    )
    want = sorted(r for r in produced if (r[0] == 0 and 13 <= r[1] < 57) or r[:2] == (1, 50))
    assert sorted(rows(df)) == want and len(want) == 45

    cut = inside_a_batch(redis_server, topic, 0) if fmt == "batch" else 3
    admin = AdminClient({"bootstrap.servers": skiff.bootstrap})
    [done] = admin.delete_records([TopicPartition(topic, 0, cut)]).values()
    assert done.result(30).low_watermark == cut
    df = batch_reader(spark, path, skiff, redis_server, topic).load()
    assert sorted(rows(df)) == sorted(r for r in produced if r[0] == 1 or r[1] >= cut)


@pytest.mark.parametrize("path", READ_PATHS)
def test_batch_read_offset_ranges(
    spark: Any, skiff: Skiff, redis_server: RedisServer, four_partitions: Any, path: str
) -> None:
    topic, produced = four_partitions
    starting = {topic: {"0": 10, "1": -2, "2": 99, "3": 100}}  # 3: at its end
    ending = {topic: {"0": 20, "1": -1, "2": 100, "3": -1}}
    df = (
        batch_reader(spark, path, skiff, redis_server, topic)
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .load()
    )
    want = {
        r
        for r in produced
        if (r[0] == 0 and 10 <= r[1] < 20) or r[0] == 1 or (r[0] == 2 and r[1] == 99)
    }
    assert set(rows(df)) == want and len(want) == 10 + 100 + 1
    split = batch_reader(spark, path, skiff, redis_server, topic).option("minPartitions", 10)
    assert split.load().rdd.getNumPartitions() >= 10
    assert split.load().count() == 400


def test_kafka_connector_assign_pattern_and_timestamp(
    spark: Any, skiff: Skiff, four_partitions: Any
) -> None:
    topic, produced = four_partitions

    def base() -> Any:  # a DataFrameReader is mutable: one per query
        return spark.read.format("kafka").option("kafka.bootstrap.servers", skiff.bootstrap)

    assigned = base().option("assign", json.dumps({topic: [1, 3]})).load()
    assert assigned.count() == sum(1 for r in produced if r[0] in (1, 3))
    pattern = base().option("subscribePattern", topic[:-3] + ".*").load()
    assert pattern.count() == 400
    since = BASE_TS + 300 * 7  # records 300.. (timestamps grow with i)
    by_time = base().option("subscribe", topic).option("startingTimestamp", str(since)).load()
    assert by_time.count() == 100


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("path", READ_PATHS)
def test_batch_read_log_append_time(
    spark: Any, skiff: Skiff, redis_server: RedisServer, path: str, fmt: str
) -> None:
    """On a LogAppendTime topic, timestampType is 1 and the timestamp is Skiff's."""
    topic = f"spark-lat-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": skiff.bootstrap})
    config = {"message.timestamp.type": "LogAppendTime", "skiff.storage.format": fmt}
    admin.create_topics([NewTopic(topic, 2, 1, config=config)])[topic].result(30)
    before = int(time.time() * 1000)
    produce(skiff, topic, 20, 2)  # with CreateTime stamps from 2023, which Skiff replaces
    got = rows(batch_reader(spark, path, skiff, redis_server, topic).load())
    assert len(got) == 20
    assert all(r[5] == 1 and r[4] >= before - 1000 for r in got)


def stream_reader(spark: Any, path: str, skiff: Skiff, redis: RedisServer, topic: str) -> Any:
    if path == "kafka-connector":
        return (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", skiff.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", 70)  # several batches per availableNow run
        )
    return (
        spark.readStream.format("skiff")
        .option("redis.url", redis.url)
        .option("topics", topic)
        .option("startingOffsets", "earliest")
    )


# Each format once (a streaming test is slow): the Redis path on the format it decodes
# itself; the connector streams from `batch` topics in test_sample_pipeline_matches_plain_python.
@pytest.mark.parametrize(("path", "fmt"), (("kafka-connector", "record"), ("skiff-redis", "batch")))
def test_stream_available_now_restarts_where_it_stopped(
    spark: Any, skiff: Skiff, redis_server: RedisServer, tmp_path: Path, path: str, fmt: str
) -> None:
    topic = new_topic(skiff, 4, {"skiff.storage.format": fmt})
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    batches: list[int] = []

    def run_once() -> list[tuple[int, int]]:
        query = (
            stream_reader(spark, path, skiff, redis_server, topic)
            .load()
            .selectExpr("partition", "offset", "value")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        assert query.exception() is None
        batches.append(sum(1 for p in query.recentProgress if p["numInputRows"]))
        return [(r.partition, r.offset) for r in spark.read.parquet(str(out)).collect()]

    first = produce(skiff, topic, 200, 4)
    seen = run_once()
    assert sorted(seen) == sorted((r[0], r[1]) for r in first)
    second = produce(skiff, topic, 120, 4, first=200)
    seen = run_once()
    assert len(seen) == len(set(seen)) == 320  # nothing read twice, nothing lost
    assert set(seen) == {(r[0], r[1]) for r in first | second}
    if path == "kafka-connector":  # maxOffsetsPerTrigger 70: 200 then 120 records
        assert batches == [3, 2]


def test_skiff_stream_max_records_per_trigger_across_restarts(
    spark: Any, skiff: Skiff, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Each run of a query with trigger once is one batch of at most maxRecordsPerTrigger
    records, continuing from the checkpoint (Spark tells the reader its last offsets)."""
    topic = new_topic(skiff, 4)
    produced = produce(skiff, topic, 100, 4)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    counts = []
    for _ in range(4):
        query = (
            spark.readStream.format("skiff")
            .option("kafka.bootstrap.servers", skiff.bootstrap)  # the Kafka read path
            .option("topics", topic)
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerTrigger", 30)
            .load()
            .selectExpr("partition", "offset")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(once=True)
            .start()
        )
        query.awaitTermination()
        counts.append(spark.read.parquet(str(out)).count())
    assert counts == [30, 60, 90, 100]
    seen = [(r.partition, r.offset) for r in spark.read.parquet(str(out)).collect()]
    assert sorted(seen) == sorted((r[0], r[1]) for r in produced)


def consume_all(skiff: Skiff, topic: str, partitions: int, count: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": skiff.bootstrap, "group.id": "spark-readback"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        got += [m for m in consumer.consume(1000, timeout=0.5) if m.error() is None]
    assert not consumer.consume(100, timeout=0.2)  # and nothing more
    consumer.close()
    return got


@pytest.mark.parametrize("sink", ("kafka", "skiff"))
def test_write_from_spark(spark: Any, skiff: Skiff, sink: str) -> None:
    topic = new_topic(skiff, 3)
    data = [
        (f"k{i}" if i % 5 else None, f"v{i}", i % 3, [("src", f"row{i}".encode())] if i % 2 else [])
        for i in range(300)
    ]
    df = spark.createDataFrame(
        data,
        "key string, value string, partition int, headers array<struct<key:string,value:binary>>",
    )
    writer = df.write.format(sink).option("kafka.bootstrap.servers", skiff.bootstrap)
    writer.option("topic", topic).mode("append").save()
    got = consume_all(skiff, topic, 3, len(data))
    read_back = [
        (
            None if m.key() is None else m.key().decode(),
            m.value().decode(),
            m.partition(),
            list(m.headers() or []),
        )
        for m in got
    ]
    assert sorted(read_back, key=repr) == sorted(data, key=repr)


def test_offsets_cap_and_split() -> None:
    start = {"t": {"0": 0, "1": 10}}
    latest = {"t": {"0": 100, "1": 10, "2": 5}}
    capped = cap(start, latest, 21)
    assert sum(capped["t"][p] - start["t"].get(p, 0) for p in capped["t"]) == 21
    assert cap(start, latest, 1000) == latest
    parts = ranges(start, latest, min_partitions=6)
    assert sum(r.end - r.start for r in parts) == 105 and len(parts) >= 6


@pytest.mark.parametrize("source", ("skiff", "kafka"))
def test_sample_pipeline_matches_plain_python(
    spark: Any, skiff: Skiff, redis_server: RedisServer, tmp_path: Path, source: str
) -> None:
    suffix = uuid.uuid4().hex[:8]
    outcome = demo.run_pipeline(
        spark,
        skiff.bootstrap,
        redis_server.url,
        tmp_path,
        count=3000,
        source=source,
        input_topic=f"orders-{suffix}",
        output_topic=f"revenue-{suffix}",
    )
    assert len(outcome.expected) > 40  # most of ten minutes' windows, seven products
    assert demo.same(outcome.spark_rows, outcome.expected)
    assert outcome.topic_records == len(outcome.expected)
