"""The storage identity (sidecar/storage/identity.py): when Redis loses Skiff's data
(FLUSHALL, a restart without persistence) no offset is handed out twice; sidecars
refuse with retriable errors, /readyz says why, and `skiff storage reset --fresh`
starts fresh with a new cluster id and new topic ids. A Redis with data from a version
without an identity is adopted."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import known_secrets
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import ROOT, RedisServer, Skiff, start_redis, start_skiff, stop_process
from faults_harness import ProduceLoop
from log_helpers import wait_for
from rawkafka import RawKafka, build_batch, metadata_request, produce_request
from test_redis_faults import ENV, PARTITIONS, GroupReader

PRODUCE, METADATA = 0, 3
NONE, LEADER_NOT_AVAILABLE, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR = 0, 5, 7, 56
RETRIABLE = {LEADER_NOT_AVAILABLE, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR}


def readyz(server: Skiff) -> tuple[int, dict[str, object]]:
    url = f"http://127.0.0.1:{server.http_port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return int(reply.status), json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), json.loads(exc.read())


def metric(server: Skiff, name: str) -> float:
    url = f"http://127.0.0.1:{server.http_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as reply:
        text = reply.read().decode()
        known_secrets.output_text(url, text)
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def storage_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", "storage", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def create_topic(bootstrap: str, partitions: int) -> str:
    name = f"sid-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def cluster_and_topic_id(server: Skiff, topic: str) -> tuple[str, uuid.UUID | None, int]:
    """(cluster id, topic id, topic error code) from Metadata v12 without auto-creation."""
    with RawKafka("127.0.0.1", server.port) as kafka:
        meta = kafka.request(METADATA, 12, metadata_request([topic], False), timeout=10)
    t = meta.topics[0]
    return meta.cluster_id, t.topic_id, t.error_code


def produce_one(server: Skiff, topic: str) -> int:
    """The error code of one raw acks=1 Produce to partition 0."""
    with RawKafka("127.0.0.1", server.port) as kafka:
        resp = kafka.request(
            PRODUCE, 9, produce_request(topic, {0: build_batch([b"x"])}, 1, 5000), timeout=15
        )
    return int(resp.responses[0].partition_responses[0].error_code)


def wait_lost(*servers: Skiff) -> None:
    for server in servers:
        wait_for(lambda s=server: readyz(s)[0] == 503, 30, f"{server.bootstrap} to report the loss")
        status, body = readyz(server)
        assert status == 503 and "storage lost" in str(body["reason"]), body


def wait_ready(*servers: Skiff) -> None:
    for server in servers:
        wait_for(lambda s=server: readyz(s)[0] == 200, 30, f"{server.bootstrap} ready")


def acked_twice(acked: dict[int, list[tuple[int, bytes]]]) -> list[str]:
    out = []
    for p, pairs in acked.items():
        values: dict[int, bytes] = {}
        for offset, value in pairs:
            if values.setdefault(offset, value) != value:
                out.append(f"partition {p} offset {offset}: {values[offset]!r} and {value!r}")
    return out


def test_flushall_under_a_producer_and_a_group(own_redis: RedisServer, tmp_path: Path) -> None:
    """FLUSHALL while an idempotent producer and a group member run: no (partition,
    offset) is acknowledged for two records, the topic is not re-created, the producer
    gets retriable errors, /readyz and /metrics say why. `skiff storage reset --fresh`
    gives a new cluster id and topic id, and producing works again."""
    # Auto-creation after the reset gives the topic its partitions back.
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--num-partitions",
        str(PARTITIONS),
        env=ENV,
    )
    member = None
    loop = None
    try:
        topic = create_topic(server.bootstrap, PARTITIONS)
        cluster_before, topic_before, _ = cluster_and_topic_id(server, topic)
        member = GroupReader(server.bootstrap, topic)
        member.start()
        loop = ProduceLoop(
            server.bootstrap,
            topic,
            PARTITIONS,
            **{"message.timeout.ms": 300_000, "topic.metadata.refresh.interval.ms": 1000},
        )
        loop.start()
        loop.wait_acked(2000)
        wait_for(lambda: len(member.seen) >= 500, 30, "the member to read")
        own_redis.client().flushall()
        wait_lost(server)
        acked_at_loss = loop.acked_count
        # While lost: retriable errors, no topic re-created, nothing acknowledged.
        code = produce_one(server, topic)
        assert code in RETRIABLE, code
        assert cluster_and_topic_id(server, topic)[2] == LEADER_NOT_AVAILABLE
        wait_for(lambda: metric(server, "skiff_storage_lost") == 1, 30, "refused requests counted")
        refused = metric(server, "skiff_storage_lost_refused_requests_total")
        wait_for(
            lambda: metric(server, "skiff_storage_lost_refused_requests_total") > refused + 20,
            30,
            "the clients to keep retrying",
        )
        assert own_redis.client().hget("skiff:topics", topic) is None
        assert loop.acked_count - acked_at_loss < 50  # only replies already on their way
        assert not loop.failed, loop.failed[:3]  # retriable: nothing given up
        status = storage_cli("status", "--redis-url", own_redis.url)
        assert status.returncode == 1 and "LOST" in status.stdout, status
        # After the reset offsets start again from 0 under a new topic id: what the member
        # read counts up to here (it stops after the reset: closing needs a coordinator).
        assert not member.wrong, member.wrong[:3]
        assert not acked_twice(loop.acked), acked_twice(loop.acked)[:3]
        acked_before_reset = {p: set(pairs) for p, pairs in loop.acked.items()}
        # Loud, but rate-limited: not a line per refused request.
        loud = server.log().count("STORAGE LOST")
        assert 1 <= loud < metric(server, "skiff_storage_lost_refused_requests_total") / 10

        reset = storage_cli("reset", "--fresh", "--redis-url", own_redis.url)
        assert reset.returncode == 0 and "new cluster id" in reset.stdout, reset
        wait_ready(server)
        member.stop()
        # Promptly: a refused Produce must not leave the connection's later ones waiting
        # (they stalled until the client's socket.timeout.ms, 60 s).
        loop.wait_acked(loop.acked_count + 500, timeout=30)
        loop.finish()
        cluster_after, topic_after, error = cluster_and_topic_id(server, topic)
        assert error == NONE
        assert cluster_after != cluster_before and topic_after != topic_before
        # After the reset offsets start again, under the new topic id: each identity's
        # acknowledgements are unique on their own.
        after = {
            p: [pair for pair in loop.acked[p] if pair not in acked_before_reset[p]]
            for p in loop.acked
        }
        assert not acked_twice(after)
        member.join(30)
        assert server.alive()
    finally:
        if member is not None:
            member.stop()
            member.join(30)  # closed while the sidecar still answers: no reconnect noise
        if loop is not None:
            loop.stop()
        stop_process(server.proc)


def test_restart_of_a_redis_without_persistence(tmp_path: Path) -> None:
    """Redis restarts empty on the same port under two sidecars: both refuse (the topic
    is not auto-created, produce gets a retriable error), both pick up the operator's
    reset without a restart and report the same new cluster id."""
    store = start_redis(tmp_path / "redis")
    port = store.port
    servers: list[Skiff] = []
    try:
        for i in range(2):
            servers.append(
                start_skiff(tmp_path / f"skiff{i}.log", "--redis-url", store.url, env=ENV)
            )
        topic = create_topic(servers[0].bootstrap, 1)
        producer = Producer({"bootstrap.servers": servers[0].bootstrap})
        for i in range(100):
            producer.produce(topic, b"%d" % i)
        assert producer.flush(30) == 0
        cluster_before = cluster_and_topic_id(servers[0], topic)[0]
        stop_process(store.proc)
        store = start_redis(tmp_path / "redis", port=port)
        wait_lost(*servers)
        for server in servers:
            assert produce_one(server, topic) in RETRIABLE
            assert cluster_and_topic_id(server, topic)[2] == LEADER_NOT_AVAILABLE
        assert store.client().hget("skiff:topics", topic) is None

        reset = storage_cli("reset", "--fresh", "--redis-url", store.url)
        assert reset.returncode == 0, reset
        wait_ready(*servers)
        clusters = {cluster_and_topic_id(s, topic)[0] for s in servers}
        assert len(clusters) == 1 and cluster_before not in clusters
        assert produce_one(servers[1], topic) == NONE  # auto-created afresh
    finally:
        for server in servers:
            stop_process(server.proc)
        stop_process(store.proc)


def test_redis_with_data_but_no_identity_is_adopted(own_redis: RedisServer, tmp_path: Path) -> None:
    """Data written by a version without a storage identity (no skiff:identity, no
    `sid` in the partition metas): a sidecar starts without refusing, keeps the cluster
    id and topic id, and appends at the next offset."""
    first = start_skiff(tmp_path / "first.log", "--redis-url", own_redis.url)
    try:
        topic = create_topic(first.bootstrap, 1)
        assert produce_one(first, topic) == NONE
        cluster, topic_id, _ = cluster_and_topic_id(first, topic)
    finally:
        stop_process(first.proc)
    client = own_redis.client()
    client.delete("skiff:identity")
    client.hdel(f"skiff:{{{topic}/0}}:meta", "sid")
    second = start_skiff(tmp_path / "second.log", "--redis-url", own_redis.url)
    try:
        wait_ready(second)
        assert cluster_and_topic_id(second, topic) == (cluster, topic_id, NONE)
        with RawKafka("127.0.0.1", second.port) as kafka:
            resp = kafka.request(
                PRODUCE, 9, produce_request(topic, {0: build_batch([b"y"])}, 1, 5000), timeout=15
            )
        part = resp.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (NONE, 1)
        assert json.loads(client.get("skiff:identity"))["cluster_id"] == cluster
        assert client.hget(f"skiff:{{{topic}/0}}:meta", "sid") == cluster.encode()
        assert "adopted the Skiff data" in second.log()
        assert "STORAGE LOST" not in second.log()
    finally:
        stop_process(second.proc)


def test_append_refuses_a_partition_of_another_identity(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """lua/append.lua checks the partition's identity atomically with the append: a
    partition made under another cluster id gets KAFKA_STORAGE_ERROR and no record."""
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url)
    try:
        topic = create_topic(server.bootstrap, 1)
        meta = f"skiff:{{{topic}/0}}:meta"
        client = own_redis.client()
        client.hset(meta, "sid", "another-cluster")
        assert produce_one(server, topic) == KAFKA_STORAGE_ERROR
        assert client.hget(meta, "hw") == b"0"
        assert client.xlen(f"skiff:{{{topic}/0}}:log") == 0
    finally:
        stop_process(server.proc)


def test_storage_cli_mistakes(own_redis: RedisServer, tmp_path: Path) -> None:
    """Status of an intact identity exits 0; resetting an intact one, or naming no Redis,
    is a one-line mistake with exit status 2."""
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url)
    try:
        status = storage_cli("status", "--redis-url", own_redis.url, "--json")
        assert status.returncode == 0, status
        assert json.loads(status.stdout)["state"] == "intact"
        reset = storage_cli("reset", "--fresh", "--redis-url", own_redis.url)
        assert reset.returncode == 2 and "intact" in reset.stderr, reset
        assert "Traceback" not in reset.stderr
        no_flag = storage_cli("reset", "--redis-url", own_redis.url)
        assert no_flag.returncode == 2 and "--fresh" in no_flag.stderr
    finally:
        stop_process(server.proc)
    nowhere = storage_cli("status", "--data-dir", str(tmp_path / "none"))
    assert nowhere.returncode == 2 and len(nowhere.stderr.strip().splitlines()) == 1, nowhere
    assert "Traceback" not in nowhere.stderr


@pytest.mark.parametrize("scheme", ["http://127.0.0.1:1"])
def test_storage_cli_bad_url(scheme: str) -> None:
    bad = storage_cli("status", "--redis-url", scheme)
    assert bad.returncode in (1, 2) and "Traceback" not in bad.stderr, bad
    assert len(bad.stderr.strip().splitlines()) == 1


def test_flushall_and_reset_on_a_redis_cluster(tmp_path: Path) -> None:
    """On a Redis Cluster (3 primaries) the identity is one cluster-wide key and each
    partition's `sid` lives in its own slot: FLUSHALL on every primary is noticed, and
    `reset --fresh` deletes what is left on every primary and starts fresh."""
    from redis_cluster_harness import start_redis_cluster

    nodes = start_redis_cluster(tmp_path / "cluster", nodes=3, replicas=0)
    server = None
    try:
        server = start_skiff(tmp_path / "skiff.log", "--redis-url", nodes.url, env=ENV)
        topic = create_topic(server.bootstrap, 6)
        producer = Producer({"bootstrap.servers": server.bootstrap})
        for i in range(60):
            producer.produce(topic, b"%d" % i, partition=i % 6)
        assert producer.flush(30) == 0
        cluster_before = cluster_and_topic_id(server, topic)[0]
        for port in nodes.primaries():
            nodes.node(port).flushall()
        client = nodes.client()
        wait_lost(server)
        assert produce_one(server, topic) in RETRIABLE
        # Something left behind after the loss, on one primary: the reset removes it.
        left = f"skiff:{{{topic}/3}}:meta"
        client.hset(left, mapping={"hw": 7, "lso": 0, "sid": cluster_before})
        reset = storage_cli("reset", "--fresh", "--redis-url", nodes.url)
        assert reset.returncode == 0, reset
        assert client.exists(left) == 0
        wait_ready(server)
        cluster_after, _, _ = cluster_and_topic_id(server, topic)
        assert cluster_after != cluster_before
        assert produce_one(server, topic) == NONE
    finally:
        if server is not None:
            stop_process(server.proc)
        nodes.stop()
