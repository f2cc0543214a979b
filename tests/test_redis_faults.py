"""Redis faults under real clients: Redis stopped and started again during a produce
loop, Redis hung (DEBUG SLEEP) past the client's request timeout, and the script cache
flushed. Skiff answers retriable errors meanwhile, never hangs, and resumes by itself;
every acknowledged record is in the log exactly once, in order."""

from __future__ import annotations

import json
import struct
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import RedisServer, Skiff, start_skiff, stop_process
from faults_harness import PersistentRedis, ProduceLoop, check_exactly_once
from formats import FORMATS
from rawkafka import (
    RawKafka,
    build_batch,
    fetch_request,
    fetched_records,
    metadata_request,
    produce_request,
)
from test_durability import start_replica

from sidecar.apis import HANDLERS, unavailable

PRODUCE, FETCH, METADATA, API_VERSIONS, INIT_PRODUCER_ID = 0, 1, 3, 18, 22
NONE, REQUEST_TIMED_OUT = 0, 7
DELETE_TOPICS, DELETE_RECORDS, DESCRIBE_CONFIGS, ALTER_CONFIGS = 20, 21, 32, 33
DESCRIBE_LOG_DIRS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER = 35, 37, 44, 60
INVALID_TOPIC_EXCEPTION, INVALID_REQUEST, KAFKA_STORAGE_ERROR = 17, 42, 56
LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER = 5, 6
PARTITIONS = 2
ENV = {"SKIFF_BROKER_SESSION_TIMEOUT_MS": "3000", "SKIFF_BROKER_HEARTBEAT_INTERVAL_MS": "500"}


def create_topic(bootstrap: str, partitions: int, fmt: str = "record") -> str:
    name = f"fault-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(name, partitions, 1, config={"skiff.storage.format": fmt})
    admin.create_topics([new])[name].result(30)
    return name


class GroupReader(threading.Thread):
    """A group member reading the topic while Redis comes and goes: (partition, offset)
    -> value of everything it saw (a record may come twice after a rewind)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"g-{topic}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 200,
                "fetch.wait.max.ms": 500,
            }
        )
        self.consumer.subscribe([topic])
        self.seen: dict[tuple[int, int], bytes] = {}
        self.wrong: list[str] = []
        self.errors: list[str] = []
        self.assigned: list[int] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            msg = self.consumer.poll(0.2)
            if msg is not None and msg.error():
                self.errors.append(str(msg.error()))
            if msg is None or msg.error():
                continue
            key = (msg.partition(), msg.offset())
            if self.seen.setdefault(key, msg.value()) != msg.value():
                self.wrong.append(f"{key}: {self.seen[key]!r} then {msg.value()!r}")
        self.assigned = [tp.partition for tp in self.consumer.assignment()]
        self.consumer.close()

    def stop(self) -> None:
        """Stop reading (the thread closes the consumer and ends)."""
        self._halt.set()

    def finish(self, loop: ProduceLoop, timeout: float = 60.0) -> None:
        total = sum(len(loop.expected(p)) for p in range(loop.partitions))
        deadline = time.monotonic() + timeout
        while len(self.seen) < total and time.monotonic() < deadline:
            time.sleep(0.1)
        self._halt.set()
        self.join(10)
        assert not self.wrong, self.wrong[:3]
        for p in range(loop.partitions):
            got = [self.seen.get((p, o)) for o in range(len(loop.expected(p)))]
            assert got == loop.expected(p), (
                f"the group member missed records of partition {p}: assigned {self.assigned}, "
                f"saw {len(self.seen)}, errors {self.errors[:5]}"
            )


def readyz(port: int) -> int:
    """The status of the sidecar's /readyz (sidecar/telemetry/http.py)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


