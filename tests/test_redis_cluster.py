"""Skiff on a Redis Cluster (3 primaries + 3 replicas on loopback, tests/redis_cluster_harness.py)
through `--redis-url redis+cluster://...`: real clients produce and consume across 12
partitions byte for byte at exact offsets, consumer groups commit and resume, topic admin
works, partitions land on every primary, and a CLUSTER FAILOVER during an idempotent
acks=all produce loop loses and duplicates nothing."""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from clients import confluent_client
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from conftest import Skiff, start_skiff, stop_process
from log_helpers import stored_values
from rawkafka import ConnectionClosed, ProtocolError, RawKafka, build_batch, produce_request
from records import assert_same, make_records
from redis_cluster_harness import RedisClusterNodes, start_redis_cluster

from sidecar.storage import keys, scripts

PARTITIONS = 12
HAVE_JAVA = shutil.which("mvn") is not None and (
    importlib.util.find_spec("clients.java_client") is not None
)


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterNodes]:
    cluster = start_redis_cluster(tmp_path_factory.mktemp("redis-cluster"))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def cluster_skiff(
    redis_cluster: RedisClusterNodes, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Skiff]:
    log_path = tmp_path_factory.mktemp("skiff-cluster") / "skiff.log"
    server = start_skiff(log_path, "--redis-url", redis_cluster.url)
    yield server
    stop_process(server.proc)


def _create(bootstrap: str, topic: str, partitions: int = PARTITIONS, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=configs)])
    futures[topic].result(30)


def _by_partition(n: int, seed: int) -> list[list[dict[str, Any]]]:
    records = make_records(n, seed)
    parts: list[list[dict[str, Any]]] = [[] for _ in range(PARTITIONS)]
    for i, rec in enumerate(records):
        rec["partition"] = i % PARTITIONS
        parts[i % PARTITIONS].append(rec)
    return parts


def test_partitions_spread_over_every_primary(
    cluster_skiff: Skiff, redis_cluster: RedisClusterNodes
) -> None:
    topic = "orders"  # a fixed name: where its partitions land is deterministic
    _create(cluster_skiff.bootstrap, topic)
    owners = {p: redis_cluster.owner(keys.partition_keys(topic, p)[0]) for p in range(PARTITIONS)}
    assert set(owners.values()) == set(redis_cluster.primaries())
    # Every key of a partition is in its slot, on its primary, and created there.
    for p, port in owners.items():
        node = redis_cluster.node(port)
        slots = {
            int(node.execute_command("CLUSTER KEYSLOT", k))
            for k in keys.all_partition_keys(topic, p)
        }
        assert len(slots) == 1
        assert node.hget(keys.partition_keys(topic, p)[1], "hw") == b"0"


def test_every_script_and_transaction_touches_one_slot(redis_cluster: RedisClusterNodes) -> None:
    """The key sets Skiff passes to one script (or one MULTI) share a slot, also for
    names with braces (a group id may hold them)."""
    node = redis_cluster.node(redis_cluster.alive_port())

    def slots(names: list[str]) -> set[int]:
        return {int(node.execute_command("CLUSTER KEYSLOT", k)) for k in names}

    for topic, p in (("t", 0), ("a.b-c_d", 11), ("x" * 200, 7)):
        assert len(slots(keys.append_keys(topic, p))) == 1
        assert len(slots(keys.trim_keys(topic, p))) == 1
        assert len(slots(keys.all_partition_keys(topic, p))) == 1
        assert len(slots([keys.cleaner_key(topic, p), keys.partition_keys(topic, p)[1]])) == 1
        # A queue group's keys of a partition are in its slot (queue scripts, DeleteTopics).
        queue = keys.queue_partition_keys("{odd}group", topic, p)
        assert len(slots([*keys.all_partition_keys(topic, p), *queue])) == 1
    for group in ("g", "{odd}group", "a}b{c", ""):
        assert len(slots(list(keys.group_keys(group)))) == 1
    # Each cluster-wide key is used alone (one key per command or script).
    assert {s.name for s in scripts.ALL} >= {"brokers", "topic_cas"}


