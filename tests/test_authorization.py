"""Authorization enforcement in every API (each handler asks broker.authorizer what
Kafka's KafkaApis asks; sidecar/security/checks.py).

Two sidecars share one Redis: `allowed` has no authorizer (every request allowed, as a
Kafka broker without one) and prepares the data; `denied` runs the ACL authorizer with
no ACLs and allow.everyone.if.no.acl.found=false, so its clients (User:ANONYMOUS on a
PLAINTEXT listener) may do nothing. Every API and version Skiff serves is asked through
`denied` with a well-formed request (tests/request_samples.py, made meaningful per API
below): the answer holds exactly Kafka's authorization error codes (checked against
Kafka 4.2 with the same requests), and Redis holds exactly what it held before.

EXPECTED must name every registered API: a handler added without an entry fails
test_every_api_has_an_expected_check.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
import redis
import request_samples
from conftest import RedisServer, Skiff, start_skiff, stop_process
from rawkafka import (
    RawKafka,
    Rec,
    build_batch,
    produce_request,
    read_legacy_fetch_response,
    read_legacy_produce_response,
    read_list_offsets_v0_response,
    request_type,
)

from sidecar import apis

TOPIC = request_samples.TOPIC  # the samples use it as topic, group and transactional id
NEW_TOPIC = f"{TOPIC}-new"  # a topic a denied request must not create
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
UNKNOWN_TOPIC_ID = 100
REQUEST_TIMED_OUT = 7
NOT_REQUESTED = -(2**31)  # *_authorized_operations not computed
DENIED_FLAGS = ("--authorizer-class-name", "standard", "--allow-everyone-if-no-acl-found", "false")


@dataclass(frozen=True)
class Setup:
    """What the allowed sidecar created: the topic's id (requests by id name it)."""

    topic_id: uuid.UUID


Prepare = Callable[[dict[str, Any], Setup, int], None]
Verify = Callable[[Any, int], None]


@dataclass(frozen=True)
class Denied:
    """What a principal without permission gets from one API: the set of nonzero error
    codes anywhere in the answer (None: the API has no authorization of its own), how
    to make the sample request meaningful, and more to check in the answer."""

    codes: frozenset[int] | Callable[[int], frozenset[int]] | None
    prepare: Prepare | None = None
    verify: Verify | None = None


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    """Set a dotted path, through the first item of arrays, where the version has it."""
    *heads, last = path.split(".")
    node: Any = data
    for head in heads:
        if head not in node:
            return
        node = node[head]
        if isinstance(node, list):
            node = node[0]
    if last in node:
        node[last] = value


def sets(**values: Any) -> Prepare:
    """A prepare that sets fields (dotted paths written with __)."""

    def prepare(data: dict[str, Any], setup: Setup, version: int) -> None:
        for path, value in values.items():
            _set(data, path.replace("__", "."), value(setup) if callable(value) else value)

    return prepare


def both(*steps: Prepare) -> Prepare:
    def prepare(data: dict[str, Any], setup: Setup, version: int) -> None:
        for step in steps:
            step(data, setup, version)

    return prepare


def _topic_id(setup: Setup) -> uuid.UUID:
    return setup.topic_id


def only(codes: int | None = None) -> frozenset[int]:
    return frozenset() if codes is None else frozenset({codes})


TOPIC_DENIED = only(TOPIC_AUTHORIZATION_FAILED)
GROUP_DENIED = only(GROUP_AUTHORIZATION_FAILED)
CLUSTER_DENIED = only(CLUSTER_AUTHORIZATION_FAILED)
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64


def _metadata_prepare(data: dict[str, Any], setup: Setup, version: int) -> None:
    # One existing topic (hidden) and one that auto-creation must not create.
    data["topics"] = [{"name": TOPIC, "topic_id": None}, {"name": NEW_TOPIC, "topic_id": None}]
    data["include_cluster_authorized_operations"] = True
    data["include_topic_authorized_operations"] = True


