"""What the consumer-group tests share: the brokers, the member processes, producing, and
the checks, with failure messages that say what was expected and show every member.

    cluster = SkiffCluster(tmp, sidecars=2, env=GROUP_ENV)     # or KafkaCluster(tmp, brokers=2)
    run = GroupRun(cluster.bootstrap, topic, group, partitions=6, work=tmp)
    a, b = run.start("confluent"), run.start("java", assignor="range")
    run.wait_assignment([a, b])                  # every partition owned by exactly one
    produced = run.produce(30_000)               # {(partition, offset), ...}
    run.wait_seen(produced)
    run.check_exactly_once(produced)
    run.stop_all()                               # SIGTERM: clean close, exit 0

Members are tests/clients/group_member.py (confluent, kafka-python) or the Java tool's
``group-consume`` (tests/java), each printing JSON lines that a thread per member reads.

The tests run against Skiff by default. With ``SKIFF_GROUP_TESTS_AGAINST=kafka`` they run
against Apache Kafka 3.9.1 in KRaft mode instead (a controller and one broker per
sidecar, from the jars tools/kafka_reference caches in ~/.cache/skiff): the reference
the tests were written against, to tell a Skiff bug from a test bug.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import (
    RedisServer,
    Skiff,
    free_port,
    start_redis,
    start_skiff,
    stop_process,
    wait_for_port,
)
from rawkafka import ConnectionClosed, ProtocolError, RawKafka

ROOT = Path(__file__).resolve().parents[1]
MEMBER_SCRIPT = ROOT / "tests" / "clients" / "group_member.py"
CLIENTS = ("confluent", "java", "kafka-python")
AGAINST = os.environ.get("SKIFF_GROUP_TESTS_AGAINST", "skiff")
KAFKA_VERSION = "3.9.1"

# Kafka's minimum session timeout; members heartbeat every second so that rebalances
# (which wait for every member's next heartbeat) finish quickly.
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1000
# Skiff's group settings for tests: a short initial rebalance delay (Kafka's default is 3 s;
# the Kafka reference gets the same 200 ms).
GROUP_ENV = {"SKIFF_GROUP_INITIAL_REBALANCE_DELAY_MS": "200"}

OFFSET_FETCH, FIND_COORDINATOR, API_VERSIONS = 9, 10, 18


def against_kafka() -> bool:
    return AGAINST == "kafka"


def elapsed(since: float) -> str:
    return f"{time.monotonic() - since:.1f}s"


# -- brokers --------------------------------------------------------------------------------


class Cluster:
    """Brokers the group tests talk to: Skiff sidecars sharing one Redis, or Kafka brokers.
    ``nodes`` maps a node id to its port."""

    nodes: dict[int, int]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.nodes.values())

    def node_of_port(self, port: int) -> int:
        return next(node for node, p in self.nodes.items() if p == port)

    def kill(self, node: int) -> None:
        """SIGKILL one broker: the crash case."""
        raise NotImplementedError

    def alive(self, node: int) -> bool:
        raise NotImplementedError

    def restart(self) -> None:
        """Stop every broker cleanly and start them again on the same ports and storage."""
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def logs(self) -> str:
        raise NotImplementedError


# A dead sidecar's registration and coordinator leases last 3 s; sidecars renew every 0.5 s
# (for tests that kill sidecars).
FAILOVER_ENV = {
    "SKIFF_BROKER_SESSION_TIMEOUT_MS": "3000",
    "SKIFF_BROKER_HEARTBEAT_INTERVAL_MS": "500",
}


class SkiffCluster(Cluster):
    """``sidecars`` Skiff processes on one redis-server of their own (its own, so that the
    session-wide Skiff of other test modules does not join this cluster), node ids 0, 1, ..."""

    def __init__(
        self,
        work: Path,
        sidecars: int = 1,
        env: dict[str, str] | None = None,
        redis: RedisServer | None = None,
    ) -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.work = work
        self.env = {**GROUP_ENV, **(env or {})}
        self.own_redis = redis is None
        self.redis = redis or start_redis(work / "redis")
        self.nodes = {i: free_port() for i in range(sidecars)}
        self.procs: dict[int, Skiff] = {}
        self.generation = 0
        self._start_all()

    def _start_all(self) -> None:
        self.generation += 1
        for node in self.nodes:
            log = self.work / f"skiff-{node}.log"
            with open(log, "a") as f:
                f.write(f"--- start #{self.generation} ---\n")
            self._start(node)

    def _start(self, node: int) -> None:
        self.procs[node] = start_skiff(
            self.work / f"skiff-{node}.log",
            "--redis-url",
            self.redis.url,
            "--num-partitions",
            "6",
            port=self.nodes[node],
            env={**self.env, "SKIFF_NODE_ID": str(node)},
        )

    def kill(self, node: int) -> None:
        stop_process(self.procs[node].proc, signal.SIGKILL)

    def revive(self, node: int) -> None:
        """Start a killed sidecar again: same node id, same port (a pod restarted)."""
        self._start(node)

    def alive(self, node: int) -> bool:
        return self.procs[node].alive()

    def restart(self) -> None:
        for skiff in self.procs.values():
            stop_process(skiff.proc)
        self._start_all()

    def stop(self) -> None:
        for skiff in self.procs.values():
            stop_process(skiff.proc)
        if self.own_redis:
            stop_process(self.redis.proc)

    def logs(self) -> str:
        return "\n".join(
            f"--- skiff node {node} ({s.log_path}) ---\n{tail(s.log_path, 40)}"
            for node, s in self.procs.items()
        )


def _kafka_reference() -> Any:
    """tools/kafka_reference (a package in tools/), imported on demand."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import kafka_reference
    finally:
        sys.path.remove(str(ROOT / "tools"))
    return kafka_reference


