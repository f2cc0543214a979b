"""Many sidecars: three on one Redis share partition leadership, one SIGKILLed while an
idempotent producer and a consumer group run (leadership moves, nothing is lost or
duplicated), one joining takes leadership and clients follow, and `skiff serve
--workers 2` (several sidecar processes on one host) serves confluent-kafka and Java
clients and stops cleanly on SIGTERM.

Each test has a Redis of its own: these tests kill sidecars and start them with short
broker sessions (a SIGKILLed sidecar's registration expires after 3 s)."""

from __future__ import annotations

import re
import signal
import threading
import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import known_secrets
import psutil
from clients import java_client
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import RedisServer, Skiff, free_port_block, start_skiff, stop_process, wait_for_port
from groups_harness import GROUP_ENV, GroupRun, create_topic, high_watermarks
from rawkafka import RawKafka, metadata_request

METADATA = 3
SESSION = {
    "SKIFF_BROKER_SESSION_TIMEOUT_MS": "3000",
    "SKIFF_BROKER_HEARTBEAT_INTERVAL_MS": "500",
    **GROUP_ENV,
}
PARTITIONS = 12


def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:10]
    return f"ms-{suffix}", f"mg-{suffix}"


def metadata(port: int, topic: str) -> tuple[list[tuple[int, int]], dict[int, int]]:
    """Metadata from the sidecar on `port`: [(node id, port)] and {partition: leader}."""
    with RawKafka("127.0.0.1", port) as kafka:
        resp = kafka.request(METADATA, 12, metadata_request([topic]))
    brokers = sorted((int(b.node_id), int(b.port)) for b in resp.brokers)
    [t] = resp.topics
    return brokers, {int(p.partition_index): int(p.leader_id) for p in t.partitions}


def wait_metadata(
    port: int, topic: str, nodes: dict[int, int], timeout: float = 15.0
) -> tuple[dict[int, int], float]:
    """Until Metadata from `port` lists exactly `nodes` (id -> port) and every partition
    is led by one of them; returns the leaders and the seconds it took."""
    started = time.monotonic()
    want = sorted(nodes.items())
    while True:
        try:
            brokers, leaders = metadata(port, topic)
        except OSError:  # not listening (yet)
            brokers, leaders = [], {}
        if brokers == want and set(leaders.values()) <= set(nodes):
            return leaders, time.monotonic() - started
        assert time.monotonic() - started < timeout, (
            f"Metadata from {port}: brokers {brokers}, leaders {leaders}; expected {want}"
        )
        time.sleep(0.1)


def per_node(leaders: dict[int, int]) -> dict[int, int]:
    return dict(Counter(leaders.values()))


def start_sidecar(redis: RedisServer, tmp_path: Path, node: int) -> Skiff:
    return start_skiff(
        tmp_path / f"skiff-{node}.log",
        "--redis-url",
        redis.url,
        env={**SESSION, "SKIFF_NODE_ID": str(node)},
    )


