"""Produce, Fetch, ListOffsets and InitProducerId with the current (v2) record format."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
from rawkafka import (
    corrupt_crc,
    fetch_request,
    list_offsets_request,
    produce_request,
)

from .constants import (
    API_VERSIONS,
    BASE_TS,
    FETCH,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    PRODUCE,
    RETRIABLE_COORDINATOR,
)
from .talk import (
    SetupError,
    Side,
    add,
    api_versions_body,
    ask,
    data_topic,
    error_of,
    make_topic,
    metadata_topic,
    receive,
    records,
    small_batch,
    stored,
    topic,
)


def produce_scenarios() -> None:
    def plain(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            name = topic(f"produce-v{version}")
            make_topic(side, name)
            answer = ask(side, PRODUCE, version, produce_request(name, {0: small_batch()}))
            return {"produce": answer, "stored": stored(side, name)}

        return run

    for v in (3, 7, 9, 11):
        add(f"produce.v{v}", plain(v), "3 records (a key, a header, a null value)")

    def case(
        label: str,
        partition: int = 0,
        acks: int = -1,
        create: bool = True,
        batch: Callable[[], bytes] = small_batch,
    ) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            name = topic(f"produce-{label}")
            if create:
                make_topic(side, name)
            body = produce_request(name, {partition: batch()}, acks=acks)
            out = {"produce": ask(side, PRODUCE, 9, body)}
            if create:
                out["stored"] = stored(side, name)
            else:
                time.sleep(0.5)
                out["topic_exists_after"] = metadata_topic(side, name)["error_code"] != 3
            return out

        return run

    add("produce.missing_partition", case("nopart", partition=3), "partition 3 of 1")
    add("produce.missing_topic", case("notopic", create=False), "Produce does not auto-create")
    add("produce.bad_crc", case("crc", batch=lambda: corrupt_crc(small_batch())))
    add("produce.magic1", case("magic1", batch=magic1_batch), "a v1 message set in Produce v9")
    add(
        "produce.two_batches",
        case("two", batch=lambda: records(2) + records(2, BASE_TS + 2)),
        "two v2 batches in one partition's records",
    )
    add("produce.acks2", case("acks2", acks=2))
    add("produce.acks0", acks0_scenario(ok=True), "acks=0 then ApiVersions on the same connection")
    add(
        "produce.acks0_error",
        acks0_scenario(ok=False),
        "acks=0 to a missing partition, then ApiVersions on the same connection",
    )


def magic1_batch() -> bytes:
    builder = LegacyRecordBatchBuilder(1, 0, 1 << 20)
    for i in range(2):
        builder.append(i, timestamp=BASE_TS + i, key=None, value=f"m{i}".encode())
    return bytes(builder.build())


def acks0_scenario(ok: bool) -> Callable[[Side], Any]:
    def run(side: Side) -> Any:
        name = topic(f"produce-acks0-{'ok' if ok else 'err'}")
        make_topic(side, name)
        with side.connect() as client:
            client.send(PRODUCE, 9, produce_request(name, {0 if ok else 3: small_batch()}, acks=0))
            cid = client.send(API_VERSIONS, 3, api_versions_body())
            answer = receive(client, API_VERSIONS, 3, cid)
        next_answer = "ApiVersions answer" if isinstance(answer, dict) else answer
        return {"next_answer": next_answer, "stored": stored(side, name)}

    return run


def fetch_scenarios() -> None:
    def case(
        version: int, offset: int, partition_max_bytes: int = 1 << 20
    ) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            data = side.fixture("data", data_topic)
            body = fetch_request(
                data.name, {0: offset}, data.topic_id, partition_max_bytes=partition_max_bytes
            )
            return ask(side, FETCH, version, body)

        return run

    for v in (4, 11, 12, 15):
        add(f"fetch.v{v}.offset0", case(v, 0), "batches of 5 (offsets 0-4) and 3 (5-7)")
        add(f"fetch.v{v}.at_high_watermark", case(v, 8))
        add(f"fetch.v{v}.past_high_watermark", case(v, 20))
        add(f"fetch.v{v}.offset_minus1", case(v, -1))
        add(
            f"fetch.v{v}.inside_batch",
            case(v, 2),
            "offset 2 of the 5-record batch: Kafka returns whole batches from their base offset",
        )
        add(
            f"fetch.v{v}.tiny_partition_max_bytes",
            case(v, 0, partition_max_bytes=10),
            "partition_max_bytes=10 at offset 0",
        )

    def missing(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            body = fetch_request(topic("fetch-missing"), {0: 0}, uuid.uuid4())
            return ask(side, FETCH, version, body)

        return run

    add("fetch.v11.missing_topic", missing(11))
    add("fetch.v15.unknown_topic_id", missing(15))


def list_offsets_scenarios() -> None:
    def case(version: int, timestamp: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            data = side.fixture("data", data_topic)
            return ask(side, LIST_OFFSETS, version, list_offsets_request(data.name, {0: timestamp}))

        return run

    timestamps = {
        "latest": -1,
        "earliest": -2,
        "max_timestamp": -3,
        "timestamp": BASE_TS + 6,
        "future_timestamp": BASE_TS + 10**9,
    }
    for v in (1, 5, 7, 8):
        for label, ts in timestamps.items():
            add(f"list_offsets.v{v}.{label}", case(v, ts), f"timestamp {ts} on offsets 0-7")
    add("list_offsets.v8.earliest_local", case(8, -4), "timestamp -4")


def init_producer_id_scenarios() -> None:
    body = {
        "transactional_id": None,
        "transaction_timeout": 60_000,
        "producer_id": -1,
        "producer_epoch": -1,
    }

    def until_ready(side: Side, version: int, request: dict[str, Any]) -> tuple[Any, Any]:
        """The first answer, and the answer once retriable coordinator errors are over."""
        first = answer = ask(side, INIT_PRODUCER_ID, version, request)
        deadline = time.monotonic() + 15
        while error_of(answer) in RETRIABLE_COORDINATOR and time.monotonic() < deadline:
            time.sleep(0.2)
            answer = ask(side, INIT_PRODUCER_ID, version, request)
        return first, answer

    def plain(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            first, final = until_ready(side, version, body)
            return {"first_answer": first, "after_retries": final}

        return run

    def bump(side: Side) -> Any:
        _, first = until_ready(side, 4, body)
        if error_of(first) != 0:
            raise SetupError(f"InitProducerId: {first}")
        again = {
            **body,
            "producer_id": first["producer_id"],
            "producer_epoch": first["producer_epoch"],
        }
        second = ask(side, INIT_PRODUCER_ID, 4, again)
        if isinstance(second, dict):
            second["same_producer_id"] = second["producer_id"] == first["producer_id"]
        return second

    note = "retried while COORDINATOR_LOAD_IN_PROGRESS/NOT_AVAILABLE, as clients do"
    add("init_producer_id.v0", plain(0), note)
    add("init_producer_id.v4", plain(4), note)
    add(
        "init_producer_id.v4.bump_epoch",
        bump,
        "v4 again with the producer id and epoch just received (KIP-360)",
    )
