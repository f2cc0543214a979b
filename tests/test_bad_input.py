"""Malformed and hostile input: the sidecar answers with an error or closes that one
connection (logging why), and keeps serving everyone else with stored data intact.

After every test (autouse `healthy`): the process is alive, a fresh connection gets
ApiVersions answered, and a canary partition's stream and metadata are unchanged.
"""

from __future__ import annotations

import random
import re
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import request_samples
from conftest import RedisServer, Skiff, start_skiff, stop_process
from rawkafka import (
    RawKafka,
    Rec,
    build_batch,
    corrupt_crc,
    fetch_request,
    fetched_records,
    metadata_request,
    produce_request,
    request_type,
)

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS = 0, 1, 2, 3, 18
CREATE_TOPICS, DELETE_TOPICS, INIT_PRODUCER_ID, OFFSET_COMMIT = 19, 20, 22, 8
NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUEST = 42
UNSUPPORTED_VERSION = 35
INVALID_RECORD = 87


def new_topic(prefix: str = "bad") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def log_key(topic: str, partition: int = 0) -> str:
    return f"skiff:{{{topic}/{partition}}}:log"


def snapshot(redis_server: RedisServer, topic: str) -> tuple[Any, Any]:
    client = redis_server.client()
    meta = client.hgetall(f"skiff:{{{topic}/0}}:meta")
    return client.xrange(log_key(topic)), meta


def produce(
    kafka: RawKafka, topic: str, records: bytes | None, partition: int = 0, version: int = 9
) -> Any:
    resp = kafka.request(PRODUCE, version, produce_request(topic, {partition: records}))
    [t] = resp.responses
    [p] = t.partition_responses
    return p


@pytest.fixture(scope="module")
def canary(skiff: Skiff) -> str:
    topic = new_topic("canary")
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        records = [Rec(b"canary-%d" % i, b"k%d" % i, (("h", b"v"),)) for i in range(5)]
        assert produce(kafka, topic, build_batch(records)).error_code == NONE
    return topic


def api_versions_answered(port: int) -> bool:
    with RawKafka("127.0.0.1", port, timeout=5) as kafka:
        return (
            int(
                kafka.request(
                    API_VERSIONS,
                    3,
                    {"client_software_name": "rawkafka", "client_software_version": "1.0"},
                ).error_code
            )
            == NONE
        )


@pytest.fixture(autouse=True)
def healthy(skiff: Skiff, redis_server: RedisServer, canary: str) -> Iterator[None]:
    before = snapshot(redis_server, canary)
    assert before[0], "the canary has records"
    yield
    assert skiff.alive(), f"skiff died:\n{skiff.log()[-3000:]}"
    assert api_versions_answered(skiff.port)
    assert snapshot(redis_server, canary) == before
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        resp = kafka.request(FETCH, 12, fetch_request(canary, {0: 0}))
        got = fetched_records(resp.responses[0].partitions[0].records)
        assert [r.value for r in got] == [b"canary-%d" % i for i in range(5)]


def wait_for_log(server: Skiff, pattern: str, timeout: float = 5.0) -> str:
    """The first log line matching `pattern` (a regex), waiting for it to be written."""
    deadline = time.monotonic() + timeout
    regex = re.compile(pattern)
    while True:
        for line in server.log().splitlines():
            if regex.search(line):
                return line
        if time.monotonic() > deadline:
            raise AssertionError(f"no log line matches {pattern!r}:\n{server.log()[-3000:]}")
        time.sleep(0.05)


def assert_closed(server: Skiff, kafka: RawKafka, reason: str) -> str:
    """The connection is closed and the log names it (by the client's port) and why."""
    port = kafka.local_port
    assert kafka.closed(5.0), "the connection stayed open"
    assert not kafka._buf, f"unexpected answer before the close: {bytes(kafka._buf)!r}"
    return wait_for_log(server, rf"WARNING .*127\.0\.0\.1:{port}\b.*{reason}")


# -- framing -------------------------------------------------------------------------------