def test_confluent_round_trip_12_partitions(
    cluster_skiff: Skiff, redis_cluster: RedisClusterNodes
) -> None:
    topic = f"rt-{uuid.uuid4().hex[:8]}"
    _create(cluster_skiff.bootstrap, topic)
    parts = _by_partition(2400, seed=7)
    flat = [r for part in parts for r in part]
    meta = confluent_client.produce(cluster_skiff.bootstrap, topic, flat, "zstd", linger_ms=50)
    for p in range(PARTITIONS):
        offsets = [m["offset"] for m, r in zip(meta, flat, strict=True) if r["partition"] == p]
        assert offsets == list(range(len(parts[p]))), f"partition {p}"
        got = confluent_client.consume(cluster_skiff.bootstrap, topic, p, 0, len(parts[p]))
        assert_same(parts[p], got, 0, partition=p)
    # The records are stored on the partition's primary: batches (the default format),
    # the last entry's ID carrying the last offset + 1.
    log = keys.partition_keys(topic, 5)[0]
    primary = redis_cluster.node(redis_cluster.owner(log))
    [(last_id, fields)] = primary.xrevrange(log, count=1)
    assert (last_id, list(fields)) == (b"0-%d" % len(parts[5]), [b"b"])
    assert 0 < primary.xlen(log) < len(parts[5])


@pytest.mark.skipif(not HAVE_JAVA, reason="the Java client needs mvn")
def test_java_round_trip_12_partitions(cluster_skiff: Skiff) -> None:
    java = importlib.import_module("clients.java_client")
    topic = f"java-{uuid.uuid4().hex[:8]}"
    _create(cluster_skiff.bootstrap, topic)
    parts = _by_partition(1200, seed=11)
    flat = [r for part in parts for r in part]
    meta = java.produce(cluster_skiff.bootstrap, topic, flat, "lz4")
    for p in range(PARTITIONS):
        offsets = [m["offset"] for m, r in zip(meta, flat, strict=True) if r["partition"] == p]
        assert offsets == list(range(len(parts[p])))
    for p in (0, 5, 11):
        got = java.consume(cluster_skiff.bootstrap, topic, p, 0, len(parts[p]))
        assert_same(parts[p], got, 0, partition=p)
        got = confluent_client.consume(cluster_skiff.bootstrap, topic, p, 0, len(parts[p]))
        assert_same(parts[p], got, 0, partition=p)


def _group_consumer(bootstrap: str, group: str, topic: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
        }
    )
    consumer.subscribe([topic])
    return consumer


def _poll_values(consumer: Consumer, count: int, timeout_s: float = 60) -> list[Any]:
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append(msg)
    assert len(got) == count, f"{len(got)} of {count} records"
    return got


