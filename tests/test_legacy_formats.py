"""Legacy message sets (magic 0 and 1): Produce v0-v2, Fetch v0-v3 and ListOffsets v0.

Raw protocol tests run against the session's Skiff. The client tests run old-protocol
clients - kafka-python with ``api_version=(0, 10)`` (magic 1) and librdkafka with
``api.version.request=false, broker.version.fallback=0.9.0`` (magic 0) - against a
Skiff of their own that advertises a recording relay, so every connection of a client
goes through it and the test can check which API versions the client really used.
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from clients import aiokafka_client, confluent_client, kafka_python_client
from conftest import RedisServer, Skiff, free_port, start_redis, start_skiff, stop_process
from formats import FORMATS
from rawkafka import (
    Message,
    RawKafka,
    Rec,
    build_batch,
    compressed_message,
    corrupt_message_crc,
    fetch_request,
    fetched_records,
    legacy_fetch_body,
    legacy_produce_body,
    list_offsets_request,
    list_offsets_v0_body,
    message_set,
    metadata_request,
    produce_request,
    read_legacy_fetch_response,
    read_legacy_produce_response,
    read_list_offsets_v0_response,
    read_message_set,
)
from records import assert_same, make_records

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
NONE, OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION = 0, 1, 2, 3
UNSUPPORTED_VERSION = 35
GZIP, SNAPPY, LZ4 = 1, 2, 3
BASE_TS = 1_600_000_000_000


def new_topic(prefix: str = "legacy") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module", params=FORMATS)
def fmt(request: pytest.FixtureRequest) -> str:
    """The storage format of the topics a test creates: the raw Produce v0-v2 and Fetch
    v0-v3 tests run on `record` and `batch` topics (a message set is stored as one v2
    batch there; Fetch v0-v3 down-converts stored batches)."""
    return str(request.param)


@pytest.fixture
def kafka(skiff: Skiff) -> Iterator[RawKafka]:
    with RawKafka("127.0.0.1", skiff.port) as client:
        yield client


def create(kafka: RawKafka, topic: str, partitions: int = 1, fmt: str = "record") -> None:
    configs = [{"name": "skiff.storage.format", "value": fmt}]
    resp = kafka.request(
        19,
        7,
        {
            "topics": [
                {
                    "name": topic,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "configs": configs,
                }
            ],
            "timeout": 5000,
        },
    )
    assert resp.topics[0].error_code == NONE


def produce_old(
    kafka: RawKafka, version: int, topic: str, data: bytes, partition: int = 0
) -> dict[str, Any]:
    """One partition's answer to a Produce v0-v2 (checking the version's shape)."""
    cid = kafka.send(PRODUCE, version, legacy_produce_body(topic, {partition: data}))
    frame = kafka.recv_raw()
    assert struct.unpack_from(">i", frame)[0] == cid
    answer = read_legacy_produce_response(version, frame)
    assert ("throttle_time_ms" in answer) == (version >= 1)
    [t] = answer["responses"]
    assert t["name"] == topic
    [p] = t["partition_responses"]
    assert ("log_append_time" in p) == (version >= 2)
    return dict(p)


def fetch_old(
    kafka: RawKafka, version: int, topic: str, offsets: dict[int, int], **limits: int
) -> list[dict[str, Any]]:
    """The partitions of a Fetch v0-v3 answer."""
    kafka.send(FETCH, version, legacy_fetch_body(version, topic, offsets, **limits))
    answer = read_legacy_fetch_response(version, kafka.recv_raw(timeout=30))
    assert ("throttle_time_ms" in answer) == (version >= 1)
    [t] = answer["responses"]
    assert t["topic"] == topic
    return list(t["partitions"])


def stored(kafka: RawKafka, topic: str, partition: int = 0) -> tuple[int, list[Rec]]:
    """(high watermark, records) of a partition, read with Fetch v11 (v2 batches)."""
    resp = kafka.request(FETCH, 11, fetch_request(topic, {partition: 0}))
    p = resp.responses[0].partitions[0]
    assert p.error_code == NONE
    return int(p.high_watermark), fetched_records(p.records)


def sample(n: int, tag: str = "m", first_ts: int = BASE_TS) -> list[Rec]:
    """Null keys on odd indexes, an empty value at 1, a null value at the end."""
    return [
        Rec(
            None if i == n - 1 else b"" if i == 1 else f"{tag}{i}".encode() * (i + 1),
            key=None if i % 2 else f"key-{i}".encode(),
            timestamp=first_ts + i,
        )
        for i in range(n)
    ]


# -- Produce v0-v2 -------------------------------------------------------------------------

CASES = [
    (version, magic, codec)
    for version in (0, 1, 2)
    for magic in ((0, 1) if version == 2 else (0,))
    for codec in (0, GZIP, SNAPPY) + ((LZ4,) if magic == 1 else ())
]


@pytest.mark.parametrize(("version", "magic", "codec"), CASES)
def test_produce_old_versions_store_every_record(
    kafka: RawKafka, version: int, magic: int, codec: int, fmt: str
) -> None:
    topic = new_topic()
    create(kafka, topic, fmt=fmt)
    kafka.request(PRODUCE, 9, produce_request(topic, {0: build_batch([Rec(b"first")])}))
    records = sample(6)
    p = produce_old(kafka, version, topic, message_set(records, magic, codec))
    assert (p["index"], p["error_code"], p["base_offset"]) == (0, NONE, 1)
    if version >= 2:
        assert p["log_append_time"] == -1  # CreateTime
    hw, got = stored(kafka, topic)
    assert hw == 7
    # Magic 0 carries no timestamp: stored as -1 (Kafka's NO_TIMESTAMP).
    expected = [
        replace(r, offset=1 + i, timestamp=r.timestamp if magic else -1)
        for i, r in enumerate(records)
    ]
    assert got[1:] == expected


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_with_a_bad_crc_is_corrupt_and_stores_nothing(
    kafka: RawKafka, version: int, fmt: str
) -> None:
    topic = new_topic()
    create(kafka, topic, fmt=fmt)
    magic = 1 if version == 2 else 0
    data = message_set(sample(3), magic)
    # The second message is corrupt: nothing of the set may be stored.
    first = len(message_set(sample(3)[:1], magic))
    data = data[:first] + corrupt_message_crc(data[first:])
    p = produce_old(kafka, version, topic, data)
    assert (p["error_code"], p["base_offset"]) == (CORRUPT_MESSAGE, -1)
    assert stored(kafka, topic) == (0, [])


def test_a_bad_inner_crc_is_corrupt_too(kafka: RawKafka, fmt: str) -> None:
    # The wrapper's CRC is right; Kafka checks the inner messages' CRCs as well.
    topic = new_topic()
    create(kafka, topic, fmt=fmt)
    inner = corrupt_message_crc(message_set(sample(3), 1))
    p = produce_old(kafka, 2, topic, compressed_message(inner, 1, GZIP, 2, BASE_TS))
    assert (p["error_code"], p["base_offset"]) == (CORRUPT_MESSAGE, -1)
    assert stored(kafka, topic) == (0, [])


def test_wrapper_inner_offsets_become_contiguous_offsets(kafka: RawKafka, fmt: str) -> None:
    topic = new_topic()
    create(kafka, topic, fmt=fmt)
    kafka.request(PRODUCE, 9, produce_request(topic, {0: build_batch([Rec(b"a"), Rec(b"b")])}))
    # Magic 1: inner offsets relative (0, 1, 2), the wrapper's the last inner one.
    relative = sample(3, "r")
    wrapper = compressed_message(message_set(relative, 1), 1, GZIP, 2, BASE_TS + 2)
    assert produce_old(kafka, 2, topic, wrapper)["base_offset"] == 2
    # Magic 0: inner offsets absolute (here 100-103, not where the log is).
    absolute = sample(4, "a")
    wrapper = compressed_message(message_set(absolute, 0, first_offset=100), 0, SNAPPY, 103)
    assert produce_old(kafka, 1, topic, wrapper)["base_offset"] == 5
    hw, got = stored(kafka, topic)
    assert hw == 9
    assert [r.offset for r in got] == list(range(9))
    assert got[2:5] == [replace(r, offset=2 + i) for i, r in enumerate(relative)]
    assert got[5:] == [replace(r, offset=5 + i, timestamp=-1) for i, r in enumerate(absolute)]


def test_empty_and_truncated_message_sets(kafka: RawKafka, fmt: str) -> None:
    # As Kafka: a set without a complete message appends nothing and is no error; a
    # truncated last message is dropped and the complete ones before it are stored.
    topic = new_topic()
    create(kafka, topic, fmt=fmt)
    p = produce_old(kafka, 2, topic, b"")
    assert (p["error_code"], p["base_offset"], p["log_append_time"]) == (NONE, -1, -1)
    records = sample(3)
    p = produce_old(kafka, 2, topic, message_set(records, 1)[:-5])
    assert (p["error_code"], p["base_offset"]) == (NONE, 0)
    assert stored(kafka, topic) == (2, [replace(r, offset=i) for i, r in enumerate(records[:2])])


def test_a_v2_batch_in_produce_v2_is_accepted(kafka: RawKafka, fmt: str) -> None:
    # Kafka checks the record format only from Produce v3 on.
    topic = new_topic()
    create(kafka, topic, fmt=fmt)
    rec = Rec(b"v", key=b"k", headers=(("h", b"1"),), timestamp=BASE_TS)
    assert produce_old(kafka, 2, topic, build_batch([rec]))["base_offset"] == 0
    assert stored(kafka, topic) == (1, [replace(rec, offset=0)])


def test_magic0_records_have_no_timestamp_to_find(kafka: RawKafka, fmt: str) -> None:
    topic = new_topic()
    create(kafka, topic, fmt=fmt)
    produce_old(kafka, 0, topic, message_set(sample(3), 0))
    resp = kafka.request(LIST_OFFSETS, 1, list_offsets_request(topic, {0: 0}))
    assert (resp.topics[0].partitions[0].offset, resp.topics[0].partitions[0].timestamp) == (
        -1,
        -1,
    )
    assert [r.timestamp for r in stored(kafka, topic)[1]] == [-1, -1, -1]


# -- Fetch v0-v3 ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fetch_topic(skiff: Skiff, fmt: str) -> tuple[str, list[Rec]]:
    """10 records in two v2 batches, with headers (which old formats drop), null keys,
    an empty and a null value."""
    topic = new_topic("legacy-fetch")
    records = [
        replace(r, headers=(("h", b"x"),) if i % 3 == 0 else ()) for i, r in enumerate(sample(10))
    ]
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, topic, fmt=fmt)
        kafka.request(METADATA, 12, metadata_request([topic]))
        for batch in (records[:6], records[6:]):
            resp = kafka.request(PRODUCE, 9, produce_request(topic, {0: build_batch(batch)}))
            assert resp.responses[0].partition_responses[0].error_code == NONE
    return topic, [replace(r, offset=i) for i, r in enumerate(records)]


def as_message(rec: Rec, magic: int) -> Message:
    """What a stored record looks like in a magic 0/1 message set (aiokafka reads a
    timestamp of -1 as None)."""
    assert rec.offset is not None
    ts = rec.timestamp if magic == 1 and rec.timestamp != -1 else None
    return Message(rec.offset, magic, True, ts, 0 if ts is not None else None, rec.key, rec.value)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@pytest.mark.parametrize("offset", [0, 3, 7])
def test_fetch_old_versions_start_at_the_fetch_offset(
    kafka: RawKafka, fetch_topic: tuple[str, list[Rec]], version: int, offset: int
) -> None:
    topic, records = fetch_topic
    magic = 1 if version >= 2 else 0
    [p] = fetch_old(kafka, version, topic, {0: offset})
    assert (p["partition"], p["error_code"], p["high_watermark"]) == (0, NONE, 10)
    assert read_message_set(p["records"]) == [as_message(r, magic) for r in records[offset:]]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_old_versions_respect_partition_max_bytes(
    kafka: RawKafka, fetch_topic: tuple[str, list[Rec]], version: int
) -> None:
    topic, records = fetch_topic
    magic = 1 if version >= 2 else 0
    whole = fetch_old(kafka, version, topic, {0: 2})[0]["records"]
    sizes = [12 + struct.unpack_from(">i", whole, 8)[0]]
    pos = sizes[0]
    while pos < len(whole):
        sizes.append(12 + struct.unpack_from(">i", whole, pos + 8)[0])
        pos += sizes[-1]
    # Room for exactly three messages, then for less than one (one is always sent).
    limit = sum(sizes[:3]) + sizes[3] - 1
    [p] = fetch_old(kafka, version, topic, {0: 2}, partition_max_bytes=limit)
    assert read_message_set(p["records"]) == [as_message(r, magic) for r in records[2:5]]
    [p] = fetch_old(kafka, version, topic, {0: 2}, partition_max_bytes=5)
    assert read_message_set(p["records"]) == [as_message(records[2], magic)]


def test_fetch_v3_respects_the_request_max_bytes(kafka: RawKafka, fmt: str) -> None:
    topic = new_topic()
    create(kafka, topic, partitions=2, fmt=fmt)
    for partition in (0, 1):
        data = build_batch([Rec(b"x" * 100, timestamp=BASE_TS + i) for i in range(5)])
        kafka.request(PRODUCE, 9, produce_request(topic, {partition: data}))
    # 130 bytes: the first partition gets one message (always), the second none.
    parts = fetch_old(kafka, 3, topic, {0: 0, 1: 0}, max_bytes=130)
    assert [len(read_message_set(p["records"])) for p in parts] == [1, 0]
    parts = fetch_old(kafka, 3, topic, {0: 0, 1: 0})
    assert [len(read_message_set(p["records"])) for p in parts] == [5, 5]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_old_versions_errors(kafka: RawKafka, version: int) -> None:
    topic = new_topic()
    create(kafka, topic)
    kafka.request(PRODUCE, 9, produce_request(topic, {0: build_batch([Rec(b"x")])}))
    [p] = fetch_old(kafka, version, topic, {0: 5})
    assert (p["error_code"], p["high_watermark"], p["records"]) == (OFFSET_OUT_OF_RANGE, -1, b"")
    [p] = fetch_old(kafka, version, new_topic("missing"), {0: 0})
    assert (p["error_code"], p["high_watermark"]) == (UNKNOWN_TOPIC_OR_PARTITION, -1)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_old_versions_long_poll(skiff: Skiff, kafka: RawKafka, version: int) -> None:
    topic = new_topic()
    create(kafka, topic)
    # Nothing arrives: the answer comes after max_wait, empty.
    started = time.monotonic()
    [p] = fetch_old(kafka, version, topic, {0: 0}, max_wait_ms=400)
    assert p["records"] == b"" and time.monotonic() - started >= 0.35

    def produce_later() -> None:
        time.sleep(0.3)
        with RawKafka("127.0.0.1", skiff.port) as other:
            produce_old(other, 2, topic, message_set([Rec(b"woken", timestamp=BASE_TS)], 1))

    thread = threading.Thread(target=produce_later)
    started = time.monotonic()
    thread.start()
    [p] = fetch_old(kafka, version, topic, {0: 0}, max_wait_ms=10_000)
    waited = time.monotonic() - started
    thread.join()
    assert [m.value for m in read_message_set(p["records"])] == [b"woken"]
    assert 0.25 <= waited < 5.0


def test_log_append_time_through_old_versions(own_redis: RedisServer, tmp_path: Path) -> None:
    # Produce v2 reports the append time; Fetch v2 (magic 1) carries it with the
    # LogAppendTime attribute bit, as Kafka's down-conversion writes it.
    skiff = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--message-timestamp-type",
        "LogAppendTime",
    )
    try:
        with RawKafka("127.0.0.1", skiff.port) as kafka:
            topic = new_topic()
            create(kafka, topic)
            before = int(time.time() * 1000)
            p = produce_old(kafka, 2, topic, message_set(sample(2), 1, GZIP))
            assert p["error_code"] == NONE and p["log_append_time"] >= before
            [part] = fetch_old(kafka, 2, topic, {0: 0})
            messages = read_message_set(part["records"])
            assert [(m.timestamp, m.timestamp_type) for m in messages] == [
                (p["log_append_time"], 1)
            ] * 2
            assert all(m.crc_ok for m in messages)
    finally:
        stop_process(skiff.proc)


# -- ListOffsets v0 --------------------------------------------------------------------------


def old_offsets(kafka: RawKafka, topic: str, asks: dict[int, tuple[int, int]]) -> list[Any]:
    kafka.send(LIST_OFFSETS, 0, list_offsets_v0_body(topic, asks))
    [t] = read_list_offsets_v0_response(kafka.recv_raw())["topics"]
    assert t["name"] == topic
    return [
        (p["partition_index"], p["error_code"], p["old_style_offsets"]) for p in t["partitions"]
    ]


def test_list_offsets_v0(kafka: RawKafka) -> None:
    topic = new_topic()
    create(kafka, topic)
    empty = new_topic()
    create(kafka, empty)
    records = [Rec(b"v", timestamp=BASE_TS + i) for i in range(5)]
    kafka.request(PRODUCE, 9, produce_request(topic, {0: build_batch(records)}))
    # Kafka 3.9 for a log of one segment: latest is [log end, log start], earliest
    # [log start]; a timestamp gives the segment's start if the segment is older
    # (here: its newest record), the log end too if it is now or later.
    now = int(time.time() * 1000)
    expected = {
        (-1, 1): [5],
        (-1, 10): [5, 0],
        (-2, 1): [0],
        (-2, 10): [0],
        (BASE_TS + 2, 10): [],
        (BASE_TS + 4, 10): [0],
        (now + 60_000, 10): [5, 0],
        (now + 60_000, 1): [5],
        (-1, 0): [],
    }
    for (ts, max_num), offsets in expected.items():
        assert old_offsets(kafka, topic, {0: (ts, max_num)}) == [(0, NONE, offsets)], (ts, max_num)
    assert old_offsets(kafka, topic, {0: (-3, 1)}) == [(0, UNSUPPORTED_VERSION, [])]
    assert old_offsets(kafka, topic, {1: (-1, 1)}) == [(1, UNKNOWN_TOPIC_OR_PARTITION, [])]
    assert old_offsets(kafka, empty, {0: (-1, 10)}) == [(0, NONE, [0])]
    assert old_offsets(kafka, empty, {0: (BASE_TS, 10)}) == [(0, NONE, [])]


# -- real old clients ------------------------------------------------------------------------


class RecordingRelay:
    """A TCP relay in front of one Skiff that notes the (API key, version) of every
    request passing through. Skiff advertises the relay, so every connection a client
    makes after bootstrapping goes through it as well."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.seen: set[tuple[int, int]] = set()
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def versions(self, api_key: int) -> set[int]:
        with self.lock:
            return {v for k, v in self.seen if k == api_key}

    def clear(self) -> None:
        with self.lock:
            self.seen.clear()

    def close(self) -> None:
        self.listener.close()
        for s in self.sockets:
            s.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            # Connect upstream off the accept thread: one slow or failed connect must not
            # leave every later client waiting in the backlog (CI saw a consumer get nothing
            # for 60 s).
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=10)
        except OSError as e:
            print(f"relay: cannot reach Skiff on port {self.target_port}: {e}", file=sys.stderr)
            client.close()
            return
        upstream.settimeout(None)
        with self.lock:
            self.sockets += [client, upstream]
        threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
        threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, requests: bool) -> None:
        buf = bytearray()
        try:
            while chunk := src.recv(65536):
                if requests:
                    buf += chunk
                    while len(buf) >= 8 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                        size, key, version = struct.unpack_from(">ihh", buf)
                        with self.lock:
                            self.seen.add((key, version))
                        del buf[: 4 + size]
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