GARBAGE = [
    # (bytes, reason logged)
    (b"\x00\x00\x00\x05hello", "shorter than a request header"),
    (b"\x00\x00\x00\x00", "request of 0 bytes is shorter"),
    (b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", "request size 1195725856 is outside"),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(32), "request size 369295618"),
    (b"\xff\xff\xff\xff" + b"x" * 20, "request size -1 is outside"),
    (struct.pack(">i", -(2**31)), "request size -2147483648 is outside"),
    (struct.pack(">i", 100 * 1024 * 1024 + 1), "request size 104857601 is outside"),
    # A client id longer than the frame.
    (struct.pack(">ihhih", 12, 3, 1, 7, 100) + b"ab", "client id runs past the end"),
]


@pytest.mark.parametrize(
    ("data", "reason"),
    GARBAGE,
    ids=[
        "short",
        "empty",
        "http",
        "tls",
        "negative",
        "min-int",
        "over-default-limit",
        "client-id-overrun",
    ],
)
def test_garbage_closes_the_connection(skiff: Skiff, data: bytes, reason: str) -> None:
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        kafka.send_raw(data)
        assert_closed(skiff, kafka, re.escape(reason))


def test_random_frames(skiff: Skiff) -> None:
    """Well-framed random bodies: every one is answered or closes its connection."""
    rng = random.Random(1234)
    outcomes = set()
    for i in range(40):
        body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 200)))
        if i % 2:  # a plausible header (a served API and version) and a random body
            key, lo, hi = rng.choice([(0, 3, 12), (1, 4, 15), (3, 0, 12), (19, 2, 7)])
            body = struct.pack(">hhih", key, rng.randint(lo, hi), i, -1) + body
        with RawKafka("127.0.0.1", skiff.port, timeout=5) as kafka:
            kafka.send_raw(struct.pack(">i", len(body)) + body)
            if kafka.closed(2.0):
                outcomes.add("closed")
            else:
                frame = kafka.recv_raw(timeout=5)
                assert struct.unpack_from(">i", frame)[0] == i
                outcomes.add("answered")
    assert "closed" in outcomes


@pytest.fixture(scope="module")
def small_skiff(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Skiff]:
    log_path = tmp_path_factory.mktemp("small") / "skiff.log"
    server = start_skiff(log_path, "--redis-url", redis_server.url, "--max-request-bytes", "1024")
    yield server
    stop_process(server.proc)
    assert server.proc.returncode == 0, server.log()


def api_versions_frame(kafka: RawKafka, size: int) -> bytes:
    """An ApiVersions v3 frame whose size prefix says exactly `size`."""
    frame = kafka.frame(
        API_VERSIONS, 3, {"client_software_name": "", "client_software_version": "1"}, 1
    )
    pad = size - (len(frame) - 4)
    assert 0 <= pad < 120  # one-byte compact string length
    return kafka.frame(
        API_VERSIONS, 3, {"client_software_name": "a" * pad, "client_software_version": "1"}, 1
    )


def test_max_request_bytes(small_skiff: Skiff) -> None:
    with RawKafka("127.0.0.1", small_skiff.port) as kafka:
        kafka.client_id = "x" * 900
        frame = api_versions_frame(kafka, 1024)
        assert struct.unpack_from(">i", frame)[0] == 1024
        kafka.send_raw(frame)
        assert kafka.recv(API_VERSIONS, 3).error_code == NONE
        frame = api_versions_frame(kafka, 1025)
        kafka.send_raw(frame)
        assert_closed(small_skiff, kafka, r"request size 1025 is outside 0\.\.1024")
    # Only the size prefix of a huge request: refused before the body arrives.
    with RawKafka("127.0.0.1", small_skiff.port) as kafka:
        kafka.send_raw(struct.pack(">i", 50_000_000))
        assert_closed(small_skiff, kafka, "request size 50000000 is outside")
    # A produce larger than the limit, sent in full.
    with RawKafka("127.0.0.1", small_skiff.port) as kafka:
        big = build_batch([Rec(b"z" * 4000)])
        kafka.send(PRODUCE, 9, produce_request(new_topic(), {0: big}))
        assert_closed(small_skiff, kafka, "is outside 0..1024")
    assert small_skiff.alive()
    assert api_versions_answered(small_skiff.port)


def test_truncated_frame_then_close(skiff: Skiff) -> None:
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        port = kafka.local_port
        whole = kafka.frame(METADATA, 12, metadata_request(None), 5)
        kafka.send_raw(whole[:15])
        kafka.sock.shutdown(socket.SHUT_WR)
        assert kafka.closed(5.0)
        wait_for_log(skiff, rf"127\.0\.0\.1:{port}\b.*closed mid-request \(15 bytes")