@pytest.mark.parametrize("fmt", FORMATS)
def test_redis_restart_during_a_produce_loop(tmp_path: Path, fmt: str) -> None:
    """Redis stops (SIGTERM) while an idempotent acks=all producer and a group member
    run, and starts again on the same port 5 s later: the producer finishes, every
    acknowledged record is in the log once, in order, at its acknowledged offset; the
    member reads them all; the sidecar is registered again; /readyz went from 200 to 503
    while Redis was away and back to 200. On `record` and `batch` topics."""
    store = PersistentRedis(tmp_path / "redis").start()
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", store.url, env=ENV)
    try:
        assert readyz(server.http_port) == 200
        topic = create_topic(server.bootstrap, PARTITIONS, fmt)
        reader = GroupReader(server.bootstrap, topic)
        reader.start()
        loop = ProduceLoop(server.bootstrap, topic, PARTITIONS)
        loop.start()
        loop.wait_acked(3000)
        store.stop()
        # Acknowledgements stop while Redis is down, once those already on their way
        # (delivery reports lag on a loaded machine) have come in: 2 s without one.
        stopped_at = loop.acked_count
        deadline = time.monotonic() + 60
        while True:
            time.sleep(2)
            if loop.acked_count == stopped_at:
                break
            stopped_at = loop.acked_count
            assert time.monotonic() < deadline, "acknowledgements go on without Redis"
        time.sleep(3)
        assert readyz(server.http_port) == 503
        with RawKafka("127.0.0.1", server.port) as kafka:
            # Meanwhile: Metadata answers from memory, Produce a retriable error.
            meta = kafka.request(METADATA, 9, metadata_request([topic]), timeout=10)
            assert [t.error_code for t in meta.topics] == [NONE]
            assert len(meta.topics[0].partitions) == PARTITIONS
            resp = kafka.request(
                PRODUCE, 9, produce_request(topic, {0: build_batch([b"x"])}, 1, 4000), timeout=10
            )
            assert resp.responses[0].partition_responses[0].error_code == REQUEST_TIMED_OUT
        assert loop.acked_count - stopped_at < 200  # nothing is acknowledged while down
        store.start()
        loop.wait_acked(loop.acked_count + 3000)
        loop.finish()
        # Ready again once the registration is renewed (a renewal that timed out while
        # Redis came back may drop it for a moment under load).
        deadline = time.monotonic() + 15
        while readyz(server.http_port) != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert readyz(server.http_port) == 200
        check_exactly_once(loop, server.bootstrap)
        reader.finish(loop)
        registered = store.client().hgetall("skiff:brokers")
        assert [json.loads(v)["port"] for v in registered.values()] == [server.port]
        log = server.log()
        # A line when Redis went away and one when it came back, not one per retry: the
        # lines alternate, each outage ends, and there are far fewer of them than the
        # retries of the outage (a loaded machine may split it into a few episodes).
        assert_episodes(log, "Redis is unavailable (", "Redis is available again")
        assert_episodes(log, "wake-up subscription lost", "wake-up subscription restored")
        assert server.alive()
    finally:
        stop_process(server.proc)
        store.stop()


def assert_episodes(log: str, down: str, up: str, most: int = 10) -> None:
    """`down` and `up` lines alternate, starting with `down` and ending with `up`,
    between 1 and `most` episodes."""
    events = [line for line in log.splitlines() if down in line or up in line]
    kinds = ["down" if down in line else "up" for line in events]
    assert 1 <= len(kinds) // 2 <= most, events
    assert kinds == ["down", "up"] * (len(kinds) // 2), events


def test_debug_sleep_longer_than_the_request_timeout(tmp_path: Path) -> None:
    """Redis hangs for 8 s (DEBUG SLEEP), longer than the producer's 5 s request timeout:
    Produce gets REQUEST_TIMED_OUT in time, other requests keep being answered on other
    connections, and afterwards the producer finishes without duplicates. The raw
    append that timed out ran at most once, though it may have been resent."""
    own_redis = PersistentRedis(tmp_path / "redis", extra=("--enable-debug-command", "local"))
    own_redis.start()
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url, env=ENV)
    try:
        topic = create_topic(server.bootstrap, PARTITIONS)
        side = create_topic(server.bootstrap, 1)
        loop = ProduceLoop(server.bootstrap, topic, PARTITIONS, **{"request.timeout.ms": 5000})
        loop.start()
        loop.wait_acked(2000)
        sleeper = threading.Thread(
            target=lambda: redis.Redis(port=own_redis.port, socket_timeout=30).execute_command(
                "DEBUG", "SLEEP", 8
            ),
            daemon=True,
        )
        with (
            RawKafka("127.0.0.1", server.port) as probe,
            RawKafka("127.0.0.1", server.port) as producer,
        ):
            sleeper.start()
            time.sleep(0.3)
            started = time.monotonic()
            resp = producer.request(
                PRODUCE, 9, produce_request(side, {0: build_batch([b"once"])}, 1, 4000), timeout=10
            )
            assert resp.responses[0].partition_responses[0].error_code == REQUEST_TIMED_OUT
            assert time.monotonic() - started < 4.0  # within the request's timeout_ms
            assert sleeper.is_alive()  # Redis still asleep: answered meanwhile
            versions = probe.request(
                API_VERSIONS,
                3,
                {"client_software_name": "t", "client_software_version": "1"},
                timeout=5,
            )
            assert versions.error_code == NONE
            meta = probe.request(METADATA, 9, metadata_request([topic]), timeout=5)
            assert [t.error_code for t in meta.topics] == [NONE]
            assert sleeper.is_alive()
            sleeper.join(15)
            loop.wait_acked(loop.acked_count + 2000)
            loop.finish()
            check_exactly_once(loop, server.bootstrap)
            # The timed-out append's outcome was unknown to the client: it ran at most
            # once (resends carry its token), and the partition stays contiguous.
            resp = producer.request(
                PRODUCE, 9, produce_request(side, {0: build_batch([b"after"])}, 1)
            )
            after = resp.responses[0].partition_responses[0]
            assert after.error_code == NONE
            resp = probe.request(FETCH, 12, fetch_request(side, {0: 0}), timeout=10)
            values = [r.value for r in fetched_records(resp.responses[0].partitions[0].records)]
            assert values in ([b"after"], [b"once", b"after"])
            assert after.base_offset == len(values) - 1
        assert server.alive()
    finally:
        stop_process(server.proc)
        own_redis.stop()


