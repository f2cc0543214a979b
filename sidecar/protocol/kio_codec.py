"""kio as the codec for every API body that is not hand-written.

Decoding uses kio's Rust readers, falling back to the tolerant decoder when a
flexible request carries a tagged field kio 0.6.5 does not know (it raises
KeyError; Kafka's rule is to skip it). Encoding builds kio's per-version
dataclasses from plain dicts so one handler serves every version: keys a version
lacks are dropped, missing ones take the schema default or a zero value.
"""

from __future__ import annotations

import datetime
import io
import uuid
from dataclasses import MISSING, fields
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional

from sidecar.protocol import kio_extra
from sidecar.protocol.bounds import check_request
from sidecar.protocol.tolerant_decoder import decode_tolerant
from sidecar.telemetry.requests import response_errors

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@cache
def request_type(api_key: int, version: int) -> type:
    extra = kio_extra.REQUESTS.get((api_key, version))
    return extra if extra is not None else load_request_schema(api_key, version)


@cache
def response_type(api_key: int, version: int) -> type:
    extra = kio_extra.RESPONSES.get((api_key, version))
    return extra if extra is not None else load_response_schema(api_key, version)


@cache
def is_flexible_request(api_key: int, version: int) -> bool:
    return bool(request_type(api_key, version).__flexible__)


@cache
def _reader(entity: type) -> Any:
    return entity_reader(entity)


def decode_request(api_key: int, version: int, buf: bytes | memoryview, offset: int) -> Any:
    entity = request_type(api_key, version)
    check_request(entity, buf, offset)  # kio reserves arrays before reading them
    try:
        return _reader(entity)(buf, offset)[0]
    except KeyError as exc:
        if "tagged field" not in str(exc):
            raise
        return decode_tolerant(entity, buf, offset)[0]


def encode_response(api_key: int, version: int, data: dict[str, Any]) -> bytes:
    response_errors(data)  # error codes for /metrics and the request's span
    entity = response_type(api_key, version)
    out = io.BytesIO()
    entity_writer(entity)(out, build(entity, data))
    return out.getvalue()


def build(entity: type, data: dict[str, Any]) -> Any:
    """Instantiate a kio dataclass from a dict, converting ms ints to kio's time types."""
    kwargs: dict[str, Any] = {}
    for f in fields(entity):
        if f.name in data:
            kwargs[f.name] = _convert(f, data[f.name])
        elif f.default is MISSING and f.default_factory is MISSING:
            kwargs[f.name] = _zero(f)
    return entity(**kwargs)


def _convert(f: Any, value: Any) -> Any:
    if value is None:
        return None
    kind = classify_field(f)
    if isinstance(kind, EntityTupleField):
        return tuple(build(kind.type_, v) for v in value)
    if isinstance(kind, EntityField):
        return build(kind.type_, value)
    kafka_type = f.metadata.get("kafka_type")
    if kafka_type == "error_code":
        return ErrorCode(value)
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64":
        if value < 0 and is_optional(f):
            return None  # written as -1
        # a negative value of a non-nullable field (e.g. -1 "none") goes out as itself
        return _EPOCH + datetime.timedelta(milliseconds=value)
    if kind.is_array:
        return tuple(value)
    return value


def _zero(f: Any) -> Any:
    kind = classify_field(f)
    if kind.is_array:
        return ()
    if is_optional(f):
        return None
    if isinstance(kind, EntityField):
        return build(kind.type_, {})
    kafka_type = f.metadata.get("kafka_type", "")
    if kafka_type == "string":
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kafka_type == "datetime_i64":
        return _EPOCH
    return 0


_ONE_MS = datetime.timedelta(milliseconds=1)


def ms(value: datetime.timedelta) -> int:
    """A kio timedelta field (session timeouts and the like) in whole milliseconds."""
    return int(value / _ONE_MS)


MAX_STRING_BYTES = 32767  # Kafka's strings have an int16 length, also in compact form


def oversized_string(value: Any) -> bool:
    """Whether a decoded request holds a string longer than Kafka allows. Kafka's
    parser rejects such a request (compact strings could carry more) and closes the
    connection; kio accepts it, so Skiff checks."""
    if isinstance(value, str):
        # A UTF-8 character takes at most 4 bytes: short strings need no encoding.
        return len(value) * 4 > MAX_STRING_BYTES and len(value.encode()) > MAX_STRING_BYTES
    if isinstance(value, tuple):
        return any(oversized_string(v) for v in value)
    if hasattr(value, "__dataclass_fields__"):
        return any(oversized_string(getattr(value, f)) for f in value.__dataclass_fields__)
    return False
