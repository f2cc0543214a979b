"""Bounds check of a request body before kio decodes it.

kio 0.6.5's native reader reserves an array's declared length up front: a 24-byte
Metadata request whose topics array claims 2**32 - 2 items makes it allocate ~34 GB
and the process aborts. This pass walks the same schema (kio's per-version
dataclasses) without building anything and applies Kafka's own rules, so what kio is
handed is safe to decode:

* an array length larger than the bytes left is malformed (Kafka's generated readers:
  "Tried to allocate a collection of size N, but there are only M bytes remaining");
* a string or bytes length past the end of the frame is malformed;
* a null (length -1, or compact 0) where the schema says the field is not nullable in
  this version is malformed ("non-nullable field X was serialized as null");
* a known tagged field must fill exactly the size its header declares (kio reads it
  with its own reader; a different size would put kio and this pass out of step).

Fixed-size fields are summed at compile time, so a Produce or Fetch body costs a few
Python steps per topic and partition. Every violation raises MalformedRequest.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import fields
from functools import cache
from types import NoneType, UnionType
from typing import Any, TypeAlias, Union, get_args, get_origin

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
)

__all__ = ["MalformedRequest", "check_request", "nullable"]


class MalformedRequest(ValueError):
    """The body breaks its schema: Kafka closes the connection for such a request."""


# (buffer, position, end) -> position after the value.
Scan: TypeAlias = Callable[[Any, int, int], int]

_FIXED = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "error_code": 2,
    "int64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}
_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from


def check_request(entity_type: type, buf: Any, offset: int) -> None:
    """Raise MalformedRequest unless ``buf[offset:]`` is safe for kio to decode as
    ``entity_type``."""
    end = len(buf)
    if _entity_scan(entity_type, False)[0](buf, offset, end) > end:
        # Fixed-size fields are skipped unread: a frame cut in them ends past its end.
        raise MalformedRequest(f"{entity_type.__name__} runs past the end of the request")


def _uvarint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    """Kafka's unsigned varint: at most 5 bytes (a 32-bit value)."""
    result = 0
    for shift in (0, 7, 14, 21, 28):
        if pos >= end:
            raise MalformedRequest("varint runs past the end of the request")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
    raise MalformedRequest("varint longer than 5 bytes")


def _null(name: str) -> MalformedRequest:
    return MalformedRequest(f"non-nullable field {name} was serialized as null")


def _past_end(name: str, size: int, left: int) -> MalformedRequest:
    return MalformedRequest(f"{name}: length {size} runs past the end ({left} bytes left)")


def _fixed(size: int, name: str) -> Scan:
    def scan(buf: Any, pos: int, end: int) -> int:
        pos += size
        if pos > end:
            raise _past_end(name, size, end - pos + size)
        return pos

    return scan


def _sized(name: str, compact: bool, wide: bool, nullable: bool, skip: int = 0) -> Scan:
    """A string (int16 length) or bytes (int32 length), or their compact forms, after
    ``skip`` bytes of fixed-size fields (checked by the length's own bounds check)."""

    def scan(buf: Any, pos: int, end: int) -> int:
        pos += skip
        if compact:
            if pos < end and buf[pos] < 0x80:  # a one-byte varint: lengths below 127
                size = buf[pos] - 1
                pos += 1
            else:
                n, pos = _uvarint(buf, pos, end)
                size = n - 1
        else:
            if pos + (4 if wide else 2) > end:
                raise _past_end(name, 4 if wide else 2, end - pos)
            (size,) = _I32(buf, pos) if wide else _I16(buf, pos)
            pos += 4 if wide else 2
            if size < -1:
                raise MalformedRequest(f"{name}: negative length {size}")
        if size == -1:
            if not nullable:
                raise _null(name)
            return pos
        if size > end - pos:
            raise _past_end(name, size, end - pos)
        return pos + size

    return scan


def _array(
    name: str, compact: bool, nullable: bool, item: Scan | None, min_item: int, skip: int = 0
) -> Scan:
    """An array after ``skip`` bytes of fixed-size fields; ``item`` None means
    fixed-size items of ``min_item`` bytes."""
    least = max(min_item, 1)

    def scan(buf: Any, pos: int, end: int) -> int:
        pos += skip
        if compact:
            if pos < end and buf[pos] < 0x80:
                count = buf[pos] - 1
                pos += 1
            else:
                n, pos = _uvarint(buf, pos, end)
                count = n - 1
        else:
            if pos + 4 > end:
                raise _past_end(name, 4, end - pos)
            (count,) = _I32(buf, pos)
            pos += 4
            if count < -1:
                raise MalformedRequest(f"{name}: negative array length {count}")
        if count == -1:
            if not nullable:
                raise _null(name)
            return pos
        left = end - pos
        if count * least > left:
            raise MalformedRequest(
                f"{name}: an array of {count} items cannot fit in the {left} bytes left"
            )
        if item is None:
            return pos + count * min_item
        for _ in range(count):
            pos = item(buf, pos, end)
        return pos

    return scan


def nullable(field: Any) -> bool:
    """Whether the field may be null in this version (kio's type hint is ``X | None``)."""
    return get_origin(field.type) in (UnionType, Union) and NoneType in get_args(field.type)


