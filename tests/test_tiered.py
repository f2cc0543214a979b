"""Tiered storage (KIP-405): a topic with remote.storage.enable keeps what local retention
allows in Redis and its older batches as segment objects in a real S3-compatible store
(SeaweedFS, tests/s3_server.py); clients read both tiers without noticing.

Every test runs a sidecar on its own Redis with the archiver every 100 ms and reads back
exact bytes at exact offsets, over the Kafka protocol."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from clients import franz_client, java_client
from conftest import RedisServer, Skiff, start_skiff, stop_process
from faults_harness import PersistentRedis, ProduceLoop, check_exactly_once
from kafka_tools import KAFKA_VERSION, run_batch
from log_helpers import (
    EARLIEST,
    LATEST,
    NONE,
    OFFSET_OUT_OF_RANGE,
    create,
    create_result,
    delete_records,
    fetch,
    new_topic,
    produce,
    read_from,
    wait_for,
)
from rawkafka import RawKafka, Rec, build_batch, fetched_records
from s3_server import S3Server
from telemetry_helpers import scrape, value
from test_retention import log_dir_size

from sidecar.tiered.segments import batches

CREATE_TOPICS, LIST_OFFSETS, DELETE_TOPICS = 19, 2, 20
INVALID_CONFIG = 40
KAFKA_STORAGE_ERROR = 56
EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -4, -5, -6
DESCRIBE_LOG_DIRS = 35
BUCKET = "skiff-tiered"


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with S3Server() as server:
        server.create_bucket(BUCKET)
        yield server


def s3_env(s3: S3Server) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": s3.endpoint,
        "AWS_ACCESS_KEY_ID": s3.access_key,
        "AWS_SECRET_ACCESS_KEY": s3.secret_key,
        "AWS_REGION": s3.region,
        "AWS_ALLOW_HTTP": "true",
    }


def start_tiered(s3: S3Server, redis: RedisServer, log: Path, prefix: str, *extra: str) -> Skiff:
    return start_skiff(
        log,
        "--redis-url",
        redis.url,
        "--remote-storage",
        f"s3://{BUCKET}/{prefix}",
        "--remote-log-manager-task-interval-ms",
        "100",
        "--log-retention-check-interval-ms",
        "200",
        *extra,
        env=s3_env(s3),
    )


@pytest.fixture
def prefix() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture
def sidecar(s3: S3Server, own_redis: RedisServer, tmp_path: Path, prefix: str) -> Iterator[Skiff]:
    server = start_tiered(s3, own_redis, tmp_path / "skiff.log", prefix)
    yield server
    stop_process(server.proc)


def value_of(offset: int) -> bytes:
    return f"v{offset}".encode().ljust(100, b".")


def batch_of(first: int, n: int = 10, ts: int | None = None) -> bytes:
    return build_batch(
        [Rec(value=value_of(first + i), key=f"k{first + i}".encode()) for i in range(n)],
        base_timestamp=ts,
    )


def create_tiered(
    kafka: RawKafka, topic: str, local_batches: int, segment_batches: int | None = None
) -> None:
    """A topic with remote.storage.enable: local.retention.bytes and segment.bytes as so
    many of batch_of's batches."""
    size = len(batch_of(0))
    configs = {"remote.storage.enable": "true", "local.retention.bytes": str(size * local_batches)}
    if segment_batches is not None:
        configs["internal.segment.bytes"] = str(size * segment_batches)
    create(kafka, topic, configs)


def objects(s3: S3Server, prefix: str) -> dict[str, bytes]:
    import obstore

    store = s3.store(BUCKET)
    out = {}
    for page in obstore.list(store, prefix=prefix):
        for m in page:
            try:
                out[m["path"]] = bytes(obstore.get(store, m["path"]).bytes())
            except FileNotFoundError:
                continue  # deleted since listed (retention, the archiver)
    return out


def meta(redis: RedisServer, topic: str, partition: int = 0) -> dict[str, int]:
    raw = redis.client().hgetall(f"skiff:{{{topic}/{partition}}}:meta")
    return {k.decode(): int(v) for k, v in raw.items() if v.lstrip(b"-").isdigit()}


