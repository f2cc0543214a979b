"""compression.type, Kafka-style: Skiff stores records uncompressed (with the codec their
producer used) and Fetch compresses the batches it builds with the topic's
compression.type, or with each record's producer codec for `producer`.

For each topic compression.type x each producer codec (one topic per case, a few
records each, produced with confluent-kafka): the Java client, confluent-kafka and
kafka-python read every record back byte for byte, and a raw Fetch shows the batches
carry the expected codec and start exactly at the fetch offset.

On `batch` topics (skiff.storage.format, issue 16) a batch is stored as its producer
sent it, recompressed on append when the topic's compression.type names another codec;
Fetch serves whole batches, so a fetch from inside one starts at its base offset (as
from Kafka) and clients drop the records before the fetch offset. Every raw-Fetch case
runs on both formats; the clients read back the `producer` topics (stored as sent) and
two recompressed ones on `batch` topics, not the whole matrix again.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import struct
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest
from clients import confluent_client, kafka_python_client
from conftest import Skiff
from formats import FORMATS
from rawkafka import RawKafka, fetch_request, read_batches
from records import assert_same, make_records

FETCH, CREATE_TOPICS = 1, 19
NONE = 0
TOPIC_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
PRODUCER_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_ID = {"none": 0, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
N = 20  # records per case: the fixed special cases of tests/records.py and a few more
MID = 7  # a fetch offset inside the produced batch

CONSUMERS: dict[str, ModuleType] = {
    "confluent": confluent_client,
    "kafka-python": kafka_python_client,
}
if shutil.which("mvn") and importlib.util.find_spec("clients.java_client") is not None:
    CONSUMERS["java"] = importlib.import_module("clients.java_client")


def expected_codec(topic_type: str, producer_codec: str) -> int:
    return CODEC_ID[producer_codec if topic_type == "producer" else topic_type]


def batch_codecs(data: bytes) -> list[tuple[int, int, int]]:
    """(base offset, codec, timestamp type) of each v2 batch in a records field."""
    out = []
    pos = 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        (attributes,) = struct.unpack_from(">h", data, pos + 21)
        out.append((base, attributes & 0x07, (attributes >> 3) & 1))
        pos += 12 + length
    return out


def create_topic(kafka: RawKafka, name: str, configs: dict[str, str]) -> None:
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        "timeout": 10000,
        "validate_only": False,
    }
    [result] = kafka.request(CREATE_TOPICS, 7, body).topics
    assert result.error_code == NONE, result


def raw_fetch(kafka: RawKafka, topic: str, offset: int, **limits: Any) -> bytes:
    resp = kafka.request(FETCH, 12, fetch_request(topic, {0: offset}, **limits))
    [p] = resp.responses[0].partitions
    assert p.error_code == NONE, p
    return bytes(p.records or b"")


def assert_same_as(
    client: str, produced: list[dict[str, Any]], got: list[dict[str, Any]], first: int, **kw: Any
) -> None:
    try:
        assert_same(produced, got, first, partition=0, **kw)
    except AssertionError as exc:
        raise AssertionError(f"read by {client}: {exc}") from None


def records_of(data: bytes) -> list[dict[str, Any]]:
    return [
        {
            "offset": r.offset,
            "partition": 0,
            "key": r.key,
            "value": r.value,
            "headers": list(r.headers),
            "timestamp": r.timestamp,
            "timestamp_type": b.timestamp_type,
        }
        for b in read_batches(data)
        for r in b.records
    ]


# -- the matrix ----------------------------------------------------------------------------


@dataclass
class Case:
    topic: str
    records: list[dict[str, Any]]


@pytest.fixture(scope="module")
def matrix(skiff: Skiff) -> dict[tuple[str, str, str], Case]:
    """One topic per (compression.type, producer codec, storage format), each holding N
    records produced in one batch by confluent-kafka with that codec."""
    records = make_records(N, 7)
    cases = {}
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        for topic_type in TOPIC_TYPES:
            for codec in PRODUCER_CODECS:
                for fmt in FORMATS:
                    name = f"cz-{topic_type}-{codec}-{fmt[0]}-{uuid.uuid4().hex[:8]}"
                    configs = {"compression.type": topic_type, "skiff.storage.format": fmt}
                    create_topic(kafka, name, configs)
                    cases[(topic_type, codec, fmt)] = Case(name, records)

    def produce(key: tuple[str, str, str]) -> None:
        meta = confluent_client.produce(
            skiff.bootstrap, cases[key].topic, records, compression=key[1]
        )
        assert [m["offset"] for m in meta] == list(range(N))

    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 2)) as pool:
        list(pool.map(produce, cases))
    return cases


CASES = [(t, c) for t in TOPIC_TYPES for c in PRODUCER_CODECS]
READ_BACK = [(t, c, "record") for t, c in CASES] + [
    (t, c, "batch")
    for t, c in CASES
    if t == "producer" or (t, c) in (("zstd", "lz4"), ("uncompressed", "gzip"))
]


def from_offset(data: bytes, offset: int) -> list[dict[str, Any]]:
    """The fetched records from `offset` on: what a client keeps of a whole batch."""
    return [r for r in records_of(data) if r["offset"] >= offset]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("topic_type", "codec"), CASES, ids=[f"{t}-{c}" for t, c in CASES])
def test_fetched_batches_carry_the_topic_codec(
    skiff: Skiff,
    matrix: dict[tuple[str, str, str], Case],
    topic_type: str,
    codec: str,
    fmt: str,
) -> None:
    case = matrix[(topic_type, codec, fmt)]
    want = expected_codec(topic_type, codec)
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        for offset in (0, MID):
            data = raw_fetch(kafka, case.topic, offset)
            batches = batch_codecs(data)
            # One batch (same codec and timestamp type), starting at the fetch offset on
            # a `record` topic, the producer's whole batch on a `batch` topic.
            assert batches == [(offset if fmt == "record" else 0, want, 0)], batches
            assert all(b.crc_ok for b in read_batches(data))
            assert_same(case.records[offset:], from_offset(data, offset), offset, partition=0)


@pytest.mark.parametrize("consumer", list(CONSUMERS))
@pytest.mark.parametrize(
    ("topic_type", "codec", "fmt"), READ_BACK, ids=[f"{t}-{c}-{f}" for t, c, f in READ_BACK]
)
def test_clients_read_every_record_back(
    skiff: Skiff,
    matrix: dict[tuple[str, str, str], Case],
    topic_type: str,
    codec: str,
    fmt: str,
    consumer: str,
) -> None:
    fetched = expected_codec(topic_type, codec)
    name = [k for k, v in CODEC_ID.items() if v == fetched][0]
    if consumer == "kafka-python" and name in kafka_python_client.MISSING_CODECS:
        missing = kafka_python_client.MISSING_CODECS[name]
        pytest.skip(f"kafka-python cannot read {name} here: install {missing}")
    case = matrix[(topic_type, codec, fmt)]
    got = CONSUMERS[consumer].consume(skiff.bootstrap, case.topic, 0, 0, N)
    assert_same(case.records, got, 0, partition=0)


# -- several producer codecs in one `producer` topic ---------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_producer_topic_serves_each_record_with_its_producers_codec(skiff: Skiff, fmt: str) -> None:
    topic = f"cz-mixed-{uuid.uuid4().hex[:8]}"
    records = make_records(5 * len(PRODUCER_CODECS), 11)
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        # compression.type defaults to producer
        create_topic(kafka, topic, {"skiff.storage.format": fmt})
        for i, codec in enumerate(PRODUCER_CODECS):
            chunk = records[5 * i : 5 * i + 5]
            confluent_client.produce(skiff.bootstrap, topic, chunk, compression=codec)
        data = raw_fetch(kafka, topic, 0)
        assert batch_codecs(data) == [(5 * i, i, 0) for i in range(5)]
        assert_same(records, records_of(data), 0, partition=0)
        # From inside the gzip records: the first batch starts exactly there on a
        # `record` topic, at the gzip batch's base offset on a `batch` topic.
        data = raw_fetch(kafka, topic, 7)
        first = 7 if fmt == "record" else 5
        assert batch_codecs(data) == [(first, 1, 0)] + [(5 * i, i, 0) for i in range(2, 5)]
        assert_same(records[7:], from_offset(data, 7), 7, partition=0)
    for name, client in CONSUMERS.items():
        got = client.consume(skiff.bootstrap, topic, 0, 0, len(records))
        assert_same_as(name, records, got, 0)


@pytest.mark.parametrize("fmt", FORMATS)
def test_compressed_log_append_time_batches(skiff: Skiff, fmt: str) -> None:
    topic = f"cz-lat-{uuid.uuid4().hex[:8]}"
    records = make_records(10, 12)
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        configs = {
            "compression.type": "zstd",
            "message.timestamp.type": "LogAppendTime",
            "skiff.storage.format": fmt,
        }
        create_topic(kafka, topic, configs)
        confluent_client.produce(skiff.bootstrap, topic, records, compression="lz4")
        data = raw_fetch(kafka, topic, 3)
        first = 3 if fmt == "record" else 0
        assert batch_codecs(data) == [(first, 4, 1)]
        [batch] = read_batches(data)
        assert batch.crc_ok and len(batch.records) == 10 - first
        append_time = batch.records[0].timestamp
        assert {r.timestamp for r in batch.records} == {append_time}
    for name, client in CONSUMERS.items():
        got = client.consume(skiff.bootstrap, topic, 0, 3, 7)
        expected = [{**r, "timestamp": append_time} for r in records[3:]]
        assert_same_as(name, expected, got, 3, timestamp_type=1)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("topic_type", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_fetches_stay_within_the_byte_limits(
    skiff: Skiff, topic_type: str, fmt: str
) -> None:
    """Incompressible records: a codec's framing must not push a batch past the limits.
    On `batch` topics the batches are stored (recompressed once) as appended, so, as on
    Kafka, a first batch larger than the limit comes alone and whole."""
    topic = f"cz-limit-{topic_type}-{uuid.uuid4().hex[:8]}"
    records = [
        {"key": None, "value": os.urandom(900 + i), "headers": [], "timestamp": 1_700_000_000_000}
        for i in range(60)
    ]
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create_topic(kafka, topic, {"compression.type": topic_type, "skiff.storage.format": fmt})
        confluent_client.produce(skiff.bootstrap, topic, records)
        for limit in (5_000, 20_000, 40_000):
            data = raw_fetch(kafka, topic, 0, partition_max_bytes=limit)
            assert len(data) <= limit or (fmt == "batch" and len(read_batches(data)) == 1)
            got = records_of(data)
            assert 0 < len(got) and [r["value"] for r in got] == [
                r["value"] for r in records[: len(got)]
            ]
        # The request limit too, across a second partition's worth of data.
        data = raw_fetch(kafka, topic, 10, max_bytes=12_000, partition_max_bytes=1 << 20)
        assert 0 < len(data) <= 12_000 or (fmt == "batch" and len(read_batches(data)) == 1)