@pytest.fixture(scope="module")
def relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordingRelay]:
    """A Redis and a Skiff of their own (Skiff advertises the relay's address)."""
    tmp: Path = tmp_path_factory.mktemp("legacy")
    redis = start_redis(tmp / "redis")
    port = free_port()
    relay = RecordingRelay(port)
    skiff = start_skiff(
        tmp / "skiff.log",
        "--redis-url",
        redis.url,
        "--advertise",
        f"127.0.0.1:{relay.port}",
        port=port,
    )
    try:
        yield relay
    finally:
        stop_process(skiff.proc)
        relay.close()
        stop_process(redis.proc)


def bootstrap(relay: RecordingRelay) -> str:
    return f"127.0.0.1:{relay.port}"


KAFKA_PYTHON_0_10 = {"api_version": (0, 10)}
KAFKA_PYTHON_0_10_PRODUCER = {**KAFKA_PYTHON_0_10, "enable_idempotence": False}  # needs 0.11
LIBRDKAFKA_0_9 = {"api_version_request": False, "broker_version_fallback": "0.9.0"}
N = 300


def old_records(seed: int) -> list[dict[str, Any]]:
    """The round-trip record set without headers (message sets cannot carry them)."""
    return [{**r, "headers": []} for r in make_records(N, seed)]


