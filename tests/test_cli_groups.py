"""`skiff groups list|describe|delete|reset-offsets` (sidecar/cli/groups.py) run as a
subprocess against Skiff, with groups made by confluent-kafka consumers.

SKIFF_TEST_KAFKA_BOOTSTRAP=HOST:PORT runs the same tests against a real Kafka broker
instead (tools/kafka_reference can start one), which checks the tests themselves.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import ROOT, free_port, start_redis, start_skiff, stop_process

KAFKA_ENV = "SKIFF_TEST_KAFKA_BOOTSTRAP"
GROUP_ENV = {"SKIFF_GROUP_INITIAL_REBALANCE_DELAY_MS": "200"}  # joins settle fast
PARTITIONS = 3
RECORDS = 10  # per partition
BASE_TS = 1_700_000_000_000  # record i of every partition has timestamp BASE_TS + i s
NO_OFFSET = -1001  # confluent-kafka's OFFSET_INVALID: nothing committed


@dataclass(frozen=True)
class Target:
    bootstrap: str
    redis_url: str | None  # None: an external Kafka broker


@pytest.fixture(scope="module")
def target(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Target]:
    external = os.environ.get(KAFKA_ENV)
    if external:
        yield Target(external, None)
        return
    # A Redis of its own: sidecars of other tests on the shared one would be live
    # brokers too and coordinate some of these groups.
    redis_server = start_redis(tmp_path_factory.mktemp("groups-cli-redis"))
    log = tmp_path_factory.mktemp("skiff-groups") / "skiff.log"
    server = start_skiff(log, "--redis-url", redis_server.url, env=GROUP_ENV)
    yield Target(server.bootstrap, redis_server.url)
    stop_process(server.proc)
    stop_process(redis_server.proc)


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:12]}"


# -- helpers -----------------------------------------------------------------------------------


def skiff_groups(
    bootstrap: str, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", "groups", *args, "--bootstrap", bootstrap],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check:
        assert proc.returncode == 0, f"{args}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def groups_json(bootstrap: str, *args: str) -> Any:
    return json.loads(skiff_groups(bootstrap, *args, "--json").stdout)


def make_topic(bootstrap: str, topic: str) -> None:
    """PARTITIONS partitions of RECORDS records, with known timestamps."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            producer.produce(
                topic, value=f"{p}-{i}".encode(), partition=p, timestamp=BASE_TS + i * 1000
            )
    assert producer.flush(30) == 0