def _metadata_verify(answer: Any, version: int) -> None:
    assert {t.name for t in answer.topics} == {TOPIC, NEW_TOPIC}
    for t in answer.topics:
        assert t.partitions == ()
        if version >= 8:
            assert t.topic_authorized_operations == NOT_REQUESTED
        if version >= 10:
            assert t.topic_id in (None, uuid.UUID(int=0))  # the id is not disclosed either
    if 8 <= version <= 10:
        assert answer.cluster_authorized_operations == 0


def _describe_cluster_verify(answer: Any, version: int) -> None:
    assert answer.cluster_authorized_operations == 0
    assert answer.brokers  # the cluster itself is no secret (Kafka checks nothing)


def _no_groups(answer: Any, version: int) -> None:
    assert answer.groups == ()


def _ops_not_given(answer: Any, version: int) -> None:
    for g in answer.groups:
        assert getattr(g, "authorized_operations", NOT_REQUESTED) == NOT_REQUESTED
        assert g.members == ()


def _no_message(answer: Any, version: int) -> None:
    assert answer.error_message is None


def _no_log_dirs(answer: Any, version: int) -> None:
    assert answer.results == ()


def _fetch_prepare(data: dict[str, Any], setup: Setup, version: int) -> None:
    # A consumer's full fetch (a follower's, replica id >= 0, needs CLUSTER_ACTION).
    sets(
        replica_id=-1,
        replica_state__replica_id=-1,
        session_id=0,
        session_epoch=-1,
        topics__topic_id=_topic_id,
        topics__topic=TOPIC,
        topics__partitions__fetch_offset=0,
        topics__partitions__partition_max_bytes=1 << 20,
        max_bytes=1 << 20,
    )(data, setup, version)
    data["forgotten_topics_data"] = []


ALTER_RETENTION = {"name": "retention.ms", "value": "1000", "config_operation": 0}

