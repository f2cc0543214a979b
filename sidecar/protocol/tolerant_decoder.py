"""Fallback decoder for kio entities that skips unknown tagged fields.

kio 0.6.5's native ``entity_reader`` raises ``KeyError('Unknown tagged field tag: N')``
when a flexible message carries a tag its schema does not define. KIP-482 says such
fields must be skipped, so the broker retries with this decoder when that happens.

It mirrors kio's native parse schema (``rust/src/schema.rs``) field by field, so the
result is identical to what ``entity_reader`` returns for well-formed input:

* non-tagged fields in declaration order, then (flexible only) the tagged section;
* arrays are compact (uvarint length + 1, 0 = null) in flexible versions and legacy
  (int32, -1 = null) otherwise, and any array may decode to ``None``;
* an optional entity is preceded by an int8 marker, -1 meaning null (KIP-893);
* tagged primitives are read with non-nullable readers, absent tags get
  ``get_tagged_field_default``;
* ``RequestHeader.client_id`` is always a nullable legacy string.

All primitive parsing is delegated to kio's native readers; only the structure is
walked in Python, with one compiled reader per (entity class, nullable) pair.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from functools import cache
from typing import Any, TypeAlias

from kio._kio_native import (
    get_reader,
    read_compact_array_length,
    read_int8,
    read_legacy_array_length,
    read_nullable_legacy_string,
    read_unsigned_varint,
)
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial.errors import BufferUnderflow

__all__ = ["decode_tolerant"]

# Same calling convention as kio's native readers: (buffer, offset) -> (value, size).
Reader: TypeAlias = Callable[[Any, int], tuple[Any, int]]


def decode_tolerant(
    entity_type: type, buf: bytes | memoryview, offset: int = 0
) -> tuple[object, int]:
    """Decode ``entity_type`` at ``buf[offset:]`` like kio's ``entity_reader``, but skip
    tagged fields whose tag the schema does not define (at any nesting depth).

    Returns ``(entity, bytes_consumed)``. Malformed input raises kio's decode errors
    (e.g. ``BufferUnderflow``), just as the native reader would.
    """
    return _entity_reader(entity_type, False)(buf, offset)


def _buffer_size(buf: Any) -> int:
    with memoryview(buf) as view:
        return view.nbytes


def _compact_array(item: Reader) -> Reader:
    def read(buf: Any, offset: int) -> tuple[tuple[Any, ...] | None, int]:
        length, pos = read_compact_array_length(buf, offset)
        if length is None:
            return None, pos
        items = []
        for _ in range(length):
            value, size = item(buf, offset + pos)
            items.append(value)
            pos += size
        return tuple(items), pos

    return read


def _legacy_array(item: Reader) -> Reader:
    def read(buf: Any, offset: int) -> tuple[tuple[Any, ...] | None, int]:
        length, pos = read_legacy_array_length(buf, offset)
        if length == -1:
            return None, pos
        if length < 0:
            # Same error kio raises for other negative lengths.
            raise ValueError("negative array length")
        items = []
        for _ in range(length):
            value, size = item(buf, offset + pos)
            items.append(value)
            pos += size
        return tuple(items), pos

    return read


def _field_reader(entity_type: type, field: Any, is_tagged: bool) -> Reader:
    flexible = bool(entity_type.__flexible__)
    # Kafka special-cases this header field to the legacy format even in header v2.
    if entity_type.__name__ == "RequestHeader" and field.name == "client_id":
        return read_nullable_legacy_string

    field_class = classify_field(field)
    inner: Reader
    if isinstance(field_class, PrimitiveField):
        # A tagged field's nullability is expressed by the tag's absence, so kio reads
        # its value with the non-nullable reader.
        optional = is_optional(field) and not is_tagged
        return get_reader(get_schema_field_type(field), flexible, optional)
    if isinstance(field_class, PrimitiveTupleField):
        # Nullability of a primitive array belongs to the array, never to its items.
        inner = get_reader(get_schema_field_type(field), flexible, False)
    elif isinstance(field_class, EntityField):
        # Unlike primitives, kio keys entity nullability on the type hint alone, even
        # for tagged fields.
        return _entity_reader(field_class.type_, is_optional(field))
    elif isinstance(field_class, EntityTupleField):
        inner = _entity_reader(field_class.type_, False)
    else:  # pragma: no cover - classify_field only returns the four classes above
        raise TypeError(f"Unsupported field classification: {field_class!r}")
    return _compact_array(inner) if flexible else _legacy_array(inner)


@cache
def _entity_reader(entity_type: type, nullable: bool) -> Reader:
    """Compile and cache the decode plan of ``entity_type`` as a reader closure.

    Kafka schemas are acyclic (and kio's dataclasses cannot reference themselves), so
    nested plans are simply compiled recursively on first use.
    """
    flexible = bool(entity_type.__flexible__)
    regular: list[tuple[str, Reader]] = []
    tagged: dict[int, tuple[str, Reader]] = {}
    defaults: list[tuple[str, Any]] = []

    for field in fields(entity_type):
        tag = get_field_tag(field)
        reader = _field_reader(entity_type, field, tag is not None)
        if tag is None:
            regular.append((field.name, reader))
        else:
            tagged[int(tag)] = (field.name, reader)
            defaults.append((field.name, get_tagged_field_default(field)))

    if tagged and not flexible:
        raise ValueError(f"Found tagged fields on non-flexible {entity_type.__name__}")

    def read(buf: Any, offset: int) -> tuple[Any, int]:
        cursor = offset
        if nullable:
            # Any marker other than -1 means a value follows, as in kio.
            marker, size = read_int8(buf, cursor)
            cursor += size
            if marker == -1:
                return None, cursor - offset

        values: dict[str, Any] = {}
        for name, field_reader in regular:
            values[name], size = field_reader(buf, cursor)
            cursor += size

        if flexible:
            count, size = read_unsigned_varint(buf, cursor)
            cursor += size
            for _ in range(count):
                tag, size = read_unsigned_varint(buf, cursor)
                cursor += size
                length, size = read_unsigned_varint(buf, cursor)
                cursor += size
                known = tagged.get(tag)
                if known is None:
                    # The whole point of this module: skip the payload, per KIP-482.
                    cursor += length
                    if cursor > _buffer_size(buf):
                        raise BufferUnderflow("Buffer is exhausted")
                    continue
                # Like kio (and Kafka's generated code), a known tag's value is read by
                # its own reader; the declared length is not used to advance.
                name, field_reader = known
                values[name], size = field_reader(buf, cursor)
                cursor += size
            for name, default in defaults:
                values.setdefault(name, default)

        return entity_type(**values), cursor - offset

    return read