def list_offset(kafka: RawKafka, topic: str, ts: int) -> tuple[int, int]:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": ts}]}],
    }
    [p] = kafka.request(LIST_OFFSETS, 11, body).topics[0].partitions
    assert p.error_code == NONE, p
    return int(p.offset), int(p.timestamp)


def archived_to(redis: RedisServer, topic: str, offset: int, partition: int = 0) -> bool:
    return meta(redis, topic, partition).get("llso", 0) >= offset


def assert_all(kafka: RawKafka, topic: str, start: int, end: int) -> None:
    recs = read_from(kafka, topic, start)
    assert [r.offset for r in recs] == list(range(start, end))
    assert all(r.value == value_of(r.offset) for r in recs)  # type: ignore[arg-type]
    assert all(r.key == f"k{r.offset}".encode() for r in recs)


def test_archived_batches_read_back_exactly(
    sidecar: Skiff, own_redis: RedisServer, s3: S3Server, prefix: str
) -> None:
    """Local retention moves the oldest batches to the object store as segments in
    Kafka's log format; Fetch from anywhere (inside a batch too) returns the same bytes
    as before, ListOffsets spans both tiers, and Redis keeps only the local part."""
    now = int(time.time() * 1000)
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic("tiered")
        batch_bytes = len(batch_of(0))
        create_tiered(kafka, topic, 3, 4)
        for i in range(40):
            p = produce(kafka, topic, batch_of(10 * i, ts=now + 1000 * i))
            assert (p.error_code, p.base_offset) == (NONE, 10 * i)
        before = [fetch(kafka, topic, 10 * i).records for i in range(0, 40, 7)]
        # All but the last 3-4 batches leave Redis.
        wait_for(lambda: archived_to(own_redis, topic, 360), what="archiving")
        m = meta(own_redis, topic)
        assert m["lso"] == 0 and m["hw"] == 400
        log_key = f"skiff:{{{topic}/0}}:log"
        first_local = own_redis.client().xrange(log_key, count=1)[0][0]
        assert int(first_local[2:]) - 1 >= m["llso"]  # nothing archived is still in Redis
        assert own_redis.client().xlen(log_key) <= 4

        # The segments: consecutive, at most segment.bytes each, Kafka batches.
        stored = objects(s3, prefix)
        segments = sorted(
            (int(Path(path).name.split("-")[0]), data) for path, data in stored.items()
        )
        assert segments[0][0] == 0
        position = 0
        for base, data in segments:
            assert base == position
            assert len(data) <= batch_bytes * 4
            for _, _, last, _ in batches(data):
                position = last + 1
        assert position == m["llso"]
        # Sizes: DescribeLogDirs for given partitions reports the Redis tier (Kafka the
        # local log); for every topic, the object store as a second log dir. /metrics both.
        local = sum(len(f[b"b"]) for _, f in own_redis.client().xrange(log_key))
        assert log_dir_size(kafka, topic) == local
        remote = value(
            scrape(sidecar.http_port), "skiff_partition_remote_bytes", topic=topic, partition="0"
        )
        assert remote == sum(len(data) for _, data in segments)
        dirs = {
            r.log_dir: (
                r.error_code,
                r.total_bytes,
                {
                    (t.name, p.partition_index): p.partition_size
                    for t in r.topics
                    for p in t.partitions
                },
            )
            for r in kafka.request(DESCRIBE_LOG_DIRS, 4, {"topics": None}).results
        }
        assert dirs[own_redis.url][2][(topic, 0)] == local
        assert dirs[f"s3://{BUCKET}/{prefix}"] == (NONE, -1, {(topic, 0): remote})
        first = fetched_records(segments[0][1])
        assert [(r.offset, r.value) for r in first[:3]] == [(i, value_of(i)) for i in range(3)]

        # Fetch: same bytes as before archiving, the whole batch from inside it.
        # (A remote read returns the batches of one segment, as Kafka's does.)
        after = [fetch(kafka, topic, 10 * i).records for i in range(0, 40, 7)]
        for old, new in zip(before, after, strict=True):
            assert len(new) >= len(batch_of(0)) and old.startswith(new)
        inside = fetch(kafka, topic, 15)
        assert [r.offset for r in fetched_records(inside.records)][:10] == list(range(10, 20))
        assert (inside.high_watermark, inside.log_start_offset) == (400, 0)
        assert_all(kafka, topic, 0, 400)
        assert_all(kafka, topic, 123, 400)

        # ListOffsets: earliest spans both tiers, earliest-local is Redis's first offset,
        # a time inside the archived part finds its record there.
        assert list_offset(kafka, topic, EARLIEST) == (0, -1)
        assert list_offset(kafka, topic, EARLIEST_LOCAL) == (m["llso"], -1)
        assert list_offset(kafka, topic, LATEST) == (400, -1)
        # KIP-1005's last archived offset, KIP-1023's first one not archived yet.
        assert list_offset(kafka, topic, LATEST_TIERED) == (m["llso"] - 1, -1)
        assert list_offset(kafka, topic, EARLIEST_PENDING_UPLOAD) == (m["llso"], -1)
        assert list_offset(kafka, topic, now + 5000) == (50, now + 5000)
        assert list_offset(kafka, topic, now + 5001) == (51, now + 5001)
        assert list_offset(kafka, topic, now + 39_000) == (390, now + 39_000)
        assert list_offset(kafka, topic, -3) == (399, now + 39_009)  # max timestamp

        # DeleteRecords inside an archived batch: the log start moves, Fetch below it is
        # out of range, at it the whole batch.
        assert delete_records(kafka, topic, {0: 105}) == {0: (NONE, 105)}
        assert fetch(kafka, topic, 104).error_code == OFFSET_OUT_OF_RANGE
        assert_all(kafka, topic, 105, 400)
        # The segments wholly below it go from the list and the store.
        wait_for(
            lambda: all(int(Path(p).name.split("-")[1]) > 105 for p in objects(s3, prefix)),
            what="segments below the log start deleted",
        )
        assert_all(kafka, topic, 105, 400)