# Kafka's checks per API (KafkaApis / the group and share coordinators), as Skiff answers
# them; docs/security.md "What each API checks" says the same in words.
EXPECTED: dict[int, Denied] = {
    # Produce: WRITE on each topic (transactional batches: WRITE on the transactional id;
    # v13 names the topic by id, WRITE is asked on its name)
    0: Denied(TOPIC_DENIED, sets(transactional_id=None, topic_data__topic_id=_topic_id)),
    # Fetch: READ on each topic
    1: Denied(TOPIC_DENIED, _fetch_prepare),
    # ListOffsets: DESCRIBE on each topic
    2: Denied(TOPIC_DENIED, sets(replica_id=-1, topics__partitions__partition_index=0)),
    # Metadata: DESCRIBE on each topic; auto-creation CREATE on the cluster or topic
    3: Denied(TOPIC_DENIED, _metadata_prepare, _metadata_verify),
    # OffsetCommit: READ on the group, READ on each topic (v10: the topic its id names)
    8: Denied(GROUP_DENIED, sets(topics__topic_id=_topic_id)),
    # OffsetFetch: DESCRIBE on the group, DESCRIBE on each topic (v10: by id, as above)
    9: Denied(GROUP_DENIED, sets(groups__topics__topic_id=_topic_id)),
    # FindCoordinator: DESCRIBE on the group (or the transactional id)
    10: Denied(GROUP_DENIED, sets(key_type=0)),
    # JoinGroup, Heartbeat, LeaveGroup, SyncGroup: READ on the group
    11: Denied(GROUP_DENIED),
    12: Denied(GROUP_DENIED),
    13: Denied(GROUP_DENIED),
    14: Denied(GROUP_DENIED),
    # DescribeGroups: DESCRIBE on each group
    15: Denied(GROUP_DENIED, None, _ops_not_given),
    # ListGroups: DESCRIBE on the cluster, else only the groups one may DESCRIBE
    16: Denied(only(), sets(states_filter=[], types_filter=[]), _no_groups),
    # SaslHandshake, SaslAuthenticate: before any principal exists
    17: Denied(None),
    # ApiVersions: nothing to authorize
    18: Denied(None),
    # CreateTopics: CREATE on the cluster or the topic
    19: Denied(
        TOPIC_DENIED,
        sets(
            topics__name=NEW_TOPIC,
            topics__assignments=[],
            topics__configs=[],
            topics__num_partitions=1,
            validate_only=False,
        ),
    ),
    # DeleteTopics: DELETE on each topic (by id: DESCRIBE too)
    20: Denied(TOPIC_DENIED, sets(topics__topic_id=None)),
    # DeleteRecords: DELETE on each topic
    21: Denied(TOPIC_DENIED),
    # InitProducerId: WRITE on the transactional id (idempotent: IDEMPOTENT_WRITE on the
    # cluster, test_idempotent_producer_needs_idempotent_write)
    22: Denied(only(TRANSACTIONAL_ID_AUTHORIZATION_FAILED)),
    # AddPartitionsToTxn: WRITE on the transactional id (v4+, sent by brokers:
    # CLUSTER_ACTION on the cluster); AddOffsetsToTxn, EndTxn, TxnOffsetCommit: WRITE on
    # the transactional id first
    24: Denied(lambda v: only(TRANSACTIONAL_ID_AUTHORIZATION_FAILED) if v <= 3 else CLUSTER_DENIED),
    25: Denied(only(TRANSACTIONAL_ID_AUTHORIZATION_FAILED)),
    26: Denied(only(TRANSACTIONAL_ID_AUTHORIZATION_FAILED)),
    28: Denied(only(TRANSACTIONAL_ID_AUTHORIZATION_FAILED)),
    # WriteTxnMarkers: CLUSTER_ACTION on the cluster
    27: Denied(CLUSTER_DENIED),
    # DescribeProducers: READ on each topic
    61: Denied(TOPIC_DENIED),
    # DescribeTransactions: DESCRIBE on each transactional id
    65: Denied(only(TRANSACTIONAL_ID_AUTHORIZATION_FAILED)),
    # ListTransactions: ids one may not DESCRIBE are left out
    66: Denied(only()),
    # DescribeAcls, CreateAcls, DeleteAcls: DESCRIBE / ALTER / ALTER on the cluster
    29: Denied(CLUSTER_DENIED),
    30: Denied(CLUSTER_DENIED),
    31: Denied(CLUSTER_DENIED),
    # DescribeConfigs: DESCRIBE_CONFIGS on the topic (broker resources: the cluster)
    32: Denied(TOPIC_DENIED, sets(resources__resource_type=2)),
    # AlterConfigs: ALTER_CONFIGS on the topic (broker resources: the cluster)
    33: Denied(
        TOPIC_DENIED,
        sets(resources__resource_type=2, resources__configs=[ALTER_RETENTION], validate_only=False),
    ),
    # DescribeLogDirs: DESCRIBE on the cluster (v3+ says so, before: no log dirs)
    35: Denied(lambda v: CLUSTER_DENIED if v >= 3 else only(), None, _no_log_dirs),
    # SaslAuthenticate: see 17
    36: Denied(None),
    # CreatePartitions: ALTER on each topic
    37: Denied(TOPIC_DENIED, sets(topics__count=3, topics__assignments=None, validate_only=False)),
    # DeleteGroups: DELETE on each group
    42: Denied(GROUP_DENIED),
    # IncrementalAlterConfigs: ALTER_CONFIGS on the topic (groups: the group)
    44: Denied(
        TOPIC_DENIED,
        sets(resources__resource_type=2, resources__configs=[ALTER_RETENTION], validate_only=False),
    ),
    # OffsetDelete: DELETE on the group, READ on each topic
    47: Denied(GROUP_DENIED),
    # DescribeClientQuotas: DESCRIBE_CONFIGS on the cluster
    48: Denied(CLUSTER_DENIED),
    # AlterClientQuotas: ALTER_CONFIGS on the cluster
    49: Denied(CLUSTER_DENIED),
    # DescribeUserScramCredentials, AlterUserScramCredentials: DESCRIBE / ALTER on the cluster
    50: Denied(CLUSTER_DENIED),
    51: Denied(CLUSTER_DENIED),
    # DescribeCluster: nothing (its authorized operations: 0 without DESCRIBE)
    60: Denied(only(), None, _describe_cluster_verify),
    # ConsumerGroupHeartbeat: READ on the group, DESCRIBE on the subscribed topics
    68: Denied(GROUP_DENIED),
    # ConsumerGroupDescribe: DESCRIBE on each group
    69: Denied(GROUP_DENIED, None, _ops_not_given),
    # StreamsGroupHeartbeat: READ on the group, DESCRIBE on the topology's topics
    88: Denied(GROUP_DENIED),
    # StreamsGroupDescribe: DESCRIBE on each group
    89: Denied(GROUP_DENIED, None, _ops_not_given),
    # StreamsGroupTopologyDescriptionUpdate: READ on the group (a null message, as
    # Kafka 4.4's KafkaApis sends)
    93: Denied(GROUP_DENIED, None, _no_message),
    # ShareGroupHeartbeat: READ on the group, DESCRIBE on the subscribed topics
    76: Denied(GROUP_DENIED),
    # ShareGroupDescribe: DESCRIBE on each group
    77: Denied(GROUP_DENIED, None, _ops_not_given),
    # ShareFetch, ShareAcknowledge: READ on the group, READ on each topic
    78: Denied(GROUP_DENIED, sets(topics__topic_id=_topic_id)),
    79: Denied(GROUP_DENIED, sets(topics__topic_id=_topic_id)),
    # DescribeShareGroupOffsets: DESCRIBE on each group, DESCRIBE on each topic
    90: Denied(GROUP_DENIED),
    # AlterShareGroupOffsets: READ on the group, READ on each topic
    91: Denied(GROUP_DENIED),
    # OffsetForLeaderEpoch: CLUSTER_ACTION on the cluster, else DESCRIBE on each topic
    23: Denied(TOPIC_DENIED, sets(replica_id=-1, topics__partitions__partition=0)),
    # DescribeTopicPartitions: DESCRIBE on each topic
    75: Denied(TOPIC_DENIED, sets(cursor=None)),
    # ListConfigResources: DESCRIBE_CONFIGS on the cluster
    74: Denied(CLUSTER_DENIED),
    # GetTelemetrySubscriptions, PushTelemetry: nothing to authorize (as Kafka)
    71: Denied(None),
    72: Denied(None),
    # DeleteShareGroupOffsets: DELETE on the group, READ on each topic
    92: Denied(GROUP_DENIED),
    # Create/Renew/Expire/DescribeDelegationToken: a SASL session first (KafkaApis
    # allowTokenRequests); on this PLAINTEXT listener DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    # before any ACL (CREATE_TOKENS, DESCRIBE_TOKENS: tests/test_delegation_tokens.py)
    38: Denied(only(DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)),
    39: Denied(only(DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)),
    40: Denied(only(DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)),
    41: Denied(only(DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)),
    # ElectLeaders: ALTER on the cluster
    43: Denied(CLUSTER_DENIED),
    # UpdateFeatures: ALTER on the cluster
    57: Denied(CLUSTER_DENIED),
    # AlterPartitionReassignments: ALTER on the cluster
    45: Denied(CLUSTER_DENIED),
    # AlterReplicaLogDirs: ALTER on the cluster
    34: Denied(CLUSTER_DENIED),
    # DescribeQuorum: DESCRIBE on the cluster
    55: Denied(CLUSTER_DENIED),
    # UnregisterBroker, UnregisterController, Add/RemoveRaftVoter: ALTER on the cluster
    64: Denied(CLUSTER_DENIED),
    94: Denied(CLUSTER_DENIED),
    80: Denied(CLUSTER_DENIED),
    81: Denied(CLUSTER_DENIED),
    # ListPartitionReassignments: DESCRIBE on the cluster
    46: Denied(CLUSTER_DENIED),
}