def test_truncated_frame_then_reset(skiff: Skiff) -> None:
    kafka = RawKafka("127.0.0.1", skiff.port)
    kafka.send_raw(struct.pack(">i", 100) + b"\x00\x03")
    kafka.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    kafka.close()  # RST
    time.sleep(0.2)


def test_half_close_after_a_request_closes(skiff: Skiff) -> None:
    # Kafka clients never half-close; Skiff closes on EOF (no hang, no crash).
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        kafka.send(API_VERSIONS, 0, {})
        kafka.sock.shutdown(socket.SHUT_WR)
        assert kafka.closed(5.0)


# -- API keys and versions ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_key", "version", "reason"),
    [
        (999, 0, "unsupported API key 999 version 0"),
        (-1, 0, "unsupported API key -1 version 0"),
        (4, 0, "unsupported API key 4 version 0"),  # LeaderAndIsr: a real but unserved API
        (CREATE_TOPICS, 1, "unsupported API key 19 version 1"),
        (DELETE_TOPICS, 7, "unsupported API key 20 version 7"),
        # Newer than served: Kafka 3.9 closes the connection for these too, whether or
        # not the response has a top-level error code.
        (PRODUCE, 14, "unsupported API key 0 version 14"),
        (LIST_OFFSETS, 12, "unsupported API key 2 version 12"),
        (METADATA, 14, "unsupported API key 3 version 14"),
        (FETCH, 19, "unsupported API key 1 version 19"),
        (FETCH, 20, "unsupported API key 1 version 20"),
        (INIT_PRODUCER_ID, 6, "unsupported API key 22 version 6"),
    ],
)
def test_unsupported_api_or_version_closes_and_logs(
    skiff: Skiff, api_key: int, version: int, reason: str
) -> None:
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        kafka.send(api_key, version, b"\x00" * 16)
        assert_closed(skiff, kafka, re.escape(reason))


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        (METADATA, 1, b"\x00\x00\x00\x05"),  # five topics, none there
        (METADATA, 12, b"\x05\x00"),  # compact array, then nothing
        (PRODUCE, 9, b"\x00\x00\x01"),  # transactional id, then nothing
        (FETCH, 4, b"\xff\xff\xff\xff"),  # replica id only
        (CREATE_TOPICS, 7, b""),
        (API_VERSIONS, 3, b"\x50abc"),  # string length past the end
        (INIT_PRODUCER_ID, 4, b"\x00\x00\x00"),
        (LIST_OFFSETS, 8, b"\xff\xff\xff\xff\x00\x7f"),
        (DELETE_TOPICS, 6, b"\x02\x7f"),
        # The old versions Skiff decodes by hand (kio has no schema for them).
        (PRODUCE, 0, b"\xff\xff\x00\x00"),  # acks, then half a timeout
        (PRODUCE, 2, b"\xff\xff\x00\x00\x13\x88\x00\x00\x00\x01\x00\x09ab"),  # name cut
        (FETCH, 3, b"\xff\xff\xff\xff\x00\x00\x00\x00"),  # no min_bytes
        (FETCH, 0, b"\xff\xff\xff\xff" + b"\x00" * 8 + b"\x7f\xff\xff\xff"),  # 2**31 topics
        (LIST_OFFSETS, 0, b"\xff\xff\xff\xff\x00\x00\x00\x01\xff\xff"),  # null topic name
    ],
    ids=lambda v: str(v) if not isinstance(v, bytes) else v.hex() or "empty",
)
def test_undecodable_body_closes_and_logs(
    skiff: Skiff, api_key: int, version: int, body: bytes
) -> None:
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        kafka.send(api_key, version, body)
        assert_closed(skiff, kafka, rf"undecodable \w+ v{version} request")