def _field_scan(
    entity_type: type, field: Any, tagged: bool, skip: int = 0
) -> tuple[Scan | None, int]:
    """The field's scan, after ``skip`` bytes of fixed-size fields, and its minimum
    size; scan None for a fixed-size field. Entities do not skip: skip must be 0."""
    compact = bool(entity_type.__flexible__)
    name = f"{entity_type.__name__}.{field.name}"
    # A tagged field's absence is its null, so kio reads a present one as non-nullable;
    # except entities, whose nullability kio keys on the type hint alone.
    null_ok = nullable(field) and not tagged
    kind = classify_field(field)
    if isinstance(kind, EntityField):
        scan, least = _entity_scan(kind.type_, nullable(field))
        return scan, least
    if isinstance(kind, EntityTupleField):
        item, least = _entity_scan(kind.type_, False)
        return _array(name, compact, null_ok, item, least, skip), (1 if compact else 4)
    kafka_type = get_schema_field_type(field)
    size = _FIXED.get(kafka_type)
    if isinstance(kind, PrimitiveField):
        if size is not None:
            return None, size
        if kafka_type == "string":
            # Kafka always writes the header's client id as a legacy string (framing.py
            # reads it); kio's body schemas have no other exception.
            return _sized(name, compact, False, null_ok, skip), (1 if compact else 2)
        if kafka_type in ("bytes", "records"):
            return _sized(name, compact, True, null_ok, skip), (1 if compact else 4)
        raise TypeError(f"{name}: unknown kafka_type {kafka_type!r}")
    # An array of primitives: a fixed size lets the whole array be skipped at once.
    if size is not None:
        return _array(name, compact, null_ok, None, size, skip), (1 if compact else 4)
    if kafka_type == "string":
        item = _sized(f"{name}[]", compact, False, False)
        min_item = 1 if compact else 2
        return _array(name, compact, null_ok, item, min_item, skip), (1 if compact else 4)
    raise TypeError(f"{name}: unsupported array of {kafka_type!r}")


@cache
def _entity_scan(entity_type: type, optional: bool) -> tuple[Scan, int]:
    """Compile the entity's scan: a run of fixed-size fields is skipped by the step
    after it (whose own bounds check covers the run). Returns (scan, minimum size)."""
    name = entity_type.__name__
    flexible = bool(entity_type.__flexible__)
    steps: list[Scan] = []
    known_tags: dict[int, Scan] = {}
    run = 0
    least = 0
    for field in fields(entity_type):
        tag = get_field_tag(field)
        if tag is not None:
            scan, size = _field_scan(entity_type, field, True)
            known_tags[int(tag)] = scan or _fixed(size, f"{name}.{field.name}")
            continue
        if run and isinstance(classify_field(field), EntityField):
            steps.append(_fixed(run, name))
            run = 0
        scan, size = _field_scan(entity_type, field, False, run)
        least += size
        if scan is None:
            run += size
        else:
            steps.append(scan)
            run = 0
    if flexible:
        steps.append(_tagged_fields(name, known_tags, run))
        least += 1
    elif run:
        steps.append(_fixed(run, name))
    scan_entity = _chain(tuple(steps))

    if not optional:
        return scan_entity, least

    def scan_nullable(buf: Any, pos: int, end: int) -> int:
        # kio's marker (KIP-893): an int8, -1 meaning null, anything else a value.
        if pos >= end:
            raise _past_end(entity_type.__name__, 1, 0)
        if buf[pos] == 0xFF:
            return pos + 1
        return scan_entity(buf, pos + 1, end)

    return scan_nullable, 1


def _chain(steps: tuple[Scan, ...]) -> Scan:
    """The steps one after another (unrolled for the usual short entities)."""
    if not steps:
        return lambda buf, pos, end: pos
    if len(steps) == 1:
        return steps[0]
    if len(steps) == 2:
        first, second = steps
        return lambda buf, pos, end: second(buf, first(buf, pos, end), end)
    if len(steps) == 3:
        first, second, third = steps
        return lambda buf, pos, end: third(buf, second(buf, first(buf, pos, end), end), end)

    def scan(buf: Any, pos: int, end: int) -> int:
        for step in steps:
            pos = step(buf, pos, end)
        return pos

    return scan


def _tagged_fields(name: str, known: dict[int, Scan], skip: int) -> Scan:
    def scan(buf: Any, pos: int, end: int) -> int:
        pos += skip
        if pos < end and buf[pos] == 0:  # the usual case: no tagged fields
            return pos + 1
        count, pos = _uvarint(buf, pos, end)
        if count > end - pos:
            raise MalformedRequest(f"{name}: {count} tagged fields cannot fit")
        for _ in range(count):
            tag, pos = _uvarint(buf, pos, end)
            size, pos = _uvarint(buf, pos, end)
            if size > end - pos:
                raise _past_end(f"{name} tag {tag}", size, end - pos)
            value = known.get(tag)
            if value is not None and value(buf, pos, pos + size) != pos + size:
                raise MalformedRequest(f"{name} tag {tag}: value shorter than its size {size}")
            pos += size
        return pos

    return scan
