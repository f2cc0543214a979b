"""Every advertised API version, spoken raw over a socket to the session's Skiff
(tests/rawkafka.py encodes with kio; nothing of the sidecar is imported)."""

from __future__ import annotations

import datetime
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis
from conftest import RedisServer, Skiff, start_redis, start_skiff, stop_process
from formats import FORMATS
from log_helpers import create
from rawkafka import (
    ConnectionClosed,
    RawKafka,
    Rec,
    build_batch,
    encode,
    fetch_request,
    fetched_records,
    list_offsets_request,
    make_request,
    metadata_request,
    produce_request,
    read_batches,
    tagged_fields,
    uvarint,
)

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS, INIT_PRODUCER_ID = 18, 19, 20, 22

NONE = 0
OFFSET_OUT_OF_RANGE = 1
INVALID_REQUEST = 42
INVALID_RECORD = 87
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
UNKNOWN_TOPIC_ID = 100
REBOOTSTRAP_REQUIRED = 129

# What ApiVersions advertises and Skiff serves. The old versions kio has no schema
# for (Produce v0-v2, Fetch v0-v3, ListOffsets v0: legacy message sets) are tested in
# test_legacy_formats.py; the tests here build kio requests, so they start above them.
ADVERTISED = {
    PRODUCE: (0, 13),
    FETCH: (0, 18),
    LIST_OFFSETS: (0, 11),
    METADATA: (0, 13),
    API_VERSIONS: (0, 5),
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (0, 6),
    INIT_PRODUCER_ID: (0, 5),
    24: (0, 5),  # AddPartitionsToTxn
    25: (0, 4),  # AddOffsetsToTxn
    26: (0, 5),  # EndTxn
    28: (0, 6),  # TxnOffsetCommit
    27: (1, 2),  # WriteTxnMarkers
    61: (0, 0),  # DescribeProducers
    65: (0, 0),  # DescribeTransactions
    66: (0, 2),  # ListTransactions
    8: (2, 10),  # OffsetCommit
    9: (1, 10),  # OffsetFetch
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 6),  # DescribeGroups
    16: (0, 5),  # ListGroups
    42: (0, 3),  # DeleteGroups
    47: (0, 0),  # OffsetDelete
    32: (0, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    37: (0, 3),  # CreatePartitions
    44: (0, 1),  # IncrementalAlterConfigs
    60: (0, 2),  # DescribeCluster
    21: (0, 2),  # DeleteRecords
    35: (0, 5),  # DescribeLogDirs
    76: (1, 1),  # ShareGroupHeartbeat
    77: (1, 1),  # ShareGroupDescribe
    78: (1, 2),  # ShareFetch
    79: (1, 2),  # ShareAcknowledge
    90: (0, 1),  # DescribeShareGroupOffsets
    91: (0, 0),  # AlterShareGroupOffsets
    92: (0, 0),  # DeleteShareGroupOffsets
    29: (1, 3),  # DescribeAcls
    30: (1, 3),  # CreateAcls
    31: (1, 3),  # DeleteAcls
    17: (0, 1),  # SaslHandshake
    36: (0, 2),  # SaslAuthenticate
    48: (0, 1),  # DescribeClientQuotas
    49: (0, 1),  # AlterClientQuotas
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    38: (1, 3),  # CreateDelegationToken
    39: (1, 2),  # RenewDelegationToken
    40: (1, 2),  # ExpireDelegationToken
    41: (1, 3),  # DescribeDelegationToken
    43: (0, 2),  # ElectLeaders
    57: (0, 2),  # UpdateFeatures
    45: (0, 1),  # AlterPartitionReassignments
    34: (1, 2),  # AlterReplicaLogDirs
    55: (0, 2),  # DescribeQuorum
    64: (0, 0),  # UnregisterBroker
    80: (0, 1),  # AddRaftVoter
    81: (0, 0),  # RemoveRaftVoter
    94: (0, 0),  # UnregisterController
    46: (0, 0),  # ListPartitionReassignments
    23: (2, 4),  # OffsetForLeaderEpoch
    74: (0, 1),  # ListConfigResources
    75: (0, 0),  # DescribeTopicPartitions
    68: (0, 1),  # ConsumerGroupHeartbeat
    69: (0, 1),  # ConsumerGroupDescribe
    88: (0, 1),  # StreamsGroupHeartbeat
    89: (0, 1),  # StreamsGroupDescribe
    93: (0, 0),  # StreamsGroupTopologyDescriptionUpdate
}
# DeleteTopics v0 and DescribeConfigs v0 have no kio schema: tests/test_admin_topics.py
# and test_admin_configs.py send them by hand.
SERVED = {
    **ADVERTISED,
    PRODUCE: (3, 13),
    FETCH: (4, 18),
    LIST_OFFSETS: (1, 11),
    DELETE_TOPICS: (1, 6),
    32: (1, 4),
}


def versions(api_key: int) -> range:
    lo, hi = SERVED[api_key]
    return range(lo, hi + 1)


ZERO_UUID = uuid.UUID(int=0)
BASE_TS = 1_600_000_000_000


@pytest.fixture
def kafka(skiff: Skiff) -> Iterator[RawKafka]:
    with RawKafka("127.0.0.1", skiff.port) as client:
        yield client


def new_topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def topic_id_of(kafka: RawKafka, topic: str) -> uuid.UUID:
    resp = kafka.request(METADATA, 12, metadata_request([topic], allow_auto_topic_creation=False))
    [t] = resp.topics
    assert t.error_code == NONE, t
    assert isinstance(t.topic_id, uuid.UUID) and t.topic_id != ZERO_UUID
    return t.topic_id