HUGE = b"\xff\xff\xff\xff\x0f"  # uvarint 2**32 - 1: a compact array of 2**32 - 2 items
# Bodies whose compact arrays made kio reserve up to 2**32 - 2 items (~34 GB): the
# process aborted. The tagged-field count and the legacy (int32) Fetch v4 array were
# refused by kio already, now before decoding with the field named. (api key, version,
# body, the field named in the log line)
HUGE_ARRAYS = [
    (METADATA, 12, HUGE + b"\x00\x00\x00", "MetadataRequest.topics"),
    # One topic whose tagged section claims 2**32 - 1 fields.
    (METADATA, 12, b"\x02" + bytes(16) + b"\x00" + HUGE + b"\x01\x00\x00", "tagged fields"),
    # group "g", generation 1, member "m", no instance id, then topics.
    (
        OFFSET_COMMIT,
        8,
        b"\x02g\x00\x00\x00\x01\x02m\x00" + HUGE + b"\x00",
        "OffsetCommitRequest.topics",
    ),
    # ... one topic "t" whose partitions array is huge.
    (
        OFFSET_COMMIT,
        8,
        b"\x02g\x00\x00\x00\x01\x02m\x00\x02\x02t" + HUGE + b"\x00\x00",
        "OffsetCommitRequestTopic.partitions",
    ),
    (
        CREATE_TOPICS,
        5,
        b"\x80\x80\x80\x80\x08\x00\x00\x13\x88\x00\x00",
        "CreateTopicsRequest.topics",
    ),
    # One topic "t", 1 partition, replication factor 1, then assignments.
    (
        CREATE_TOPICS,
        5,
        b"\x02\x02t\x00\x00\x00\x01\x00\x01" + HUGE,
        "CreatableTopic.assignments",
    ),
    # No transactional id, acks -1, timeout 5000, then topics.
    (PRODUCE, 9, b"\x00\xff\xff\x00\x00\x13\x88" + HUGE + b"\x00", "ProduceRequest.topic_data"),
    # Not flexible: replica id, max wait, min bytes, max bytes, isolation, then topics.
    (
        FETCH,
        4,
        struct.pack(">iiiib", -1, 100, 1, 1 << 20, 0) + b"\x7f\xff\xff\xff",
        "FetchRequest.topics",
    ),
]


@pytest.mark.parametrize(
    ("api_key", "version", "body", "field"), HUGE_ARRAYS, ids=[f for *_, f in HUGE_ARRAYS]
)
def test_huge_array_length_closes_without_allocating(
    skiff: Skiff, api_key: int, version: int, body: bytes, field: str
) -> None:
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        kafka.send(api_key, version, body)
        line = assert_closed(skiff, kafka, r"undecodable \w+ v\d+ request: MalformedRequest")
    assert field in line


def test_the_issues_24_byte_frame(skiff: Skiff) -> None:
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        kafka.send_raw(bytes.fromhex("000000140003000c00000007000466757a7a00ffffffff0f"))
        line = assert_closed(skiff, kafka, "MalformedRequest")
    assert "MetadataRequest.topics: an array of 4294967294 items" in line


def test_nulls_as_kafka_treats_them(skiff: Skiff) -> None:
    """Every array, string and bytes field of every request version Skiff decodes with
    kio, sent as null: where the schema says nullable (Metadata topics = all topics,
    Produce records = INVALID_RECORD, ...) the request is answered; elsewhere it is
    malformed and the connection is closed, as by Kafka ("non-nullable field X was
    serialized as null"). Never a traceback."""
    closed: dict[int, str] = {}
    failures = []
    answered = 0
    for key, version in request_samples.kio_decoded():
        for path, kind, nullable in request_samples.null_paths(request_type(key, version)):
            body = request_samples.with_null(key, version, path, kind)
            case = f"api {key} v{version} {path}=null"
            with RawKafka("127.0.0.1", skiff.port, timeout=10) as kafka:
                cid = kafka.send(key, version, body)
                if not nullable:
                    if not kafka.closed(10.0) or kafka._buf:
                        failures.append(f"{case}: not closed without an answer")
                    closed[kafka.local_port] = path.rsplit(".", 1)[-1]
                    continue
                try:
                    kafka.recv(key, version, timeout=10)
                except Exception as exc:
                    failures.append(f"{case}: no answer ({exc!r})")
                    continue
                if kafka.last_correlation_id != cid:
                    failures.append(f"{case}: answered as {kafka.last_correlation_id}")
                answered += 1
    assert not failures, "\n".join(failures)
    assert answered > 50 and len(closed) > 300
    log = skiff.log()
    assert "Traceback" not in log, log[log.index("Traceback") - 2000 :][:6000]
    for port, field in closed.items():
        assert re.search(
            rf"closing connection 127\.0\.0\.1:{port}: .*non-nullable field \w+\.{field} ", log
        ), f"no close reason logged for {field} (port {port})"


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_null_topic_name_before_v12(skiff: Skiff, version: int) -> None:
    """Names are nullable from v10 but ids are served from v12 only: Kafka answers
    INVALID_REQUEST (it was a traceback and a closed connection: the response of these
    versions has no null name)."""
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        resp = kafka.request(
            METADATA, version, {"topics": [{"name": None, "topic_id": uuid.uuid4()}]}
        )
        assert [(t.name, t.error_code) for t in resp.topics] == [("", INVALID_REQUEST)]
    assert "Traceback" not in skiff.log()


