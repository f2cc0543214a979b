"""Round trips through real Kafka clients: what a client produces comes back from every
client byte for byte, at the offsets the producer was told, and is visible as plain
Redis stream entries.

Clients (tests/clients/*): confluent-kafka (librdkafka), kafka-python, aiokafka, and the
Java client when ``mvn`` is on PATH and tests/clients/java_client.py exists. Each
produces N records of tests/records.py to a fresh topic per codec it supports; those
topics are produced once per module and reused by the cross-client, ListOffsets, Redis
and mid-batch tests.

Storage formats (issue 16): the tests where storage matters run on `record` and `batch`
topics with the same assertions. On `batch` topics every client's round trip uses its
cross codec and no compression, and librdkafka every codec: the stored bytes are the
producer's batches, so what varies with the format is each producer's batches and each
consumer's reading of them (all cross pairs), not every client x codec pair again.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import socket
import struct
import uuid
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest
import redis
from clients import aiokafka_client, confluent_client, kafka_python_client
from crc32c import crc32c
from formats import FORMATS, prepare_topic
from records import (
    assert_same,
    backward_steps,
    expected_offset_for_time,
    make_records,
)

from sidecar.protocol import stored_batch

N = 10_000
SEED = 1
ALL_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

CLIENTS: dict[str, ModuleType] = {
    "confluent": confluent_client,
    "kafka-python": kafka_python_client,
    "aiokafka": aiokafka_client,
}
if shutil.which("mvn") and importlib.util.find_spec("clients.java_client") is not None:
    CLIENTS["java"] = importlib.import_module("clients.java_client")
if shutil.which("go") and importlib.util.find_spec("clients.franz_client") is not None:
    CLIENTS["franz"] = importlib.import_module("clients.franz_client")

# The codec of the topic each producer writes for the cross-client, Redis and ListOffsets
# tests: a different one per producer. (Skiff decompresses on produce, stores records
# uncompressed with their producer's codec, and on compression.type=producer, the
# default, serves them compressed with it: tests/test_compression.py.)
CROSS_CODEC = {"confluent": "zstd", "kafka-python": "gzip", "aiokafka": "snappy", "java": "lz4"}


def codecs(name: str) -> tuple[str, ...]:
    return tuple(getattr(CLIENTS[name], "CODECS", ALL_CODECS))


def cross_codec(name: str) -> str:
    wanted = CROSS_CODEC.get(name, "none")
    return wanted if wanted in codecs(name) else "none"


def dataset(name: str) -> list[dict[str, Any]]:
    """The records ``name`` produces: the full set, less null header values for a client
    that cannot send them (kafka-python, see its module)."""
    nulls = getattr(CLIENTS[name], "NULL_HEADER_VALUES", True)
    return make_records(N, SEED, null_header_values=nulls)


# --------------------------------------------------------------------------- produced topics


@dataclass
class Topic:
    name: str
    records: list[dict[str, Any]]
    producer: str
    codec: str


class Produced:
    """Topics produced once per module: (client, codec) -> Topic, produced on first use."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.topics: dict[tuple[str, str, str], Topic] = {}
        self.failed: dict[tuple[str, str, str], str] = {}

    def get(self, client: str, codec: str, storage_format: str = "record") -> Topic:
        key = (client, codec, storage_format)
        if key in self.failed:
            pytest.fail(f"producing with {key} failed earlier: {self.failed[key]}")
        if key not in self.topics:
            try:
                self.topics[key] = self._produce(client, codec, storage_format)
            except BaseException as exc:
                self.failed[key] = repr(exc)[:2000]
                raise
        return self.topics[key]

    def _produce(self, client: str, codec: str, storage_format: str) -> Topic:
        name = f"rt-{client}-{codec}-{storage_format[0]}-{uuid.uuid4().hex[:8]}"
        records = dataset(client)
        prepare_topic(self.bootstrap, name, storage_format)
        meta = CLIENTS[client].produce(self.bootstrap, name, records, compression=codec)
        assert [m["offset"] for m in meta] == list(range(N)), (
            f"{client} was told offsets other than 0..{N - 1}: first "
            f"{[m['offset'] for m in meta[:10]]}"
        )
        assert {m["partition"] for m in meta} == {0}
        if getattr(CLIENTS[client], "PRODUCE_METADATA_TIMESTAMPS", True):
            wrong = [
                (i, m["timestamp"], r["timestamp"])
                for i, (m, r) in enumerate(zip(meta, records, strict=True))
                if m["timestamp"] != r["timestamp"]
            ]
            assert not wrong, f"produce metadata timestamps (index, told, sent): {wrong[:5]}"
        return Topic(name, records, client, codec)