def produce(
    kafka: RawKafka,
    topic: str,
    records: list[Rec],
    partition: int = 0,
    version: int = 9,
    topic_id: uuid.UUID | None = None,
) -> int:
    """Produce one batch (v13+: to topic_id); returns its base offset."""
    resp = kafka.request(
        PRODUCE,
        version,
        produce_request(topic, {partition: build_batch(records)}, topic_id=topic_id),
    )
    [t] = resp.responses
    [p] = t.partition_responses
    assert p.error_code == NONE, p
    return int(p.base_offset)


def fetch_partition(
    kafka: RawKafka,
    version: int,
    topic: str,
    offset: int,
    topic_id: uuid.UUID | None = None,
    **kwargs: Any,
) -> Any:
    resp = kafka.request(FETCH, version, fetch_request(topic, {0: offset}, topic_id, **kwargs))
    [t] = resp.responses
    [p] = t.partitions
    return p


def topic_exists(redis_server: RedisServer, topic: str) -> bool:
    return bool(redis_server.client().hexists("skiff:topics", topic))


# -- ApiVersions -------------------------------------------------------------------------


def ranges(resp: Any) -> dict[int, tuple[int, int]]:
    out = {int(a.api_key): (int(a.min_version), int(a.max_version)) for a in resp.api_keys}
    assert len(out) == len(resp.api_keys), "an API key is listed twice"
    return out


@pytest.mark.parametrize("version", versions(API_VERSIONS))
def test_api_versions(kafka: RawKafka, version: int) -> None:
    resp = kafka.request(
        API_VERSIONS,
        version,
        {"client_software_name": "rawkafka", "client_software_version": "0.1"},
    )
    assert resp.error_code == NONE
    assert ranges(resp) == ADVERTISED
    if version >= 1:
        assert resp.throttle_time == datetime.timedelta(0)


@pytest.mark.parametrize("name", ["", "bad name!", "-dash-first", "dot-last."])
def test_api_versions_refuses_an_invalid_client_software_name(kafka: RawKafka, name: str) -> None:
    # As Kafka (ApiVersionsRequest.isValid): INVALID_REQUEST and no API list.
    resp = kafka.request(
        API_VERSIONS, 3, {"client_software_name": name, "client_software_version": "1.0"}
    )
    assert (resp.error_code, resp.api_keys) == (INVALID_REQUEST, ())


def test_api_versions_v5_checks_the_cluster_and_node_named(kafka: RawKafka, skiff: Skiff) -> None:
    """KIP-1242: a client naming the cluster and node it means to reach gets the API list
    from that node, REBOOTSTRAP_REQUIRED from another cluster or node, and
    INVALID_REQUEST when it names only one of them (Kafka's isValid)."""
    meta = kafka.request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
    me = next(b.node_id for b in meta.brokers if b.port == skiff.port)
    software = {"client_software_name": "rawkafka", "client_software_version": "0.1"}

    def answer(**named: Any) -> tuple[int, dict[int, tuple[int, int]]]:
        resp = kafka.request(API_VERSIONS, 5, {**software, **named})
        return int(resp.error_code), ranges(resp)

    assert answer() == (NONE, ADVERTISED)
    assert answer(cluster_id=meta.cluster_id, node_id=me) == (NONE, ADVERTISED)
    assert answer(cluster_id="another-cluster", node_id=me) == (REBOOTSTRAP_REQUIRED, {})
    assert answer(cluster_id=meta.cluster_id, node_id=me + 1) == (REBOOTSTRAP_REQUIRED, {})
    assert answer(cluster_id=meta.cluster_id) == (INVALID_REQUEST, {})
    assert answer(node_id=me) == (INVALID_REQUEST, {})


@pytest.mark.parametrize("version", [6, 127])
def test_api_versions_newer_than_served_gets_v0_answer(kafka: RawKafka, version: int) -> None:
    # A newer client speaks its own version (a v4-shaped body here, header v2); the
    # broker answers in v0 with UNSUPPORTED_VERSION and, as Kafka does, only the
    # ApiVersions range, so the client retries with a version it shares.
    body = encode(
        make_request(
            API_VERSIONS, 4, {"client_software_name": "rawkafka", "client_software_version": "0.1"}
        )
    )
    cid = kafka.send(API_VERSIONS, version, body)
    resp = kafka.recv(API_VERSIONS, 0)
    assert kafka.last_correlation_id == cid
    assert resp.error_code == UNSUPPORTED_VERSION
    assert ranges(resp) == {API_VERSIONS: ADVERTISED[API_VERSIONS]}
    # The connection stays usable for the retry.
    assert (
        kafka.request(
            API_VERSIONS, 3, {"client_software_name": "rawkafka", "client_software_version": "0.1"}
        ).error_code
        == 0
    )


def test_every_advertised_version_is_served(kafka: RawKafka) -> None:
    """An empty request of each advertised version is answered."""
    resp = kafka.request(API_VERSIONS, 0, {})
    for api_key, (lo, hi) in ranges(resp).items():
        for version in range(lo, hi + 1):
            if (api_key, version) in OLD_EMPTY_BODIES:
                body = OLD_EMPTY_BODIES[api_key, version]
            else:
                # The body of the nearest version kio knows (DeleteTopics v0 == v1).
                known = next(v for v in range(version, hi + 1) if has_schema(api_key, v))
                fields = NOT_EMPTY.get(api_key, {"acks": 1})  # produce: acks=1
                body = encode(make_request(api_key, known, fields))
            cid = kafka.send(api_key, version, body)
            try:
                frame = kafka.recv_raw()
            except ConnectionClosed:
                pytest.fail(
                    f"API {api_key} v{version} is advertised; the request closed the connection"
                )
            assert struct.unpack_from(">i", frame)[0] == cid, (api_key, version)


