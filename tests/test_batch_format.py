"""`batch` topics (skiff.storage.format=batch): a produced batch is one stream entry
holding the producer's bytes; Fetch serves those bytes with the base offset written in;
a fetch from inside a batch gets the whole batch; a bad batch stores nothing; the format
cannot be altered. (Suites that run on both formats parametrize over it.)"""

from __future__ import annotations

import struct
import time

import pytest
from conftest import RedisServer, Skiff
from crc32c import crc32c
from log_helpers import (
    LATEST,
    NONE,
    create,
    fetch,
    list_offset,
    new_topic,
    produce,
    read_from,
)
from rawkafka import (
    RawKafka,
    Rec,
    build_batch,
    corrupt_crc,
    legacy_fetch_body,
    read_batches,
    read_legacy_fetch_response,
    read_message_set,
)

BATCH = {"skiff.storage.format": "batch"}
ZSTD = 4
CORRUPT_MESSAGE = 2
INVALID_RECORD = 87
INVALID_CONFIG = 40
INCREMENTAL_ALTER_CONFIGS = 44
TOPIC_RESOURCE = 2
FETCH = 1


def _entries(redis_server: RedisServer, topic: str) -> list[tuple[bytes, list[bytes]]]:
    return redis_server.client().xrange(f"skiff:{{{topic}/0}}:log")  # type: ignore[no-any-return]


def _records(n: int, start: int = 0) -> list[Rec]:
    return [
        Rec(value=b'{"n": %d, "pad": "%s"}' % (i, b"x" * 60), key=b"k%d" % i)
        for i in range(start, start + n)
    ]


def test_a_compressed_batch_is_stored_as_sent(skiff: Skiff, redis_server: RedisServer) -> None:
    topic = new_topic("bf-sent")
    first = build_batch(_records(100), compression=ZSTD)
    second = build_batch(_records(50, 100), compression=ZSTD)
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, topic, BATCH)
        assert produce(kafka, topic, first).base_offset == 0
        assert produce(kafka, topic, second).base_offset == 100
        # One entry per batch, ID 0-<last offset + 1>, holding the producer's bytes.
        entries = _entries(redis_server, topic)
        assert [e[0] for e in entries] == [b"0-100", b"0-150"]
        assert [e[1] for e in entries] == [{b"b": first}, {b"b": second}]
        # Fetch serves them compressed as sent, with the base offset and the partition
        # leader epoch (0, as Skiff reports for `record` topics too) written in.
        p = fetch(kafka, topic, 0)
        assert p.error_code == NONE and p.high_watermark == 150
        assert bytes(p.records) == (
            struct.pack(">qii", 0, len(first) - 12, 0)
            + first[16:]
            + struct.pack(">qii", 100, len(second) - 12, 0)
            + second[16:]
        )
        batches = read_batches(p.records)
        assert [b.base_offset for b in batches] == [0, 100]
        assert all(b.crc_ok for b in batches)
        values = [r.value for b in batches for r in b.records]
        assert values == [r.value for r in _records(150)]
        assert [r.offset for b in batches for r in b.records] == list(range(150))


def test_a_fetch_inside_a_batch_gets_the_whole_batch(skiff: Skiff) -> None:
    topic = new_topic("bf-mid")
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, topic, BATCH)
        produce(kafka, topic, build_batch(_records(10)))
        produce(kafka, topic, build_batch(_records(10, 10)))
        p = fetch(kafka, topic, 13)
        batches = read_batches(p.records)
        assert [b.base_offset for b in batches] == [10]
        assert [r.offset for r in batches[0].records] == list(range(10, 20))
        # What a client keeps: from the fetch offset on.
        assert [r.value for r in read_from(kafka, topic, 13)] == [r.value for r in _records(7, 13)]
        assert list_offset(kafka, topic, LATEST) == (20, -1)


def test_a_bad_batch_stores_nothing(skiff: Skiff, redis_server: RedisServer) -> None:
    topic = new_topic("bf-bad")
    good = build_batch(_records(5))
    # A count that disagrees with lastOffsetDelta (the CRC made to match).
    liar = bytearray(good)
    struct.pack_into(">i", liar, 57, 4)
    struct.pack_into(">I", liar, 17, crc32c(bytes(liar[21:])))
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, topic, BATCH)
        assert produce(kafka, topic, corrupt_crc(good)).error_code == CORRUPT_MESSAGE
        assert produce(kafka, topic, bytes(liar)).error_code == INVALID_RECORD
        assert _entries(redis_server, topic) == []
        assert list_offset(kafka, topic, LATEST) == (0, -1)
        assert produce(kafka, topic, good).base_offset == 0


def test_the_format_of_a_topic_cannot_be_altered(skiff: Skiff) -> None:
    topic = new_topic("bf-alter")
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, topic, BATCH)
        body = {
            "resources": [
                {
                    "resource_type": TOPIC_RESOURCE,
                    "resource_name": topic,
                    "configs": [
                        {"name": "skiff.storage.format", "config_operation": 0, "value": "record"}
                    ],
                }
            ],
            "validate_only": False,
        }
        [r] = kafka.request(INCREMENTAL_ALTER_CONFIGS, 1, body).responses
        assert r.error_code == INVALID_CONFIG
        assert "cannot be altered" in r.error_message


@pytest.mark.parametrize("version", [0, 2, 3])
def test_fetch_v0_to_v3_down_converts(skiff: Skiff, version: int) -> None:
    topic = new_topic("bf-down")
    base = int(time.time() * 1000)
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, topic, BATCH)
        produce(kafka, topic, build_batch(_records(4), base_timestamp=base, compression=ZSTD))
        kafka.send(FETCH, version, legacy_fetch_body(version, topic, {0: 1}))
        answer = read_legacy_fetch_response(version, kafka.recv_raw(timeout=30))
        [p] = answer["responses"][0]["partitions"]
        assert (p["error_code"], p["high_watermark"]) == (NONE, 4)
        got = [(m.offset, m.magic, m.key, m.value) for m in read_message_set(p["records"])]
        magic = 0 if version < 2 else 1
        assert got == [(i, magic, b"k%d" % i, _records(4)[i].value) for i in range(1, 4)]