def join_and_commit(
    bootstrap: str,
    group: str,
    topic: str,
    commits: dict[int, int],
    metadata: dict[int, str] | None = None,
    client_id: str = "groups-test",
) -> Consumer:
    """A subscribed group member that has read each partition up to its commit offset and
    committed it; the caller closes it (LeaveGroup)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": client_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range",
        }
    )
    consumer.subscribe([topic])
    read: dict[int, int] = {}
    deadline = time.monotonic() + 60
    while not consumer.assignment() or any(read.get(p, 0) < o for p, o in commits.items()):
        assert time.monotonic() < deadline, f"read {read}, want {commits}"
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            read[msg.partition()] = msg.offset() + 1
    meta = metadata or {}
    offsets = [
        CTopicPartition(topic, p, o, metadata=meta[p])
        if p in meta
        else CTopicPartition(topic, p, o)
        for p, o in commits.items()
    ]
    consumer.commit(offsets=offsets, asynchronous=False)
    return consumer


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets as confluent-kafka reads them (NO_OFFSET: none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([CTopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in tps}


def iso(ms: int, hours: int = 0) -> str:
    zone = datetime.timezone(datetime.timedelta(hours=hours))
    return datetime.datetime.fromtimestamp(ms / 1000, zone).isoformat()


# -- list ----------------------------------------------------------------------------------------


def test_list_shows_each_group_with_state_and_protocol_type(target: Target, topic: str) -> None:
    make_topic(target.bootstrap, topic)
    active, idle = f"{topic}-active", f"{topic}-idle"
    member = join_and_commit(target.bootstrap, active, topic, {0: 1})
    try:
        join_and_commit(target.bootstrap, idle, topic, {0: 2}).close()
        listed = {g["group"]: g for g in groups_json(target.bootstrap, "list")}
        assert listed[active] == {"group": active, "state": "Stable", "protocol_type": "consumer"}
        assert listed[idle] == {"group": idle, "state": "Empty", "protocol_type": "consumer"}

        stable = {g["group"] for g in groups_json(target.bootstrap, "list", "--state", "stable")}
        assert active in stable and idle not in stable
        empty = {g["group"] for g in groups_json(target.bootstrap, "list", "--state", "Empty,Dead")}
        assert idle in empty and active not in empty

        lines = skiff_groups(target.bootstrap, "list").stdout.splitlines()
        assert re.split(r"\s+", lines[0]) == ["GROUP", "STATE", "PROTOCOL-TYPE"]
        assert any(re.fullmatch(rf"{active}\s+Stable\s+consumer", line) for line in lines)
    finally:
        member.close()


# -- describe ------------------------------------------------------------------------------------


def test_describe_shows_committed_offsets_lag_and_members(
    target: Target, topic: str, group: str
) -> None:
    make_topic(target.bootstrap, topic)
    member = join_and_commit(
        target.bootstrap,
        group,
        topic,
        {0: 4, 1: 10, 2: 0},
        metadata={0: "checkpoint-7"},
        client_id="describe-client",
    )
    try:
        member_id = member.memberid()
        described = groups_json(target.bootstrap, "describe", group)
        assert described["group"] == group
        assert described["state"] == "Stable"
        assert (described["protocol_type"], described["protocol"]) == ("consumer", "range")
        coordinator = described["coordinator"]
        assert f"{coordinator['host']}:{coordinator['port']}" == target.bootstrap
        [m] = described["members"]
        assert (m["member_id"], m["client_id"]) == (member_id, "describe-client")
        assert "127.0.0.1" in m["host"]
        assert m["assignment"] == [{"topic": topic, "partition": p} for p in range(PARTITIONS)]
        rows = [
            (r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"], r["metadata"])
            for r in described["partitions"]
        ]
        # librdkafka sends a given metadata string with its C terminator (NUL) as well.
        assert rows == [
            (0, 4, 10, 6, "checkpoint-7\x00"),
            (1, 10, 10, 0, ""),
            (2, 0, 10, 10, ""),
        ]
        assert {r["member_id"] for r in described["partitions"]} == {member_id}
        assert described["total_lag"] == 16

        text = skiff_groups(target.bootstrap, "describe", group).stdout
        assert "State:        Stable" in text and "Total lag:    16" in text
        assert re.search(rf"^{topic}\s+0\s+4\s+10\s+6\s+{member_id}\s", text, re.M), text
        assert re.search(
            rf"^{member_id}\s+-\s+describe-client\s+\S+\s+3\s+{topic}\(0,1,2\)$", text, re.M
        )
    finally:
        member.close()

    described = groups_json(target.bootstrap, "describe", group)
    assert (described["state"], described["members"]) == ("Empty", [])
    rows = [
        (r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"], r["member_id"])
        for r in described["partitions"]
    ]
    assert rows == [(0, 4, 10, 6, None), (1, 10, 10, 0, None), (2, 0, 10, 10, None)]
    assert described["total_lag"] == 16
    assert "has no active members" in skiff_groups(target.bootstrap, "describe", group).stdout


def test_describe_of_an_unknown_group_says_it_does_not_exist(target: Target, group: str) -> None:
    proc = skiff_groups(target.bootstrap, "describe", group, check=False)
    assert proc.returncode == 1
    assert f"group '{group}' does not exist" in proc.stderr


# -- reset-offsets --------------------------------------------------------------------------------


def reset(target: Target, group: str, *args: str) -> Any:
    return groups_json(target.bootstrap, "reset-offsets", group, *args)


def test_reset_offsets_to_earliest_latest_offset_and_datetime(
    target: Target, topic: str, group: str
) -> None:
    make_topic(target.bootstrap, topic)
    join_and_commit(target.bootstrap, group, topic, {0: 5, 1: 5, 2: 5}).close()

    plan = reset(target, group, "--topic", topic, "--to-earliest")
    assert plan["dry_run"] is False
    assert [(r["partition"], r["current_offset"], r["new_offset"]) for r in plan["partitions"]] == [
        (0, 5, 0),
        (1, 5, 0),
        (2, 5, 0),
    ]
    assert committed(target.bootstrap, group, topic) == {0: 0, 1: 0, 2: 0}

    reset(target, group, "--topic", topic, "--to-latest")
    assert committed(target.bootstrap, group, topic) == {0: 10, 1: 10, 2: 10}

    reset(target, group, "--topic", f"{topic}:1", "--to-offset", "3")
    assert committed(target.bootstrap, group, topic) == {0: 10, 1: 3, 2: 10}

    # Out of range: moved into [log start, log end], with a note, as Kafka's tool does.
    proc = skiff_groups(
        target.bootstrap, "reset-offsets", group, "--topic", f"{topic}:0,1", "--to-offset", "99"
    )
    assert f"past the log end of {topic}-1; using 10" in proc.stderr
    assert committed(target.bootstrap, group, topic) == {0: 10, 1: 10, 2: 10}

    # Record i has timestamp BASE_TS + i s: the first at or after BASE_TS + 2.5 s is offset 3.
    reset(target, group, "--topic", topic, "--to-datetime", iso(BASE_TS + 2500))
    assert committed(target.bootstrap, group, topic) == {0: 3, 1: 3, 2: 3}
    reset(target, group, "--topic", f"{topic}:2", "--to-datetime", iso(BASE_TS + 7000, hours=2))
    assert committed(target.bootstrap, group, topic) == {0: 3, 1: 3, 2: 7}
    # Later than every record: the log end.
    reset(target, group, "--topic", topic, "--to-datetime", "2999-01-01T00:00:00Z")
    assert committed(target.bootstrap, group, topic) == {0: 10, 1: 10, 2: 10}

    text = skiff_groups(
        target.bootstrap, "reset-offsets", group, "--topic", topic, "--to-earliest", "--dry-run"
    ).stdout
    assert re.search(rf"^{group}\s+{topic}\s+2\s+10\s+0$", text, re.M), text
    assert "Dry run: nothing committed." in text
    assert committed(target.bootstrap, group, topic) == {0: 10, 1: 10, 2: 10}

    text = skiff_groups(
        target.bootstrap, "reset-offsets", group, "--topic", f"{topic}:0", "--to-offset", "1"
    ).stdout
    assert f"Committed new offsets for 1 partition(s) of group '{group}'." in text
    assert committed(target.bootstrap, group, topic) == {0: 1, 1: 10, 2: 10}


def test_reset_offsets_of_a_new_group_commits_its_first_offsets(
    target: Target, topic: str, group: str
) -> None:
    make_topic(target.bootstrap, topic)
    reset(target, group, "--topic", topic, "--to-offset", "2")
    assert committed(target.bootstrap, group, topic) == {0: 2, 1: 2, 2: 2}
    described = groups_json(target.bootstrap, "describe", group)
    assert [r["lag"] for r in described["partitions"]] == [8, 8, 8]


def test_reset_offsets_is_refused_while_the_group_has_a_member(
    target: Target, topic: str, group: str
) -> None:
    make_topic(target.bootstrap, topic)
    member = join_and_commit(target.bootstrap, group, topic, {0: 5})
    try:
        for dry_run in ((), ("--dry-run",)):
            proc = skiff_groups(
                target.bootstrap,
                "reset-offsets",
                group,
                "--topic",
                topic,
                "--to-earliest",
                *dry_run,
                check=False,
            )
            assert proc.returncode == 1
            assert f"group '{group}' is Stable with 1 member(s)" in proc.stderr
            assert "Stop its consumers" in proc.stderr
        assert committed(target.bootstrap, group, topic)[0] == 5
    finally:
        member.close()
    reset(target, group, "--topic", f"{topic}:0", "--to-earliest")
    assert committed(target.bootstrap, group, topic)[0] == 0


def test_reset_offsets_names_a_missing_topic_or_partition(
    target: Target, group: str, topic: str
) -> None:
    make_topic(target.bootstrap, topic)
    proc = skiff_groups(
        target.bootstrap,
        "reset-offsets",
        group,
        "--topic",
        "no-such-topic-x",
        "--to-earliest",
        check=False,
    )
    assert proc.returncode == 1 and "topic 'no-such-topic-x' does not exist" in proc.stderr
    proc = skiff_groups(
        target.bootstrap,
        "reset-offsets",
        group,
        "--topic",
        f"{topic}:7",
        "--to-earliest",
        check=False,
    )
    assert proc.returncode == 1 and f"topic '{topic}' has no partition 7" in proc.stderr


# -- delete ----------------------------------------------------------------------------------------


def test_delete_refuses_a_group_with_members_then_deletes_it(
    target: Target, topic: str, group: str
) -> None:
    make_topic(target.bootstrap, topic)
    member = join_and_commit(target.bootstrap, group, topic, {0: 5})
    try:
        proc = skiff_groups(target.bootstrap, "delete", group, check=False)
        assert proc.returncode == 1
        assert "still has active members (NON_EMPTY_GROUP)" in proc.stderr
        assert "stop its consumers" in proc.stderr
    finally:
        member.close()

    missing = f"{group}-missing"
    proc = skiff_groups(target.bootstrap, "delete", group, missing, "--json", check=False)
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result[group] is None
    assert result[missing]["error"] == "GROUP_ID_NOT_FOUND"
    assert committed(target.bootstrap, group, topic) == {p: NO_OFFSET for p in range(PARTITIONS)}
    assert group not in {g["group"] for g in groups_json(target.bootstrap, "list")}
    proc = skiff_groups(target.bootstrap, "describe", group, check=False)
    assert proc.returncode == 1 and "does not exist" in proc.stderr


def test_delete_prints_what_it_deleted(target: Target, topic: str, group: str) -> None:
    make_topic(target.bootstrap, topic)
    join_and_commit(target.bootstrap, group, topic, {1: 1}).close()
    assert skiff_groups(target.bootstrap, "delete", group).stdout == f"Deleted group '{group}'.\n"


# -- usage and errors ------------------------------------------------------------------------------


def test_an_unreachable_bootstrap_fails_at_once_with_a_hint() -> None:
    started = time.monotonic()
    proc = skiff_groups(f"127.0.0.1:{free_port()}", "list", check=False)
    assert proc.returncode == 1
    assert "cannot connect to 127.0.0.1:" in proc.stderr
    assert "Is Skiff running" in proc.stderr and "--bootstrap" in proc.stderr
    assert time.monotonic() - started < 20


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["reset-offsets", "g", "--topic", "t", "--to-offset", "-1"], "expected an offset >= 0"),
        (["reset-offsets", "g", "--topic", "t", "--to-datetime", "soon"], "expected an ISO 8601"),
        (["reset-offsets", "g", "--topic", "t:x", "--to-earliest"], "partitions must be numbers"),
        (["reset-offsets", "g", "--topic", "t"], "one of the arguments"),
        (["reset-offsets", "g", "--to-latest"], "--topic"),
        (["list", "--bootstrap", "nonsense"], "expected HOST:PORT"),
    ],
)
def test_bad_arguments_are_refused_with_a_message(args: list[str], says: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", "groups", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert says in proc.stderr, proc.stderr


# -- several sidecars ------------------------------------------------------------------------


def test_every_sidecar_answers_for_every_group(
    target: Target, topic: str, group: str, tmp_path: Path
) -> None:
    if target.redis_url is None:
        pytest.skip("needs a second sidecar on the same Redis")
    other = start_skiff(tmp_path / "skiff-b.log", "--redis-url", target.redis_url, env=GROUP_ENV)
    try:
        make_topic(target.bootstrap, topic)
        member = join_and_commit(target.bootstrap, group, topic, {0: 4, 2: 6})
        try:
            for bootstrap in (target.bootstrap, other.bootstrap):
                listed = {g["group"]: g["state"] for g in groups_json(bootstrap, "list")}
                assert listed[group] == "Stable"
                described = groups_json(bootstrap, "describe", group)
                assert described["state"] == "Stable"
                assert [m["member_id"] for m in described["members"]] == [member.memberid()]
                c = described["coordinator"]
                assert f"{c['host']}:{c['port']}" in (target.bootstrap, other.bootstrap)
                assert [(r["partition"], r["lag"]) for r in described["partitions"]] == [
                    (0, 6),
                    (1, None),
                    (2, 4),
                ]
            proc = skiff_groups(
                other.bootstrap,
                "reset-offsets",
                group,
                "--topic",
                topic,
                "--to-earliest",
                check=False,
            )
            assert proc.returncode == 1 and "Stable with 1 member(s)" in proc.stderr
        finally:
            member.close()
        groups_json(other.bootstrap, "reset-offsets", group, "--topic", topic, "--to-latest")
        assert committed(target.bootstrap, group, topic) == {0: 10, 1: 10, 2: 10}
        skiff_groups(other.bootstrap, "delete", group)
        assert group not in {g["group"] for g in groups_json(target.bootstrap, "list")}
    finally:
        stop_process(other.proc)


def test_a_command_follows_the_group_when_its_coordinator_dies(
    target: Target, topic: str, group: str, tmp_path: Path
) -> None:
    """The coordinator's sidecar is killed: `describe` through the other sidecar keeps
    asking FindCoordinator until the group has moved, then answers from the new one."""
    if target.redis_url is None:
        pytest.skip("kills a sidecar")
    redis_server = start_redis(tmp_path / "redis")  # the module's sidecar must not coordinate
    env = {
        **GROUP_ENV,
        "SKIFF_BROKER_SESSION_TIMEOUT_MS": "3000",
        "SKIFF_BROKER_HEARTBEAT_INTERVAL_MS": "500",
    }
    sidecars = [
        start_skiff(tmp_path / f"skiff-{i}.log", "--redis-url", redis_server.url, env=env)
        for i in range(2)
    ]
    try:
        make_topic(sidecars[0].bootstrap, topic)
        join_and_commit(sidecars[0].bootstrap, group, topic, {0: 3, 1: 4, 2: 5}).close()
        before = groups_json(sidecars[0].bootstrap, "describe", group)["coordinator"]
        [dying] = [s for s in sidecars if s.port == before["port"]]
        [survivor] = [s for s in sidecars if s is not dying]
        os.kill(dying.proc.pid, signal.SIGKILL)
        dying.proc.wait()

        described = groups_json(survivor.bootstrap, "describe", group, "--timeout", "30")
        after = described["coordinator"]
        assert f"{after['host']}:{after['port']}" == survivor.bootstrap
        assert described["state"] == "Empty"
        assert [
            (r["partition"], r["committed_offset"], r["lag"]) for r in described["partitions"]
        ] == [
            (0, 3, 7),
            (1, 4, 6),
            (2, 5, 5),
        ]
    finally:
        for sidecar in sidecars:
            stop_process(sidecar.proc)
        stop_process(redis_server.proc)
