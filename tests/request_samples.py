"""One well-formed request body for every API and version Skiff serves: every array
holds one item, every string and bytes field a value, so that each length field of
the schema appears once. The fuzz tests mutate these (tests/test_fuzz.py) and the
bounds check must accept them unchanged (tests/test_bad_input.py)."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from dataclasses import fields
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
)
from rawkafka import (
    Rec,
    build_batch,
    encode,
    legacy_fetch_body,
    legacy_produce_body,
    list_offsets_v0_body,
    make,
    request_type,
)

from sidecar import apis
from sidecar.protocol.bounds import nullable

TOPIC = "fuzz-samples"
BATCH = build_batch([Rec(b"value", b"key", (("h", b"v"),))])
_STRINGS = {"string": TOPIC, "bytes": b"ab", "records": BATCH}


def _value(kafka_type: str, name: str) -> Any:
    if kafka_type in _STRINGS:
        return _STRINGS[kafka_type]
    if kafka_type == "bool":
        return True
    if kafka_type == "uuid":
        return uuid.UUID(int=1)
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return 100  # timeouts and waits: short, so long-polling requests answer soon
    if name in ("acks",):
        return -1  # acks=0 would have no response
    if name in ("min_bytes",):
        return 0
    return 1


def sample(entity_type: type) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for f in fields(entity_type):
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField):
            data[f.name] = [sample(kind.type_)]
        elif isinstance(kind, EntityField):
            data[f.name] = sample(kind.type_)
        elif isinstance(kind, PrimitiveTupleField):
            data[f.name] = [_value(get_schema_field_type(f), f.name)]
        else:
            data[f.name] = _value(get_schema_field_type(f), f.name)
    return data


def _hand_decoded(api_key: int, version: int) -> bytes:
    """Bodies of the old versions Skiff decodes by hand (kio has no schema)."""
    name = struct.pack(">h", len(TOPIC)) + TOPIC.encode()
    if api_key == 0:
        return legacy_produce_body(TOPIC, {0: BATCH})
    if api_key == 1:
        return legacy_fetch_body(version, TOPIC, {0: 0}, max_wait_ms=100, min_bytes=0)
    if api_key == 2:
        return list_offsets_v0_body(TOPIC, {0: (-1, 1)})
    if api_key == 20:  # DeleteTopics v0: names, timeout
        return struct.pack(">i", 1) + name + struct.pack(">i", 100)
    if api_key == 32:  # DescribeConfigs v0: resources [type, name, keys]
        return struct.pack(">ib", 1, 2) + name + struct.pack(">i", 1) + name
    if api_key == 35:  # DescribeLogDirs v0: topics [name, partitions]
        return struct.pack(">i", 1) + name + struct.pack(">ii", 1, 0)
    raise KeyError((api_key, version))


def served() -> Iterator[tuple[int, int]]:
    for key, handler in sorted(apis.HANDLERS.items()):
        for version in range(handler.MIN_VERSION, handler.MAX_VERSION + 1):
            yield key, version


def body(api_key: int, version: int) -> bytes:
    if version in getattr(apis.HANDLERS[api_key], "DECODERS", {}):
        return _hand_decoded(api_key, version)
    entity_type = request_type(api_key, version)
    return encode(make(entity_type, sample(entity_type)))


def kio_decoded() -> Iterator[tuple[int, int]]:
    """The served versions decoded by kio (behind the bounds check)."""
    for key, version in served():
        if version not in getattr(apis.HANDLERS[key], "DECODERS", {}):
            yield key, version


def null_paths(entity_type: type, prefix: str = "") -> Iterator[tuple[str, str, bool]]:
    """Every field that has a null on the wire, as (dotted path, "array" | "string" |
    "bytes", nullable in this version); nested ones through the first item of their
    parent arrays. Tagged fields are left out: their null is their absence."""
    for f in fields(entity_type):
        kind = classify_field(f)
        if get_field_tag(f) is None:
            if kind.is_array:
                yield prefix + f.name, "array", nullable(f)
            elif not isinstance(kind, EntityField):
                kafka_type = get_schema_field_type(f)
                if kafka_type == "string":
                    yield prefix + f.name, "string", nullable(f)
                elif kafka_type in ("bytes", "records"):
                    yield prefix + f.name, "bytes", nullable(f)
        if isinstance(kind, EntityTupleField | EntityField):
            yield from null_paths(kind.type_, f"{prefix}{f.name}.")


def _set(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    head, _, rest = path.partition(".")
    if not rest:
        return {**data, head: value}
    inner = data[head]
    if isinstance(inner, list):
        return {**data, head: [_set(inner[0], rest, value), *inner[1:]]}
    return {**data, head: _set(inner, rest, value)}


_EMPTY: dict[str, Any] = {"array": [], "string": "", "bytes": b""}
_LEGACY_WIDTH = {"array": 4, "string": 2, "bytes": 4}


def with_null(api_key: int, version: int, path: str, kind: str) -> bytes:
    """The sample body with the field at `path` null (length -1, or compact 0), whether
    or not the schema allows it: kio writes only what its schema allows, so the null is
    put where the field's empty and sample values first differ (in its length)."""
    entity_type = request_type(api_key, version)
    data = sample(entity_type)
    empty = encode(make(entity_type, _set(data, path, _EMPTY[kind])))
    full = encode(make(entity_type, data))
    at = next(i for i, (a, b) in enumerate(zip(empty, full, strict=False)) if a != b)
    if entity_type.__flexible__:
        assert empty[at] == 1  # compact length + 1
        return empty[:at] + b"\x00" + empty[at + 1 :]
    width = _LEGACY_WIDTH[kind]
    assert empty[at - width + 1 : at + 1] == bytes(width)
    return empty[: at - width + 1] + b"\xff" * width + empty[at + 1 :]


def flexible_header(api_key: int, version: int) -> bool:
    """Whether the request header is v2 (it has a tagged-field section)."""
    return version not in getattr(apis.HANDLERS[api_key], "DECODERS", {}) and bool(
        request_type(api_key, version).__flexible__
    )


def frame(api_key: int, version: int, body: bytes, correlation_id: int) -> bytes:
    """A whole request frame, size prefix included, with client id "fuzz"."""
    header = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"fuzz"
    if flexible_header(api_key, version):
        header += b"\x00"
    return struct.pack(">i", len(header) + len(body)) + header + body
