"""Positions and committed offsets from inside a batch, on `record` and `batch` topics:
a consumer assigned to an offset inside a produced batch gets exactly the records from
there (a `batch` topic serves the whole batch; the client drops the records before),
its position after k records is offset + k, that is what it commits, and a consumer of
the same group resumes exactly there. The Python clients in process; the Java client and
franz-go through their test tools' `seek-commit` (one JVM or Go process per test, both
consumers in it). Every client's mid-batch fetch is in tests/test_roundtrip.py."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from types import ModuleType

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import OffsetAndMetadata
from aiokafka.structs import TopicPartition as AioPartition
from clients import franz_client, java_client
from confluent_kafka import Consumer, TopicPartition
from conftest import Skiff
from formats import FORMATS
from kafka import KafkaConsumer
from kafka import TopicPartition as KpPartition
from kafka.structs import OffsetAndMetadata as KpOffset
from log_helpers import create, produce
from rawkafka import RawKafka, Rec, build_batch

SIZES = (10, 30, 10)  # three batches; offsets 10-39 are one batch
START, TAKE = 17, 5  # inside the middle batch
DEADLINE = 60.0


def values(first: int, count: int) -> list[bytes]:
    return [b"value-%d" % i for i in range(first, first + count)]


def make_topic(skiff: Skiff, fmt: str) -> str:
    topic = f"pos-{fmt[0]}-{uuid.uuid4().hex[:8]}"
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, topic, {"skiff.storage.format": fmt})
        first = 0
        for size in SIZES:
            batch = build_batch([Rec(v, key=b"k") for v in values(first, size)])
            assert produce(kafka, topic, batch).base_offset == first
            first += size
    return topic


def confluent(bootstrap: str, topic: str, group: str) -> tuple[list[tuple[int, bytes]], int, int]:
    def consumer() -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "error",
            }
        )

    c = consumer()
    got: list[tuple[int, bytes]] = []
    try:
        c.assign([TopicPartition(topic, 0, START)])
        deadline = time.monotonic() + DEADLINE
        while len(got) < TAKE and time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append((msg.offset(), msg.value()))
        got = got[:TAKE]
        # Position: the next offset after the last record handed out (poll may have
        # handed out none past TAKE: one at a time).
        [position] = c.position([TopicPartition(topic, 0)])
        c.commit(offsets=[TopicPartition(topic, 0, got[-1][0] + 1)], asynchronous=False)
        [committed] = c.committed([TopicPartition(topic, 0)], timeout=30)
    finally:
        c.close()
    resumed = consumer()
    try:
        resumed.assign([TopicPartition(topic, 0, committed.offset)])
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            msg = resumed.poll(1.0)
            if msg is not None and msg.error() is None:
                return got, position.offset, msg.offset()
    finally:
        resumed.close()
    raise AssertionError("the resumed consumer got nothing")


def kafka_python(
    bootstrap: str, topic: str, group: str
) -> tuple[list[tuple[int, bytes]], int, int]:
    tp = KpPartition(topic, 0)

    def consumer() -> KafkaConsumer:
        return KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="none",
            max_poll_records=1,
        )

    c = consumer()
    got: list[tuple[int, bytes]] = []
    try:
        c.assign([tp])
        c.seek(tp, START)
        deadline = time.monotonic() + DEADLINE
        while len(got) < TAKE and time.monotonic() < deadline:
            for record in c.poll(1000).get(tp, []):
                got.append((record.offset, record.value))
        position = c.position(tp)
        c.commit({tp: KpOffset(position, "", -1)})
        committed = c.committed(tp)
    finally:
        c.close()
    resumed = consumer()
    try:
        resumed.assign([tp])
        resumed.seek(tp, committed)
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            records = resumed.poll(1000).get(tp, [])
            if records:
                return got, position, records[0].offset
    finally:
        resumed.close()
    raise AssertionError("the resumed consumer got nothing")


def aiokafka(bootstrap: str, topic: str, group: str) -> tuple[list[tuple[int, bytes]], int, int]:
    tp = AioPartition(topic, 0)

    async def run() -> tuple[list[tuple[int, bytes]], int, int]:
        c = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="none",
        )
        await c.start()
        got: list[tuple[int, bytes]] = []
        try:
            c.assign([tp])
            c.seek(tp, START)
            while len(got) < TAKE:
                record = await asyncio.wait_for(c.getone(), DEADLINE)
                got.append((record.offset, record.value))
            position = await c.position(tp)
            await c.commit({tp: OffsetAndMetadata(position, "")})
            committed = await c.committed(tp)
        finally:
            await c.stop()
        resumed = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
        )
        await resumed.start()
        try:
            resumed.assign([tp])
            resumed.seek(tp, committed)
            first = await asyncio.wait_for(resumed.getone(), DEADLINE)
        finally:
            await resumed.stop()
        return got, position, first.offset

    return asyncio.run(run())


Result = tuple[list[tuple[int, bytes]], int, int]  # records, position, resumed at


def tool(module: ModuleType) -> Callable[[str, str, str], Result]:
    """The Java client or franz-go, through its test tool's seek-commit."""

    def run(bootstrap: str, topic: str, group: str) -> Result:
        records, answer = module.seek_commit(
            bootstrap, topic, 0, group, START, TAKE, timeout_ms=int(DEADLINE * 1000)
        )
        # The commit as the broker reports it back (Java: committed(); franz-go: the
        # OffsetFetch of the member that resumed).
        assert answer["committed"] == answer["position"]
        return (
            [(r["offset"], r["value"]) for r in records],
            answer["position"],
            answer["resumed_at"],
        )

    return run


CLIENTS = {
    "confluent": confluent,
    "kafka-python": kafka_python,
    "aiokafka": aiokafka,
    "java": tool(java_client),
    "franz-go": tool(franz_client),
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_position_and_commit_inside_a_batch(skiff: Skiff, client: str, fmt: str) -> None:
    topic = make_topic(skiff, fmt)
    group = f"pos-{uuid.uuid4().hex[:8]}"
    got, position, resumed_at = CLIENTS[client](skiff.bootstrap, topic, group)
    assert got == list(zip(range(START, START + TAKE), values(START, TAKE), strict=True))
    assert position == START + TAKE
    assert resumed_at == START + TAKE