def with_timestamp(records: list[dict[str, Any]], ts: int) -> list[dict[str, Any]]:
    return [{**r, "timestamp": ts} for r in records]


@pytest.fixture(autouse=True)
def _quiet_client_warnings() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy"])
def test_kafka_python_0_10_round_trip(relay: RecordingRelay, compression: str) -> None:
    topic = new_topic("kp010")
    records = old_records(10)
    relay.clear()
    meta = kafka_python_client.produce(
        bootstrap(relay), topic, records, compression=compression, **KAFKA_PYTHON_0_10_PRODUCER
    )
    assert [m["offset"] for m in meta] == list(range(N))
    got = kafka_python_client.consume(bootstrap(relay), topic, 0, 0, N, **KAFKA_PYTHON_0_10)
    assert_same(records, got, 0)
    middle = kafka_python_client.consume(
        bootstrap(relay), topic, 0, 123, N - 123, **KAFKA_PYTHON_0_10
    )
    assert_same(records[123:], middle, 123)
    # Magic 1 for both (Produce v2; Fetch v2, or v3 for kafka-python's 0.10.1 guess).
    assert relay.versions(PRODUCE) == {2}
    assert relay.versions(FETCH) and max(relay.versions(FETCH)) <= 3
    # A new client reads the same records, timestamps included.
    assert_same(records, confluent_client.consume(bootstrap(relay), topic, 0, 0, N), 0)


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4"])
def test_librdkafka_0_9_round_trip(relay: RecordingRelay, compression: str) -> None:
    topic = new_topic("rdk09")
    records = old_records(9)
    relay.clear()
    meta = confluent_client.produce(
        bootstrap(relay), topic, records, compression=compression, **LIBRDKAFKA_0_9
    )
    assert [m["offset"] for m in meta] == list(range(N))
    # From the beginning (-2: librdkafka asks ListOffsets v0 for it), and the middle.
    got = confluent_client.consume(bootstrap(relay), topic, 0, -2, N, **LIBRDKAFKA_0_9)
    # Magic 0 has no timestamps: librdkafka reports none (0, "not available").
    assert {g["timestamp"] for g in got} <= {0, -1}
    assert_same(with_timestamp(records, -1), with_timestamp(got, -1), 0)
    middle = confluent_client.consume(bootstrap(relay), topic, 0, 200, N - 200, **LIBRDKAFKA_0_9)
    assert_same(with_timestamp(records[200:], -1), with_timestamp(middle, -1), 200)
    assert relay.versions(PRODUCE) and max(relay.versions(PRODUCE)) <= 1
    assert relay.versions(FETCH) and max(relay.versions(FETCH)) <= 1
    assert relay.versions(LIST_OFFSETS) == {0}
    # Stored without timestamps: a new client reads -1, as from Kafka.
    assert_same(
        with_timestamp(records, -1), confluent_client.consume(bootstrap(relay), topic, 0, 0, N), 0
    )