@pytest.fixture(scope="module")
def produced(skiff: Any) -> Produced:
    return Produced(skiff.bootstrap)


# --------------------------------------------------------------------------- round trips

ROUND_TRIPS = [(c, codec, "record") for c in CLIENTS for codec in ALL_CODECS] + sorted(
    {
        (c, codec, "batch")
        for c in CLIENTS
        for codec in ((ALL_CODECS if c == "confluent" else ()) + ("none", cross_codec(c)))
    }
)


@pytest.mark.parametrize(
    ("client", "codec", "storage_format"),
    ROUND_TRIPS,
    ids=[f"{c}-{codec}-{f}" for c, codec, f in ROUND_TRIPS],
)
def test_round_trip(
    skiff: Any, produced: Produced, client: str, codec: str, storage_format: str
) -> None:
    if codec not in codecs(client):
        missing = getattr(CLIENTS[client], "MISSING_CODECS", {}).get(codec, "?")
        pytest.skip(f"{client} cannot use {codec} here: install the {missing} package")
    topic = produced.get(client, codec, storage_format)
    got = CLIENTS[client].consume(skiff.bootstrap, topic.name, 0, 0, N)
    assert_same(topic.records, got, 0, partition=0)


CROSS = [(p, c) for p in CLIENTS for c in CLIENTS if p != c]


@pytest.mark.parametrize("storage_format", FORMATS)
@pytest.mark.parametrize(("producer", "consumer"), CROSS, ids=[f"{p}-to-{c}" for p, c in CROSS])
def test_cross_client(
    skiff: Any, produced: Produced, producer: str, consumer: str, storage_format: str
) -> None:
    topic = produced.get(producer, cross_codec(producer), storage_format)
    got = CLIENTS[consumer].consume(skiff.bootstrap, topic.name, 0, 0, N)
    assert_same(topic.records, got, 0, partition=0)


# --------------------------------------------------------------------------- ListOffsets