class KafkaCluster(Cluster):
    """Apache Kafka in KRaft mode: one controller (node 100) and ``brokers`` brokers
    (node ids 0, 1, ...), group settings as the Skiff tests use. With several brokers,
    topics and __consumer_offsets are replicated on all of them, so one may be killed."""

    CONTROLLER = 100

    def __init__(self, work: Path, brokers: int = 1) -> None:
        self.ref = _kafka_reference()
        work.mkdir(parents=True, exist_ok=True)
        self.work = work
        self.lib = self.ref.kafka_jars(KAFKA_VERSION)
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("java is not installed")
        self.jvm = [java, "-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true"]
        self.jvm += ["-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", str(self.lib / "*")]
        self.controller_port = free_port()
        self.nodes = {i: free_port() for i in range(brokers)}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        cluster_id = self.ref.random_cluster_id()
        for node in [self.CONTROLLER, *self.nodes]:
            config = self._config(node)
            subprocess.run(
                [*self.jvm, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", config],
                check=True,
                capture_output=True,
                timeout=120,
            )
        self._start_all()

    def _config(self, node: int) -> str:
        voters = f"{self.CONTROLLER}@127.0.0.1:{self.controller_port}"
        props: dict[str, Any] = {
            "node.id": node,
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "log.dirs": self.work / f"data-{node}",
            # a killed broker is fenced (and its partitions move) 3 s after its last heartbeat
            "broker.session.timeout.ms": 3000,
            "broker.heartbeat.interval.ms": 500,
            # topic defaults are the controller's in KRaft (it creates the topics)
            "num.partitions": 6,
            "default.replication.factor": len(self.nodes),
            "min.insync.replicas": 1,
        }
        if node == self.CONTROLLER:
            props |= {
                "process.roles": "controller",
                "listeners": f"CONTROLLER://127.0.0.1:{self.controller_port}",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
            }
        else:
            port, replicas = self.nodes[node], len(self.nodes)
            props |= {
                "process.roles": "broker",
                "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "offsets.topic.replication.factor": replicas,
                "offsets.topic.num.partitions": 6,
                "group.initial.rebalance.delay.ms": 200,
                "num.network.threads": 2,
                "num.io.threads": 2,
            }
        path = self.work / f"node-{node}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return str(path)

    def _start(self, node: int) -> subprocess.Popen[bytes]:
        log = self.work / f"kafka-{node}.log"
        with open(log, "ab") as out:
            return subprocess.Popen(
                [*self.jvm, "kafka.Kafka", str(self.work / f"node-{node}.properties")],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def _start_all(self) -> None:
        self.procs[self.CONTROLLER] = self._start(self.CONTROLLER)
        wait_for_port(self.controller_port, self.procs[self.CONTROLLER], timeout=90)
        for node in self.nodes:
            self.procs[node] = self._start(node)
        for node, port in self.nodes.items():
            self.ref.wait_kafka_ready(port, self.procs[node], 120)
        self._wait_brokers_registered()

    def _wait_brokers_registered(self) -> None:
        """Until Metadata lists every broker (topics created earlier need them all)."""
        deadline = time.monotonic() + 60
        port = next(iter(self.nodes.values()))
        while time.monotonic() < deadline:
            with RawKafka("127.0.0.1", port) as client:
                meta = client.request(3, 12, {"topics": [], "allow_auto_topic_creation": False})
            if len(meta.brokers) == len(self.nodes):
                return
            time.sleep(0.3)
        raise RuntimeError(f"Kafka brokers did not all register:\n{self.logs()}")

    def kill(self, node: int) -> None:
        stop_process(self.procs[node], signal.SIGKILL)

    def alive(self, node: int) -> bool:
        return self.procs[node].poll() is None

    def restart(self) -> None:
        self._stop_all()
        self._start_all()

    def _stop_all(self) -> None:
        for node in [*self.nodes, self.CONTROLLER]:  # brokers shut down through the controller
            stop_process(self.procs[node])

    def stop(self) -> None:
        self._stop_all()

    def logs(self) -> str:
        return "\n".join(
            f"--- kafka node {node} ---\n{tail(self.work / f'kafka-{node}.log', 40)}"
            for node in self.procs
        )


def start_cluster(work: Path, nodes: int = 1, env: dict[str, str] | None = None) -> Cluster:
    """Skiff sidecars (default) or Kafka brokers, per SKIFF_GROUP_TESTS_AGAINST."""
    if against_kafka():
        return KafkaCluster(work, brokers=nodes)
    return SkiffCluster(work, sidecars=nodes, env=env)


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def create_topic(
    bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # replication -1: the broker's default (Skiff keeps copies in Redis, Kafka on all brokers)
    new = NewTopic(topic, num_partitions=partitions, replication_factor=-1, config=config or {})
    futures = admin.create_topics([new], operation_timeout=30)
    futures[topic].result(timeout=60)
    deadline = time.monotonic() + 30  # until every partition has a leader
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta and meta.error is None and len(meta.partitions) == partitions:
            if all(p.leader >= 0 for p in meta.partitions.values()):
                return
        time.sleep(0.1)
    raise AssertionError(f"topic {topic} has no leader for every partition after 30s")


def _error(code: Any) -> int:
    return int(getattr(code, "value", code))


def _served_versions(kafka: RawKafka) -> dict[int, int]:
    versions = kafka.request(
        API_VERSIONS,
        3,
        {"client_software_name": "groups-harness", "client_software_version": "1.0"},
    )
    return {int(v.api_key): int(v.max_version) for v in versions.api_keys}


def find_coordinator(port: int, group: str) -> tuple[int, int]:
    """FindCoordinator (API key 10) for ``group`` asked of the broker on ``port``: the
    coordinator's (node id, port). Raises RuntimeError on an error code (e.g.
    COORDINATOR_NOT_AVAILABLE while a coordinator moves), OSError when nothing listens."""
    with RawKafka("127.0.0.1", port, client_id="groups-harness") as kafka:
        top = _served_versions(kafka).get(FIND_COORDINATOR, -1)
        if top >= 4:  # batched: coordinator_keys
            resp = kafka.request(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
            (answer,) = resp.coordinators
        elif top >= 0:
            answer = kafka.request(FIND_COORDINATOR, min(top, 3), {"key": group, "key_type": 0})
        else:
            raise AssertionError(f"the broker on port {port} does not serve FindCoordinator")
    if _error(answer.error_code) != 0:
        raise RuntimeError(
            f"FindCoordinator({group!r}) on port {port}: error {_error(answer.error_code)}"
        )
    return int(answer.node_id), int(answer.port)


def _ports(bootstrap: str) -> list[int]:
    return [int(address.rsplit(":", 1)[1]) for address in bootstrap.split(",")]


def committed_offsets(
    bootstrap: str, group: str, topic: str, partitions: int
) -> dict[int, tuple[int, str | None]]:
    """The group's committed (offset, metadata) per partition, by raw FindCoordinator and
    OffsetFetch (API key 9) at the coordinator; offset -1 when nothing is committed.
    Raw, because confluent-kafka's Consumer.committed() reads metadata as a C string and
    runs past the end of one that has no trailing NUL (any other client's).
    Raises RuntimeError or OSError while no coordinator answers (callers retry)."""
    errors = []
    for port in _ports(bootstrap):
        try:
            _node, coordinator = find_coordinator(port, group)
            break
        except (RuntimeError, OSError) as exc:
            errors.append(repr(exc))
    else:
        raise RuntimeError(f"no coordinator for {group}: {errors}")
    wanted = [{"name": topic, "partition_indexes": list(range(partitions))}]
    with RawKafka("127.0.0.1", coordinator, client_id="groups-harness") as kafka:
        top = _served_versions(kafka).get(OFFSET_FETCH, -1)
        if top >= 8:  # batched: groups
            resp = kafka.request(
                OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": wanted}]}
            )
            (answer,) = resp.groups
        elif top >= 1:
            answer = kafka.request(OFFSET_FETCH, min(top, 7), {"group_id": group, "topics": wanted})
        else:
            raise AssertionError(f"the broker on port {coordinator} does not serve OffsetFetch")
    if _error(answer.error_code) != 0:
        raise RuntimeError(f"OffsetFetch({group!r}): error {_error(answer.error_code)}")
    out: dict[int, tuple[int, str | None]] = {}
    for t in answer.topics:
        for p in t.partitions:
            if _error(p.error_code) != 0:
                raise RuntimeError(
                    f"OffsetFetch({group!r}) {t.name}/{p.partition_index}: "
                    f"error {_error(p.error_code)}"
                )
            if t.name == topic:
                out[int(p.partition_index)] = (int(p.committed_offset), p.metadata)
    if sorted(out) != list(range(partitions)):
        raise AssertionError(f"OffsetFetch({group!r}) answered partitions {sorted(out)}")
    return out


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "groups-harness-hw"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


# -- members --------------------------------------------------------------------------------


@dataclass
class Event:
    t: float  # time.monotonic() when the harness read the line
    data: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.data.get("event"))


@dataclass
class Member:
    """One member process and the events it printed so far."""

    name: str
    client: str
    cmd: list[str]
    stderr_path: Path
    proc: subprocess.Popen[bytes] = field(init=False)
    started: float = field(init=False)
    stopped_on_purpose: bool = False  # terminate() or kill() was called
    _events: list[Event] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _reader: threading.Thread | None = None

    def start(self) -> None:
        with open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(
                self.cmd,
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches pytest only; teardown stops us
                # librdkafka members log their group state machine, shown on failure
                env={"SKIFF_TEST_RDKAFKA_DEBUG": "cgrp", **os.environ},
            )
        self.started = time.monotonic()
        assert self.proc.stdout is not None
        self._reader = threading.Thread(
            target=self._read, args=(self.proc.stdout,), name=f"read-{self.name}", daemon=True
        )
        self._reader.start()

    def _read(self, stdout: IO[bytes]) -> None:
        for raw in stdout:
            line = raw.decode(errors="replace").strip()
            if not line:
                continue
            try:
                data = json.loads(line)
            except ValueError:
                data = {"event": "garbage", "line": line}
            with self._lock:
                self._events.append(Event(time.monotonic(), data))

    # what it printed

    def events(self, kind: str | None = None, since: float = 0.0) -> list[Event]:
        with self._lock:
            events = list(self._events)
        return [e for e in events if (kind is None or e.kind == kind) and e.t >= since]

    def assignment(self) -> set[int] | None:
        """The partitions of its last "assigned" event (None before the first)."""
        assigned = self.events("assigned")
        if not assigned:
            return None
        return {int(p) for _topic, p in assigned[-1].data["partitions"]}

    def records(self) -> list[tuple[int, int]]:
        return [(e.data["partition"], e.data["offset"]) for e in self.events("record")]

    def uncommitted(self) -> list[tuple[int, int]]:
        """Records it processed whose batch commit was never acknowledged: the batch
        before a commit_failed, and whatever followed its last "committed" if it stopped
        or was killed there. Only these may be processed again by another member."""
        out: list[tuple[int, int]] = []
        pending: list[tuple[int, int]] = []
        for e in self.events():
            if e.kind == "record":
                pending.append((e.data["partition"], e.data["offset"]))
            elif e.kind == "committed":
                pending = []
            elif e.kind == "commit_failed":
                out += pending
                pending = []
        return out + pending

    def acked_commits(self, before: float = float("inf")) -> dict[int, int]:
        """The highest offset per partition whose commit it reported as done, among the
        "committed" lines read before ``before``."""
        best: dict[int, int] = {}
        for e in self.events("committed"):
            if e.t < before:
                for p, o in e.data["offsets"]:
                    best[p] = max(best.get(p, -1), o)
        return best

    # the process

    def alive(self) -> bool:
        return self.proc.poll() is None

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM (clean close) and wait; returns the exit status."""
        self.signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(
                f"{self.name} did not exit within {timeout}s of SIGTERM\n{self.describe()}"
            ) from None
        self._join_reader()
        return code

    def kill(self) -> None:
        """SIGKILL: the crash case, no LeaveGroup."""
        self.signal(signal.SIGKILL)
        self.proc.wait()
        self._join_reader()

    def signal(self, sig: int) -> None:
        """Send ``sig`` once (a second SIGTERM would only disturb a JVM's shutdown)."""
        if self.alive() and not (sig == signal.SIGTERM and self.stopped_on_purpose):
            os.kill(self.proc.pid, sig)
        self.stopped_on_purpose = True

    def _join_reader(self) -> None:
        if self._reader is not None:
            self._reader.join(timeout=10)

    def describe(self) -> str:
        state = "alive" if self.alive() else f"exited {self.proc.returncode}"
        if self.alive() and self.client != "java":
            os.kill(self.proc.pid, signal.SIGUSR1)  # group_member.py dumps its stacks
            time.sleep(0.3)
        assigned = self.assignment()
        kinds = Counter(e.kind for e in self.events())
        last = [e.data for e in self.events()[-4:]]
        stderr = tail(self.stderr_path, 60)
        return (
            f"  {self.name} ({self.client}, {state}): assignment "
            f"{sorted(assigned) if assigned is not None else 'none yet'}, events {dict(kinds)}\n"
            f"    last events: {last}\n"
            + ("    stderr: " + stderr.replace("\n", "\n      ") + "\n" if stderr else "")
        )


def member_cmd(client: str, bootstrap: str, group: str, topic: str, **opts: Any) -> list[str]:
    """The argv of one member: ``opts`` are the flags without dashes (instance_id,
    assignor, session_timeout_ms, heartbeat_interval_ms, client_id, max_records,
    record_delay_ms)."""
    if client == "java":
        from clients.java_client import group_member_cmd

        return group_member_cmd(bootstrap, group, topic, **opts)
    if client not in ("confluent", "kafka-python"):
        raise ValueError(f"unknown client {client!r}")
    cmd = [sys.executable, str(MEMBER_SCRIPT), "--client", client, "--bootstrap", bootstrap]
    cmd += ["--group", group, "--topic", topic]
    for name, value in opts.items():
        if value is not None:
            cmd += [f"--{name.replace('_', '-')}", str(value)]
    return cmd


# -- a group run ---------------------------------------------------------------------------

Offsets = set[tuple[int, int]]  # (partition, offset)


class GroupRun:
    """The members of one group on one topic, and the records produced for them."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        partitions: int,
        work: Path,
        cluster: Cluster | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = group
        self.partitions = partitions
        self.work = work
        self.cluster = cluster
        self.members: list[Member] = []
        self.names: Counter[str] = Counter()
        work.mkdir(parents=True, exist_ok=True)

    def start(self, client: str, name: str | None = None, **opts: Any) -> Member:
        """Start one member. Defaults: session timeout SESSION_TIMEOUT_MS, heartbeat
        HEARTBEAT_INTERVAL_MS, client id = its name."""
        if name is None:
            self.names[client] += 1
            name = f"{client}-{self.names[client]}"
        opts.setdefault("session_timeout_ms", SESSION_TIMEOUT_MS)
        opts.setdefault("heartbeat_interval_ms", HEARTBEAT_INTERVAL_MS)
        opts.setdefault("client_id", name)
        cmd = member_cmd(client, self.bootstrap, self.group, self.topic, **opts)
        member = Member(name, client, cmd, self.work / f"{name}.{len(self.members)}.stderr")
        member.start()
        self.members.append(member)
        return member

    def live(self) -> list[Member]:
        return [m for m in self.members if m.alive()]

    # waiting

    def wait_for(self, check: Callable[[], str | None], timeout: float, what: str) -> float:
        """Poll ``check`` (None when satisfied, else what is still wrong) until it holds;
        returns the seconds it took. On timeout the failure names ``what``, the last thing
        wrong, and shows every member."""
        started = time.monotonic()
        deadline = started + timeout
        while True:
            problem = check()
            if problem is None:
                return time.monotonic() - started
            dead = [m for m in self.members if not m.alive() and not m.stopped_on_purpose]
            if time.monotonic() > deadline or dead:
                why = f"timed out after {timeout:.0f}s" if not dead else "a member died"
                raise AssertionError(f"{why} waiting for {what}: {problem}\n{self.describe()}")
            time.sleep(0.1)

    def assignment_problem(self, members: Sequence[Member]) -> str | None:
        """None when the members' current assignments cover every partition exactly once
        (and each member has one when there are enough partitions), else what is wrong."""
        owners: dict[int, list[str]] = {p: [] for p in range(self.partitions)}
        for m in members:
            assigned = m.assignment()
            if assigned is None:
                return f"{m.name} has no assignment yet"
            if not assigned and len(members) <= self.partitions:
                return f"{m.name} has an empty assignment"
            for p in assigned:
                owners.setdefault(p, []).append(m.name)
        bad = {p: names for p, names in owners.items() if len(names) != 1}
        if bad:
            return "partition owners " + ", ".join(f"{p}: {n or 'nobody'}" for p, n in bad.items())
        return None

    def wait_assignment(
        self, members: Sequence[Member], timeout: float = 60.0, stable_s: float = 1.0
    ) -> float:
        """Until the assignment covers every partition exactly once across ``members`` and
        stays so for ``stable_s`` (a rebalance in progress may pass through a moment where
        it does); returns the seconds until it first held."""
        first: list[float] = []

        def check() -> str | None:
            problem = self.assignment_problem(members)
            if problem is not None:
                first.clear()
                return problem
            if not first:
                first.append(time.monotonic())
            if time.monotonic() - first[0] < stable_s:
                return "assignment not yet stable"
            return None

        started = time.monotonic()
        self.wait_for(
            check,
            timeout,
            f"the assignment to cover every partition exactly once across "
            f"{[m.name for m in members]}",
        )
        return first[0] - started

    def seen(self) -> Counter[tuple[int, int]]:
        """How often each (partition, offset) was processed, over all members."""
        counts: Counter[tuple[int, int]] = Counter()
        for m in self.members:
            counts.update(m.records())
        return counts

    def wait_seen(self, expected: Offsets, timeout: float = 60.0) -> float:
        def check() -> str | None:
            missing = expected - set(self.seen())
            if missing:
                example = sorted(missing)[:5]
                return f"{len(missing)} of {len(expected)} offsets not seen, e.g. {example}"
            return None

        return self.wait_for(check, timeout, f"all {len(expected)} offsets seen")

    # producing

    def produce(self, count: int, start: int = 0) -> Offsets:
        """Produce ``count`` records round-robin over the partitions (values "start+i");
        returns their (partition, offset) from the delivery reports."""
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "acks": "all"})
        delivered: Offsets = set()
        failures: list[str] = []

        def report(err: Any, msg: Any) -> None:
            if err is not None:
                failures.append(str(err))
            else:
                delivered.add((msg.partition(), msg.offset()))

        for i in range(start, start + count):
            while True:
                try:
                    producer.produce(
                        self.topic,
                        value=str(i).encode(),
                        partition=i % self.partitions,
                        on_delivery=report,
                    )
                    break
                except BufferError:  # local queue full: let deliveries drain
                    producer.poll(0.05)
            if i % 1000 == 0:
                producer.poll(0)
        left = producer.flush(120)
        assert left == 0 and not failures, (
            f"produce: {left} records undelivered, {len(failures)} failed: {failures[:5]}"
        )
        assert len(delivered) == count, f"produced {count} records, {len(delivered)} reports"
        return delivered

    # checks

    def check_exactly_once(self, expected: Offsets) -> None:
        counts = self.seen()
        missing = expected - set(counts)
        twice = {k: n for k, n in counts.items() if n > 1}
        extra = set(counts) - expected
        assert not missing and not twice and not extra, (
            f"records consumed exactly once: {len(missing)} missing (e.g. {sorted(missing)[:5]}),"
            f" {len(twice)} seen more than once (e.g. {sorted(twice.items())[:5]}),"
            f" {len(extra)} never produced (e.g. {sorted(extra)[:5]})\n{self.describe()}"
        )

    def check_at_least_once(self, expected: Offsets) -> dict[str, int]:
        """Every produced offset seen; an offset seen n > 1 times must have been processed
        without an acknowledged commit at least n - 1 times (the uncommitted window of a
        member that left, crashed or failed a commit). Returns counts for the report."""
        counts = self.seen()
        missing = expected - set(counts)
        assert not missing, (
            f"{len(missing)} of {len(expected)} produced offsets never consumed "
            f"(e.g. {sorted(missing)[:5]})\n{self.describe()}"
        )
        uncommitted: Counter[tuple[int, int]] = Counter()
        for m in self.members:
            uncommitted.update(m.uncommitted())
        unexplained = {k: (n, uncommitted[k]) for k, n in counts.items() if n - 1 > uncommitted[k]}
        assert not unexplained, (
            f"{len(unexplained)} offsets processed again although their first processing "
            f"was committed: (partition, offset): (times seen, times uncommitted) "
            f"{sorted(unexplained.items())[:10]}\n{self.describe()}"
        )
        return {
            "duplicates": sum(n - 1 for n in counts.values() if n > 1),
            "uncommitted": sum(uncommitted.values()),
        }

    def stop_all(self, check_exit: bool = True) -> None:
        """SIGTERM every live member; each must close and exit 0."""
        live = self.live()
        for m in live:  # all at once: the group's last rebalances overlap
            m.signal(signal.SIGTERM)
        problems = []
        for m in live:
            code = m.terminate()
            if check_exit and (code != 0 or not m.events("closed")):
                problems.append(
                    f"{m.name} exited {code}, closed printed: {bool(m.events('closed'))}"
                )
        assert not problems, f"clean shutdown: {problems}\n{self.describe()}"

    def kill_all(self) -> None:
        for m in self.members:
            if m.alive():
                m.kill()

    def describe(self) -> str:
        text = f"group {self.group} on {self.topic} ({self.partitions} partitions):\n"
        text += "".join(m.describe() for m in self.members)
        if self.cluster is not None:
            text += self.cluster.logs()
        return text


def seen_again(
    members: Iterable[Member], records: Iterable[tuple[int, int]]
) -> set[tuple[int, int]]:
    """Which of ``records`` some of ``members`` processed."""
    wanted = set(records)
    got: set[tuple[int, int]] = set()
    for m in members:
        got |= wanted & set(m.records())
    return got


def retry(action: Callable[[], Any], timeout: float, what: str, pause: float = 0.2) -> Any:
    """``action()`` until it stops raising (KafkaException, RuntimeError, OSError, or a
    connection a broker closed), for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return action()
        except (KafkaException, RuntimeError, OSError, ConnectionClosed, ProtocolError) as exc:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{what}: still failing after {timeout:.0f}s: {exc!r}"
                ) from exc
            time.sleep(pause)