def requests_served(skiff: Skiff, api: str) -> float:
    """Kafka requests of one API this sidecar handled (its /metrics)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{skiff.http_port}/metrics") as resp:
        text = resp.read().decode()
    known_secrets.output_text(f"GET :{skiff.http_port}/metrics", text)
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("skiff_requests_total{") and f'api="{api}"' in line
    )


class SteadyProducer(threading.Thread):
    """An idempotent confluent-kafka producer writing values "0".."count-1" round-robin
    over the partitions, spread over `seconds`; keeps every acknowledged (partition,
    offset, value) and every error."""

    def __init__(self, bootstrap: str, topic: str, count: int, seconds: float) -> None:
        super().__init__(name="producer", daemon=True)
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120000,
            }
        )
        self.topic, self.count, self.seconds = topic, count, seconds
        self.acked: list[tuple[int, int, bytes]] = []
        self.errors: list[str] = []
        self.undelivered = -1

    def _report(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))

    def run(self) -> None:
        started = time.monotonic()
        for i in range(self.count):
            self.producer.produce(
                self.topic, value=b"%d" % i, partition=i % PARTITIONS, on_delivery=self._report
            )
            if i % 50 == 0:
                self.producer.poll(0)
                ahead = started + self.seconds * i / self.count - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
        self.undelivered = self.producer.flush(150)


def read_log(bootstrap: str, topic: str) -> list[tuple[int, int, bytes]]:
    """Every record of every partition, (partition, offset, value), by a group-less
    consumer reading up to the high watermarks."""
    ends = high_watermarks(bootstrap, topic, PARTITIONS)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "log-reader"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < sum(ends.values()) and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                assert not m.error(), m.error()
                got.append((m.partition(), m.offset(), m.value()))
    finally:
        consumer.close()
    assert len(got) == sum(ends.values()), f"read {len(got)} of {sum(ends.values())} records"
    return got


def test_three_sidecars_share_leadership_and_survive_a_sigkill(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """Three sidecars each list all three and lead 4 of 12 partitions. One is SIGKILLed
    while an idempotent producer and a two-member group (confluent, Java) run: within
    seconds Metadata names only the survivors, who lead 6 each; the producer delivers
    everything, the group consumes every acknowledged record, and the log holds each
    value exactly once."""
    sidecars = {node: start_sidecar(own_redis, tmp_path, node) for node in range(3)}
    ports = {node: s.port for node, s in sidecars.items()}
    topic, group = names()
    run = None
    try:
        bootstrap = ",".join(s.bootstrap for s in sidecars.values())
        create_topic(bootstrap, topic, PARTITIONS)
        answers = [wait_metadata(port, topic, ports)[0] for port in ports.values()]
        assert answers[0] == answers[1] == answers[2]
        assert per_node(answers[0]) == {0: 4, 1: 4, 2: 4}
        before = answers[0]

        run = GroupRun(bootstrap, topic, group, PARTITIONS, tmp_path / "members")
        members = [run.start("confluent", max_records=100), run.start("java", max_records=100)]
        run.wait_assignment(members, timeout=60)
        total = 8000
        producer = SteadyProducer(bootstrap, topic, total, seconds=10)
        producer.start()
        run.wait_for(
            lambda: None if len(run.seen()) >= total // 4 else f"{len(run.seen())} seen",
            timeout=60,
            what="a quarter of the records consumed",
        )
        stop_process(sidecars[1].proc, signal.SIGKILL)
        survivors = {0: ports[0], 2: ports[2]}
        after, took = wait_metadata(ports[0], topic, survivors)
        assert wait_metadata(ports[2], topic, survivors)[0] == after
        assert per_node(after) == {0: 6, 2: 6}
        # Only the dead sidecar's partitions (and few others) change leader.
        moved = sorted(p for p in before if before[p] != 1 and after[p] != before[p])
        assert len(moved) <= 2, f"partitions of live sidecars that moved: {moved}"

        producer.join(timeout=180)
        assert producer.undelivered == 0 and not producer.errors, (
            f"{producer.undelivered} undelivered, errors {producer.errors[:5]}"
        )
        assert len(producer.acked) == total
        acked = {(p, o) for p, o, _v in producer.acked}
        run.wait_seen(acked, timeout=90)
        counts = run.check_at_least_once(acked)
        run.stop_all()

        log = read_log(f"127.0.0.1:{ports[0]}", topic)
        values = Counter(v for _p, _o, v in log)
        assert {v for v, n in values.items() if n > 1} == set(), "duplicates in the log"
        assert set(values) == {b"%d" % i for i in range(total)}
        assert set(producer.acked) == set(log)
        print(
            f"leadership moved {took:.1f}s after the SIGKILL (session 3 s); "
            f"other partitions moved: {moved}; group {counts}"
        )
    finally:
        if run is not None:
            run.kill_all()
        for s in sidecars.values():
            stop_process(s.proc)


def test_a_joining_sidecar_gets_leadership_and_clients_follow(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """A third sidecar joins two: Metadata lists it at once and it leads 4 of 12
    partitions; a producer that bootstrapped before it joined (and refreshes metadata
    every second) starts sending it Produce requests, and every record is delivered."""
    one, two = (start_sidecar(own_redis, tmp_path, node) for node in range(2))
    three = None
    topic, _group = names()
    try:
        create_topic(one.bootstrap, topic, PARTITIONS)
        leaders, _ = wait_metadata(one.port, topic, {0: one.port, 1: two.port})
        assert per_node(leaders) == {0: 6, 1: 6}
        producer = Producer(
            {"bootstrap.servers": one.bootstrap, "topic.metadata.refresh.interval.ms": 1000}
        )
        delivered: list[int] = []

        def report(err: Any, msg: Any) -> None:
            assert err is None, err
            delivered.append(msg.partition())

        def produce(n: int) -> None:
            for i in range(n):
                producer.produce(topic, value=b"x", partition=i % PARTITIONS, on_delivery=report)
            assert producer.flush(30) == 0

        produce(120)
        three = start_sidecar(own_redis, tmp_path, 2)
        nodes = {0: one.port, 1: two.port, 2: three.port}
        leaders, took = wait_metadata(one.port, topic, nodes, timeout=5)
        assert per_node(leaders) == {0: 4, 1: 4, 2: 4}
        assert wait_metadata(three.port, topic, nodes)[0] == leaders
        deadline = time.monotonic() + 20
        while requests_served(three, "produce") == 0:
            assert time.monotonic() < deadline, "the producer never sent the new sidecar a Produce"
            produce(12)
            time.sleep(0.2)
        assert len(delivered) == sum(high_watermarks(one.bootstrap, topic, PARTITIONS).values())
        print(f"the joining sidecar was in Metadata after {took:.1f}s")
    finally:
        for s in (one, two, three):
            if s is not None:
                stop_process(s.proc)


def children(parent: Skiff, marker: str) -> list[int]:
    """Live child processes of `parent` whose command line contains `marker`."""
    found = []
    for p in psutil.Process(parent.proc.pid).children():
        try:
            if marker in " ".join(p.cmdline()):
                found.append(p.pid)
        except psutil.Error:  # exited (a zombie until the parent reaps it)
            pass
    return found


def started_workers(parent: Skiff) -> dict[int, int]:
    """Worker index -> pid of its latest start, from the parent's log."""
    starts = re.finditer(r"worker (\d+) started \(pid (\d+)\)", parent.log())
    return {int(m[1]): int(m[2]) for m in starts}