def test_answers_already_sent_survive_a_later_bad_frame(skiff: Skiff) -> None:
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        for cid in (1, 2, 3):
            kafka.send(API_VERSIONS, 2, {}, correlation_id=cid)
            assert kafka.recv(API_VERSIONS, 2).error_code == NONE
            assert kafka.last_correlation_id == cid
        kafka.send_raw(struct.pack(">i", -5))
        assert_closed(skiff, kafka, "request size -5 is outside")


def test_tagged_field_past_the_end_closes(skiff: Skiff) -> None:
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        port = kafka.local_port
        # Header v2 for Metadata v12 with one tagged field that claims 100 bytes.
        header = struct.pack(">hhih", METADATA, 12, 9, -1) + b"\x01\x05\x64abc"
        kafka.send_raw(struct.pack(">i", len(header)) + header)
        assert kafka.closed(5.0)
        wait_for_log(skiff, rf"127\.0\.0\.1:{port}\b.*tagged fields run past the end")


def test_requests_before_a_bad_one_are_answered(skiff: Skiff) -> None:
    """Pipelined: the good requests ahead of a bad frame get their answers first."""
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        frames = b"".join(kafka.frame(API_VERSIONS, 2, {}, cid) for cid in (1, 2, 3))
        kafka.send_raw(frames + struct.pack(">i", -5))
        for cid in (1, 2, 3):
            assert kafka.recv(API_VERSIONS, 2).error_code == NONE
            assert kafka.last_correlation_id == cid
        assert kafka.closed(5.0)


# -- bad produce data ----------------------------------------------------------------------


def test_wrong_crc_is_corrupt_message_and_stores_nothing(
    skiff: Skiff, redis_server: RedisServer
) -> None:
    topic = new_topic()
    client = redis_server.client()
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        assert produce(kafka, topic, build_batch([Rec(b"first")])).base_offset == 0
        before = snapshot(redis_server, topic)
        good = build_batch([Rec(b"good-%d" % i) for i in range(3)])
        bad = corrupt_crc(build_batch([Rec(b"bad-%d" % i) for i in range(3)]))
        for version in (3, 9, 11):
            p = produce(kafka, topic, bad, version=version)
            assert (p.error_code, p.base_offset) == (CORRUPT_MESSAGE, -1)
            if version >= 8:
                assert p.error_message
        # Two batches in one partition are refused whole (v3+ takes one), bad or not.
        p = produce(kafka, topic, good + bad)
        assert p.error_code == INVALID_RECORD
        p = produce(kafka, topic, bad + good)
        assert p.error_code == INVALID_RECORD
        assert client.xlen(log_key(topic)) == 1
        assert snapshot(redis_server, topic) == before
        # The connection still works and the next good produce follows offset 0.
        assert produce(kafka, topic, good).base_offset == 1
        wait_for_log(skiff, rf"rejected batch for {topic}-0: record batch CRC32C mismatch")


def test_bad_partition_among_good_ones(skiff: Skiff, redis_server: RedisServer) -> None:
    topic = new_topic()
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        resp = kafka.request(
            CREATE_TOPICS,
            7,
            {
                "topics": [{"name": topic, "num_partitions": 2, "replication_factor": 1}],
                "timeout": 5000,
            },
        )
        assert resp.topics[0].error_code == NONE
        bad = corrupt_crc(build_batch([Rec(b"bad")]))
        good = build_batch([Rec(b"good")])
        resp = kafka.request(PRODUCE, 9, produce_request(topic, {0: bad, 1: good}))
        results = {p.index: p for p in resp.responses[0].partition_responses}
        assert results[0].error_code == CORRUPT_MESSAGE
        assert (results[1].error_code, results[1].base_offset) == (NONE, 0)
    client = redis_server.client()
    assert client.xlen(log_key(topic, 0)) == 0
    assert client.xlen(log_key(topic, 1)) == 1