def test_records_of_a_new_client_are_read_by_old_ones(relay: RecordingRelay) -> None:
    topic = new_topic("new2old")
    records = make_records(N, 11)  # with headers: v2 batches carry them
    confluent_client.produce(bootstrap(relay), topic, records, compression="gzip")
    relay.clear()
    without_headers = [{**r, "headers": []} for r in records]
    got = kafka_python_client.consume(bootstrap(relay), topic, 0, 0, N, **KAFKA_PYTHON_0_10)
    assert_same(without_headers, got, 0)  # magic 1: timestamps kept, headers dropped
    got = confluent_client.consume(bootstrap(relay), topic, 0, 0, N, **LIBRDKAFKA_0_9)
    assert_same(with_timestamp(without_headers, -1), with_timestamp(got, -1), 0)
    assert max(relay.versions(FETCH)) <= 3


def test_records_of_an_old_client_are_read_by_new_ones(relay: RecordingRelay) -> None:
    topic = new_topic("old2new")
    records = old_records(12)
    kafka_python_client.produce(
        bootstrap(relay), topic, records, compression="snappy", **KAFKA_PYTHON_0_10_PRODUCER
    )
    assert_same(records, confluent_client.consume(bootstrap(relay), topic, 0, 0, N), 0)
    assert_same(records, kafka_python_client.consume(bootstrap(relay), topic, 0, 0, N), 0)
    assert_same(records, aiokafka_client.consume(bootstrap(relay), topic, 0, 0, N), 0)