def test_clients_consume_both_tiers_while_producing(sidecar: Skiff, own_redis: RedisServer) -> None:
    """confluent-kafka, the Java client and franz-go read 1,000,000 records most of which
    are archived, from offset 0, byte for byte with contiguous offsets, while a producer
    keeps writing; Redis holds about local.retention.bytes of them."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = new_topic("tiered-clients")
    admin = AdminClient({"bootstrap.servers": sidecar.bootstrap})
    configs = {
        "remote.storage.enable": "true",
        "local.retention.bytes": "3000000",
        "segment.bytes": "4000000",
    }
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)
    # Batches of at most 100 KB: Redis keeps between local.retention.bytes and one batch
    # more.
    producer = Producer(
        {
            "bootstrap.servers": sidecar.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 100_000,
        }
    )
    total = 1_000_000
    for i in range(total):
        while True:
            try:
                producer.produce(topic, value_of(i), key=f"k{i}".encode())
                break
            except BufferError:
                producer.poll(0.05)
        if i % 5000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    wait_for(lambda: archived_to(own_redis, topic, total - 35_000), 240, "archiving")
    # The local part only: 3-3.1 MB of batches in 256 KB stream nodes, of the ~120 MB made
    # (local retention trims what was archived at its next check).
    local_log = f"skiff:{{{topic}/0}}:log"
    wait_for(
        lambda: own_redis.client().memory_usage(local_log, samples=0) < 3_100_000 + 3 * 256 * 1024,
        60,
        "the local log trimmed to local.retention.bytes",
    )

    writer = subprocess.Popen(
        [sys.executable, "-c", _KEEP_PRODUCING, sidecar.bootstrap, topic],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        consumer = Consumer(
            {
                "bootstrap.servers": sidecar.bootstrap,
                "group.id": f"g-{topic}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([topic])
        deadline = time.monotonic() + 180
        next_offset = 0
        while next_offset < total and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 1.0):
                if msg.error() or msg.offset() >= total:
                    continue
                assert (msg.offset(), msg.value()) == (next_offset, value_of(next_offset))
                assert msg.key() == f"k{next_offset}".encode()
                next_offset += 1
        consumer.close()
        assert next_offset == total

        for client in (java_client, franz_client):
            got = client.consume(sidecar.bootstrap, topic, 0, 0, total, timeout_ms=240_000)
            assert [r["offset"] for r in got] == list(range(total)), client
            assert all(r["value"] == value_of(r["offset"]) for r in got), client
            assert all(r["key"] == f"k{r['offset']}".encode() for r in got), client
            del got
    finally:
        writer.kill()
        writer.wait()


_KEEP_PRODUCING = """
import sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "linger.ms": 20})
while True:
    p.produce(sys.argv[2], b"later".ljust(100, b"."))
    p.poll(0)
    time.sleep(0.001)