def timestamp_specs(records: list[dict[str, Any]]) -> dict[str, int]:
    """Named timestamps to look up, chosen from the data set."""
    ts = [r["timestamp"] for r in records]
    back = backward_steps(records)
    assert back, "the data set has no backwards timestamp step"
    b = back[len(back) // 2]
    peak = max(ts[:b])
    after_peak = next(i for i in range(b, len(ts)) if ts[i] > peak)
    equal = next(i for i in range(1, len(ts) - 1) if ts[i - 1] < ts[i] == ts[i + 1])
    specs = {
        "before-all": ts[0] - 1000,
        "first": ts[0],
        "equal-run": ts[equal],
        # In the region after a step back: the answer lies before the step.
        "inside-backwards-region": ts[b],
        "backwards-region-peak": peak,
        # Above the peak: the answer lies after the region, which is all below T.
        "past-backwards-peak": ts[after_peak],
        "last-max": max(ts),
        "after-all": max(ts) + 1,
    }
    first_of_value = expected_offset_for_time(records, ts[b])[0]
    assert first_of_value < b, "inside-backwards-region does not test a backwards region"
    assert expected_offset_for_time(records, specs["past-backwards-peak"])[0] > b
    return specs


@pytest.mark.parametrize("storage_format", FORMATS)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_list_offsets(skiff: Any, produced: Produced, client: str, storage_format: str) -> None:
    topic = produced.get(client, cross_codec(client), storage_format)
    adapter = CLIENTS[client]
    earliest = adapter.list_offsets(skiff.bootstrap, topic.name, 0, "earliest")
    latest = adapter.list_offsets(skiff.bootstrap, topic.name, 0, "latest")
    assert (earliest["offset"], latest["offset"]) == (0, N)
    problems = []
    for label, t in timestamp_specs(topic.records).items():
        want = expected_offset_for_time(topic.records, t)
        got = adapter.list_offsets(skiff.bootstrap, topic.name, 0, t)
        got_pair = (got["offset"], got["timestamp"])
        if want == (-1, -1):
            ok = got["offset"] in (-1, None) and got["timestamp"] in (-1, None)
        else:
            ok = got_pair == want
        if not ok:
            problems.append(f"{label} T={t}: expected (offset, timestamp) {want}, got {got_pair}")
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------- Redis view


def _varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def kafka_headers(headers: list[tuple[str, bytes | None]]) -> bytes:
    """Kafka's record header encoding (zig-zag varint count and lengths, -1 for null);
    empty when there are no headers, as Skiff stores it."""
    if not headers:
        return b""
    out = [_varint(len(headers))]
    for name, value in headers:
        raw = name.encode()
        out += [_varint(len(raw)), raw]
        out += [_varint(-1)] if value is None else [_varint(len(value)), value]
    return b"".join(out)


def node_for(redis_server: Any, key: str) -> redis.Redis:
    """A plain client of the Redis holding key (SKIFF_TEST_REDIS=cluster: its primary)."""
    cluster = getattr(redis_server, "cluster", None)
    return redis.Redis(port=cluster.owner(key) if cluster else redis_server.port)


def stream_entries(redis_server: Any, topic: str, partition: int = 0) -> list[Any]:
    client = node_for(redis_server, f"skiff:{{{topic}/{partition}}}:log")
    client.set_response_callback("XRANGE", lambda response, **_: response)  # keep field order
    try:
        return client.execute_command("XRANGE", f"skiff:{{{topic}/{partition}}}:log", "-", "+")
    finally:
        client.close()


@pytest.mark.parametrize("client", list(CLIENTS))
def test_records_are_plain_redis_stream_entries(
    redis_server: Any, produced: Produced, client: str
) -> None:
    topic = produced.get(client, cross_codec(client))
    assert_record_entries(topic, stream_entries(redis_server, topic.name))


@pytest.mark.parametrize("client", list(CLIENTS))
def test_batch_topics_keep_each_producer_batch_as_one_entry(
    redis_server: Any, produced: Produced, client: str
) -> None:
    """On a `batch` topic: one entry per produced batch, ID 0-<last offset + 1>, field
    `b` holding a valid v2 batch with base offset 0 (Fetch writes the real one in), the
    batches contiguous; expanded, they are exactly the `record` topic's entries."""
    topic = produced.get(client, cross_codec(client), "batch")
    entries = stream_entries(redis_server, topic.name)
    assert 0 < len(entries) < N
    assert all(fields[0] == stored_batch.FIELD and len(fields) == 2 for _, fields in entries)
    first = 0
    for entry_id, fields in entries:
        data = fields[1]
        header = stored_batch.header(data)
        assert (header[0], header[3]) == (0, 2), f"batch at {entry_id!r}: base offset, magic"
        assert crc32c(data[21:]) == header[4], f"batch at {entry_id!r}: CRC32C"
        assert stored_batch.base_offset(entry_id, data) == first
        first = stored_batch.last_offset(entry_id) + 1
    assert first == N
    assert_record_entries(topic, stored_batch.record_entries(entries))


def assert_record_entries(topic: Topic, entries: list[Any]) -> None:
    """`entries` (a record topic's XRANGE reply, or batches expanded) are topic's records,
    one entry per offset."""
    client = topic.producer
    assert len(entries) == N
    codec = ALL_CODECS.index(topic.codec)
    for i, (entry_id, fields) in enumerate(entries):
        r = topic.records[i]
        flags = (1 if r["key"] is None else 0) | (2 if r["value"] is None else 0)
        # Flag bits 3-5 keep the codec of the batch as the producer sent it (Kafka's
        # codec ids: none 0 ... zstd 4). Clients may send a batch uncompressed when
        # compressing would not shrink it (kafka-python does), so either is right.
        stored = list(fields)
        got_flags = int(stored[-1]) if entry_id == f"0-{i + 1}".encode() else -1
        if got_flags >> 3 in (0, codec):
            flags |= got_flags & ~7
        want = [
            b"t",
            str(r["timestamp"]).encode(),
            b"k",
            r["key"] or b"",
            b"v",
            r["value"] or b"",
            b"h",
            kafka_headers(r["headers"]),
            b"f",
            str(flags).encode(),
        ]
        if entry_id != f"0-{i + 1}".encode() or stored != want:
            pytest.fail(
                f"stream entry #{i} of {topic.name} (produced by {client}):\n"
                f"  expected id 0-{i + 1}, fields {want!r:.600}\n"
                f"  got      id {entry_id.decode()}, fields {stored!r:.600}"
            )
    # Most batches of a compressed topic do arrive compressed.
    if codec:
        compressed = sum(1 for _, f in entries if int(f[-1]) >> 3 == codec)
        assert compressed > N // 2


# --------------------------------------------------------------------------- mid-batch fetch

MID_N = 30  # small enough for one default-sized (16 KiB) batch of every client
MID_AT = 17


def mid_batch_records() -> list[dict[str, Any]]:
    """MID_N small records with strictly increasing timestamps: Skiff's time index then
    gets one member per produced batch (lua/append.lua), which tells whether the
    producer sent them as one batch."""
    records = make_records(MID_N, SEED + 1)
    out = []
    for i, r in enumerate(records):
        value = r["value"] if r["value"] is None or len(r["value"]) <= 300 else r["value"][:300]
        out.append({**r, "value": value, "timestamp": records[0]["timestamp"] + i})
    size = sum(
        len(r["key"] or b"") + len(r["value"] or b"") + len(kafka_headers(r["headers"]))
        for r in out
    )
    assert size < 12_000, f"mid-batch records take {size} bytes: too many for one batch"
    return out


def raw_fetch(bootstrap: str, topic: str, partition: int, offset: int) -> tuple[int, bytes]:
    """One Fetch v4 request on a fresh socket: (partition error code, records bytes)."""
    name = topic.encode()
    body = struct.pack(">iiiib", -1, 0, 1, 1 << 20, 0)
    body += struct.pack(">ih", 1, len(name)) + name
    body += struct.pack(">iiqi", 1, partition, offset, 1 << 20)
    client_id = b"skiff-roundtrip"
    frame = struct.pack(">hhih", 1, 4, 7, len(client_id)) + client_id + body
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError(f"connection closed after {len(data)} bytes")
            data += chunk
    pos = 4
    (correlation_id, _throttle, n_topics) = struct.unpack_from(">iii", data, pos)
    assert (correlation_id, n_topics) == (7, 1)
    pos += 12
    (name_len,) = struct.unpack_from(">h", data, pos)
    pos += 2 + name_len
    (_n_parts, _index, error, _hw, _lso, n_aborted) = struct.unpack_from(">iihqqi", data, pos)
    pos += 30 + 16 * max(n_aborted, 0)
    (size,) = struct.unpack_from(">i", data, pos)
    pos += 4
    return error, data[pos : pos + max(size, 0)]


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos


def first_batch(records: bytes) -> dict[str, int]:
    """Header fields of the first v2 batch (its CRC checked) and the offset delta of its
    first record."""
    base_offset, length, _epoch, magic, crc = struct.unpack_from(">qiibI", records, 0)
    assert magic == 2
    assert crc32c(records[21 : 12 + length]) == crc, "batch CRC32C mismatch"
    _attrs, last_delta, _ts, _max_ts, _pid, _pepoch, _seq, count = struct.unpack_from(
        ">hiqqqhii", records, 21
    )
    # A record: varint length, int8 attributes, varlong timestamp delta, varint offset delta.
    _length, pos = _read_varint(records, 61)
    _ts_delta, pos = _read_varint(records, pos + 1)
    offset_delta, _ = _read_varint(records, pos)
    return {
        "base_offset": base_offset,
        "count": count,
        "last_offset_delta": last_delta,
        "first_offset_delta": offset_delta,
    }


@pytest.mark.parametrize("storage_format", FORMATS)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_fetch_from_middle_of_a_batch(
    skiff: Any, redis_server: Any, topic: str, client: str, storage_format: str
) -> None:
    adapter = CLIENTS[client]
    prepare_topic(skiff.bootstrap, topic, storage_format)
    records = mid_batch_records()
    if not getattr(adapter, "NULL_HEADER_VALUES", True):
        records = [
            {**r, "headers": [(k, b"<null>" if v is None else v) for k, v in r["headers"]]}
            for r in records
        ]
    # One batch: records queue up during the linger and go out together on flush.
    meta = adapter.produce(skiff.bootstrap, topic, records, linger_ms=1000)
    assert [m["offset"] for m in meta] == list(range(MID_N))
    time_key = f"skiff:{{{topic}/0}}:time"
    batches = node_for(redis_server, time_key).zcard(time_key)
    assert batches == 1, f"{client} sent the records in {batches} batches, not one"

    got = adapter.consume(skiff.bootstrap, topic, 0, MID_AT, MID_N - MID_AT)
    assert_same(records[MID_AT:], got, MID_AT, partition=0)

    # On the wire: on a `record` topic the first batch Skiff returns starts at the fetch
    # offset itself; on a `batch` topic it is the producer's whole batch, as from Kafka,
    # and the client left out the records before the fetch offset (checked above).
    error, data = raw_fetch(skiff.bootstrap, topic, 0, MID_AT)
    assert error == 0
    batch = first_batch(data)
    if storage_format == "record":
        assert batch["base_offset"] == MID_AT, batch
    else:
        assert (batch["base_offset"], batch["count"]) == (0, MID_N), batch
    assert batch["first_offset_delta"] == 0, batch


@pytest.mark.parametrize("storage_format", FORMATS)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_fetch_from_middle_of_large_topic(
    skiff: Any, produced: Produced, client: str, storage_format: str
) -> None:
    """Seek into the middle of a 10k-record topic (inside one of the producer's batches,
    most likely) and read a stretch across several batches."""
    topic = produced.get(client, "none", storage_format)
    start, count = 4321, 1500
    got = CLIENTS[client].consume(skiff.bootstrap, topic.name, 0, start, count)
    assert_same(topic.records[start : start + count], got, start, partition=0)
