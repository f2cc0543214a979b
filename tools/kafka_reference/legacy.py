"""Legacy message sets (magic 0 and 1): Produce v0-v2, Fetch v0-v3, ListOffsets v0, sent as
raw bodies because kio has no schema for them."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from aiokafka.record.legacy_records import LegacyRecordBatch
from rawkafka import (
    ConnectionClosed,
    Rec,
    compressed_message,
    corrupt_message_crc,
    legacy_fetch_body,
    legacy_produce_body,
    list_offsets_v0_body,
    message_set,
    read_legacy_fetch_response,
    read_legacy_produce_response,
    read_list_offsets_v0_response,
)

from .compare import _text
from .constants import BASE_TS, FETCH, LIST_OFFSETS, PRODUCE, REQUEST_TIMEOUT
from .talk import (
    SetupError,
    Side,
    add,
    data_topic,
    make_topic,
    produce_ok,
    records,
    small_batch,
    stored,
    topic,
)

# -- legacy message sets (magic 0 and 1): Produce v0-v2, Fetch v0-v3, ListOffsets v0 -----------


def ask_raw(
    side: Side, api_key: int, version: int, body: bytes, read: Callable[[bytes], Any]
) -> Any:
    """A request kio cannot encode (raw body) on a fresh connection; `read` decodes the
    answer frame into plain data."""
    with side.connect() as client:
        cid = client.send(api_key, version, body)
        try:
            frame = client.recv_raw()
        except ConnectionClosed:
            return "connection closed, no answer"
        except TimeoutError:
            return f"no answer within {REQUEST_TIMEOUT:.0f}s"
    (got,) = struct.unpack_from(">i", frame)
    if got != cid:
        return f"answer with correlation id {got}, sent {cid}"
    try:
        return read(frame)
    except Exception as exc:
        return f"undecodable answer: {exc!r}"


_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def summarise_message_set(data: bytes | None) -> Any:
    """A Fetch v0-v3 record set: its messages as 'offset:value' with magic, attributes
    (timestamp relative to BASE_TS, key), wrappers with their inner messages, and the
    bytes of a truncated trailing message."""
    if data is None:
        return None
    out: dict[str, Any] = {"bytes": len(data), "messages": []}
    pos = 0
    while pos < len(data):
        if pos + 17 > len(data):
            out["partial_tail_bytes"] = len(data) - pos
            break
        (length,) = struct.unpack_from(">i", data, pos + 8)
        end = pos + 12 + length
        if end > len(data):
            out["partial_tail_bytes"] = len(data) - pos
            break
        magic, attributes = data[pos + 16], data[pos + 17]
        batch = LegacyRecordBatch(data[pos:end], magic)
        text = [_message(r, magic, attributes) for r in batch]
        if not batch.validate_crc():
            text.append("BAD CRC")
        if attributes & 7:
            (offset,) = struct.unpack_from(">q", data, pos)
            out["messages"].append(
                {"wrapper": _CODECS[attributes & 7], "offset": offset, "inner": text}
            )
        else:
            out["messages"] += text
        pos = end
    return out


def _message(r: Any, magic: int, attributes: int) -> str:
    text = f"{r.offset}:{_text(r.value)} m{magic} a{attributes}"
    if magic:
        ts = -1 if r.timestamp is None else r.timestamp - BASE_TS
        text += f" t{'+' if ts >= 0 else ''}{ts}"
    if r.key is not None:
        text += f" key={_text(r.key)}"
    return text


def legacy_fetch(side: Side, version: int, name: str, offset: int, **limits: int) -> Any:
    answer = ask_raw(
        side,
        FETCH,
        version,
        legacy_fetch_body(version, name, {0: offset}, **limits),
        lambda f: read_legacy_fetch_response(version, f),
    )
    if isinstance(answer, dict):
        for t in answer["responses"]:
            for p in t["partitions"]:
                p["records"] = summarise_message_set(p["records"])
    return answer


def legacy_records(n: int, prefix: str = "m", first_ts: int = BASE_TS) -> list[Rec]:
    """Keys on even indexes, a null value on the last."""
    return [
        Rec(
            None if i == n - 1 else f"{prefix}{i}".encode(),
            key=b"k" if i % 2 == 0 else None,
            timestamp=first_ts + i,
        )
        for i in range(n)
    ]


def legacy_scenarios() -> None:
    def produce(
        version: int, label: str, make: Callable[[], bytes], before: int = 0
    ) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            name = topic(f"legacy-p{version}-{label}")
            make_topic(side, name)
            if before:
                produce_ok(side, name, records(before, BASE_TS - 100, "x"))
            body = legacy_produce_body(name, {0: make()})
            answer = ask_raw(
                side, PRODUCE, version, body, lambda f: read_legacy_produce_response(version, f)
            )
            return {"produce": answer, "stored": stored(side, name)}

        return run

    for v in (0, 1, 2):
        magics = (0, 1) if v == 2 else (0,)
        for m in magics:
            add(
                f"produce.v{v}.magic{m}",
                produce(v, f"m{m}", lambda m=m: message_set(legacy_records(3), m)),
                "3 messages: keys on 0 and 2, a null value on 2",
            )
            for codec in (1, 2):
                add(
                    f"produce.v{v}.magic{m}.{_CODECS[codec]}",
                    produce(
                        v,
                        f"m{m}-{_CODECS[codec]}",
                        lambda m=m, c=codec: message_set(legacy_records(4), m, c),
                        before=2,
                    ),
                    "a wrapper of 4 messages (inner offsets 0-3) after 2 records",
                )
        add(
            f"produce.v{v}.bad_crc",
            produce(
                v,
                "crc",
                lambda m=magics[-1]: corrupt_message_crc(message_set(legacy_records(2), m)),
            ),
        )
    add("produce.v2.magic1.lz4", produce(2, "lz4", lambda: message_set(legacy_records(4), 1, 3)))
    add(
        "produce.v2.magic1.gzip_absolute_offsets",
        produce(
            2,
            "abs",
            lambda: compressed_message(
                message_set(legacy_records(3), 1, first_offset=7), 1, 1, 9, BASE_TS
            ),
        ),
        "magic 1 wrapper whose inner offsets are 7-9 (not relative)",
    )
    add(
        "produce.v2.magic1.bad_inner_crc",
        produce(
            2,
            "inner-crc",
            lambda: compressed_message(
                corrupt_message_crc(message_set(legacy_records(3), 1)), 1, 1, 2, BASE_TS
            ),
        ),
        "gzip wrapper (CRC right) whose first inner message has a bad CRC",
    )
    add(
        "produce.v2.magic1.inner_magic0",
        produce(
            2,
            "inner-m0",
            lambda: compressed_message(message_set(legacy_records(2), 0), 1, 1, 1, BASE_TS),
        ),
        "magic 1 gzip wrapper holding magic 0 messages",
    )
    add("produce.v2.empty", produce(2, "empty", lambda: b""), "an empty message set")
    add(
        "produce.v2.v2_batch", produce(2, "v2batch", small_batch), "a v2 record batch in Produce v2"
    )
    add(
        "produce.v0.magic1",
        produce(0, "m1", lambda: message_set(legacy_records(2), 1)),
        "magic 1 in Produce v0",
    )
    add(
        "produce.v1.truncated",
        produce(1, "trunc", lambda: message_set(legacy_records(2), 0)[:-3]),
        "the last message cut 3 bytes short",
    )

    def fetch(version: int, offset: int, **limits: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            return legacy_fetch(
                side, version, side.fixture("data", data_topic).name, offset, **limits
            )

        return run

    for v in range(4):
        add(f"fetch.v{v}.offset0", fetch(v, 0), "batches of 5 (offsets 0-4) and 3 (5-7)")
        add(f"fetch.v{v}.inside_batch", fetch(v, 2), "offset 2 of the 5-record batch")
        add(f"fetch.v{v}.at_high_watermark", fetch(v, 8))
        add(f"fetch.v{v}.past_high_watermark", fetch(v, 20))
        add(
            f"fetch.v{v}.small_partition_max_bytes",
            fetch(v, 1, partition_max_bytes=100),
            "partition_max_bytes=100 at offset 1",
        )
        add(
            f"fetch.v{v}.tiny_partition_max_bytes",
            fetch(v, 0, partition_max_bytes=10),
            "partition_max_bytes=10 at offset 0",
        )
        add(
            f"fetch.v{v}.missing_topic",
            lambda side, v=v: legacy_fetch(side, v, topic("fetch-missing"), 0),
        )

        def headers(side: Side, v: int = v) -> Any:
            name = side.fixture("small", small_topic)
            return legacy_fetch(side, v, name, 0)

        add(f"fetch.v{v}.headers_and_nulls", headers, "key + header, plain, null value (v2 batch)")
    add("fetch.v3.small_max_bytes", fetch(3, 0, max_bytes=60), "request max_bytes=60 at offset 0")

    def magic0_records(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            name = side.fixture("magic0", magic0_topic)
            return legacy_fetch(side, version, name, 0)

        return run

    for v in (0, 2):
        add(
            f"fetch.v{v}.magic0_records",
            magic0_records(v),
            "3 records produced with magic 0 (no timestamps)",
        )
    add("fetch.v11.magic0_records", lambda side: stored(side, side.fixture("magic0", magic0_topic)))

    def offsets(asks: dict[int, tuple[int, int]], fixture: str = "data") -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            if fixture == "data":
                name = side.fixture("data", data_topic).name
            else:
                name = side.fixture(fixture, empty_topic)
            body = list_offsets_v0_body(name, asks)
            return ask_raw(side, LIST_OFFSETS, 0, body, read_list_offsets_v0_response)

        return run

    for label, asks in {
        "latest": {0: (-1, 1)},
        "latest_max10": {0: (-1, 10)},
        "earliest": {0: (-2, 1)},
        "earliest_max10": {0: (-2, 10)},
        "max_timestamp": {0: (-3, 10)},
        "earliest_local": {0: (-4, 10)},
        "earliest_pending_upload": {0: (-5, 10)},
        "minus_9": {0: (-9, 10)},
        "timestamp": {0: (BASE_TS + 6, 10)},
        "future_timestamp": {0: (BASE_TS + 10**12, 10)},
        "zero_max": {0: (-1, 0)},
        "negative_max": {0: (-1, -1)},
        "missing_partition": {3: (-1, 1)},
    }.items():
        add(f"list_offsets.v0.{label}", offsets(asks), f"(timestamp, max num) {asks}, offsets 0-7")
    add("list_offsets.v0.empty_latest", offsets({0: (-1, 10)}, "empty"), "an empty topic")
    add("list_offsets.v0.empty_timestamp", offsets({0: (BASE_TS, 10)}, "empty"), "an empty topic")
    add(
        "list_offsets.v0.missing_topic",
        lambda side: ask_raw(
            side,
            LIST_OFFSETS,
            0,
            list_offsets_v0_body(topic("lo-missing"), {0: (-1, 1)}),
            read_list_offsets_v0_response,
        ),
    )


def small_topic(side: Side) -> str:
    name = topic("legacy-small")
    make_topic(side, name)
    produce_ok(side, name, small_batch())
    return name


def empty_topic(side: Side) -> str:
    name = topic("legacy-empty")
    make_topic(side, name)
    return name


def magic0_topic(side: Side) -> str:
    name = topic("legacy-magic0")
    make_topic(side, name)
    body = legacy_produce_body(name, {0: message_set(legacy_records(3), 0)})
    answer = ask_raw(side, PRODUCE, 0, body, lambda f: read_legacy_produce_response(0, f))
    if (
        not isinstance(answer, dict)
        or answer["responses"][0]["partition_responses"][0]["error_code"]
    ):
        raise SetupError(f"Produce v0 to {name}: {answer}")
    return name