"""


def test_retention_and_topic_deletion_remove_remote_segments(
    sidecar: Skiff, own_redis: RedisServer, s3: S3Server, prefix: str
) -> None:
    """retention.ms deletes expired segments from the store and moves the log start to
    their end; deleting the topic deletes its objects."""
    now = int(time.time() * 1000)
    soon_old = now - 597_000  # expires 3 s from now under retention.ms 600000
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic("tiered-ret")
        batch_bytes = len(batch_of(0))
        create(
            kafka,
            topic,
            {
                "remote.storage.enable": "true",
                "retention.ms": "600000",
                "local.retention.bytes": str(batch_bytes),
                "internal.segment.bytes": str(batch_bytes * 2),
            },
        )
        for i in range(4):
            produce(kafka, topic, batch_of(10 * i, ts=soon_old))
        for i in range(4, 8):
            produce(kafka, topic, batch_of(10 * i, ts=now))
        # All but the last batch reach the store (segments of one or two batches).
        wait_for(lambda: archived_to(own_redis, topic, 70), what="archiving")
        assert_all(kafka, topic, 0, 80)
        wait_for(lambda: meta(own_redis, topic)["lso"] == 40, 30, "expired segments dropped")
        assert fetch(kafka, topic, 39).error_code == OFFSET_OUT_OF_RANGE
        assert_all(kafka, topic, 40, 80)
        # What is left in the store: segments from offset 40 on, back to back.
        ranges = sorted(
            (int(name.split("-")[0]), int(name.split("-")[1]))
            for name in (Path(p).name for p in objects(s3, prefix))
        )
        assert ranges[0][0] == 40 and ranges[-1][1] == 70
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
        left = sum(len(data) for data in objects(s3, prefix).values())
        remote = value(
            scrape(sidecar.http_port), "skiff_partition_remote_bytes", topic=topic, partition="0"
        )
        assert remote == left

        # Deleting the topic removes its segments from the store.
        resp = kafka.request(DELETE_TOPICS, 4, {"topic_names": [topic], "timeout_ms": 10000})
        assert resp.responses[0].error_code == NONE
        wait_for(lambda: not objects(s3, prefix), what="objects of the deleted topic gone")


def test_config_rules(s3: S3Server, own_redis: RedisServer, tmp_path: Path) -> None:
    """Kafka's checks of the tiered-storage configs, with Kafka's messages."""
    plain = start_skiff(tmp_path / "plain.log", "--redis-url", own_redis.url)
    try:
        with RawKafka("127.0.0.1", plain.port) as kafka:
            assert create_error(kafka, {"remote.storage.enable": "true"}) == (
                INVALID_CONFIG,
                "Tiered Storage functionality is disabled in the broker. Topic cannot be "
                "configured with remote log storage.",
            )
    finally:
        stop_process(plain.proc)
    server = start_tiered(s3, own_redis, tmp_path / "tiered.log", "rules")
    try:
        with RawKafka("127.0.0.1", server.port) as kafka:
            on = {"remote.storage.enable": "true"}
            assert create_error(kafka, {**on, "cleanup.policy": "compact"}) == (
                INVALID_CONFIG,
                "Remote log storage only supports topics with cleanup.policy=delete or "
                "cleanup.policy being an empty list.",
            )
            assert create_error(
                kafka, {**on, "retention.bytes": "1000", "local.retention.bytes": "2000"}
            ) == (
                INVALID_CONFIG,
                "Invalid value 2000 for configuration local.retention.bytes: Value must not "
                "be more than retention.bytes property value: 1000",
            )
            assert create_error(kafka, {**on, "local.retention.ms": "-1"}) == (
                INVALID_CONFIG,
                "Invalid value -1 for configuration local.retention.ms: Value must not be -1 "
                "as retention.ms value is set as 604800000.",
            )
            assert create_error(kafka, {**on, "skiff.storage.format": "record"})[0] == (
                INVALID_CONFIG
            )
            # A `record` topic cannot be altered into one either.
            plain_topic = new_topic("rules-record")
            create(kafka, plain_topic, {"skiff.storage.format": "record"})
            [r] = kafka.request(44, 1, alter_body(plain_topic, "true")).responses
            assert (r.error_code, r.error_message) == (
                INVALID_CONFIG,
                "remote.storage.enable=true needs skiff.storage.format=batch: tiered storage "
                "archives stored batches",
            )
            topic = new_topic("rules")
            create(kafka, topic, on)
            # Turning it off needs remote.log.delete.on.disable (KIP-950).
            [r] = kafka.request(44, 1, alter_body(topic, "false")).responses
            assert r.error_code == INVALID_CONFIG
            assert r.error_message.startswith(
                "It is invalid to disable remote storage without deleting remote data."
            )
    finally:
        stop_process(server.proc)


def alter_body(topic: str, remote: str) -> dict[str, object]:
    """IncrementalAlterConfigs SET remote.storage.enable."""
    config = {"name": "remote.storage.enable", "config_operation": 0, "value": remote}
    return {
        "resources": [{"resource_type": 2, "resource_name": topic, "configs": [config]}],
        "validate_only": False,
    }


def create_error(kafka: RawKafka, configs: dict[str, str]) -> tuple[int, str | None]:
    result = create_result(kafka, new_topic("bad"), configs)
    return int(result.error_code), result.error_message


def test_sidecar_killed_while_archiving_loses_nothing(
    s3: S3Server, own_redis: RedisServer, tmp_path: Path, prefix: str
) -> None:
    """SIGKILL at arbitrary points of archiving: every acknowledged record is readable
    exactly once afterwards, from one tier or the other."""
    topic = new_topic("tiered-kill")
    produced = 0
    server = start_tiered(s3, own_redis, tmp_path / "kill0.log", prefix)
    try:
        with RawKafka("127.0.0.1", server.port) as kafka:
            create_tiered(kafka, topic, 2, 3)
        for round_ in range(4):
            with RawKafka("127.0.0.1", server.port) as kafka:
                for _ in range(30):
                    p = produce(kafka, topic, batch_of(produced))
                    assert (p.error_code, p.base_offset) == (NONE, produced)
                    produced += 10
            time.sleep(0.05 * (round_ + 1))  # mid-pass, at different points
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait()
            server = start_tiered(s3, own_redis, tmp_path / f"kill{round_ + 1}.log", prefix)
        wait_for(lambda: archived_to(own_redis, topic, produced - 30), 30, "archiving")
        with RawKafka("127.0.0.1", server.port) as kafka:
            assert_all(kafka, topic, 0, produced)
    finally:
        stop_process(server.proc)


def test_fetch_below_log_start_is_out_of_range(sidecar: Skiff, own_redis: RedisServer) -> None:
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic("tiered-oor")
        create(kafka, topic, {"remote.storage.enable": "true", "local.retention.bytes": "0"})
        for i in range(5):
            produce(kafka, topic, batch_of(10 * i))
        wait_for(lambda: archived_to(own_redis, topic, 50), what="archiving")
        assert own_redis.client().xlen(f"skiff:{{{topic}/0}}:log") == 0
        assert_all(kafka, topic, 0, 50)
        assert delete_records(kafka, topic, {0: 20}) == {0: (NONE, 20)}
        assert fetch(kafka, topic, 19).error_code == OFFSET_OUT_OF_RANGE
        assert_all(kafka, topic, 20, 50)
        p = produce(kafka, topic, batch_of(50))
        assert (p.error_code, p.base_offset) == (NONE, 50)
        assert_all(kafka, topic, 20, 60)


def test_parquet_copies_of_segments(
    s3: S3Server, own_redis: RedisServer, tmp_path: Path, prefix: str
) -> None:
    """--remote-parquet: beside each segment a Parquet file with its records (the Kafka
    source's columns), which an engine reading Parquet gets exactly; retention deletes
    it with its segment."""
    import io

    import pyarrow.parquet as pq

    server = start_tiered(s3, own_redis, tmp_path / "skiff.log", prefix, "--remote-parquet", "true")
    now = int(time.time() * 1000)
    try:
        with RawKafka("127.0.0.1", server.port) as kafka:
            topic = new_topic("tiered-parquet")
            create(
                kafka,
                topic,
                {
                    "remote.storage.enable": "true",
                    "local.retention.bytes": "0",
                    "internal.segment.bytes": str(len(batch_of(0)) * 3),
                },
            )
            for i in range(6):
                produce(kafka, topic, batch_of(10 * i, ts=now + i))
            wait_for(lambda: archived_to(own_redis, topic, 60), what="archiving")

            def tables() -> dict[str, bytes]:
                return {p: d for p, d in objects(s3, prefix).items() if p.endswith(".parquet")}

            wait_for(lambda: len(tables()) == len(objects(s3, prefix)) / 2, what="Parquet files")
            rows = []
            for data in tables().values():
                rows += pq.read_table(io.BytesIO(data)).to_pylist()
            rows.sort(key=lambda r: r["offset"])
            assert [r["offset"] for r in rows] == list(range(60))
            assert all(r["value"] == value_of(r["offset"]) for r in rows)
            assert all(r["key"] == f"k{r['offset']}".encode() for r in rows)
            assert all(r["topic"] == topic and r["partition"] == 0 for r in rows)
            assert [int(r["timestamp"].timestamp() * 1000) for r in rows[::10]] == [
                now + i for i in range(6)
            ]
        # A copy whose upload failed (here: deleted) is written again by the garbage
        # pass, which a sidecar makes first thing after it starts, once no other pass
        # holds the every-5-minutes lease (dropped here: as if 5 minutes had passed).
        import obstore

        lost, lost_table = sorted(tables().items())[0]
        stop_process(server.proc)
        obstore.delete(s3.store(BUCKET), lost)
        own_redis.client().delete("skiff:remote_gc")
        assert lost not in tables()
        server = start_tiered(
            s3, own_redis, tmp_path / "skiff.log", prefix, "--remote-parquet", "true"
        )
        wait_for(lambda: lost in tables(), what="the lost Parquet copy written again")
        assert (
            pq.read_table(io.BytesIO(tables()[lost])).to_pylist()
            == pq.read_table(io.BytesIO(lost_table)).to_pylist()
        )
        with RawKafka("127.0.0.1", server.port) as kafka:
            # DeleteRecords past everything: segments and their Parquet files go.
            assert delete_records(kafka, topic, {0: 60}) == {0: (NONE, 60)}
            wait_for(lambda: not objects(s3, prefix), what="segments and Parquet files gone")
    finally:
        stop_process(server.proc)


def test_object_store_outage(own_redis: RedisServer, tmp_path: Path, prefix: str) -> None:
    """The store killed: produce goes on (Redis keeps what it cannot archive), a fetch of
    archived data gets the retriable KAFKA_STORAGE_ERROR, a fetch from Redis works; the
    store back: archiving resumes, every record is read back exactly once."""
    with S3Server() as store:
        store.create_bucket(BUCKET)
        server = start_tiered(store, own_redis, tmp_path / "skiff.log", prefix)
        try:
            with RawKafka("127.0.0.1", server.port) as kafka:
                topic = new_topic("tiered-outage")
                create_tiered(kafka, topic, 2, 3)
                for i in range(10):
                    produce(kafka, topic, batch_of(10 * i))
                wait_for(lambda: archived_to(own_redis, topic, 70), what="archiving")
                store.kill()
                for i in range(10, 20):
                    p = produce(kafka, topic, batch_of(10 * i))
                    assert (p.error_code, p.base_offset) == (NONE, 10 * i)
                archived = meta(own_redis, topic)["llso"]
                assert archived < 180  # nothing more archived while the store is away
                assert fetch(kafka, topic, 0).error_code == KAFKA_STORAGE_ERROR
                assert_all(kafka, topic, archived, 200)
                store.restart()
                wait_for(lambda: archived_to(own_redis, topic, 170), 60, "archiving resumed")
                assert_all(kafka, topic, 0, 200)
        finally:
            stop_process(server.proc)


def test_redis_killed_while_archiving(s3: S3Server, tmp_path: Path, prefix: str) -> None:
    """Redis SIGKILLed and restarted (AOF, fsync always) while an idempotent producer
    writes and the archiver moves batches out: the log is exactly what was acknowledged,
    at the acknowledged offsets, across both tiers."""
    redis_server = PersistentRedis(tmp_path / "redis").start()
    server = start_tiered(s3, redis_server, tmp_path / "skiff.log", prefix)  # type: ignore[arg-type]
    try:
        topic = new_topic("tiered-redis-kill")
        with RawKafka("127.0.0.1", server.port) as kafka:
            create(
                kafka,
                topic,
                {
                    "remote.storage.enable": "true",
                    "local.retention.bytes": "20000",
                    "internal.segment.bytes": "100000",
                },
            )
        loop = ProduceLoop(server.bootstrap, topic, 1, **{"batch.size": 16384})
        loop.start()
        loop.wait_acked(3000)
        for _ in range(2):
            assert redis_server.proc is not None
            redis_server.proc.kill()
            redis_server.proc.wait()
            redis_server.start()
            loop.wait_acked(loop.acked_count + 2000)
        loop.finish()
        wait_for(
            lambda: archived_to(redis_server, topic, len(loop.expected(0)) // 2),  # type: ignore[arg-type]
            30,
            "archiving",
        )
        check_exactly_once(loop, server.bootstrap)
    finally:
        stop_process(server.proc)
        redis_server.stop()


def test_queue_group_reads_archived_records(sidecar: Skiff, own_redis: RedisServer) -> None:
    """An HTTP queue group (the same core as Kafka share groups) from the earliest offset
    of a topic most of which is archived: every record once, archived ones included,
    each acknowledged."""
    from test_queues_http import Api, configure, read, settle

    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic("tiered-queue")
        create_tiered(kafka, topic, 2, 3)
        for i in range(12):
            produce(kafka, topic, batch_of(10 * i))
    wait_for(lambda: archived_to(own_redis, topic, 90), what="archiving")
    api = Api(sidecar.http_port)
    group = f"qg-{uuid.uuid4().hex[:8]}"
    configure(api, group)
    seen: list[int] = []
    deadline = time.monotonic() + 60
    while len(seen) < 120 and time.monotonic() < deadline:
        records = read(api, group, topic, "w1", 25)
        for r in records:
            assert r["value"] == value_of(r["offset"]).decode()
        seen += [r["offset"] for r in records]
        if records:
            status, body = settle(api, group, "acknowledge", "w1", records)
            assert status == 200, body
    api.close()
    assert sorted(seen) == list(range(120))


def test_disabling_with_delete_on_disable_deletes_remote_data(
    sidecar: Skiff, own_redis: RedisServer, s3: S3Server, prefix: str
) -> None:
    """remote.storage.enable=false with remote.log.delete.on.disable=true (KIP-950): the
    archived segments are deleted and the log start moves past them; Redis keeps its
    part, and the topic stays a plain one."""
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic("tiered-off")
        create(
            kafka,
            topic,
            {"remote.storage.enable": "true", "local.retention.bytes": str(len(batch_of(0)))},
        )
        for i in range(6):
            produce(kafka, topic, batch_of(10 * i))
        wait_for(lambda: archived_to(own_redis, topic, 50), what="archiving")
        assert objects(s3, prefix)
        body = alter_body(topic, "false")
        body["resources"][0]["configs"].append(  # type: ignore[index]
            {"name": "remote.log.delete.on.disable", "config_operation": 0, "value": "true"}
        )
        [r] = kafka.request(44, 1, body).responses
        assert r.error_code == NONE, r
        wait_for(lambda: not objects(s3, prefix), what="remote data deleted")
        assert meta(own_redis, topic)["lso"] == 50
        assert fetch(kafka, topic, 49).error_code == OFFSET_OUT_OF_RANGE
        assert_all(kafka, topic, 50, 60)
        p = produce(kafka, topic, batch_of(60))
        assert (p.error_code, p.base_offset) == (NONE, 60)
        time.sleep(0.5)  # a few archiver passes: nothing is archived any more
        assert meta(own_redis, topic)["llso"] == 50
        assert_all(kafka, topic, 50, 70)


def test_read_committed_over_archived_transactions(sidecar: Skiff, own_redis: RedisServer) -> None:
    """Committed and aborted transactions, then archived whole: a read_committed
    consumer from offset 0 gets exactly the committed records (the aborted-transaction
    index stays in Redis; markers are archived with the data), read_uncommitted all."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic("tiered-txn")
        create(kafka, topic, {"remote.storage.enable": "true", "local.retention.bytes": "0"})
    producer = Producer({"bootstrap.servers": sidecar.bootstrap, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    for round_ in range(4):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, f"{round_}-{i}".encode(), partition=0)
        assert producer.flush(30) == 0  # in the log before the abort, as aborted data
        if round_ % 2:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    hw = meta(own_redis, topic)["hw"]
    assert hw == 24  # 4 x (5 records + 1 marker)
    wait_for(lambda: archived_to(own_redis, topic, hw), what="archiving")
    assert own_redis.client().xlen(f"skiff:{{{topic}/0}}:log") == 0

    def values(isolation: str) -> list[bytes]:
        consumer = Consumer(
            {
                "bootstrap.servers": sidecar.bootstrap,
                "group.id": f"g-{uuid.uuid4().hex[:6]}",
                "isolation.level": isolation,
                "enable.partition.eof": True,
            }
        )
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF: read to the end
                    break
                continue
            out.append(msg.value())
        consumer.close()
        return out

    committed = [f"{r}-{i}".encode() for r in (0, 2) for i in range(5)]
    assert values("read_committed") == committed
    assert values("read_uncommitted") == [f"{r}-{i}".encode() for r in range(4) for i in range(5)]


def test_bad_remote_storage_url_is_one_line(own_redis: RedisServer) -> None:
    """A --remote-storage the object store client cannot use: one ERROR line saying
    what to check, exit status 2, no traceback."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sidecar.cli.main",
            "serve",
            "--redis-url",
            own_redis.url,
            "--remote-storage",
            "bogus://x",
            "--listen",
            "127.0.0.1:0",
            "--http-listen",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "check --remote-storage" in errors[0], proc.stderr
    assert "bogus://x" in errors[0] and "Traceback" not in proc.stderr


def test_kafka_tools_see_both_tiers(sidecar: Skiff, own_redis: RedisServer, prefix: str) -> None:
    """Kafka's own tools, unmodified: kafka-log-dirs lists the object store as a log dir
    holding the archived bytes; kafka-get-offsets --time latest-tiered and earliest-local
    give the tier boundary, and latest-tiered nothing for a topic without remote storage
    (the -1 Kafka answers, which the tool leaves out)."""
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic, plain = new_topic("tiered-tools"), new_topic("plain")
        create_tiered(kafka, topic, 1, 2)
        create(kafka, plain)
        for i in range(6):
            produce(kafka, topic, batch_of(10 * i))
        produce(kafka, plain, batch_of(0))
        wait_for(lambda: archived_to(own_redis, topic, 50), what="archiving")
        local = log_dir_size(kafka, topic)
    m = meta(own_redis, topic)
    remote = m["rbytes"]
    assert remote > 0 and local > 0

    times = ("latest-tiered", "earliest-local")
    runs = [
        ["--bootstrap-server", sidecar.bootstrap, "--topic", t, "--time", time]
        for t in (topic, plain)
        for time in times
    ]
    offsets = run_batch(KAFKA_VERSION, "kafka-get-offsets", runs)
    assert all(r.returncode == 0 for r in offsets), offsets
    assert [r.stdout.split() for r in offsets] == [
        [f"{topic}:0:{m['llso'] - 1}"],
        [f"{topic}:0:{m['llso']}"],
        [],
        [f"{plain}:0:0"],
    ]

    [described] = run_batch(
        KAFKA_VERSION, "kafka-log-dirs", [["--bootstrap-server", sidecar.bootstrap, "--describe"]]
    )
    assert described.returncode == 0, described
    report = json.loads(described.stdout.strip().splitlines()[-1])
    [broker] = report["brokers"]
    sizes = {
        d["logDir"]: {p["partition"]: p["size"] for p in d["partitions"]} for d in broker["logDirs"]
    }
    assert sizes[f"s3://{BUCKET}/{prefix}"] == {f"{topic}-0": remote}
    assert sizes[own_redis.url][f"{topic}-0"] == local
    assert sizes[own_redis.url][f"{plain}-0"] == len(batch_of(0))