def test_script_flush_is_cured_transparently(own_redis: RedisServer, tmp_path: Path) -> None:
    """SCRIPT FLUSH (as after a Redis restart without persistence): appends, group
    writes, the broker heartbeat and InitProducerId reload their scripts and succeed."""
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url, env=ENV)
    client = redis.Redis(port=own_redis.port)
    try:
        topic = create_topic(server.bootstrap, 1)
        with RawKafka("127.0.0.1", server.port) as kafka:

            def produce(value: bytes) -> tuple[int, int]:
                resp = kafka.request(PRODUCE, 9, produce_request(topic, {0: build_batch([value])}))
                p = resp.responses[0].partition_responses[0]
                return int(p.error_code), int(p.base_offset)

            assert produce(b"a") == (NONE, 0)
            client.script_flush()
            assert produce(b"b") == (NONE, 1)
            client.script_flush()
            init = kafka.request(
                INIT_PRODUCER_ID,
                4,
                {
                    "transactional_id": "tx-1",
                    "transaction_timeout": 60000,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
            )
            assert (init.error_code, init.producer_epoch) == (NONE, 0)
            client.script_flush()
            before = json.loads(next(iter(client.hgetall("skiff:brokers").values())))["exp"]
            time.sleep(1.2)  # two heartbeats
            after = json.loads(next(iter(client.hgetall("skiff:brokers").values())))["exp"]
            assert after > before  # renewed through a reloaded brokers.lua
        client.script_flush()
        consumer = Consumer(
            {
                "bootstrap.servers": server.bootstrap,
                "group.id": f"g-{topic}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([topic])
        values = []
        deadline = time.monotonic() + 30
        while len(values) < 2 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                values.append(msg.value())
        assert values == [b"a", b"b"]
        client.script_flush()
        consumer.commit(asynchronous=False)  # lua/group_write.lua, reloaded
        committed = consumer.committed([*consumer.assignment()], timeout=10)
        assert [tp.offset for tp in committed] == [2]
        consumer.close()
        assert client.xlen(f"skiff:{{{topic}/0}}:log") == 2
        assert "NOSCRIPT" not in server.log()
    finally:
        stop_process(server.proc)


def test_every_api_answers_retriable_errors_while_redis_is_down(tmp_path: Path) -> None:
    """With Redis stopped, each API answers within --redis-retry-ms with the retriable
    error its clients retry on, and keeps the connection open."""
    store = PersistentRedis(tmp_path / "redis").start()
    server = start_skiff(
        tmp_path / "skiff.log", "--redis-url", store.url, "--redis-retry-ms", "600", env=ENV
    )
    try:
        topic = create_topic(server.bootstrap, 1)
        store.stop()
        g, tps = "grp", [{"name": topic, "partitions": [{"partition_index": 0}]}]
        some_id = uuid.uuid4()
        NOT_LEADER, LEADER_NA, COORD_NA = 6, 5, 15
        cases: list[tuple[int, int, dict[str, object], object]] = [
            (
                FETCH,
                12,
                fetch_request(topic, {0: 0}),
                lambda r: [p.error_code for p in r.responses[0].partitions] == [NOT_LEADER],
            ),
            (
                FETCH,
                4,
                fetch_request(topic, {0: 0}),
                lambda r: [p.error_code for p in r.responses[0].partitions] == [NOT_LEADER],
            ),
            (
                2,
                7,
                {
                    "replica_id": -1,
                    "topics": [
                        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}
                    ],
                },
                lambda r: r.topics[0].partitions[0].error_code == NOT_LEADER,
            ),
            (
                METADATA,
                12,
                metadata_request(["never-seen"]),
                lambda r: [t.error_code for t in r.topics] == [LEADER_NA],
            ),
            (
                8,
                8,
                {
                    "group_id": g,
                    "generation_id_or_member_epoch": -1,
                    "member_id": "",
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [{"partition_index": 0, "committed_offset": 1}],
                        }
                    ],
                },
                lambda r: r.topics[0].partitions[0].error_code == COORD_NA,
            ),
            (
                9,
                7,
                {"group_id": g, "topics": [{"name": topic, "partition_indexes": [0]}]},
                lambda r: r.error_code == COORD_NA,
            ),
            (
                9,
                8,
                {"groups": [{"group_id": g, "topics": None}]},
                lambda r: r.groups[0].error_code == COORD_NA,
            ),
            # v10 names topics by id: the answer echoes it.
            (
                8,
                10,
                {
                    "group_id": g,
                    "generation_id_or_member_epoch": -1,
                    "member_id": "",
                    "topics": [
                        {
                            "topic_id": some_id,
                            "partitions": [{"partition_index": 0, "committed_offset": 1}],
                        }
                    ],
                },
                lambda r: (
                    (r.topics[0].topic_id, r.topics[0].partitions[0].error_code)
                    == (some_id, COORD_NA)
                ),
            ),
            (
                9,
                10,
                {
                    "groups": [
                        {"group_id": g, "topics": [{"topic_id": some_id, "partition_indexes": [0]}]}
                    ]
                },
                lambda r: (
                    (r.groups[0].error_code, r.groups[0].topics[0].topic_id) == (COORD_NA, some_id)
                ),
            ),
            (10, 3, {"key": g, "key_type": 0}, lambda r: r.error_code == COORD_NA),
            (
                10,
                4,
                {"key_type": 0, "coordinator_keys": [g]},
                lambda r: r.coordinators[0].error_code == COORD_NA,
            ),
            (
                11,
                7,
                {
                    "group_id": g,
                    "session_timeout": 10000,
                    "rebalance_timeout": 10000,
                    "member_id": "",
                    "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": b""}],
                },
                lambda r: r.error_code == COORD_NA,
            ),
            (
                12,
                4,
                {"group_id": g, "generation_id": 1, "member_id": "m"},
                lambda r: r.error_code == COORD_NA,
            ),
            (
                13,
                4,
                {"group_id": g, "members": [{"member_id": "m"}]},
                lambda r: r.error_code == COORD_NA,
            ),
            (
                14,
                5,
                {
                    "group_id": g,
                    "generation_id": 1,
                    "member_id": "m",
                    "protocol_type": "consumer",
                    "protocol_name": "range",
                },
                lambda r: r.error_code == COORD_NA,
            ),
            (15, 5, {"groups": [g]}, lambda r: r.groups[0].error_code == COORD_NA),
            (16, 4, {}, lambda r: r.error_code == COORD_NA),
            (
                19,
                7,
                {
                    "topics": [{"name": "new-topic", "num_partitions": 1, "replication_factor": 1}],
                    "timeout": 5000,
                },
                lambda r: r.topics[0].error_code == REQUEST_TIMED_OUT,
            ),
            (
                20,
                6,
                {"topics": [{"name": topic}], "timeout": 5000},
                lambda r: r.responses[0].error_code == REQUEST_TIMED_OUT,
            ),
            (
                INIT_PRODUCER_ID,
                4,
                {
                    "transactional_id": None,
                    "transaction_timeout": 60000,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
                lambda r: r.error_code == COORD_NA,
            ),
            (42, 2, {"groups_names": [g]}, lambda r: r.results[0].error_code == COORD_NA),
            (
                42,
                3,
                {"groups_names": [g]},
                lambda r: (
                    (r.results[0].error_code, r.results[0].error_message)
                    == (COORD_NA, "The coordinator is not available.")
                ),
            ),
            (47, 0, {"group_id": g, "topics": tps}, lambda r: r.error_code == COORD_NA),
            (
                68,
                1,
                {
                    "group_id": g,
                    "member_id": "m",
                    "member_epoch": 0,
                    "rebalance_timeout": 10000,
                    "subscribed_topic_names": [topic],
                    "topic_partitions": [],
                },
                lambda r: (r.error_code, r.member_epoch) == (COORD_NA, 0),
            ),
            (69, 1, {"group_ids": [g]}, lambda r: r.groups[0].error_code == COORD_NA),
            (
                88,
                1,
                {
                    "group_id": g,
                    "member_id": "m",
                    "member_epoch": 0,
                    "rebalance_timeout": 10000,
                    "topology": {
                        "epoch": 0,
                        "subtopologies": [
                            {
                                "subtopology_id": "0",
                                "source_topics": [topic],
                                "state_changelog_topics": [],
                                "repartition_source_topics": [],
                                "copartition_groups": [],
                            }
                        ],
                    },
                    "active_tasks": [],
                    "standby_tasks": [],
                    "warmup_tasks": [],
                },
                lambda r: (r.error_code, r.member_epoch) == (COORD_NA, 0),
            ),
            (89, 1, {"group_ids": [g]}, lambda r: r.groups[0].error_code == COORD_NA),
            (
                93,
                0,
                {
                    "group_id": g,
                    "member_id": "m",
                    "topology_epoch": 0,
                    "topology_description": {"subtopologies": [], "global_stores": []},
                },
                # Needs no Redis: answered as by Kafka 4.4 without a description plugin.
                lambda r: r.error_code == 35,  # UNSUPPORTED_VERSION
            ),
            (
                49,
                1,
                {
                    "entries": [
                        {
                            "entity": [{"entity_type": "client-id", "entity_name": "c"}],
                            "ops": [{"key": "producer_byte_rate", "value": 1e6, "remove": False}],
                        }
                    ],
                    "validate_only": False,
                },
                lambda r: r.entries[0].error_code == REQUEST_TIMED_OUT,
            ),
        ]
        with RawKafka("127.0.0.1", server.port) as kafka:
            for api_key, version, body, check in cases:
                resp = kafka.request(api_key, version, body, timeout=10)
                assert check(resp), (api_key, version, resp)  # type: ignore[operator]
            resp = kafka.request(
                PRODUCE, 3, produce_request(topic, {0: build_batch([b"x"])}, -1, 4000)
            )
            assert resp.responses[0].partition_responses[0].error_code == REQUEST_TIMED_OUT
            check_admin_apis_while_redis_is_down(kafka, topic, server.port, store.url)
        assert server.alive()
    finally:
        stop_process(server.proc)
        store.stop()