def test_every_api_has_an_expected_check() -> None:
    missing = sorted(
        f"{key} ({module.__name__.rsplit('.', 1)[-1]})"
        for key, module in apis.HANDLERS.items()
        if key not in EXPECTED
    )
    assert not missing, (
        f"APIs without an entry in EXPECTED (what a principal without permission gets): "
        f"{missing}; add what Kafka's broker checks for each to its handler and here"
    )


# -- the sidecars -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sidecars(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RedisServer, Skiff, Skiff]]:
    from conftest import start_redis

    tmp = tmp_path_factory.mktemp("authorization")
    server = start_redis(tmp / "redis")
    allowed = denied = None
    try:
        allowed = start_skiff(tmp / "allowed.log", "--redis-url", server.url)
        denied = start_skiff(tmp / "denied.log", "--redis-url", server.url, *DENIED_FLAGS)
        yield server, allowed, denied
    finally:
        for side in (denied, allowed):
            if side is not None:
                stop_process(side.proc)
        stop_process(server.proc)


def _prepare_data(allowed: Skiff) -> Setup:
    """A topic of two partitions with records, and a group with committed offsets."""
    with RawKafka("127.0.0.1", allowed.port) as client:
        created = client.request(
            19,
            7,
            {
                "topics": [
                    {
                        "name": TOPIC,
                        "num_partitions": 2,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout": 10_000,
                "validate_only": False,
            },
        )
        assert created.topics[0].error_code == 0, created
        batch = build_batch([Rec(b"v1", b"k1"), Rec(b"v2", b"k2")])
        for partition in (0, 1):
            produced = client.request(0, 9, produce_request(TOPIC, {partition: batch}))
            assert produced.responses[0].partition_responses[0].error_code == 0
        committed = client.request(
            8,
            8,
            {
                "group_id": TOPIC,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [
                    {
                        "name": TOPIC,
                        "partitions": [
                            {
                                "partition_index": p,
                                "committed_offset": 1,
                                "committed_leader_epoch": -1,
                                "committed_metadata": "",
                            }
                            for p in (0, 1)
                        ],
                    }
                ],
            },
        )
        assert {p.error_code for t in committed.topics for p in t.partitions} == {0}, committed
        return Setup(created.topics[0].topic_id)


# Keys that change by themselves: the sidecars' registrations (heartbeats).
CHANGING_BY_THEMSELVES = frozenset({b"skiff:brokers"})


def _snapshot(client: redis.Redis) -> dict[bytes, Any]:
    """Every key Redis holds with its value, except the ones that change by themselves
    (those above, and keys with a time to live: group leases)."""
    out: dict[bytes, Any] = {}
    for key in client.scan_iter(count=1000):
        if key in CHANGING_BY_THEMSELVES or client.pttl(key) >= 0:
            continue
        kind = client.type(key)
        if kind == b"string":
            out[key] = client.get(key)
        elif kind == b"hash":
            out[key] = client.hgetall(key)
        elif kind == b"set":
            out[key] = client.smembers(key)
        elif kind == b"zset":
            out[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"list":
            out[key] = client.lrange(key, 0, -1)
        elif kind == b"stream":
            out[key] = client.xrange(key)
        else:
            out[key] = kind
    return out


def _error_codes(answer: Any) -> set[int]:
    """Every nonzero *error_code anywhere in a decoded answer."""
    found: set[int] = set()

    def walk(node: Any) -> None:
        if isinstance(node, tuple | list):
            for item in node:
                walk(item)
        elif hasattr(node, "__dataclass_fields__"):
            for name in node.__dataclass_fields__:
                value = getattr(node, name)
                if name.endswith("error_code"):
                    code = int(value.value if isinstance(value, Enum) else value)
                    if code:
                        found.add(code)
                else:
                    walk(value)

    walk(answer)
    return found


def _read_delete_topics_v0(version: int, frame: bytes) -> Any:
    (count,), pos, topics = struct.unpack_from(">i", frame, 4), 8, []
    for _ in range(count):
        (size,) = struct.unpack_from(">h", frame, pos)
        name = frame[pos + 2 : pos + 2 + size].decode()
        (code,) = struct.unpack_from(">h", frame, pos + 2 + size)
        topics.append({"name": name, "error_code": code})
        pos += 4 + size
    return topics


def _read_describe_configs_v0(version: int, frame: bytes) -> Any:
    # throttle time, one resource: its error code first
    (count, code) = struct.unpack_from(">ih", frame, 8)
    return [{"error_code": code}] if count else []


def _read_describe_log_dirs_v0(version: int, frame: bytes) -> Any:
    # v0 is v1 on the wire: throttle time, then the number of log dirs
    (count,) = struct.unpack_from(">i", frame, 8)
    assert count == 0, "log dirs shown to a principal without DESCRIBE on the cluster"
    return []


# The old versions Skiff decodes by hand (request_samples: legacy bodies), read from the
# frame (correlation id first) as plain data: the error codes are every "error_code".
LEGACY_READERS: dict[int, Callable[[int, bytes], Any]] = {
    0: read_legacy_produce_response,
    1: read_legacy_fetch_response,
    2: lambda version, frame: read_list_offsets_v0_response(frame),
    20: _read_delete_topics_v0,
    32: _read_describe_configs_v0,
    35: _read_describe_log_dirs_v0,
}


def _plain_error_codes(data: Any) -> set[int]:
    if isinstance(data, dict):
        own = {data["error_code"]} if data.get("error_code") else set()
        return own.union(*(_plain_error_codes(v) for v in data.values()))
    if isinstance(data, list):
        return set().union(*(_plain_error_codes(v) for v in data))
    return set()


def _request(key: int, version: int, setup: Setup) -> dict[str, Any]:
    data = request_samples.sample(request_type(key, version))
    prepare = EXPECTED[key].prepare
    if prepare is not None:
        prepare(data, setup, version)
    return data


def test_denied_principal_gets_kafkas_errors_and_changes_nothing(
    sidecars: tuple[RedisServer, Skiff, Skiff], tmp_path: Path
) -> None:
    server, allowed, denied = sidecars
    setup = _prepare_data(allowed)
    store = server.client()
    before = _snapshot(store)
    failures = []
    for key, version in request_samples.kio_decoded():
        expected = EXPECTED[key]
        with RawKafka("127.0.0.1", denied.port, timeout=20) as client:
            answer = client.request(key, version, _request(key, version, setup))
        codes = expected.codes(version) if callable(expected.codes) else expected.codes
        name = apis.HANDLERS[key].__name__.rsplit(".", 1)[-1]
        if codes is not None and _error_codes(answer) != set(codes):
            failures.append(f"{name} v{version}: codes {_error_codes(answer)}, want {set(codes)}")
        if expected.verify is not None:
            try:
                expected.verify(answer, version)
            except AssertionError as exc:
                failures.append(f"{name} v{version}: {exc!r} in {answer}")
        after = _snapshot(store)
        if after != before:
            changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            failures.append(f"{name} v{version} changed Redis keys {changed}")
            before = after
    assert not failures, "\n".join(failures)
    assert "Traceback" not in denied.log()


def test_denied_principal_in_old_versions(sidecars: tuple[RedisServer, Skiff, Skiff]) -> None:
    """The versions Skiff decodes by hand (Produce v0-v2, Fetch v0-v3, ...) go through the
    same checks."""
    server, allowed, denied = sidecars
    store = server.client()
    before = _snapshot(store)
    by_kio = set(request_samples.kio_decoded())
    legacy = [(k, v) for k, v in request_samples.served() if (k, v) not in by_kio]
    assert {k for k, _ in legacy} == set(LEGACY_READERS)
    for key, version in legacy:
        with RawKafka("127.0.0.1", denied.port, timeout=20) as client:
            body = request_samples.body(key, version)
            client.send_raw(request_samples.frame(key, version, body, 7))
            frame = client.recv_raw()
        answer = LEGACY_READERS[key](version, frame)
        expected = EXPECTED[key].codes
        codes = expected(version) if callable(expected) else expected
        assert _plain_error_codes(answer) == set(codes or ()), (key, version, answer)
        assert _snapshot(store) == before, (key, version)


def start_permissive(own_redis: RedisServer, tmp_path: Path) -> Skiff:
    """A sidecar with the standard authorizer that allows what no ACL names."""
    return start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--authorizer-class-name",
        "standard",
        "--allow-everyone-if-no-acl-found",
        "true",
    )


def test_produce_v13_by_topic_id_checks_write_on_its_name(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """Produce v13 resolves each topic id to its topic and asks WRITE on the name, as
    Kafka does; an unknown id has no name to ask about: UNKNOWN_TOPIC_ID. v12 by name
    answers the same."""
    side = start_permissive(own_redis, tmp_path)  # topics without ACLs: allowed
    open_topic, closed_topic = f"{TOPIC}-open", f"{TOPIC}-closed"
    try:
        with RawKafka("127.0.0.1", side.port) as client:
            ids = {}
            for name in (open_topic, closed_topic):
                client.request(3, 12, {"topics": [{"name": name}]})  # auto-created
                [t] = client.request(3, 12, {"topics": [{"name": name}]}).topics
                assert t.error_code == 0, t
                ids[name] = t.topic_id
            deny_write = {
                "resource_type": 2,  # TOPIC
                "resource_name": closed_topic,
                "resource_pattern_type": 3,  # LITERAL
                "principal": "User:ANONYMOUS",
                "host": "*",
                "operation": 4,  # WRITE
                "permission_type": 2,  # DENY
            }
            created = client.request(30, 3, {"creations": [deny_write]})
            assert created.results[0].error_code == 0, created
            unknown = uuid.uuid4()
            batch = build_batch([Rec(b"v")])
            body = {
                "acks": -1,
                "timeout": 5000,
                "topic_data": [
                    {"topic_id": i, "partition_data": [{"index": 0, "records": batch}]}
                    for i in (ids[open_topic], ids[closed_topic], unknown)
                ],
            }
            answer = client.request(0, 13, body)
            assert [
                (t.topic_id, [(p.error_code, p.base_offset) for p in t.partition_responses])
                for t in answer.responses
            ] == [
                (ids[open_topic], [(0, 0)]),
                (ids[closed_topic], [(TOPIC_AUTHORIZATION_FAILED, -1)]),
                (unknown, [(UNKNOWN_TOPIC_ID, -1)]),
            ]
            by_name = client.request(
                0, 12, {**body, "topic_data": [{**body["topic_data"][0], "name": n} for n in ids]}
            )
            assert [
                (t.name, [(p.error_code, p.base_offset) for p in t.partition_responses])
                for t in by_name.responses
            ] == [(open_topic, [(0, 1)]), (closed_topic, [(TOPIC_AUTHORIZATION_FAILED, -1)])]
        logs = own_redis.client()
        assert logs.xlen(f"skiff:{{{open_topic}/0}}:log") == 2  # one batch by id, one by name
        assert logs.xlen(f"skiff:{{{closed_topic}/0}}:log") == 0
    finally:
        stop_process(side.proc)


def test_broker_configs_stay_denied_while_redis_is_down(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """A DescribeConfigs that Redis cannot serve (a topic it must look up) is answered by
    unavailable.py, which describes broker resources from memory: only to a principal
    that may DESCRIBE_CONFIGS the cluster."""
    side = start_permissive(own_redis, tmp_path)  # topics have no ACLs: allowed
    deny = {
        "resource_type": 4,
        "resource_name": "kafka-cluster",
        "resource_pattern_type": 3,
        "principal": "User:ANONYMOUS",
        "host": "*",
        "operation": 10,  # DESCRIBE_CONFIGS
        "permission_type": 2,  # DENY
    }
    try:
        with RawKafka("127.0.0.1", side.port) as client:
            created = client.request(30, 3, {"creations": [deny]})
            assert created.results[0].error_code == 0, created
            node = client.request(60, 1, {"include_cluster_authorized_operations": False})
            node_id = str(node.brokers[0].broker_id)
        stop_process(own_redis.proc)
        body = {
            "resources": [
                {"resource_type": 2, "resource_name": "never-seen", "configuration_keys": None},
                {"resource_type": 4, "resource_name": node_id, "configuration_keys": None},
            ],
            "include_synonyms": False,
            "include_documentation": False,
        }
        with RawKafka("127.0.0.1", side.port, timeout=60) as client:
            answer = client.request(32, 4, body)
        assert [(int(r.error_code), r.configs) for r in answer.results] == [
            (REQUEST_TIMED_OUT, ()),
            (CLUSTER_AUTHORIZATION_FAILED, ()),
        ], answer
    finally:
        stop_process(side.proc)


def test_offsets_by_topic_id_authorize_the_topic_the_id_names(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """OffsetCommit and OffsetFetch v10 name topics by id: READ (commit) and DESCRIBE
    (fetch) are asked of the topic the id names, as for a name; an id no topic has
    answers UNKNOWN_TOPIC_ID (there is no name to authorize), as Kafka's KafkaApis."""
    side = start_permissive(own_redis, tmp_path)  # the group and `open` have no ACLs: allowed
    group, names = "ids-group", ("open", "shut")
    unknown = uuid.uuid4()

    def commit(version: int, topics: list[dict[str, Any]]) -> Any:
        body = {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": topics,
        }
        return client.request(8, version, body)

    def parts(offset: int) -> list[dict[str, Any]]:
        return [
            {
                "partition_index": 0,
                "committed_offset": offset,
                "committed_leader_epoch": -1,
                "committed_metadata": "",
            }
        ]

    def fetch(topics: list[dict[str, Any]] | None) -> Any:
        body = {"groups": [{"group_id": group, "topics": topics}], "require_stable": False}
        [answer] = client.request(9, 10, body).groups
        assert answer.error_code == 0
        return [
            (t.topic_id, [(p.committed_offset, int(p.error_code)) for p in t.partitions])
            for t in answer.topics
        ]

    try:
        with RawKafka("127.0.0.1", side.port) as client:
            ids = {}
            for name in names:
                topic = {
                    "name": name,
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
                body = {"topics": [topic], "timeout": 10_000, "validate_only": False}
                [created] = client.request(19, 7, body).topics
                assert created.error_code == 0, created
                ids[name] = created.topic_id
            done = commit(9, [{"name": n, "partitions": parts(7)} for n in names])
            assert {p.error_code for t in done.topics for p in t.partitions} == {0}, done
            denials = [
                {
                    "resource_type": 2,  # TOPIC
                    "resource_name": "shut",
                    "resource_pattern_type": 3,  # LITERAL
                    "principal": "User:ANONYMOUS",
                    "host": "*",
                    "operation": operation,
                    "permission_type": 2,  # DENY
                }
                for operation in (3, 8)  # READ, DESCRIBE
            ]
            created_acls = client.request(30, 3, {"creations": denials})
            assert {r.error_code for r in created_acls.results} == {0}, created_acls
            by_id = [
                {"topic_id": ids["open"], "partitions": parts(8)},
                {"topic_id": ids["shut"], "partitions": parts(8)},
                {"topic_id": unknown, "partitions": parts(8)},
            ]
            answer = commit(10, by_id)
            # Kafka 4: the topics refused before the coordinator first, in request order
            assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in answer.topics] == [
                (ids["shut"], [TOPIC_AUTHORIZATION_FAILED]),
                (unknown, [100]),  # UNKNOWN_TOPIC_ID
                (ids["open"], [0]),
            ]
            wanted = [{"topic_id": t["topic_id"], "partition_indexes": [0]} for t in by_id]
            assert fetch(wanted) == [
                (ids["open"], [(8, 0)]),
                (ids["shut"], [(-1, TOPIC_AUTHORIZATION_FAILED)]),
                (unknown, [(-1, 100)]),
            ]
            assert fetch(None) == [(ids["open"], [(8, 0)])]  # `shut` is left out
    finally:
        stop_process(side.proc)