# Requests whose all-zero form Kafka refuses by closing the connection (DescribeAcls:
# UNKNOWN filter codes), sent with the least that Kafka accepts instead.
ANY_ACL = {"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1}
NOT_EMPTY: dict[int, dict[str, object]] = {29: {**ANY_ACL, "permission_type": 1}}

# Empty requests of the versions kio has no schema for (see rawkafka's legacy helpers).
OLD_EMPTY_BODIES = {
    **{(PRODUCE, v): struct.pack(">hii", 1, 5000, 0) for v in (0, 1, 2)},
    **{(FETCH, v): struct.pack(">iiii", -1, 0, 1, 0) for v in (0, 1, 2)},
    (FETCH, 3): struct.pack(">iiiii", -1, 0, 1, 1 << 20, 0),
    (LIST_OFFSETS, 0): struct.pack(">ii", -1, 0),
}


def has_schema(api_key: int, version: int) -> bool:
    try:
        make_request(api_key, version, {})
    except Exception:
        return False
    return True


# -- Metadata ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(METADATA))
def test_metadata_auto_creates_with_one_partition(
    kafka: RawKafka, skiff: Skiff, redis_server: RedisServer, version: int
) -> None:
    topic = new_topic()
    assert not topic_exists(redis_server, topic)
    first = kafka.request(METADATA, version, metadata_request([topic]))
    second = kafka.request(METADATA, version, metadata_request([topic]))
    assert topic_exists(redis_server, topic)
    topic_id = topic_id_of(kafka, topic)
    for resp in (first, second):
        assert [(b.node_id, b.host, b.port) for b in resp.brokers] == [(0, "127.0.0.1", skiff.port)]
        if version >= 1:
            assert resp.controller_id == 0
            assert resp.brokers[0].rack is None
        if version >= 2:
            assert resp.cluster_id
        if version >= 3:
            assert resp.throttle_time == datetime.timedelta(0)
        [t] = resp.topics
        assert t.error_code == NONE
        assert t.name == topic
        if version >= 1:
            assert t.is_internal is False
        if version >= 10:
            assert t.topic_id == topic_id
        [p] = t.partitions
        assert (p.error_code, p.partition_index, p.leader_id) == (NONE, 0, 0)
        assert (p.replica_nodes, p.isr_nodes) == ((0,), (0,))
        if version >= 5:
            assert p.offline_replicas == ()
        if version >= 7:
            assert p.leader_epoch == -1
    if version >= 2:
        assert first.cluster_id == second.cluster_id
    # The id stays the same on later calls.
    assert topic_id_of(kafka, topic) == topic_id


@pytest.mark.parametrize("version", [0, 1, 4, 9, 12])
def test_metadata_all_topics(kafka: RawKafka, version: int) -> None:
    topic = new_topic()
    produce(kafka, topic, [Rec(b"x")])
    resp = kafka.request(METADATA, version, {"topics": [] if version == 0 else None})
    names = [t.name for t in resp.topics]
    assert topic in names
    assert len(names) == len(set(names))
    assert all(t.error_code == NONE and t.partitions for t in resp.topics)


@pytest.mark.parametrize("name", ["bad name!", "a/b", "x" * 250, ".."])
@pytest.mark.parametrize("version", [0, 4, 9, 10, 12])
def test_metadata_invalid_topic_name(
    kafka: RawKafka, redis_server: RedisServer, version: int, name: str
) -> None:
    resp = kafka.request(METADATA, version, metadata_request([name]))
    [t] = resp.topics
    assert t.error_code == INVALID_TOPIC_EXCEPTION
    assert t.name == name
    assert t.partitions == ()
    assert not topic_exists(redis_server, name)


@pytest.mark.parametrize("version", range(4, 13))
def test_metadata_without_auto_creation(
    kafka: RawKafka, redis_server: RedisServer, version: int
) -> None:
    topic = new_topic()
    resp = kafka.request(
        METADATA, version, metadata_request([topic], allow_auto_topic_creation=False)
    )
    [t] = resp.topics
    assert (t.error_code, t.name, t.partitions) == (UNKNOWN_TOPIC_OR_PARTITION, topic, ())
    assert not topic_exists(redis_server, topic)


def test_metadata_v12_by_topic_id(kafka: RawKafka) -> None:
    topic = new_topic()
    produce(kafka, topic, [Rec(b"x")])
    topic_id = topic_id_of(kafka, topic)
    resp = kafka.request(METADATA, 12, {"topics": [{"name": None, "topic_id": topic_id}]})
    [t] = resp.topics
    assert (t.error_code, t.name, t.topic_id) == (NONE, topic, topic_id)
    unknown = uuid.uuid4()
    resp = kafka.request(METADATA, 12, {"topics": [{"name": None, "topic_id": unknown}]})
    [t] = resp.topics
    assert (t.error_code, t.topic_id) == (UNKNOWN_TOPIC_ID, unknown)


def test_metadata_reports_the_advertised_address(tmp_path: Path) -> None:
    # A Redis of its own: sidecars sharing one Redis all appear in Metadata.
    own_redis = start_redis(tmp_path / "redis")
    other = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--advertise",
        "kafka.example.com:19092",
    )
    try:
        with RawKafka("127.0.0.1", other.port) as kafka:
            for version in (0, 1, 9, 12):
                resp = kafka.request(METADATA, version, metadata_request([]))
                assert [(b.node_id, b.host, b.port) for b in resp.brokers] == [
                    (0, "kafka.example.com", 19092)
                ]
    finally:
        stop_process(other.proc)
        stop_process(own_redis.proc)


# -- Produce and Fetch -------------------------------------------------------------------


def sample_records(tag: str, n: int, ts: int) -> list[Rec]:
    out = []
    for i in range(n):
        out.append(
            Rec(
                value=None if i == 2 else f"{tag}-value-{i}".encode(),
                key=None if i == 1 else f"{tag}-key-{i}".encode(),
                headers=(("h1", b"one"), ("h2", None), ("h1", b"")) if i == 0 else (),
                timestamp=ts + i,
            )
        )
    return out