def test_consumer_group_commits_and_resumes(cluster_skiff: Skiff) -> None:
    topic = f"grp-{uuid.uuid4().hex[:8]}"
    group = f"g-{{{uuid.uuid4().hex[:6]}}}"  # braces in the id: its own hash tag
    _create(cluster_skiff.bootstrap, topic)
    producer = Producer({"bootstrap.servers": cluster_skiff.bootstrap, "acks": "all"})
    for i in range(600):
        producer.produce(topic, value=b"v%d" % i, partition=i % PARTITIONS)
    producer.flush(30)

    first = _group_consumer(cluster_skiff.bootstrap, group, topic)
    taken = _poll_values(first, 300)
    first.commit(asynchronous=False)
    committed = {
        tp.partition: tp.offset
        for tp in first.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 30)
    }
    first.close()
    seen = {(m.partition(), m.offset()) for m in taken}
    for p in range(PARTITIONS):
        mine = [o for q, o in seen if q == p]
        assert committed[p] == (max(mine) + 1 if mine else -1001), p

    second = _group_consumer(cluster_skiff.bootstrap, group, topic)
    rest = _poll_values(second, 300)
    second.close()
    resumed = {(m.partition(), m.offset()) for m in rest}
    assert not resumed & seen  # resumed after the committed offsets, nothing twice
    assert seen | resumed == {(i % PARTITIONS, i // PARTITIONS) for i in range(600)}


def test_topic_admin(cluster_skiff: Skiff, redis_cluster: RedisClusterNodes) -> None:
    topic = f"adm-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster_skiff.bootstrap})
    _create(cluster_skiff.bootstrap, topic, PARTITIONS, **{"retention.ms": "3600000"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    described = admin.describe_configs([resource])[resource].result(30)
    assert described["retention.ms"].value == "3600000"
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    change = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([change])[change].result(30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        fresh = ConfigResource(ConfigResource.Type.TOPIC, topic)
        if admin.describe_configs([fresh])[fresh].result(30)["retention.ms"].value == "7200000":
            break
        time.sleep(0.2)
    else:
        raise AssertionError("retention.ms did not change")
    producer = Producer({"bootstrap.servers": cluster_skiff.bootstrap})
    for p in range(PARTITIONS):
        producer.produce(topic, value=b"x", partition=p)
    producer.flush(30)
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 10
    while topic in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    assert topic not in admin.list_topics(timeout=10).topics
    for p in range(PARTITIONS):
        for key in keys.all_partition_keys(topic, p):
            assert redis_cluster.node(redis_cluster.owner(key)).exists(key) == 0, key


def test_failover_during_idempotent_produce(tmp_path: Path) -> None:
    """CLUSTER FAILOVER on one primary's replica while an idempotent acks=all producer
    runs: every acknowledged record is there once, at its acknowledged offset; the
    promoted replica gets the scripts (NOSCRIPT -> SCRIPT LOAD on every primary)."""
    cluster = start_redis_cluster(tmp_path / "cluster")
    skiff = None
    try:
        # acks=all waits for the partition primary's replica (WAIT 1 on its shard).
        skiff = start_skiff(
            tmp_path / "skiff.log", "--redis-url", cluster.url, "--min-insync-replicas", "2"
        )
        topic = "failover"
        _create(skiff.bootstrap, topic)
        victim = cluster.owner(keys.partition_keys(topic, 0)[0])
        replica = cluster.replica_of(victim)
        sha = scripts.APPEND.sha
        assert cluster.node(replica).script_exists(sha) == [False]  # not replicated

        acked: dict[tuple[int, int], bytes] = {}
        failures: list[str] = []
        stop = threading.Event()

        def produce_loop() -> None:
            producer = Producer(
                {
                    "bootstrap.servers": skiff.bootstrap,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "message.timeout.ms": 60000,
                }
            )

            def report(err: Any, msg: Any) -> None:
                if err is not None:
                    failures.append(str(err))
                else:
                    key = (msg.partition(), msg.offset())
                    assert key not in acked, f"offset {key} acknowledged twice"
                    acked[key] = msg.value()

            i = 0
            while not stop.is_set():
                producer.produce(
                    topic, value=b"r%08d" % i, partition=i % PARTITIONS, on_delivery=report
                )
                i += 1
                if i % 200 == 0:
                    producer.poll(0)
                    time.sleep(0.01)
            producer.flush(60)

        def wait_acked(count: int) -> None:
            deadline = time.monotonic() + 60
            while len(acked) < count:
                assert thread.is_alive() and not failures, failures[:5]
                assert time.monotonic() < deadline, f"{len(acked)} acknowledged, not {count}"
                time.sleep(0.1)

        thread = threading.Thread(target=produce_loop)
        thread.start()
        try:
            wait_acked(1000)
            before = len(acked)
            cluster.node(replica).execute_command("CLUSTER FAILOVER")
            deadline = time.monotonic() + 30
            while cluster.owner(keys.partition_keys(topic, 0)[0]) != replica:
                assert time.monotonic() < deadline, "the failover did not happen"
                time.sleep(0.1)
            cluster.wait_ok()
            wait_acked(len(acked) + 2000)  # keep producing on the new primary
        finally:
            stop.set()
            thread.join(120)
        assert not failures, failures[:5]
        assert len(acked) > before
        assert cluster.node(replica).script_exists(sha) == [True]

        values = sorted(acked.values())
        assert len(set(values)) == len(values)  # no record acknowledged twice
        for p in range(PARTITIONS):
            mine = sorted(o for q, o in acked if q == p)
            assert mine == list(range(len(mine))), f"partition {p}: offsets not contiguous"
            got = confluent_client.consume(skiff.bootstrap, topic, p, 0, len(mine))
            assert [g["value"] for g in got] == [acked[(p, o)] for o in mine]
        assert skiff.alive()
    finally:
        if skiff is not None:
            stop_process(skiff.proc)
        cluster.stop()


def test_long_poll_wakes_on_an_append_on_any_primary(
    cluster_skiff: Skiff, redis_cluster: RedisClusterNodes
) -> None:
    """One pattern subscription per sidecar on one node hears appends on every primary
    (classic PUBLISH is broadcast across the cluster)."""
    from rawkafka import RawKafka, Rec, build_batch, fetch_request, fetched_records, produce_request

    topic = f"lp-{uuid.uuid4().hex[:8]}"
    _create(cluster_skiff.bootstrap, topic)
    numpat = sum(
        int(redis_cluster.node(p).execute_command("PUBSUB NUMPAT")) for p in redis_cluster.ports
    )
    assert numpat == 1  # this module's one sidecar
    # A partition on each primary.
    chosen: dict[int, int] = {}
    for p in range(PARTITIONS):
        chosen.setdefault(redis_cluster.owner(keys.partition_keys(topic, p)[0]), p)
    assert len(chosen) == 3
    with (
        RawKafka("127.0.0.1", cluster_skiff.port) as waiter,
        RawKafka("127.0.0.1", cluster_skiff.port) as producer,
    ):
        for p in chosen.values():
            cid = waiter.send(1, 12, fetch_request(topic, {p: 0}, max_wait_ms=30000, min_bytes=1))
            assert not waiter.closed(0.3) and not waiter._buf  # waiting
            resp = producer.request(0, 9, produce_request(topic, {p: build_batch([Rec(b"w")])}))
            assert resp.responses[0].partition_responses[0].error_code == 0
            started = time.monotonic()
            resp = waiter.recv(1, 12)
            # Woken by the append, not by the end of the 30 s wait.
            assert time.monotonic() - started < 15
            assert waiter.last_correlation_id == cid
            [part] = resp.responses[0].partitions
            assert [(r.offset, r.value) for r in fetched_records(part.records)] == [(0, b"w")]


def test_spark_redis_read_path_on_a_cluster(
    cluster_skiff: Skiff, redis_cluster: RedisClusterNodes
) -> None:
    pytest.importorskip("pyarrow")
    from pipeline.skiff_logs import RedisLog

    topic = f"spark-{uuid.uuid4().hex[:8]}"
    _create(cluster_skiff.bootstrap, topic)
    producer = Producer({"bootstrap.servers": cluster_skiff.bootstrap, "acks": "all"})
    for i in range(120):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % PARTITIONS)
    producer.flush(30)
    log = RedisLog(redis_cluster.url)
    try:
        assert log.partition_count(topic) == PARTITIONS
        for p in range(PARTITIONS):
            assert log.watermarks(topic, p) == (0, 10)
            rows = [row for batch in log.read(topic, p, 0, 10) for row in batch.to_pylist()]
            assert [(r["offset"], r["value"]) for r in rows] == [
                (o, b"v%d" % (o * PARTITIONS + p)) for o in range(10)
            ]
    finally:
        log.close()


def test_one_slot_transactions_and_pipelines_through_the_cluster_client(
    redis_cluster: RedisClusterNodes,
) -> None:
    """pipeline(transaction=True) on the cluster client: one MULTI/EXEC on the slot's
    primary with redis-py's reply parsing (options included); a plain pipeline spans
    nodes."""
    import asyncio

    from sidecar.storage.connection import client_for

    async def run() -> None:
        client = client_for(redis_cluster.url, 2.0)
        try:
            tag = f"skiff:{{tx-{uuid.uuid4().hex[:6]}/0}}"
            async with client.pipeline(transaction=True) as pipe:
                pipe.hset(f"{tag}:meta", mapping={"hw": 3, "lso": 1})
                pipe.zadd(f"{tag}:time", {"0": 10, "2": 20})
                pipe.zrange(f"{tag}:time", 0, -1, withscores=True)
                pipe.hmget(f"{tag}:meta", "hw", "lso")
                pipe.time()
                pipe.evalsha("0" * 40, 1, f"{tag}:meta")  # NOSCRIPT, kept in its place
                reply = await pipe.execute(raise_on_error=False)
            assert reply[:4] == [2, 2, [(b"0", 10.0), (b"2", 20.0)], [b"3", b"1"]]
            assert isinstance(reply[4], tuple) and len(reply[4]) == 2
            assert type(reply[5]).__name__ == "NoScriptError"
            async with client.pipeline(transaction=False) as pipe:
                for p in range(PARTITIONS):
                    pipe.hsetnx(f"skiff:{{spread/{p}}}:meta", "hw", 0)
                assert await pipe.execute() == [True] * PARTITIONS
        finally:
            await client.aclose()

    asyncio.run(run())


def test_acks_all_counts_the_replicas_of_each_partitions_primary(tmp_path: Path) -> None:
    """min.insync.replicas=2 on a cluster: a partition whose primary lost its replica
    answers NOT_ENOUGH_REPLICAS (nothing appended); partitions on the other primaries
    are acknowledged as usual."""
    from rawkafka import RawKafka, Rec, build_batch, produce_request

    cluster = start_redis_cluster(tmp_path / "cluster")
    skiff = None
    try:
        skiff = start_skiff(
            tmp_path / "skiff.log", "--redis-url", cluster.url, "--min-insync-replicas", "2"
        )
        topic = "isr"
        _create(skiff.bootstrap, topic)
        owners = {p: cluster.owner(keys.partition_keys(topic, p)[0]) for p in range(PARTITIONS)}
        lonely = owners[0]
        replica = cluster.replica_of(lonely)
        stop_process(cluster.procs[cluster.ports.index(replica)])
        deadline = time.monotonic() + 10
        while cluster.node(lonely).execute_command("ROLE")[2]:
            assert time.monotonic() < deadline, "the primary still lists its replica"
            time.sleep(0.1)
        time.sleep(0.6)  # past the sidecar's 0.5 s replica cache
        with RawKafka("127.0.0.1", skiff.port) as kafka:
            batches = {p: build_batch([Rec(b"p%d" % p)]) for p in range(PARTITIONS)}
            resp = kafka.request(0, 9, produce_request(topic, batches, acks=-1))
            codes = {r.index: r.error_code for r in resp.responses[0].partition_responses}
        not_enough = 19
        for p, port in owners.items():
            if port == lonely:
                assert codes[p] == not_enough, p
                assert cluster.node(port).xlen(keys.partition_keys(topic, p)[0]) == 0
            else:
                assert codes[p] == 0, p
                assert cluster.node(port).xlen(keys.partition_keys(topic, p)[0]) == 1
    finally:
        if skiff is not None:
            stop_process(skiff.proc)
        cluster.stop()


def test_append_follows_ask_while_a_partitions_slot_migrates(
    cluster_skiff: Skiff, redis_cluster: RedisClusterNodes
) -> None:
    """A partition's slot moves to another primary (CLUSTER SETSLOT MIGRATING/IMPORTING,
    MIGRATE of its keys, as `redis-cli --cluster reshard` does): a produce in the middle
    of it follows ASK to the importing node, and after the slot is handed over, Fetch
    follows MOVED; offsets continue."""
    import redis as redis_py

    topic = f"mig-{uuid.uuid4().hex[:8]}"
    _create(cluster_skiff.bootstrap, topic, 1)
    log_key = keys.partition_keys(topic, 0)[0]
    # Idempotent, so the partition has all six keys of the append script: with ASKING
    # the importing node runs a multi-key script only when every key is there (else
    # TRYAGAIN, retried until the slot is handed over).
    producer = Producer(
        {"bootstrap.servers": cluster_skiff.bootstrap, "acks": "all", "enable.idempotence": True}
    )
    producer.produce(topic, value=b"before", partition=0)
    producer.flush(30)
    src = redis_cluster.owner(log_key)
    dst = next(p for p in redis_cluster.primaries() if p != src)
    src_node, dst_node = redis_cluster.node(src), redis_cluster.node(dst)
    slot = int(src_node.execute_command("CLUSTER KEYSLOT", log_key))
    src_id = src_node.execute_command("CLUSTER MYID").decode()
    dst_id = dst_node.execute_command("CLUSTER MYID").decode()
    dst_node.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", src_id)
    src_node.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", dst_id)
    moved = src_node.execute_command("CLUSTER GETKEYSINSLOT", slot, 1000)
    assert set(keys.append_keys(topic, 0)) <= set(moved)
    src_node.execute_command("MIGRATE", "127.0.0.1", dst, "", 0, 5000, "KEYS", *moved)

    producer.produce(topic, value=b"during", partition=0)
    assert producer.flush(30) == 0
    asking = redis_py.Redis(port=dst, single_connection_client=True)
    asking.execute_command("ASKING")
    assert asking.xlen(log_key) == 2  # appended on the importing node

    for port in redis_cluster.primaries():
        redis_cluster.node(port).execute_command("CLUSTER SETSLOT", slot, "NODE", dst_id)
    assert redis_cluster.owner(log_key) == dst
    producer.produce(topic, value=b"after", partition=0)
    producer.flush(30)
    got = confluent_client.consume(cluster_skiff.bootstrap, topic, 0, 0, 3)
    assert [(g["offset"], g["value"]) for g in got] == [
        (0, b"before"),
        (1, b"during"),
        (2, b"after"),
    ]


# Produce answers an idempotent producer retries (the batch is resent unchanged).
RETRIABLE = {
    5: "LEADER_NOT_AVAILABLE",
    6: "NOT_LEADER_OR_FOLLOWER",
    7: "REQUEST_TIMED_OUT",
    19: "NOT_ENOUGH_REPLICAS",
    20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    56: "KAFKA_STORAGE_ERROR",
}


class RawIdempotentProducer(threading.Thread):
    """An idempotent acks=all producer on the raw protocol, so that every Produce answer's
    error code is seen: it sends one batch per partition in turn and resends a batch
    unchanged (same producer id, epoch and sequence) after a retriable error or a
    closed connection, as Kafka's clients do. Anything else ends it."""

    def __init__(self, port: int, topic: str, partitions: list[int], name: str) -> None:
        super().__init__(daemon=True)
        self.port, self.topic, self.partitions, self.tag = port, topic, partitions, name
        self.stop = threading.Event()
        self.codes: Counter[int] = Counter()
        self.closed = 0
        self.acked: dict[tuple[int, int], bytes] = {}
        self.fatal: list[str] = []
        self.kafka: RawKafka | None = None

    def _request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        while True:
            try:
                if self.kafka is None:
                    self.kafka = RawKafka("127.0.0.1", self.port, timeout=30)
                return self.kafka.request(api_key, version, body, timeout=30)
            except (ConnectionClosed, OSError, ProtocolError):
                self.closed += 1
                if self.kafka is not None:
                    self.kafka.close()
                self.kafka = None
                time.sleep(0.1)

    def run(self) -> None:
        try:
            self._run()
        except Exception as exc:  # reported by the test
            self.fatal.append(repr(exc))

    def _run(self) -> None:
        body = {"transactional_id": None, "transaction_timeout": 60000}
        init = self._request(22, 4, {**body, "producer_id": -1, "producer_epoch": -1})
        assert init.error_code == 0, init
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        sequences = dict.fromkeys(self.partitions, 0)
        n = 0
        while not self.stop.is_set():
            for p in self.partitions:
                values = [b"%s-%d-%d-%d" % (self.tag.encode(), p, n, i) for i in range(3)]
                batch = build_batch(
                    values, producer_id=pid, producer_epoch=epoch, base_sequence=sequences[p]
                )
                while True:
                    resp = self._request(
                        0, 9, produce_request(self.topic, {p: batch}, acks=-1, timeout_ms=4000)
                    )
                    [answer] = resp.responses[0].partition_responses
                    code = int(answer.error_code)
                    self.codes[code] += 1
                    if code == 0:
                        for i, value in enumerate(values):
                            self.acked[(p, int(answer.base_offset) + i)] = value
                        sequences[p] += len(values)
                        break
                    if code not in RETRIABLE:
                        self.fatal.append(f"partition {p}: error {code}: {answer.error_message}")
                        return
                    if self.stop.is_set():
                        return  # unacknowledged: may or may not be stored, once
                    time.sleep(0.05)
            n += 1


def test_failover_and_a_killed_primary_give_idempotent_producers_only_retriable_errors(
    tmp_path: Path,
) -> None:
    """Raw idempotent acks=all producers (min.insync.replicas=2) on all 12 partitions
    while (1) CLUSTER FAILOVER swaps one shard's primary and replica, (2) the new primary
    is SIGKILLed and its replica promoted by the cluster, (3) the killed node comes back
    as a replica. Every Produce answer is NONE or a retriable error (never
    UNKNOWN_SERVER_ERROR, which ends an idempotent producer), every acknowledged record
    is stored once at its offset, and the shard's partitions move on afterwards."""
    cluster = start_redis_cluster(tmp_path / "cluster")
    skiff = None
    producers: list[RawIdempotentProducer] = []
    try:
        skiff = start_skiff(tmp_path / "skiff.log", "--redis-url", cluster.url)
        topic = "failover-raw"
        _create(skiff.bootstrap, topic, **{"min.insync.replicas": "2"})
        key = keys.partition_keys(topic, 0)[0]
        first = cluster.owner(key)
        second = cluster.replica_of(first)
        producers = [
            RawIdempotentProducer(skiff.port, topic, list(range(i, PARTITIONS, 4)), f"w{i}")
            for i in range(4)
        ]
        for producer in producers:
            producer.start()

        def acked() -> int:
            return sum(len(p.acked) for p in producers)

        def progress(partition: int, beyond: int, timeout: float = 60) -> int:
            """Wait until partition has more than `beyond` acknowledged records."""
            deadline = time.monotonic() + timeout
            while True:
                mine = sum(1 for p in producers for q, _ in list(p.acked) if q == partition)
                if mine > beyond:
                    return mine
                assert all(p.is_alive() for p in producers), [p.fatal for p in producers]
                assert time.monotonic() < deadline, f"partition {partition} stuck at {mine}"
                time.sleep(0.1)

        on_zero = progress(0, 50)
        # (1) A coordinated failover: the replica takes over, the old primary follows it.
        cluster.node(second).execute_command("CLUSTER FAILOVER")
        deadline = time.monotonic() + 30
        while cluster.owner(key) != second:
            assert time.monotonic() < deadline, "the failover did not happen"
            time.sleep(0.1)
        cluster.wait_ok()
        on_zero = progress(0, on_zero + 50)
        # (2) The new primary dies; the cluster promotes its replica (node timeout 2 s).
        cluster.kill(second)
        deadline = time.monotonic() + 60
        while True:
            try:
                if cluster.owner(key) == first:
                    break
            except (AssertionError, redis.RedisError):
                pass  # the slot has no primary for a moment
            assert time.monotonic() < deadline, "the replica was not promoted"
            time.sleep(0.2)
        # (3) Without a replica that shard's partitions answer NOT_ENOUGH_REPLICAS; the
        # killed node rejoins as a replica, resyncs, and they go on.
        cluster.restart(second)
        cluster.wait_ok(60)
        progress(0, on_zero + 50, timeout=90)
        before_stop = acked()
        for producer in producers:
            producer.stop.set()
        for producer in producers:
            producer.join(60)
        assert not [p.fatal for p in producers if p.fatal or p.is_alive()]
        codes = sum((p.codes for p in producers), Counter())
        assert set(codes) <= {0, *RETRIABLE}, codes
        assert codes[0] >= before_stop // 3

        client = cluster.client()
        for p in range(PARTITIONS):
            stored = stored_values(client, f"skiff:{{{topic}/{p}}}:log")
            assert len(set(stored)) == len(stored), f"partition {p}: a record stored twice"
            mine = {o: v for q in producers for (r, o), v in q.acked.items() if r == p}
            assert mine and max(mine) < len(stored), f"partition {p}: acknowledged, lost"
            assert all(stored[o] == v for o, v in mine.items()), f"partition {p} differs"
        assert skiff.alive()
        assert "Traceback" not in skiff.log(), skiff.log()
    finally:
        for producer in producers:
            producer.stop.set()
        if skiff is not None:
            stop_process(skiff.proc)
        cluster.stop()