def worker_pids(parent: Skiff, count: int, timeout: float = 20.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        kids = children(parent, "spawn_main")  # not redis-server, not the resource tracker
        if len(kids) == count:
            return kids
        assert time.monotonic() < deadline, f"workers {kids}, expected {count}"
        time.sleep(0.1)


def start_workers(log_path: Path, *args: str, env: dict[str, str] | None = None) -> Skiff:
    """`skiff serve --workers 2 ...` on a Kafka port pair and an HTTP port pair found free;
    another process may take P+1 before the worker binds it, so a start whose second
    worker does not listen is stopped and tried again on other ports."""
    failures = []
    for _ in range(4):
        http = free_port_block(2)
        try:
            parent = start_skiff(
                log_path,
                *args,
                "--workers",
                "2",
                "--http-listen",
                f"127.0.0.1:{http}",
                port=free_port_block(2),
                env=env,
            )
        except RuntimeError as exc:  # the first port was taken meanwhile
            failures.append(str(exc))
            continue
        try:
            wait_for_port(parent.port + 1, parent.proc, timeout=20)
            wait_for_port(http + 1, parent.proc, timeout=20)
            return parent
        except RuntimeError as exc:
            stop_process(parent.proc)
            failures.append(f"{exc}\n{parent.log()}")
    raise AssertionError("--workers 2 did not start on four port pairs:\n" + "\n".join(failures))


def test_workers_serve_confluent_and_java_clients_and_stop_on_sigterm(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """`--workers 2`: two sidecars on ports P and P+1, nodes in Metadata with those ports;
    confluent-kafka and Java produce and consume through them, a group of a confluent and
    a Java member consumes everything; SIGTERM to the parent stops both workers cleanly,
    which deregister."""
    parent = start_workers(tmp_path / "workers.log", "--redis-url", own_redis.url, env=SESSION)
    topic, group = names()
    run = None
    try:
        workers = worker_pids(parent, 2)
        bootstrap = parent.bootstrap  # one address: clients find the other worker by Metadata
        create_topic(bootstrap, topic, PARTITIONS)
        # Node ids: the lowest free ones in this Redis, in the order the workers register.
        deadline = time.monotonic() + 15
        while sorted(port for _n, port in metadata(parent.port, topic)[0]) != [
            parent.port,
            parent.port + 1,
        ]:
            assert time.monotonic() < deadline, metadata(parent.port, topic)
            time.sleep(0.1)
        nodes = dict(metadata(parent.port, topic)[0])
        assert sorted(nodes) == [0, 1]
        leaders, _ = wait_metadata(parent.port + 1, topic, nodes)
        assert per_node(leaders) == {0: 6, 1: 6}

        run = GroupRun(bootstrap, topic, group, PARTITIONS, tmp_path / "members")
        members = [run.start("confluent"), run.start("java")]
        run.wait_assignment(members, timeout=60)
        produced = run.produce(3000)
        java = java_client.produce(
            f"127.0.0.1:{parent.port + 1}",
            topic,
            [{"partition": p, "value": b"java-%d" % p} for p in range(PARTITIONS)],
        )
        produced |= {(r["partition"], r["offset"]) for r in java}
        run.wait_seen(produced, timeout=90)
        run.check_exactly_once(produced)
        run.stop_all()
        got = java_client.consume(bootstrap, topic, 5, java[5]["offset"], 1)
        assert got[0]["value"] == b"java-5"

        stop_process(parent.proc)
        assert parent.proc.returncode == 0, parent.log()
        assert not any(psutil.pid_exists(pid) for pid in workers)
        assert own_redis.client().hkeys("skiff:brokers") == []
        log = parent.log()
        assert "[w0] skiff: stopped" in log and "[w1] skiff: stopped" in log, log
    finally:
        if run is not None:
            run.kill_all()
        stop_process(parent.proc)


def test_workers_share_one_embedded_redis_and_a_dead_worker_is_restarted(
    tmp_path: Path,
) -> None:
    """With no --redis-url the parent runs one embedded redis-server for its workers
    (nodes 0 and 1); a SIGKILLed worker is restarted and takes its node id back at once;
    SIGTERM stops the workers and the embedded Redis."""
    parent = start_workers(tmp_path / "workers.log", "--data-dir", str(tmp_path / "data"))
    try:
        worker_pids(parent, 2)
        second = started_workers(parent)[1]
        nodes = {0: parent.port, 1: parent.port + 1}
        topic = names()[0]
        producer = Producer({"bootstrap.servers": parent.bootstrap})
        for i in range(100):
            producer.produce(topic, value=b"%d" % i)
        assert producer.flush(30) == 0
        wait_metadata(parent.port, topic, nodes)
        psutil.Process(second).kill()
        deadline = time.monotonic() + 20
        while started_workers(parent)[1] == second:
            assert time.monotonic() < deadline, parent.log()
            time.sleep(0.1)
        # Back as node 1 at once (the embedded Redis is private: its id is forced).
        wait_metadata(parent.port + 1, topic, nodes, timeout=10)
        consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{parent.port + 1}", "group.id": "g"})
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 100 and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(100, 0.5) if not m.error()]
        consumer.close()
        assert got == [b"%d" % i for i in range(100)]
        [redis_pid] = children(parent, "redis-server")
        stop_process(parent.proc)
        assert parent.proc.returncode == 0, parent.log()
        assert not psutil.pid_exists(redis_pid)
        assert f"worker 1 (pid {second}) exited with code -9; restarting" in parent.log()
    finally:
        stop_process(parent.proc)