@pytest.mark.parametrize("version", versions(PRODUCE))
def test_produce_base_offsets_are_contiguous(kafka: RawKafka, version: int) -> None:
    topic = new_topic()
    topic_id = None
    if version >= 13:  # by id (KIP-516): no auto-creation, Metadata creates the topic
        kafka.request(METADATA, 12, metadata_request([topic]))
        topic_id = topic_id_of(kafka, topic)
    expected_base = 0
    for size in (3, 1, 5):
        batch = build_batch(sample_records(f"p{version}", size, BASE_TS))
        resp = kafka.request(
            PRODUCE, version, produce_request(topic, {0: batch}, topic_id=topic_id)
        )
        [t] = resp.responses
        if version >= 13:
            assert t.topic_id == topic_id
        else:
            assert t.name == topic
        [p] = t.partition_responses
        assert (p.index, p.error_code, p.base_offset) == (0, NONE, expected_base)
        assert p.log_append_time is None  # CreateTime: -1
        if version >= 5:
            assert p.log_start_offset == 0
        if version >= 8:
            assert p.record_errors == () and p.error_message is None
        expected_base += size
    resp = kafka.request(LIST_OFFSETS, 8, list_offsets_request(topic, {0: -1}))
    assert resp.topics[0].partitions[0].offset == expected_base


@pytest.mark.parametrize("acks", [1, -1])
def test_produce_acks(kafka: RawKafka, acks: int) -> None:
    topic = new_topic()
    resp = kafka.request(
        PRODUCE, 9, produce_request(topic, {0: build_batch([Rec(b"a")])}, acks=acks)
    )
    assert resp.responses[0].partition_responses[0].error_code == NONE


def test_produce_of_two_batches_in_one_partition_is_refused(kafka: RawKafka) -> None:
    # Kafka (ProduceRequest.validateRecords): v3+ takes exactly one batch a partition.
    topic = new_topic()
    one = sample_records("one", 2, BASE_TS)
    two = sample_records("two", 3, BASE_TS + 100)
    records = build_batch(one) + build_batch(two)
    resp = kafka.request(PRODUCE, 9, produce_request(topic, {0: records}))
    p = resp.responses[0].partition_responses[0]
    assert (p.error_code, p.base_offset) == (INVALID_RECORD, -1)
    assert fetched_records(fetch_partition(kafka, 12, topic, 0).records) == []


# -- Produce v13: topics by id (KIP-516) ---------------------------------------------------


def produce_by_id(
    kafka: RawKafka, topics: list[tuple[uuid.UUID | None, dict[int, bytes]]], acks: int = -1
) -> list[tuple[uuid.UUID | None, list[tuple[int, int, int, str | None]]]]:
    """A Produce v13 of several topics by id: per topic its id and per partition
    (index, error, base offset, error message)."""
    body = {
        "acks": acks,
        "timeout": 5000,
        "topic_data": [
            {
                "topic_id": topic_id,
                "partition_data": [{"index": i, "records": r} for i, r in parts.items()],
            }
            for topic_id, parts in topics
        ],
    }
    resp = kafka.request(PRODUCE, 13, body)
    assert resp.throttle_time == datetime.timedelta(0)
    return [
        (
            t.topic_id,
            [
                (p.index, p.error_code, p.base_offset, p.error_message)
                for p in t.partition_responses
            ],
        )
        for t in resp.responses
    ]


@pytest.mark.parametrize("storage_format", FORMATS)
def test_produce_v13_by_topic_id(kafka: RawKafka, storage_format: str) -> None:
    topic = new_topic()
    create(kafka, topic, {"skiff.storage.format": storage_format}, partitions=2)
    topic_id = topic_id_of(kafka, topic)
    first, second, third = (
        sample_records("id-a", 3, BASE_TS),
        sample_records("id-b", 2, BASE_TS + 10),
        sample_records("id-c", 4, BASE_TS + 20),
    )
    sent = {0: build_batch(first), 1: build_batch(second)}
    assert produce_by_id(kafka, [(topic_id, sent)]) == [
        (topic_id, [(0, NONE, 0, None), (1, NONE, 0, None)])
    ]
    again = build_batch(third)
    assert produce_by_id(kafka, [(topic_id, {0: again})]) == [(topic_id, [(0, NONE, 3, None)])]
    # Read back by id (Fetch v13) and by name (Fetch v12): the same records.
    want = {
        0: [replace(r, offset=i) for i, r in enumerate(first + third)],
        1: [replace(r, offset=i) for i, r in enumerate(second)],
    }
    for version in (12, 13):
        for partition, records in want.items():
            resp = kafka.request(FETCH, version, fetch_request(topic, {partition: 0}, topic_id))
            [p] = resp.responses[0].partitions
            assert (p.error_code, p.high_watermark) == (NONE, len(records))
            assert fetched_records(p.records) == records
    # A `batch` topic serves the batches as produced: byte for byte after the base
    # offset (Skiff's) and the partition leader epoch.
    if storage_format == "batch":
        p = fetch_partition(kafka, 13, topic, 0, topic_id)
        served = raw_batches(p.records)
        assert [b[16:] for b in served] == [sent[0][16:], again[16:]]
        assert [b[8:12] for b in served] == [sent[0][8:12], again[8:12]]
        assert [struct.unpack_from(">q", b)[0] for b in served] == [0, 3]