@pytest.mark.parametrize(
    ("mangle", "error"),
    [
        (lambda b: b[:-3], CORRUPT_MESSAGE),  # truncated: length runs past the end
        (lambda b: b[:40], CORRUPT_MESSAGE),  # shorter than a batch header
        (lambda b: b + b"\x00\x00\x00", CORRUPT_MESSAGE),  # trailing partial batch
        (lambda b: b[:8] + struct.pack(">i", 5) + b[12:], CORRUPT_MESSAGE),  # tiny length
        (lambda b: b[:16] + b"\x01" + b[17:], INVALID_RECORD),  # magic 1
        (lambda b: b"", INVALID_RECORD),  # no batch at all
        (lambda b: b + b, INVALID_RECORD),  # two batches: v3+ takes exactly one
        (lambda b: None, INVALID_RECORD),  # null records
    ],
    ids=["truncated", "short", "trailing", "tiny-length", "magic-1", "empty", "two", "null"],
)
def test_malformed_batches_store_nothing(
    skiff: Skiff, redis_server: RedisServer, mangle: Any, error: int
) -> None:
    topic = new_topic()
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        produce(kafka, topic, build_batch([Rec(b"ok")]))
        p = produce(kafka, topic, mangle(build_batch([Rec(b"x" * 50), Rec(b"y")])))
        assert p.error_code == error
        assert redis_server.client().xlen(log_key(topic)) == 1
        assert produce(kafka, topic, build_batch([Rec(b"ok2")])).base_offset == 1


@pytest.mark.parametrize("partition", [5, 1, -1])
def test_produce_to_a_missing_partition(
    skiff: Skiff, redis_server: RedisServer, partition: int
) -> None:
    topic = new_topic()
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        assert produce(kafka, topic, build_batch([Rec(b"p0")])).error_code == NONE
        p = produce(kafka, topic, build_batch([Rec(b"nowhere")]), partition=partition)
        assert (p.index, p.error_code, p.base_offset) == (partition, UNKNOWN_TOPIC_OR_PARTITION, -1)
    assert redis_server.client().keys(f"skiff:{{{topic}/{partition}}}*") == []


@pytest.mark.parametrize("name", ["bad name!", "a/b", "", "x" * 250, "..", "ü"])
def test_produce_to_an_invalid_topic_name(
    skiff: Skiff, redis_server: RedisServer, name: str
) -> None:
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        p = produce(kafka, name, build_batch([Rec(b"v")]))
        assert p.error_code == INVALID_TOPIC_EXCEPTION
    assert not redis_server.client().hexists("skiff:topics", name)


def test_invalid_acks(skiff: Skiff) -> None:
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        resp = kafka.request(
            PRODUCE, 9, produce_request(new_topic(), {0: build_batch([Rec(b"v")])}, acks=2)
        )
        assert resp.responses[0].partition_responses[0].error_code == 21  # INVALID_REQUIRED_ACKS


# -- many bad clients at once --------------------------------------------------------------


def test_many_bad_connections_at_once(skiff: Skiff) -> None:
    clients = [RawKafka("127.0.0.1", skiff.port) for _ in range(30)]
    try:
        for i, kafka in enumerate(clients):
            kafka.send_raw(GARBAGE[i % len(GARBAGE)][0])
        for kafka in clients:
            assert kafka.closed(5.0)
    finally:
        for kafka in clients:
            kafka.close()


def test_log_names_every_closed_connection(skiff: Skiff) -> None:
    """Every close (here and in the tests before) left a WARNING line naming the peer."""
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        kafka.send_raw(b"\x00\x00\x00\x01x")
        assert_closed(skiff, kafka, "shorter than a request header")
    lines = [line for line in skiff.log().splitlines() if "closing connection" in line]
    assert lines
    assert all(
        re.search(r"WARNING .*closing connection 127\.0\.0\.1:\d+: \S", line) for line in lines
    )
