#!/usr/bin/env python3
"""Ask Apache Kafka 4.2 and Skiff the same share-group (KIP-932) questions; print where
the answers differ.

    .venv/bin/python tools/share_reference.py [--kafka-version 4.2.0] [--keep]

tools/kafka_reference runs Kafka 3.9.1, which has no share groups; this tool starts a
4.2 broker the same way (jars from Maven Central, single-node KRaft, the share-group
state topic with replication factor 1) beside redis-server and Skiff, and runs one
scripted conversation on each: group configs, heartbeats (join, stay, fenced epoch,
unknown member, leave), share sessions (missing session, acknowledgements on the opening
fetch, wrong epoch), acknowledgement errors, renew and reject, session close,
DescribeShareGroupOffsets, ShareGroupDescribe, AlterShareGroupOffsets, ListGroups and a
classic JoinGroup on a share group; then share.isolation.level over committed, aborted
and open transactions. Each step's answer is reduced to the fields that
must agree (topic ids and names masked); the known, explained differences are listed in
docs/share-groups.md ("Differences from Kafka").
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka_reference import SCENARIO_PROPERTIES, Processes, say, start_kafka, start_skiff  # noqa: E402
from rawkafka import RawKafka, fetched_records, metadata_request  # noqa: E402
from share_raw import (  # noqa: E402
    ACCEPT,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    ShareMember,
    acquired_offsets,
    partition_errors,
)

SHARE_PROPERTIES = {
    **SCENARIO_PROPERTIES,
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}

Step = tuple[str, Any]


def _wait_coordinator(port: int, group: str) -> None:
    with RawKafka("127.0.0.1", port) as k:
        for _ in range(120):
            r = k.request(10, 4, {"key_type": 0, "coordinator_keys": [group]})
            if r.coordinators[0].error_code == 0:
                return
            time.sleep(0.5)
    raise RuntimeError(f"no group coordinator on port {port}")


def _join_when_loaded(member: ShareMember, topic: str) -> None:
    """Join by heartbeat, retrying while the coordinator loads or moves (14, 15, 16)."""
    for _ in range(60):
        if member.heartbeat(0, [topic]).error_code not in (14, 15, 16):
            return
        time.sleep(0.5)


def _setup(port: int, topic: str, group: str) -> uuid.UUID:
    bootstrap = f"127.0.0.1:{port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i in range(4):
        producer.produce(topic, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
    _wait_coordinator(port, group)
    with RawKafka("127.0.0.1", port) as k:
        for _ in range(60):
            t = k.request(3, 12, metadata_request([topic])).topics[0]
            if t.error_code == 0 and t.partitions:
                return t.topic_id
            time.sleep(0.5)
    raise RuntimeError(f"topic {topic} did not appear on port {port}")


def conversation(port: int, topic: str, group: str) -> list[Step]:
    tid = _setup(port, topic, group)
    tp = (tid, 0)
    out: list[Step] = []

    def step(name: str, value: Any) -> None:
        out.append((name, value))

    with RawKafka("127.0.0.1", port) as k:
        r = k.request(
            44,
            1,
            {
                "resources": [
                    {
                        "resource_type": 32,
                        "resource_name": group,
                        "configs": [
                            {
                                "name": "share.auto.offset.reset",
                                "config_operation": 0,
                                "value": "earliest",
                            },
                            {
                                "name": "share.record.lock.duration.ms",
                                "config_operation": 0,
                                "value": "15000",
                            },
                        ],
                    }
                ],
                "validate_only": False,
            },
        )
        step("group configs", [(x.error_code, x.resource_type) for x in r.responses])
        r = k.request(
            44,
            1,
            {
                "resources": [
                    {
                        "resource_type": 32,
                        "resource_name": group,
                        "configs": [
                            {"name": "no.such.config", "config_operation": 0, "value": "1"}
                        ],
                    }
                ],
                "validate_only": False,
            },
        )
        step("unknown group config", [x.error_code for x in r.responses])
        # (share.delivery.count.limit and errors.deadletterqueue.topic.name are Skiff's
        # own group configs: Kafka 4.2 has the first only as a broker config.)
        keys = ["share.record.lock.duration.ms", "share.auto.offset.reset"]
        r = k.request(
            32,
            4,
            {
                "resources": [
                    {"resource_type": 32, "resource_name": group, "configuration_keys": keys}
                ],
                "include_synonyms": False,
                "include_documentation": False,
            },
        )
        step(
            "describe group configs",
            [
                (
                    x.error_code,
                    sorted((c.name, c.value, c.config_source, c.config_type) for c in x.configs),
                )
                for x in r.results
            ],
        )
    a = ShareMember("127.0.0.1", port, group)
    b = ShareMember("127.0.0.1", port, group)
    stranger = ShareMember("127.0.0.1", port, group)
    try:
        step("heartbeat without subscription", a.heartbeat(0, None).error_code)
        for _ in range(120):  # Kafka's coordinator may still be loading its partition
            r = a.heartbeat(0, [topic])
            if r.error_code not in (14, 15, 16):
                break
            time.sleep(0.5)
        step("join", (r.error_code, r.member_epoch, r.assignment is not None))
        r = b.heartbeat(0, [topic])
        step("second join", (r.error_code, r.member_epoch))
        step("larger epoch", a.heartbeat(a.member_epoch + 5).error_code)
        step("unknown member", stranger.heartbeat(3).error_code)
        step("unknown member leaves", stranger.heartbeat(-1).error_code)
        step("fetch without a session", a.fetch({tid: [0]}, epoch=1).error_code)
        step(
            "acknowledgements on the opening fetch",
            a.fetch({}, acks={tp: [(0, 0, [ACCEPT])]}, epoch=0).error_code,
        )
        for _ in range(20):  # Kafka initialises the share partition on the first fetch
            r = a.fetch({tid: [0]}, max_records=500, max_wait_ms=1000)
            if acquired_offsets(r):
                break
        step("fetch", (r.error_code, r.acquisition_lock_timeout, acquired_offsets(r).get(tp)))
        step("wrong session epoch", a.fetch({tid: [0]}, epoch=7).error_code)
        step(
            "acknowledge with epoch 0",
            a.acknowledge({tp: [(0, 0, [ACCEPT])]}, epoch=0).error_code,
        )
        r = a.acknowledge({tp: [(9, 9, [ACCEPT])]})
        step("acknowledge an offset never delivered", partition_errors(r).get(tp))
        step("acknowledge type 9", partition_errors(a.acknowledge({tp: [(1, 1, [9])]})).get(tp))
        r = a.acknowledge({tp: [(1, 1, [RENEW])]}, version=1)
        step("renew in v1", partition_errors(r).get(tp))
        step("renew in v2", partition_errors(a.acknowledge({tp: [(1, 1, [RENEW])]})).get(tp))
        step("reject", partition_errors(a.acknowledge({tp: [(1, 1, [REJECT])]})).get(tp))
        r = a.acknowledge({tp: [(0, 0, [ACCEPT]), (2, 3, [RELEASE, GAP])]})
        step("accept, release and gap", partition_errors(r).get(tp))
        step("accept twice", partition_errors(a.acknowledge({tp: [(0, 0, [ACCEPT])]})).get(tp))
        r = b.fetch({tid: [0]}, max_records=500, max_wait_ms=5000)
        step("the other member gets the released record", acquired_offsets(r).get(tp))
        step("close the session", b.fetch({}, epoch=-1).error_code)
        r = a.fetch({tid: [0]}, max_records=500, max_wait_ms=5000)
        step("released by the closed session", acquired_offsets(r).get(tp))
        with RawKafka("127.0.0.1", port) as k:
            r = k.request(
                90,
                1,
                {
                    "groups": [
                        {"group_id": group, "topics": [{"topic_name": topic, "partitions": [0]}]}
                    ]
                },
            )
            g = r.groups[0]
            p = g.topics[0].partitions[0]
            step("share group offsets", (g.error_code, p.error_code, p.start_offset, p.lag))
            r = k.request(90, 1, {"groups": [{"group_id": "no-such-" + group, "topics": None}]})
            step("offsets of an unknown group", [(x.error_code, len(x.topics)) for x in r.groups])
            r = k.request(77, 1, {"group_ids": [group, "no-such-" + group]})
            step(
                "describe",
                sorted(
                    (
                        x.group_id == group,
                        x.error_code,
                        x.group_state,
                        x.assignor_name,
                        len(x.members),
                    )
                    for x in r.groups
                ),
            )
            r = k.request(
                91,
                0,
                {
                    "group_id": group,
                    "topics": [
                        {
                            "topic_name": topic,
                            "partitions": [{"partition_index": 0, "start_offset": 0}],
                        }
                    ],
                },
            )
            step("alter offsets of a group with members", (r.error_code, r.error_message))
            r = k.request(42, 2, {"groups_names": [group]})
            step("delete a share group with members", [x.error_code for x in r.results])
            r = k.request(16, 5, {"states_filter": [], "types_filter": ["share"]})
            step(
                "list share groups",
                [
                    (x.protocol_type, x.group_state, x.group_type)
                    for x in r.groups
                    if x.group_id == group
                ],
            )
        a.fetch({}, epoch=-1)
        r = a.heartbeat(-1)
        step("leave", (r.error_code, r.member_epoch))
        step("heartbeat after leaving", a.heartbeat(2).error_code)
        b.heartbeat(-1)
        with RawKafka("127.0.0.1", port) as k:
            r = k.request(
                91,
                0,
                {
                    "group_id": group,
                    "topics": [
                        {
                            "topic_name": topic,
                            "partitions": [{"partition_index": 0, "start_offset": 1}],
                        },
                        {
                            "topic_name": "no-such-topic",
                            "partitions": [{"partition_index": 0, "start_offset": 1}],
                        },
                    ],
                },
            )
            step(
                "alter offsets of an empty group",
                (
                    r.error_code,
                    sorted(
                        (t.topic_name == topic, [p.error_code for p in t.partitions])
                        for t in r.responses
                    ),
                ),
            )
            r = k.request(
                11,
                5,
                {
                    "group_id": group,
                    "session_timeout": 10000,
                    "rebalance_timeout": 10000,
                    "member_id": "",
                    "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": b""}],
                },
            )
            step("classic JoinGroup on a share group", r.error_code)
            r = k.request(42, 2, {"groups_names": [group]})
            step("delete the empty share group", [x.error_code for x in r.results])
        # A member whose connection drops: its session and acquisitions end with it
        # (a fresh group, so nothing else is in flight).
        group2 = group + "-dropped"
        with RawKafka("127.0.0.1", port) as k:
            configs = [
                {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"},
                {"name": "share.record.lock.duration.ms", "config_operation": 0, "value": "30000"},
            ]
            k.request(
                44,
                1,
                {
                    "resources": [
                        {"resource_type": 32, "resource_name": group2, "configs": configs}
                    ],
                    "validate_only": False,
                },
            )
        c = ShareMember("127.0.0.1", port, group2)
        d = ShareMember("127.0.0.1", port, group2)
        try:
            _join_when_loaded(c, topic)
            got = None
            for _ in range(20):
                got = acquired_offsets(c.fetch({tid: [0]}, max_records=500, max_wait_ms=1000))
                if got:
                    break
            step("acquired by a member", got.get(tp) if got else None)
            c.close()
            d.join([topic])
            got = None
            for _ in range(10):  # well within the 30 s lock
                got = acquired_offsets(d.fetch({tid: [0]}, max_records=500, max_wait_ms=1000))
                if got:
                    break
            step("released when its connection closed", got.get(tp) if got else None)
        finally:
            d.close()
    finally:
        for m in (a, b, stranger):
            m.close()
    return out


def isolation_conversation(port: int, topic: str, group: str) -> list[Step]:
    """share.isolation.level on a log of plain records and committed, aborted and open
    transactions: what each level acquires, and which records come with it."""
    bootstrap = f"127.0.0.1:{port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    plain = Producer({"bootstrap.servers": bootstrap})
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}"})
    txn.init_transactions(60)

    def write(values: list[bytes], end: str | None) -> None:
        producer = plain if end is None else txn
        if end is not None:
            txn.begin_transaction()
        for v in values:
            producer.produce(topic, v, partition=0)
        assert producer.flush(30) == 0
        if end == "commit":
            txn.commit_transaction(30)
        elif end == "abort":
            txn.abort_transaction(30)

    write([b"p0"], None)
    write([b"a0", b"a1"], "commit")
    write([b"b0", b"b1"], "abort")
    write([b"p1"], None)
    write([b"c0"], "open")
    write([b"p2"], None)
    _wait_coordinator(port, group)
    with RawKafka("127.0.0.1", port) as k:
        tid = k.request(3, 12, metadata_request([topic])).topics[0].topic_id
    out: list[Step] = []
    for level in ("read_committed", "read_uncommitted"):
        name = f"{group}-{level}"
        configs = [
            {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"},
            {"name": "share.isolation.level", "config_operation": 0, "value": level},
        ]
        with RawKafka("127.0.0.1", port) as k:
            r = k.request(
                44,
                1,
                {
                    "resources": [{"resource_type": 32, "resource_name": name, "configs": configs}],
                    "validate_only": False,
                },
            )
        out.append((f"{level}: configs", r.responses[0].error_code))
        m = ShareMember("127.0.0.1", port, name)
        try:
            _join_when_loaded(m, topic)
            got: list[Any] = []
            values: list[Any] = []
            for _ in range(20):
                resp = m.fetch({tid: [0]}, max_records=500, max_wait_ms=1000)
                got = acquired_offsets(resp).get((tid, 0), [])
                if got:
                    [p] = resp.responses[0].partitions
                    values = [(r.offset, r.value) for r in fetched_records(p.records)]
                    break
            out.append((f"{level}: acquired", got))
            out.append((f"{level}: records sent", values))
        finally:
            m.close()
    txn.commit_transaction(30)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "total_seconds"):
        return int(value.total_seconds() * 1000)
    if isinstance(value, int):
        return int(value)
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kafka-version", default="4.2.0")
    parser.add_argument("--keep", action="store_true", help="keep the work dir and logs")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="share-reference-"))
    procs = Processes()
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"share-ref-{suffix}", f"share-ref-group-{suffix}"
    try:
        kafka_port = start_kafka(procs, args.kafka_version, work, 120.0, SHARE_PROPERTIES)
        skiff_port = start_skiff(procs, work)
        sides: dict[str, Callable[[], list[Step]]] = {
            "kafka": lambda: (
                conversation(kafka_port, topic, group)
                + isolation_conversation(kafka_port, f"{topic}-txn", f"{group}-txn")
            ),
            "skiff": lambda: (
                conversation(skiff_port, topic, group)
                + isolation_conversation(skiff_port, f"{topic}-txn", f"{group}-txn")
            ),
        }
        answers = {name: run() for name, run in sides.items()}
    finally:
        procs.stop_all()
        if args.keep:
            say(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    same = 0
    for (name, kafka), (_, skiff) in zip(answers["kafka"], answers["skiff"], strict=True):
        k, s = _plain(kafka), _plain(skiff)
        if k == s:
            same += 1
            print(f"SAME  {name}: {k}")
        else:
            print(f"DIFF  {name}\n      kafka: {k}\n      skiff: {s}")
    print(f"\n{len(answers['kafka'])} steps: {same} SAME, {len(answers['kafka']) - same} DIFF")
    return 0


if __name__ == "__main__":
    sys.exit(main())
