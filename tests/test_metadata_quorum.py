"""The KRaft administration APIs on a cluster of sidecars: DescribeQuorum (the live
sidecars as voters), UnregisterBroker and UnregisterController (a registration dropped
before its lease runs out), AddRaftVoter and RemoveRaftVoter (refused as by a quorum of
static voters), with Kafka 4.4's `kafka-metadata-quorum` and `kafka-cluster`."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import RedisServer, Skiff, start_skiff, stop_process
from log_helpers import wait_for
from rawkafka import RawKafka

from sidecar.protocol import kio_extra

KAFKA4 = "4.4.0"
METADATA, DESCRIBE_QUORUM, UNREGISTER_BROKER = 3, 55, 64
ADD_RAFT_VOTER, REMOVE_RAFT_VOTER, UNREGISTER_CONTROLLER = 80, 81, 94
NONE, UNKNOWN_TOPIC_OR_PARTITION, UNSUPPORTED_VERSION, INVALID_REQUEST = 0, 3, 35, 42
BROKER_ID_NOT_REGISTERED, INCONSISTENT_CLUSTER_ID, CONTROLLER_ID_NOT_REGISTERED = 102, 104, 136
# Long enough that a killed sidecar is still registered while the test looks.
SESSION_MS = 60_000
# A sidecar renews (and, once unregistered, registers again) this often: rarely enough
# that an unregistered live sidecar is seen gone before it comes back.
HEARTBEAT_MS = 10_000
QUORUM = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}


@dataclass
class Pair:
    first: Skiff
    second: Skiff


@pytest.fixture
def pair(own_redis: RedisServer, tmp_path: Path) -> Iterator[Pair]:
    """Two sidecars on one Redis, nodes 0 and 1 (0 the controller)."""
    args = [
        "--redis-url",
        own_redis.url,
        "--broker-session-timeout-ms",
        str(SESSION_MS),
        "--broker-heartbeat-interval-ms",
        str(HEARTBEAT_MS),
    ]
    first = start_skiff(tmp_path / "first.log", *args, "--node-id", "0")
    second = start_skiff(tmp_path / "second.log", *args, "--node-id", "1")
    yield Pair(first, second)
    for s in (first, second):
        stop_process(s.proc)


def _brokers(skiff: Skiff) -> list[int]:
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        body = {"topics": [], "allow_auto_topic_creation": False}
        return sorted(b.node_id for b in kafka.request(METADATA, 12, body).brokers)


def _both_listed(pair: Pair) -> None:
    for s in (pair.first, pair.second):
        wait_for(lambda s=s: _brokers(s) == [0, 1], 30, "both sidecars in Metadata")


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum_lists_the_live_sidecars(pair: Pair, version: int) -> None:
    _both_listed(pair)
    before_ms = time.time() * 1000 - SESSION_MS
    with RawKafka("127.0.0.1", pair.second.port) as kafka:
        resp = kafka.request(DESCRIBE_QUORUM, version, QUORUM)
    assert resp.error_code == NONE
    [topic] = resp.topics
    [part] = topic.partitions
    assert (topic.topic_name, part.partition_index, part.error_code) == ("__cluster_metadata", 0, 0)
    assert (part.leader_id, part.leader_epoch, part.high_watermark) == (0, 0, 0)
    assert [v.replica_id for v in part.current_voters] == [0, 1]
    assert [v.log_end_offset for v in part.current_voters] == [0, 0]
    assert part.observers == ()
    if version >= 1:  # each voter's last registration renewal, by Redis's clock
        for v in part.current_voters:
            assert before_ms < v.last_fetch_timestamp == v.last_caught_up_timestamp
            assert v.last_fetch_timestamp < time.time() * 1000 + 5_000
    if version >= 2:
        assert (resp.error_message, part.error_message) == ("", "")
        assert [v.replica_directory_id for v in part.current_voters] == [None, None]
        listeners = {n.node_id: [(li.host, li.port) for li in n.listeners] for n in resp.nodes}
        assert listeners == {
            0: [("127.0.0.1", pair.first.port)],
            1: [("127.0.0.1", pair.second.port)],
        }


def test_describe_quorum_of_anything_else_is_unknown(pair: Pair) -> None:
    """As Kafka: only partition 0 of __cluster_metadata, asked alone, is the quorum."""
    partition = QUORUM["topics"][0]["partitions"][0]
    for topics in (
        [{"topic_name": "orders", "partitions": [{"partition_index": 0}]}],
        [{"topic_name": "__cluster_metadata", "partitions": [partition, {"partition_index": 1}]}],
        [*QUORUM["topics"], *QUORUM["topics"]],
    ):
        with RawKafka("127.0.0.1", pair.first.port) as kafka:
            resp = kafka.request(DESCRIBE_QUORUM, 2, {"topics": topics})
        assert (resp.error_code, resp.nodes) == (NONE, ())
        answered = [
            (t.topic_name, p.partition_index, p.error_code, p.error_message, p.current_voters)
            for t in resp.topics
            for p in t.partitions
        ]
        asked = [(t["topic_name"], p["partition_index"]) for t in topics for p in t["partitions"]]
        message = "This server does not host this topic-partition."
        assert answered == [(n, i, UNKNOWN_TOPIC_OR_PARTITION, message, ()) for n, i in asked]
    with RawKafka("127.0.0.1", pair.first.port) as kafka:
        resp = kafka.request(DESCRIBE_QUORUM, 2, {"topics": []})
    assert (resp.error_code, resp.topics, resp.nodes) == (NONE, (), ())


def test_unregister_broker_drops_a_killed_sidecar_at_once(pair: Pair) -> None:
    _both_listed(pair)
    os.kill(pair.second.proc.pid, signal.SIGKILL)
    pair.second.proc.wait(30)
    # Its registration outlives it (the session timeout) until it is unregistered.
    assert _brokers(pair.first) == [0, 1]
    with RawKafka("127.0.0.1", pair.first.port) as kafka:
        resp = kafka.request(UNREGISTER_BROKER, 0, {"broker_id": 1})
        assert (resp.error_code, resp.error_message) == (NONE, "")
        assert _brokers(pair.first) == [0]
        resp = kafka.request(UNREGISTER_BROKER, 0, {"broker_id": 1})
        assert (resp.error_code, resp.error_message) == (
            BROKER_ID_NOT_REGISTERED,
            "Broker ID 1 is not currently registered",
        )
        resp = kafka.request(DESCRIBE_QUORUM, 2, QUORUM)
        assert [v.replica_id for v in resp.topics[0].partitions[0].current_voters] == [0]


def test_an_unregistered_live_sidecar_registers_again(pair: Pair) -> None:
    _both_listed(pair)
    with RawKafka("127.0.0.1", pair.first.port) as kafka:
        assert kafka.request(UNREGISTER_BROKER, 0, {"broker_id": 1}).error_code == NONE
    assert _brokers(pair.first) == [0]
    # Its next heartbeat finds the registration gone and makes a new one.
    wait_for(lambda: _brokers(pair.first) == [0, 1], 30, "node 1 registered again")
    assert pair.second.alive()


def _unregister_controller(skiff: Skiff, node_id: int) -> tuple[int, str | None]:
    request = kio_extra.UnregisterControllerRequestV0(controller_id=node_id)  # type: ignore[arg-type]
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        resp = kafka.request(UNREGISTER_CONTROLLER, 0, request)
    return int(resp.error_code), resp.error_message


def test_unregister_controller_as_kafka(pair: Pair) -> None:
    _both_listed(pair)
    assert _unregister_controller(pair.second, 0) == (
        INVALID_REQUEST,
        "Controller cannot unregister itself while it is active.",
    )
    assert _unregister_controller(pair.first, 7) == (
        CONTROLLER_ID_NOT_REGISTERED,
        "Controller ID 7 is not currently registered.",
    )
    assert _unregister_controller(pair.first, 1) == (NONE, "")
    assert _brokers(pair.first) == [0]
    wait_for(lambda: _brokers(pair.first) == [0, 1], 30, "node 1 registered again")


def test_raft_voters_cannot_be_added_or_removed(pair: Pair) -> None:
    directory = uuid.uuid4()
    add = {
        "cluster_id": None,
        "timeout": 1000,
        "voter_id": 2,
        "voter_directory_id": directory,
        "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 1}],
        "ack_when_committed": True,
    }
    remove = {"cluster_id": None, "voter_id": 1, "voter_directory_id": directory}
    with RawKafka("127.0.0.1", pair.first.port) as kafka:
        for key, version, body, verb in (
            (ADD_RAFT_VOTER, 0, add, "adding"),
            (ADD_RAFT_VOTER, 1, add, "adding"),
            (REMOVE_RAFT_VOTER, 0, remove, "removing"),
        ):
            resp = kafka.request(key, version, body)
            message = f"Cluster doesn't support {verb} voter because the kraft.version feature is 0"
            assert (resp.error_code, resp.error_message) == (UNSUPPORTED_VERSION, message)
            resp = kafka.request(key, version, {**body, "cluster_id": "another"})
            assert resp.error_code == INCONSISTENT_CLUSTER_ID
            assert resp.error_message.startswith('The given id "another" doesn\'t match')
            resp = kafka.request(key, version, {**body, "voter_directory_id": uuid.UUID(int=0)})
            noun = "Add" if key == ADD_RAFT_VOTER else "Remove"
            assert (resp.error_code, resp.error_message) == (
                INVALID_REQUEST,
                f"{noun} voter request didn't include a valid voter",
            )


# -- Kafka 4.4's tools ------------------------------------------------------------------


def _tool(main_class: str, *args: str) -> tuple[int, str]:
    from kafka_tools import ToolsUnavailable, kafka_cli

    try:
        cmd = kafka_cli.command(main_class, list(args), "ERROR", KAFKA4)
    except ToolsUnavailable as exc:
        pytest.skip(f"no Kafka {KAFKA4}: {exc}")
    done = subprocess.run(
        cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120
    )
    return done.returncode, done.stdout + done.stderr


def _quorum_tool(skiff: Skiff, *args: str) -> tuple[int, str]:
    tool = "org.apache.kafka.tools.MetadataQuorumCommand"
    return _tool(tool, "--bootstrap-server", skiff.bootstrap, *args)


def _cluster_tool(skiff: Skiff, command: str, *args: str) -> tuple[int, str]:
    tool = "org.apache.kafka.tools.ClusterTool"
    return _tool(tool, command, "--bootstrap-server", skiff.bootstrap, *args)


def test_kafka_metadata_quorum_describes_the_sidecars(pair: Pair) -> None:
    _both_listed(pair)
    with RawKafka("127.0.0.1", pair.first.port) as kafka:
        described = kafka.request(60, 0, {"include_cluster_authorized_operations": False})
    cluster_id = described.cluster_id
    code, out = _quorum_tool(pair.second, "describe", "--status")
    assert code == 0, out
    status = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    assert status["ClusterId"].strip() == cluster_id
    assert (status["LeaderId"].strip(), status["HighWatermark"].strip()) == ("0", "0")
    assert status["MaxFollowerLag"].strip() == "0"
    voters = status["CurrentVoters"].strip()
    for node, skiff in ((0, pair.first), (1, pair.second)):
        assert f'{{"id": {node}, "endpoints": ["PLAINTEXT://127.0.0.1:{skiff.port}"]}}' in voters
    assert status["CurrentObservers"].strip() == "[]"

    code, out = _quorum_tool(pair.second, "describe", "--replication", "--human-readable")
    assert code == 0, out
    rows = [line.split() for line in out.splitlines()[1:] if line.strip()]
    assert [(r[0], r[2], r[3], r[-1]) for r in rows] == [
        ("0", "0", "0", "Leader"),
        ("1", "0", "0", "Follower"),
    ]
    assert all("ago" in " ".join(r) for r in rows), out

    code, out = _quorum_tool(
        pair.first,
        "remove-controller",
        "--controller-id",
        "1",
        "--controller-directory-id",
        "pvn0VkQbRxC8HsbKjbWbLw",
    )
    assert code == 1 and "UnsupportedVersionException" in out, out
    assert "kraft.version feature is 0" in out, out


def test_kafka_cluster_unregisters_a_killed_sidecar(pair: Pair) -> None:
    _both_listed(pair)
    os.kill(pair.second.proc.pid, signal.SIGKILL)
    pair.second.proc.wait(30)
    code, out = _cluster_tool(pair.first, "unregister", "--id", "1")
    assert (code, out.strip()) == (0, "Broker 1 is no longer registered."), out
    assert _brokers(pair.first) == [0]
    code, out = _cluster_tool(pair.first, "unregister", "--id", "1")
    assert code == 1 and "BrokerIdNotRegisteredException" in out, out
    code, out = _cluster_tool(pair.first, "unregister-controller", "--id", "0")
    assert code == 1 and "cannot unregister itself while it is active" in out, out
