"""PySpark over a topic that spans both tiers (tiered storage): the `skiff` source's Redis
read path reads the archived segments straight from the object store (one Spark task
per segment) and the rest from Redis; its Kafka read path and Spark's own Kafka
connector read through a sidecar. All three return exactly the records produced."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import RedisServer, Skiff, stop_process
from log_helpers import wait_for
from s3_server import S3Server
from test_spark import batch_reader, new_topic, produce, rows
from test_tiered import BUCKET, archived_to, start_tiered

from pipeline.offsets import OffsetRange
from pipeline.session import local_session
from pipeline.skiff_logs import RedisLog
from pipeline.skiff_source import SkiffReader

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with S3Server() as server:
        server.create_bucket(BUCKET)
        yield server


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    session = local_session("local[2]", "skiff-tiered-tests")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def store_options(s3: S3Server) -> dict[str, str]:
    """The object store's endpoint and credentials as the source's options (the Python
    workers of a JVM another test module started do not see this process's variables)."""
    return {
        "remote.storage": f"s3://{BUCKET}/spark",
        "remote.storage.aws_endpoint": s3.endpoint,
        "remote.storage.aws_access_key_id": s3.access_key,
        "remote.storage.aws_secret_access_key": s3.secret_key,
        "remote.storage.aws_region": s3.region,
        "remote.storage.allow_http": "true",
    }


@pytest.fixture
def tiered(s3: S3Server, own_redis: RedisServer, tmp_path: Path) -> Iterator[Skiff]:
    server = start_tiered(s3, own_redis, tmp_path / "skiff.log", "spark")
    yield server
    stop_process(server.proc)


def test_spark_reads_both_tiers(
    spark: Any,
    tiered: Skiff,
    own_redis: RedisServer,
    s3: S3Server,
) -> None:
    topic = new_topic(
        tiered,
        2,
        {
            "remote.storage.enable": "true",
            "retention.ms": "-1",  # the records' timestamps are from 2023
            "local.retention.bytes": "20000",
            "internal.segment.bytes": "30000",  # below segment.bytes' 1 MiB floor, as Kafka's tests
        },
    )
    # Flushed every 500 records: batches of ~250 records (~10 KB) per partition, under
    # the segment size (a larger batch is RECORD_LIST_TOO_LARGE, as on Kafka).
    acked: set[Any] = set()
    for first in range(0, 4000, 500):
        acked |= produce(tiered, topic, 500, 2, first=first)
    for p in (0, 1):
        wait_for(lambda p=p: archived_to(own_redis, topic, 1, p), 30, "archiving")
    store = store_options(s3)
    reader = batch_reader(spark, "skiff-redis", tiered, own_redis, topic)
    assert set(rows(reader.options(**store).load())) == acked
    for path in ("skiff-kafka", "kafka-connector"):
        assert set(rows(batch_reader(spark, path, tiered, own_redis, topic).load())) == acked

    # One Spark task per archived segment, then the part in Redis.
    options = {"redis.url": own_redis.url, "topics": topic, **store}
    tasks = SkiffReader(options).partitions()
    log = RedisLog(own_redis.url, store["remote.storage"])
    try:
        ends = {p: log.segment_ends(topic, p) for p in (0, 1)}
    finally:
        log.close()
    for p in (0, 1):
        mine = [t for t in tasks if isinstance(t, OffsetRange) and t.partition == p]
        assert len(ends[p]) >= 2
        assert [t.end for t in mine][: len(ends[p])] == ends[p]

    # Without the option, the Redis read path says what to do.
    with pytest.raises(Exception, match="give the skiff source the option remote.storage"):
        batch_reader(spark, "skiff-redis", tiered, own_redis, topic).load().collect()