def raw_batches(data: bytes) -> list[bytes]:
    """A Fetch response's records field split into its v2 batches, as bytes."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
        out.append(data[pos:end])
        pos = end
    return out


def test_produce_v13_unknown_topic_id(kafka: RawKafka, redis_server: RedisServer) -> None:
    # Kafka (KafkaApis.handleProduceRequest): an id it has no topic for, or the zero id,
    # answers UNKNOWN_TOPIC_ID in each of its partitions; the other topics are served.
    topic = new_topic()
    create(kafka, topic)
    topic_id = topic_id_of(kafka, topic)
    unknown = uuid.uuid4()
    before = redis_server.client().hlen("skiff:topics")
    batch = build_batch([Rec(b"x")])
    assert produce_by_id(
        kafka,
        [(unknown, {0: batch, 1: batch}), (None, {0: batch}), (topic_id, {0: batch, 5: batch})],
    ) == [
        (unknown, [(0, UNKNOWN_TOPIC_ID, -1, None), (1, UNKNOWN_TOPIC_ID, -1, None)]),
        (None, [(0, UNKNOWN_TOPIC_ID, -1, None)]),  # kio reads the zero id as None
        (topic_id, [(0, NONE, 0, None), (5, UNKNOWN_TOPIC_OR_PARTITION, -1, None)]),
    ]
    assert redis_server.client().hlen("skiff:topics") == before  # nothing auto-created
    # A deleted topic's id is unknown too.
    deleted = kafka.request(
        DELETE_TOPICS, 6, {"topics": [{"name": topic, "topic_id": None}], "timeout": 10000}
    )
    assert deleted.responses[0].error_code == NONE
    assert produce_by_id(kafka, [(topic_id, {0: batch})]) == [
        (topic_id, [(0, UNKNOWN_TOPIC_ID, -1, None)])
    ]
    # acks=0: no answer to a failure; the connection is closed, as for v12.
    body = produce_request(topic, {0: batch}, acks=0, topic_id=unknown)
    kafka.send(PRODUCE, 13, body)
    assert kafka.closed(2.0)


def strip(rec: Rec) -> Rec:
    return replace(rec, offset=None)


@pytest.fixture(scope="module", params=FORMATS)
def produced(
    skiff: Skiff, request: pytest.FixtureRequest
) -> tuple[str, uuid.UUID, list[Rec], list[int], str]:
    """A topic of each storage format written with every Produce version: (name, id,
    records with offsets, base offsets of the batches, format)."""
    topic = new_topic("pf")
    expected: list[Rec] = []
    bases: list[int] = []
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, topic, {"skiff.storage.format": request.param})
        topic_id = topic_id_of(kafka, topic)
        for version in versions(PRODUCE):
            records = sample_records(f"v{version}", 3, BASE_TS + 1000 * version)
            base = produce(kafka, topic, records, version=version, topic_id=topic_id)
            assert base == len(expected)
            bases.append(base)
            expected += [replace(r, offset=base + i) for i, r in enumerate(records)]
        return topic, topic_id, expected, bases, request.param


@pytest.mark.parametrize("version", versions(FETCH))
def test_fetch_reads_back_every_produce_version(
    kafka: RawKafka, version: int, produced: tuple[str, uuid.UUID, list[Rec], list[int], str]
) -> None:
    topic, topic_id, expected, bases, storage_format = produced
    end = len(expected)
    resp = kafka.request(FETCH, version, fetch_request(topic, {0: 0}, topic_id))
    if version >= 7:
        assert (resp.error_code, resp.session_id) == (NONE, 0)
    [t] = resp.responses
    if version >= 13:
        assert t.topic_id == topic_id
    else:
        assert t.topic == topic
    [p] = t.partitions
    assert (p.partition_index, p.error_code) == (0, NONE)
    assert p.high_watermark == end
    assert p.last_stable_offset == end
    if version >= 5:
        assert p.log_start_offset == 0
    assert p.aborted_transactions is None
    if version >= 11:
        assert p.preferred_read_replica == -1
    batches = read_batches(p.records)
    assert batches and all(b.crc_ok for b in batches)
    assert all(b.timestamp_type == 0 for b in batches)
    assert fetched_records(p.records) == expected

    # A fetch from inside a batch: on `record` topics a batch that starts exactly there;
    # on `batch` topics the whole stored batch holding it, as Kafka serves (clients skip
    # the records before their position).
    inside = bases[2] + 1
    start = inside if storage_format == "record" else bases[2]
    p = fetch_partition(kafka, version, topic, inside, topic_id)
    assert p.error_code == NONE
    batches = read_batches(p.records)
    assert batches[0].base_offset == start
    assert batches[0].records[0].offset == start
    assert fetched_records(p.records) == expected[start:]

    # At the high watermark: nothing, no error.
    p = fetch_partition(kafka, version, topic, end, topic_id)
    assert (p.error_code, p.high_watermark, p.records or b"") == (NONE, end, b"")

    for bad in (end + 1, end + 1000, -1):
        p = fetch_partition(kafka, version, topic, bad, topic_id)
        assert p.error_code == OFFSET_OUT_OF_RANGE, bad
        assert not fetched_records(p.records)


@pytest.mark.parametrize("storage_format", FORMATS)
@pytest.mark.parametrize("version", [4, 7, 12, 13, 15])
def test_fetch_returns_one_record_larger_than_the_limits(
    kafka: RawKafka, version: int, storage_format: str
) -> None:
    topic = new_topic()
    create(kafka, topic, {"skiff.storage.format": storage_format})
    big = [Rec(b"x" * 1000, b"k"), Rec(b"y" * 1000, b"k2")]
    produce(kafka, topic, big)
    topic_id = topic_id_of(kafka, topic)
    for limits in (
        {"partition_max_bytes": 10},
        {"max_bytes": 10},
        {"partition_max_bytes": 1, "max_bytes": 1},
    ):
        p = fetch_partition(kafka, version, topic, 0, topic_id, **limits)
        got = fetched_records(p.records)
        assert p.error_code == NONE
        assert len(got) >= 1, limits
        assert got[0].value == b"x" * 1000 and got[0].offset == 0
    # From offset 1: the record alone, or on `batch` topics the stored batch holding it.
    p = fetch_partition(kafka, version, topic, 1, topic_id, partition_max_bytes=10)
    whole = [b"x" * 1000] if storage_format == "batch" else []
    assert [r.value for r in fetched_records(p.records)] == [*whole, b"y" * 1000]


@pytest.mark.parametrize("storage_format", FORMATS)
def test_fetch_limits_are_honoured_beyond_the_first_record(
    kafka: RawKafka, storage_format: str
) -> None:
    topic = new_topic()
    create(kafka, topic, {"skiff.storage.format": storage_format})
    # One record per produced batch: on both formats a limit falls between batches.
    for i in range(20):
        produce(kafka, topic, [Rec(bytes([65 + i]) * 1000)])
    p = fetch_partition(kafka, 12, topic, 0, partition_max_bytes=5000)
    got = fetched_records(p.records)
    assert 1 <= len(got) < 20
    assert len(p.records) <= 5000
    assert [r.offset for r in got] == list(range(len(got)))


@pytest.mark.parametrize("version", [4, 12, 13, 15])
def test_fetch_unknown_topic_or_partition(kafka: RawKafka, version: int) -> None:
    topic = new_topic()
    produce(kafka, topic, [Rec(b"x")])
    topic_id = topic_id_of(kafka, topic)
    resp = kafka.request(FETCH, version, fetch_request(topic, {7: 0}, topic_id))
    assert resp.responses[0].partitions[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    missing = new_topic()
    resp = kafka.request(FETCH, version, fetch_request(missing, {0: 0}, uuid.uuid4()))
    expected = UNKNOWN_TOPIC_ID if version >= 13 else UNKNOWN_TOPIC_OR_PARTITION
    assert resp.responses[0].partitions[0].error_code == expected


@pytest.mark.parametrize("version", [13, 15])
def test_fetch_with_zero_topic_id(kafka: RawKafka, version: int) -> None:
    # A client that has no id for the topic sends the zero UUID (Kafka answers
    # UNKNOWN_TOPIC_ID); the connection must stay open.
    resp = kafka.request(FETCH, version, fetch_request("whatever", {0: 0}, ZERO_UUID))
    [t] = resp.responses
    assert t.partitions[0].error_code == UNKNOWN_TOPIC_ID
    assert (
        kafka.request(
            API_VERSIONS, 3, {"client_software_name": "rawkafka", "client_software_version": "1.0"}
        ).error_code
        == NONE
    )


# -- ListOffsets -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def timed_topic(skiff: Skiff) -> str:
    """Offsets 0..4 with timestamps +1000 +3000 | +2000 | +5000 +4000 (three batches)."""
    topic = new_topic("lo")
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        for stamps in ((1000, 3000), (2000,), (5000, 4000)):
            produce(kafka, topic, [Rec(f"at{s}".encode(), timestamp=BASE_TS + s) for s in stamps])
    return topic


@pytest.mark.parametrize("version", versions(LIST_OFFSETS))
def test_list_offsets(kafka: RawKafka, timed_topic: str, version: int) -> None:
    def lookup(ts: int) -> tuple[int, int, int]:
        resp = kafka.request(LIST_OFFSETS, version, list_offsets_request(timed_topic, {0: ts}))
        [t] = resp.topics
        assert t.name == timed_topic
        [p] = t.partitions
        assert p.partition_index == 0
        if version >= 4:
            assert p.leader_epoch == -1
        return int(p.error_code), int(p.offset), int(p.timestamp)

    assert lookup(-2) == (NONE, 0, -1)
    assert lookup(-1) == (NONE, 5, -1)
    if version >= 7:
        assert lookup(-3) == (NONE, 3, BASE_TS + 5000)
    else:  # max timestamp arrived with v7: Kafka refuses it before
        assert lookup(-3) == (UNSUPPORTED_VERSION, -1, -1)
    assert lookup(0) == (NONE, 0, BASE_TS + 1000)
    assert lookup(BASE_TS + 1000) == (NONE, 0, BASE_TS + 1000)
    assert lookup(BASE_TS + 1001) == (NONE, 1, BASE_TS + 3000)
    assert lookup(BASE_TS + 2000) == (NONE, 1, BASE_TS + 3000)
    assert lookup(BASE_TS + 3500) == (NONE, 3, BASE_TS + 5000)
    assert lookup(BASE_TS + 4500) == (NONE, 3, BASE_TS + 5000)
    assert lookup(BASE_TS + 5000) == (NONE, 3, BASE_TS + 5000)
    assert lookup(BASE_TS + 5001) == (NONE, -1, -1)


@pytest.mark.parametrize("version", [1, 8])
def test_list_offsets_unknown(kafka: RawKafka, version: int) -> None:
    topic = new_topic()
    resp = kafka.request(LIST_OFFSETS, version, list_offsets_request(topic, {0: -1}))
    assert resp.topics[0].partitions[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    produce(kafka, topic, [Rec(b"x")])
    resp = kafka.request(LIST_OFFSETS, version, list_offsets_request(topic, {3: -1}))
    assert resp.topics[0].partitions[0].error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_list_offsets_empty_partition(kafka: RawKafka) -> None:
    topic = new_topic()
    kafka.request(METADATA, 12, metadata_request([topic]))
    for ts, expected in ((-2, 0), (-1, 0), (-3, -1), (BASE_TS, -1)):
        resp = kafka.request(LIST_OFFSETS, 8, list_offsets_request(topic, {0: ts}))
        p = resp.topics[0].partitions[0]
        assert (p.error_code, p.offset) == (NONE, expected), ts


# -- InitProducerId ----------------------------------------------------------------------


def test_init_producer_id_gives_distinct_ids(kafka: RawKafka) -> None:
    ids = []
    for version in versions(INIT_PRODUCER_ID):
        for _ in range(2):
            resp = kafka.request(
                INIT_PRODUCER_ID,
                version,
                {
                    "transactional_id": None,
                    "transaction_timeout": 60000,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
            )
            assert resp.error_code == NONE
            assert resp.producer_epoch == 0
            assert resp.producer_id >= 0
            ids.append(resp.producer_id)
    assert len(set(ids)) == len(ids)


# -- CreateTopics and DeleteTopics ----------------------------------------------------


def create_topics_request(
    *topics: tuple[str, int, int], validate_only: bool = False
) -> dict[str, Any]:
    return {
        "topics": [
            {
                "name": n,
                "num_partitions": p,
                "replication_factor": rf,
                "assignments": [],
                "configs": [],
            }
            for n, p, rf in topics
        ],
        "timeout": 10000,
        "validate_only": validate_only,
    }


@pytest.mark.parametrize("version", versions(CREATE_TOPICS))
def test_create_topics(kafka: RawKafka, redis_server: RedisServer, version: int) -> None:
    good, twice, zero, rf3, bad = (new_topic() for _ in range(5))
    invalid = "bad name!"
    resp = kafka.request(
        CREATE_TOPICS,
        version,
        create_topics_request((good, 3, 1), (zero, 0, 1), (rf3, 1, 3), (invalid, 1, 1)),
    )
    if version >= 2:
        assert resp.throttle_time == datetime.timedelta(0)
    results = {t.name: t for t in resp.topics}
    assert list(results) == [good, zero, rf3, invalid]
    assert results[good].error_code == NONE
    assert results[zero].error_code == INVALID_PARTITIONS
    assert results[rf3].error_code == INVALID_REPLICATION_FACTOR
    assert results[invalid].error_code == INVALID_TOPIC_EXCEPTION
    for name in (zero, rf3, invalid):
        assert results[name].error_message
        assert not topic_exists(redis_server, name)
    if version >= 5:
        assert (results[good].num_partitions, results[good].replication_factor) == (3, 1)
    meta = kafka.request(METADATA, 12, metadata_request([good], False)).topics[0]
    assert meta.error_code == NONE
    assert [p.partition_index for p in meta.partitions] == [0, 1, 2]
    if version >= 7:
        assert results[good].topic_id == meta.topic_id != ZERO_UUID

    resp = kafka.request(CREATE_TOPICS, version, create_topics_request((good, 1, 1)))
    [t] = resp.topics
    assert t.error_code == TOPIC_ALREADY_EXISTS and t.error_message
    meta = kafka.request(METADATA, 12, metadata_request([good], False)).topics[0]
    assert len(meta.partitions) == 3  # unchanged

    # Defaults (-1) are allowed from v4; validate_only creates nothing.
    if version >= 4:
        resp = kafka.request(CREATE_TOPICS, version, create_topics_request((twice, -1, -1)))
        assert resp.topics[0].error_code == NONE
        meta = kafka.request(METADATA, 12, metadata_request([twice], False)).topics[0]
        assert len(meta.partitions) == 1
    resp = kafka.request(
        CREATE_TOPICS, version, create_topics_request((bad, 2, 1), validate_only=True)
    )
    assert resp.topics[0].error_code == NONE
    assert not topic_exists(redis_server, bad)


def partition_keys(redis_server: RedisServer, topic: str) -> list[bytes]:
    client = redis_server.client()
    if isinstance(client, redis.RedisCluster):  # SKIFF_TEST_REDIS=cluster: every primary
        return sorted(client.keys(f"skiff:{{{topic}/*", target_nodes=client.PRIMARIES))
    return sorted(client.keys(f"skiff:{{{topic}/*"))


@pytest.mark.parametrize(
    ("version", "by_id"),
    [(v, False) for v in versions(DELETE_TOPICS)] + [(6, True)],  # ids from v6
)
def test_delete_topics(
    kafka: RawKafka, redis_server: RedisServer, version: int, by_id: bool
) -> None:
    topic = new_topic()
    kafka.request(CREATE_TOPICS, 7, create_topics_request((topic, 2, 1)))
    for partition in (0, 1):
        produce(kafka, topic, [Rec(b"a", timestamp=BASE_TS), Rec(b"b")], partition=partition)
    topic_id = topic_id_of(kafka, topic)
    assert len(partition_keys(redis_server, topic)) >= 6  # log, meta, time per partition

    if version >= 6:
        entry = {"name": None, "topic_id": topic_id} if by_id else {"name": topic, "topic_id": None}
        request: dict[str, Any] = {"topics": [entry], "timeout": 10000}
    else:
        request = {"topic_names": [topic], "timeout": 10000}
    resp = kafka.request(DELETE_TOPICS, version, request)
    [r] = resp.responses
    assert (r.error_code, r.name) == (NONE, topic)
    if version >= 6:
        assert r.topic_id == topic_id
    assert partition_keys(redis_server, topic) == []
    client = redis_server.client()
    assert not client.hexists("skiff:topics", topic)
    assert not client.hexists("skiff:topic_ids", topic_id.hex)
    meta = kafka.request(METADATA, 12, metadata_request([topic], False)).topics[0]
    assert meta.error_code == UNKNOWN_TOPIC_OR_PARTITION

    # Deleting again: unknown.
    [r] = kafka.request(DELETE_TOPICS, version, request).responses
    assert r.error_code == (UNKNOWN_TOPIC_ID if by_id else UNKNOWN_TOPIC_OR_PARTITION)

    # The name can be used again: a new topic, with a new id, from offset 0.
    assert produce(kafka, topic, [Rec(b"again")]) == 0
    assert topic_id_of(kafka, topic) != topic_id
    got = fetched_records(fetch_partition(kafka, 12, topic, 0).records)
    assert [r.value for r in got] == [b"again"]


# -- tagged fields, acks=0, pipelining -------------------------------------------------


def test_unknown_tagged_fields_are_skipped(kafka: RawKafka) -> None:
    topic = new_topic()
    produce(kafka, topic, [Rec(b"tagged")])
    unknown = [(77, b"future"), (1000, b"\x00" * 40)]
    # Metadata v12: in the request header and at the top level of the body.
    for where in (
        {"header_tags": unknown},
        {"body_tags": unknown},
        {"header_tags": unknown, "body_tags": unknown[:1]},
    ):
        resp = kafka.request(METADATA, 12, metadata_request([topic]), **where)
        assert resp.topics[0].error_code == NONE and resp.topics[0].name == topic, where
    # Metadata v12, inside a topic entry (hand-encoded).
    name = topic.encode()
    body = (
        uvarint(2)
        + bytes(16)
        + uvarint(len(name) + 1)
        + name
        + tagged_fields(unknown)
        + b"\x01\x00"
        + b"\x00"
    )
    resp = kafka.request(METADATA, 12, body)
    assert [(t.error_code, t.name) for t in resp.topics] == [(NONE, topic)]
    # Fetch v12 and v15 at the top level, Produce v9 in the header.
    for version in (12, 15):
        topic_id = topic_id_of(kafka, topic)
        resp = kafka.request(
            FETCH, version, fetch_request(topic, {0: 0}, topic_id), body_tags=[(99, b"?")]
        )
        p = resp.responses[0].partitions[0]
        assert p.error_code == NONE
        assert [r.value for r in fetched_records(p.records)] == [b"tagged"]
    resp = kafka.request(
        PRODUCE,
        9,
        produce_request(topic, {0: build_batch([Rec(b"t2")])}),
        header_tags=unknown,
        body_tags=unknown,
    )
    assert resp.responses[0].partition_responses[0].base_offset == 1


def test_acks_0_gets_no_response_and_the_next_request_is_answered(kafka: RawKafka) -> None:
    topic = new_topic()
    for i in range(3):
        kafka.send(PRODUCE, 9, produce_request(topic, {0: build_batch([Rec(b"%d" % i)])}, acks=0))
    cid = kafka.send(METADATA, 12, metadata_request([topic]))
    resp = kafka.recv(METADATA, 12)
    assert kafka.last_correlation_id == cid
    assert resp.topics[0].error_code == NONE
    cid = kafka.send(FETCH, 12, fetch_request(topic, {0: 0}))
    resp = kafka.recv(FETCH, 12)
    assert kafka.last_correlation_id == cid
    got = fetched_records(resp.responses[0].partitions[0].records)
    assert [r.value for r in got] == [b"0", b"1", b"2"]


def test_failed_acks_0_produce_closes_the_connection(kafka: RawKafka) -> None:
    kafka.send(PRODUCE, 9, produce_request("bad name!", {0: build_batch([Rec(b"x")])}, acks=0))
    assert kafka.closed(2.0)


def test_pipelined_requests_are_answered_in_order(kafka: RawKafka) -> None:
    topic, idle = new_topic(), new_topic()
    kafka.request(METADATA, 12, metadata_request([topic, idle]))
    sent: list[tuple[int, int, int]] = []

    def send(api_key: int, version: int, body: Any) -> None:
        sent.append((kafka.send(api_key, version, body), api_key, version))

    send(API_VERSIONS, 3, {"client_software_name": "rawkafka", "client_software_version": "1.0"})
    for i in range(3):
        send(PRODUCE, 9, produce_request(topic, {0: build_batch([Rec(b"%d" % i)])}, acks=1))
    # A long poll on an idle partition, then quick requests behind it.
    send(FETCH, 12, fetch_request(idle, {0: 0}, max_wait_ms=300))
    send(LIST_OFFSETS, 8, list_offsets_request(topic, {0: -1}))
    send(METADATA, 1, metadata_request([topic]))
    for i in range(3, 40):  # more than the sidecar queues before it stops reading
        send(PRODUCE, 3, produce_request(topic, {0: build_batch([Rec(b"%d" % i)])}))
    send(FETCH, 4, fetch_request(topic, {0: 0}))

    produced = []
    for cid, api_key, version in sent:
        resp = kafka.recv(api_key, version)
        assert kafka.last_correlation_id == cid
        if api_key == PRODUCE:
            produced.append(resp.responses[0].partition_responses[0].base_offset)
        elif api_key == LIST_OFFSETS:
            assert resp.topics[0].partitions[0].offset == 3
        elif api_key == FETCH and version == 12:
            assert resp.responses[0].partitions[0].records in (None, b"")
        elif api_key == FETCH:
            got = fetched_records(resp.responses[0].partitions[0].records)
            assert [r.value for r in got] == [b"%d" % i for i in range(40)]
    assert produced == list(range(40))


def test_pipelined_burst_in_one_write(kafka: RawKafka) -> None:
    frames = b"".join(kafka.frame(API_VERSIONS, 2, {}, cid) for cid in range(100, 150))
    kafka.send_raw(frames)
    for cid in range(100, 150):
        assert kafka.recv(API_VERSIONS, 2).error_code == NONE
        assert kafka.last_correlation_id == cid


def test_response_frames_are_well_formed(kafka: RawKafka) -> None:
    # recv() already refuses trailing bytes; also check the size prefix on a raw read.
    kafka.send(API_VERSIONS, 0, {})
    frame = kafka.recv_raw()
    (cid,) = struct.unpack_from(">i", frame, 0)
    assert cid == kafka.next_correlation_id - 1
    assert kafka.decode_response(API_VERSIONS, 0, frame).error_code == NONE


def test_slow_client_byte_by_byte(kafka: RawKafka) -> None:
    frame = kafka.frame(METADATA, 12, metadata_request([]), 4242)
    for i in range(len(frame)):
        kafka.send_raw(frame[i : i + 1])
        if i % 8 == 0:
            time.sleep(0.001)
    kafka.recv(METADATA, 12)
    assert kafka.last_correlation_id == 4242