def test_every_api_has_an_answer_for_redis_being_down() -> None:
    """A new API must get a retriable-error builder in sidecar/apis/unavailable.py (or
    be declared as needing no Redis), else its clients see closed connections."""
    assert set(HANDLERS) == set(unavailable.BUILDERS) | unavailable.NEEDS_NO_REDIS
    assert not set(unavailable.BUILDERS) & unavailable.NEEDS_NO_REDIS


def _versions(api_key: int) -> range:
    return range(HANDLERS[api_key].MIN_VERSION, HANDLERS[api_key].MAX_VERSION + 1)


class _Frame:
    """Reads a hand-decoded answer (versions kio has no schema for)."""

    def __init__(self, frame: bytes) -> None:
        self.frame, self.pos = frame, 4  # after the correlation id

    def take(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.frame, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def text(self) -> str | None:
        n = self.take(">h")
        value = None if n < 0 else self.frame[self.pos : self.pos + n].decode()
        self.pos += max(n, 0)
        return value


def _str16(s: str) -> bytes:
    return struct.pack(">h", len(s.encode())) + s.encode()


def check_admin_apis_while_redis_is_down(
    kafka: RawKafka, topic: str, port: int, redis_url: str
) -> None:
    """Every version of the admin APIs answers its retriable error per partition or
    resource (REQUEST_TIMED_OUT, as for a controller or deletion timeout; an offline log
    dir's KAFKA_STORAGE_ERROR), and what needs no Redis is answered as usual, on the one
    connection, which stays open."""
    unseen, bad = "never-seen-cfg", "bad/name"
    # Needing no Redis: ApiVersions and DescribeCluster answer as usual.
    for version in _versions(API_VERSIONS):
        client = {"client_software_name": "rawkafka", "client_software_version": "1.0"}
        resp = kafka.request(API_VERSIONS, version, client)
        assert resp.error_code == NONE and DESCRIBE_CLUSTER in {k.api_key for k in resp.api_keys}
    for version in _versions(DESCRIBE_CLUSTER):
        resp = kafka.request(
            DESCRIBE_CLUSTER, version, {"include_cluster_authorized_operations": False}
        )
        assert resp.error_code == NONE
        [node] = resp.brokers
        assert node.port == port
    node_id = str(node.broker_id)
    # DeleteTopics (v0 by hand).
    for version in _versions(DELETE_TOPICS):
        if version == 0:
            kafka.send(
                DELETE_TOPICS, 0, struct.pack(">i", 1) + _str16(topic) + struct.pack(">i", 5000)
            )
            f = _Frame(kafka.recv_raw())
            assert [(f.text(), f.take(">h")) for _ in range(f.take(">i"))] == [
                (topic, REQUEST_TIMED_OUT)
            ]
            assert f.pos == len(f.frame)
            continue
        body = {"topic_names": [topic], "topics": [{"name": topic}], "timeout": 5000}
        resp = kafka.request(DELETE_TOPICS, version, body)
        assert [(r.name, r.error_code) for r in resp.responses] == [(topic, REQUEST_TIMED_OUT)]
    # DeleteRecords: the Java AdminClient retries a retriable partition error.
    for version in _versions(DELETE_RECORDS):
        body = {
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": -1}]}],
            "timeout": 5000,
        }
        resp = kafka.request(DELETE_RECORDS, version, body)
        got = [
            (t.name, [(p.partition_index, p.low_watermark, p.error_code) for p in t.partitions])
            for t in resp.topics
        ]
        assert got == [(topic, [(0, -1, REQUEST_TIMED_OUT)])], version
    # DescribeConfigs: a topic Skiff does not know from memory times out; the broker
    # resource and a bad name are answered as with Redis up (v0 by hand).
    broker_only = {"resources": [{"resource_type": 4, "resource_name": node_id}]}
    for version in _versions(DESCRIBE_CONFIGS):
        if version == 0:
            body = struct.pack(">i", 2)
            for kind, name in ((2, unseen), (4, node_id)):
                body += struct.pack(">b", kind) + _str16(name) + struct.pack(">i", -1)
            kafka.send(DESCRIBE_CONFIGS, 0, body)
            f = _Frame(kafka.recv_raw())
            assert (f.take(">i"), f.take(">i")) == (0, 2)
            got = []
            for _ in range(2):
                head = (f.take(">h"), f.text(), f.take(">b"), f.text())
                entries = [
                    (f.text(), f.text(), f.take(">?"), f.take(">?"), f.take(">?"))
                    for _ in range(f.take(">i"))
                ]
                got.append((head, len(entries)))
            assert f.pos == len(f.frame)
            assert got[0] == ((REQUEST_TIMED_OUT, "Redis is unavailable", 2, unseen), 0)
            assert got[1][0] == (NONE, "", 4, node_id) and got[1][1] > 0
            continue
        resources = [
            {"resource_type": 2, "resource_name": unseen, "configuration_keys": None},
            {"resource_type": 2, "resource_name": bad, "configuration_keys": None},
            {"resource_type": 4, "resource_name": node_id, "configuration_keys": None},
        ]
        resp = kafka.request(DESCRIBE_CONFIGS, version, {"resources": resources})
        assert [(r.resource_name, r.error_code, len(r.configs)) for r in resp.results[:2]] == [
            (unseen, REQUEST_TIMED_OUT, 0),
            (bad, INVALID_TOPIC_EXCEPTION, 0),
        ], version
        expected = kafka.request(DESCRIBE_CONFIGS, version, broker_only).results[0]
        assert resp.results[2] == expected and expected.error_code == NONE
        assert expected.configs
    # AlterConfigs and IncrementalAlterConfigs: per resource, as a controller timeout.
    for api_key, config in (
        (ALTER_CONFIGS, {"name": "retention.ms", "value": "1000"}),
        (INCREMENTAL_ALTER_CONFIGS, {"name": "retention.ms", "config_operation": 0, "value": "1"}),
    ):
        for version in _versions(api_key):
            resource = {"resource_type": 2, "resource_name": topic, "configs": [config]}
            resp = kafka.request(
                api_key, version, {"resources": [resource], "validate_only": False}
            )
            got = [(r.resource_type, r.resource_name, r.error_code) for r in resp.responses]
            assert got == [(2, topic, REQUEST_TIMED_OUT)], (api_key, version)
    # CreatePartitions: per topic; a duplicated name is refused as usual.
    for version in _versions(CREATE_PARTITIONS):
        grow = [{"name": n, "count": 3, "assignments": None} for n in (topic, "twice", "twice")]
        body = {"topics": grow, "timeout": 5000, "validate_only": False}
        resp = kafka.request(CREATE_PARTITIONS, version, body)
        assert [(r.name, r.error_code) for r in resp.results] == [
            (topic, REQUEST_TIMED_OUT),
            ("twice", INVALID_REQUEST),
        ], version
    # DescribeLogDirs: the one log dir, offline (v0 is v1 on the wire, by hand).
    for version in _versions(DESCRIBE_LOG_DIRS):
        if version == 0:
            kafka.send(DESCRIBE_LOG_DIRS, 0, struct.pack(">i", -1))
            resp = kafka.decode_response(DESCRIBE_LOG_DIRS, 1, kafka.recv_raw())
        else:
            resp = kafka.request(DESCRIBE_LOG_DIRS, version, {"topics": None})
        assert getattr(resp, "error_code", NONE) == NONE  # v3+
        got = [(r.error_code, r.log_dir, r.topics) for r in resp.results]
        assert got == [(KAFKA_STORAGE_ERROR, redis_url, ())], version
        if version >= 4:
            assert (resp.results[0].total_bytes, resp.results[0].usable_bytes) == (-1, -1)
    # OffsetForLeaderEpoch: retriable; DescribeTopicPartitions answers a topic known from
    # memory, as Metadata does; ListConfigResources lists the brokers.
    for version in _versions(23):
        ask = [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]
        body = {"replica_id": -1, "topics": [{"topic": topic, "partitions": ask}]}
        [t] = kafka.request(23, version, body).topics
        got = [(p.partition, p.error_code, p.leader_epoch, p.end_offset) for p in t.partitions]
        assert (t.topic, got) == (topic, [(0, NOT_LEADER_OR_FOLLOWER, -1, -1)]), version
    resp = kafka.request(75, 0, {"topics": [{"name": topic}, {"name": unseen}]})
    got = [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in resp.topics]
    assert got == [(topic, NONE, [0]), (unseen, LEADER_NOT_AVAILABLE, [])], got
    for version in _versions(74):  # brokers come from memory
        resp = kafka.request(74, version, {"resource_types": [4]})
        listed = [(r.resource_name, r.resource_type) for r in resp.config_resources]
        assert (resp.error_code, listed) == (
            NONE,
            [] if version == 0 else [(str(node.broker_id), 4)],
        )
    # UpdateFeatures: REQUEST_TIMED_OUT, nothing changed (as a controller timeout). The
    # level stays 2: v0 can only upgrade (its refusal needs no Redis).
    update = {"feature": "transaction.version", "max_version_level": 2, "upgrade_type": 1}
    for version in _versions(57):
        body = {"timeout": 1000, "feature_updates": [update], "validate_only": False}
        assert kafka.request(57, version, body).error_code == REQUEST_TIMED_OUT, version
    assert not kafka.closed(0.2)


def test_java_producer_rides_out_a_redis_restart(tmp_path: Path) -> None:
    """The Java client (idempotent by default, acks=all) produces 100,000 records while
    Redis stops (a fifth of the way) and starts again 5 s later: it finishes, and each
    partition holds exactly what was produced, in order, at the offsets the client was
    told."""
    from clients import java_client

    java_client.build_tool()  # before the clock starts
    store = PersistentRedis(tmp_path / "redis").start()
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", store.url, env=ENV)
    records = 100_000  # 80,000 still to send when Redis stops: in flight and retried as ever
    try:
        topic = create_topic(server.bootstrap, PARTITIONS)
        wanted = [{"partition": i % PARTITIONS, "value": b"%d" % i} for i in range(records)]
        result: dict[str, list[dict[str, int]]] = {}

        def produce() -> None:
            result["meta"] = java_client.produce(
                server.bootstrap,
                topic,
                wanted,
                acks="all",
                idempotence=True,
                properties={"reconnect.backoff.max.ms": "200", "delivery.timeout.ms": "120000"},
                timeout_s=300,
            )

        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        client = store.client()
        keys = [f"skiff:{{{topic}/{p}}}:log" for p in range(PARTITIONS)]
        deadline = time.monotonic() + 120
        while sum(client.xlen(k) for k in keys) < records // 5:
            assert thread.is_alive() and time.monotonic() < deadline, "no progress"
            time.sleep(0.01)
        store.stop()
        time.sleep(5)
        store.start()
        thread.join(300)
        assert not thread.is_alive(), "the Java producer did not finish"
        meta = result["meta"]
        for p in range(PARTITIONS):
            expected = [r["value"] for r in wanted if r["partition"] == p]
            stored = [f[b"v"] for _, f in store.client().xrange(keys[p])]
            assert stored == expected, f"partition {p} differs from what was produced"
            offsets = [
                m["offset"] for m, r in zip(meta, wanted, strict=True) if r["partition"] == p
            ]
            assert offsets == list(range(len(expected)))
        assert server.alive()
    finally:
        stop_process(server.proc)
        store.stop()


def wait_for_line(server: Skiff, text: str, timeout: float = 15.0) -> str:
    """The first line of the sidecar's log holding `text`, waited for."""
    deadline = time.monotonic() + timeout
    while True:
        for line in server.log().splitlines():
            if text in line:
                return line
        assert time.monotonic() < deadline, f"no log line with {text!r}:\n{server.log()}"
        time.sleep(0.1)


def test_acks_all_without_enough_replicas_is_refused_at_once(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """min.insync.replicas=2 on a Redis without replicas: a confluent-kafka acks=all
    producer gets NOT_ENOUGH_REPLICAS in well under its message.timeout.ms, nothing is
    stored, the sidecar says why; with a replica attached the same produce succeeds."""
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url)
    replica = None
    try:
        topic = f"isr-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        new = NewTopic(topic, 1, 1, config={"min.insync.replicas": "2"})
        admin.create_topics([new])[topic].result(30)

        def produce_one(value: bytes) -> tuple[Any, float]:
            # No retries: the delivery report carries the broker's error itself (with
            # retries librdkafka retries this retriable error until the message times out).
            producer = Producer(
                {
                    "bootstrap.servers": server.bootstrap,
                    "acks": "all",
                    "enable.idempotence": False,
                    "retries": 0,
                    "message.timeout.ms": 60000,
                }
            )
            reports: list[Any] = []
            started = time.monotonic()
            producer.produce(topic, value=value, on_delivery=lambda err, msg: reports.append(err))
            assert producer.flush(60) == 0
            return reports[0], time.monotonic() - started

        error, took = produce_one(b"refused")
        assert error is not None and error.code() == KafkaError.NOT_ENOUGH_REPLICAS, error
        assert took < 15, took  # an answer, not the 60 s message timeout
        assert own_redis.client().xlen(f"skiff:{{{topic}/0}}:log") == 0
        line = wait_for_line(server, "NOT_ENOUGH_REPLICAS")
        assert topic in line and "min.insync.replicas is 2" in line, line

        replica = start_replica(tmp_path / "replica", own_redis)
        deadline = time.monotonic() + 15
        while (error := produce_one(b"accepted")[0]) is not None:
            # The sidecar caches the replica count for half a second.
            assert error.code() == KafkaError.NOT_ENOUGH_REPLICAS, error
            assert time.monotonic() < deadline, error
        # The topic is a `batch` topic (the default): its one entry is the accepted batch.
        entries = own_redis.client().xrange(f"skiff:{{{topic}/0}}:log")
        assert [r.value for _, f in entries for r in fetched_records(f[b"b"])] == [b"accepted"]
    finally:
        stop_process(server.proc)
        if replica is not None:
            stop_process(replica.proc)


def produce_acks_all(kafka: RawKafka, topic: str, value: bytes) -> tuple[int, int]:
    """One record to partition 0 with acks=all (2 s): (error_code, base_offset)."""
    request = produce_request(topic, {0: build_batch([value])}, -1, 2000)
    resp = kafka.request(PRODUCE, 9, request, timeout=10)
    [p] = resp.responses[0].partition_responses
    return int(p.error_code), int(p.base_offset)


def test_redis_out_of_memory_is_a_retriable_produce_error(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """A Redis at maxmemory with noeviction refuses the append (OOM): the partition gets
    KAFKA_STORAGE_ERROR (retriable; it was UNKNOWN_SERVER_ERROR), the sidecar logs the
    refusal, nothing is stored, and once memory is there the same producer goes on."""
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url)
    client = own_redis.client()
    try:
        topic = create_topic(server.bootstrap, 1)
        with RawKafka("127.0.0.1", server.port) as kafka:
            assert produce_acks_all(kafka, topic, b"first") == (NONE, 0)
            client.config_set("maxmemory-policy", "noeviction")
            client.config_set("maxmemory", 1)
            try:
                assert produce_acks_all(kafka, topic, b"refused") == (KAFKA_STORAGE_ERROR, -1)
            finally:
                client.config_set("maxmemory", 0)
            assert produce_acks_all(kafka, topic, b"second") == (NONE, 1)
        line = wait_for_line(server, "Redis error (oom)")
        assert "maxmemory" in line, line
        stored = [f[b"v"] for _, f in client.xrange(f"skiff:{{{topic}/0}}:log")]
        assert stored == [b"first", b"second"]
    finally:
        stop_process(server.proc)


def test_redis_maxclients_is_retried_and_logged(own_redis: RedisServer, tmp_path: Path) -> None:
    """Redis at maxclients refuses the sidecar's new connections ("max number of clients
    reached"): Produce answers a retriable REQUEST_TIMED_OUT and the refusal is logged,
    never UNKNOWN_SERVER_ERROR; with room again the same client goes on."""
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url)
    admin = own_redis.client()
    admin.ping()  # this connection stays: the one client Redis still has room for
    try:
        topic = create_topic(server.bootstrap, 1)
        with RawKafka("127.0.0.1", server.port) as kafka:
            assert produce_acks_all(kafka, topic, b"first") == (NONE, 0)
            admin.config_set("maxclients", 1)
            try:
                admin.client_kill_filter(_type="normal", skipme=True)  # the sidecar's
                assert produce_acks_all(kafka, topic, b"refused") == (REQUEST_TIMED_OUT, -1)
            finally:
                admin.config_set("maxclients", 10000)
            deadline = time.monotonic() + 15
            while (answer := produce_acks_all(kafka, topic, b"second"))[0] != NONE:
                assert answer[0] == REQUEST_TIMED_OUT and time.monotonic() < deadline, answer
        line = wait_for_line(server, "Redis error (maxclients)")
        assert "max number of clients reached" in line, line
        stored = [f[b"v"] for _, f in admin.xrange(f"skiff:{{{topic}/0}}:log")]
        assert stored == [b"first", b"second"]
    finally:
        stop_process(server.proc)
