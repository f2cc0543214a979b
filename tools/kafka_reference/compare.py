"""Turning decoded answers into comparable data (`to_plain`, `normalise`), comparing
Kafka's with Skiff's (`diff`) and showing the differences (`show`, `jsonable`)."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import struct
import uuid
from collections.abc import Callable
from typing import Any

from aiokafka.record.default_records import DefaultRecordBatch

from .constants import BASE_TS, ERROR_NAMES, RUN, ZERO_UUID

# -- turning responses into comparable data --------------------------------------------------

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MS = datetime.timedelta(milliseconds=1)


def to_plain(value: Any, field: str = "") -> Any:
    """A decoded kio entity as dicts, lists and scalars. Error codes become ints, durations
    and datetimes milliseconds, uuids strings, and a `records` field a batch summary."""
    if isinstance(value, enum.Enum):
        return int(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name), f.name) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [to_plain(v, field) for v in value]
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime.timedelta):
        return int(value / _MS)
    if isinstance(value, datetime.datetime):
        return int((value - _EPOCH) / _MS)
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        if field == "records":
            return summarise_records(data)
        return repr(data) if field in SHOWN_BYTES else f"<{len(data)} bytes>"
    return value


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return "0x" + data.hex()


SHOWN_BYTES = {"metadata", "member_metadata", "assignment", "member_assignment"}  # group blobs

_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 record batch header


def summarise_records(data: bytes) -> dict[str, Any]:
    """A Fetch response's record set as its batches' header fields and records."""
    out: dict[str, Any] = {"bytes": len(data), "batches": []}
    pos = 0
    while pos < len(data):
        if pos + 17 > len(data):
            out["partial_tail_bytes"] = len(data) - pos
            break
        base_offset, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        if end > len(data):
            out["partial_tail_bytes"] = len(data) - pos
            break
        raw = data[pos:end]
        magic = raw[16]
        if magic != 2:
            out["batches"].append({"base_offset": base_offset, "magic": magic, "bytes": len(raw)})
            pos = end
            continue
        (
            _,
            _,
            leader_epoch,
            _,
            _,
            attributes,
            last_delta,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        ) = _BATCH_HEADER.unpack_from(raw, 0)
        batch = DefaultRecordBatch(raw)
        out["batches"].append(
            {
                "base_offset": base_offset,
                "bytes": len(raw),
                "partition_leader_epoch": leader_epoch,
                "crc_ok": batch.validate_crc(),
                "attributes": attributes,
                "last_offset_delta": last_delta,
                "base_timestamp": base_ts,
                "max_timestamp": max_ts,
                "producer_id": producer_id,
                "producer_epoch": producer_epoch,
                "base_sequence": base_sequence,
                "record_count": count,
                "records": [_record(r) for r in batch],
            }
        )
        pos = end
    return out


def _record(r: Any) -> str:
    """A record as 'offset:value' plus its key, headers and timestamp (relative to BASE_TS)."""
    ts = r.timestamp - BASE_TS
    text = f"{r.offset}:{_text(r.value)} t{'+' if ts >= 0 else ''}{ts}"
    if r.key is not None:
        text += f" key={_text(r.key)}"
    if r.headers:
        text += f" headers={[(k, _text(v)) for k, v in r.headers]}"
    return text


@dataclasses.dataclass(frozen=True, eq=False)
class Masked:
    """A value that must differ between the brokers: equal to any Masked of the same kind,
    shown with its real value."""

    kind: str
    value: Any

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Masked) and other.kind == self.kind

    def __hash__(self) -> int:
        return hash(self.kind)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


MASKS: dict[str, Callable[[Any], bool]] = {  # field name -> whether this value is masked
    "node_id": lambda v: _is_int(v) and v >= 0,
    "leader_id": lambda v: _is_int(v) and v >= 0,
    "controller_id": lambda v: _is_int(v) and v >= 0,
    "host": lambda v: v is not None,
    "port": lambda v: v is not None,
    "cluster_id": lambda v: v is not None,
    "topic_id": lambda v: v not in (None, str(ZERO_UUID)),
    "error_message": lambda v: v is not None,
    "log_append_time": lambda v: _is_int(v) and v > 0,
    "producer_id": lambda v: _is_int(v) and v >= 0,
    "finalized_features_epoch": lambda v: _is_int(v) and v >= 0,
}
NODE_LISTS = {
    "replica_nodes",
    "isr_nodes",
    "offline_replicas",
    "eligible_leader_replicas",
    "last_known_elr",
}
DROPPED = {"throttle_time", "throttle_time_ms"}
KEY_FIELDS = (
    "name",
    "topic",
    "partition_index",
    "index",
    "partition",
    "group_id",
    "member_id",
    "key",
)


def _strip_run(text: str) -> str:
    return text.replace(f"{RUN}-", "~")


def normalise(value: Any, field: str = "") -> Any:
    """The shared normaliser: drops throttle times, masks what must differ, shows this
    run's topic names as ~label, and turns lists of named things (topics, partitions,
    configs) into dicts keyed by name so that differences have readable paths."""
    if isinstance(value, dict):
        return {_strip_run(k): normalise(v, k) for k, v in value.items() if k not in DROPPED}
    if isinstance(value, list):
        if field in NODE_LISTS:
            return [Masked("node id", v) if _is_int(v) and v >= 0 else v for v in value]
        return _keyed([normalise(v, field) for v in value])
    if field in MASKS and MASKS[field](value):
        return Masked(field, _strip_run(value) if isinstance(value, str) else value)
    if isinstance(value, str):
        return _strip_run(value)
    return value


def _keyed(items: list[Any]) -> Any:
    if not items or not all(isinstance(i, dict) for i in items):
        return items
    for key in KEY_FIELDS:
        names = [i.get(key) for i in items]
        if all(isinstance(n, str | int) and not isinstance(n, bool) for n in names) and len(
            set(names)
        ) == len(names):
            return {str(n): i for n, i in zip(names, items, strict=True)}
    return items


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


ABSENT = _Absent()


class Summary(str):
    """A diff line's own text (e.g. the names of entries only one side has)."""


@dataclasses.dataclass
class Difference:
    path: str
    kafka: Any
    skiff: Any


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _scalar(value: Any) -> bool:
    return not isinstance(value, dict | list)


def diff(a: Any, b: Any, path: str = "") -> list[Difference]:
    """Field-by-field differences between Kafka's (a) and Skiff's (b) normalised answers.
    An empty list counts as an empty dict (a keyed list that happens to be empty); lists of
    scalars are shown whole; other lists are compared item by item."""
    if isinstance(a, dict) and b == []:
        b = {}
    if isinstance(b, dict) and a == []:
        a = {}
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[Difference] = []
        for key in a:
            if key in b:
                out += diff(a[key], b[key], _join(path, key))
        out += _one_sided([k for k in a if k not in b], a, path, kafka_side=True)
        out += _one_sided([k for k in b if k not in a], b, path, kafka_side=False)
        return out
    if isinstance(a, list) and isinstance(b, list) and a != b:
        if all(map(_scalar, a + b)):
            return [Difference(path or "(top)", a, b)]
        out = []
        if len(a) != len(b):
            out.append(Difference(f"{path}.length", len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            out += diff(x, y, f"{path}[{i}]")
        extra = a[len(b) :] if len(a) > len(b) else b[len(a) :]
        for i, item in enumerate(extra, start=min(len(a), len(b))):
            kafka, skiff = (item, ABSENT) if len(a) > len(b) else (ABSENT, item)
            out.append(Difference(f"{path}[{i}]", kafka, skiff))
        return out
    if a == b and type(a) is type(b):
        return []
    return [Difference(path or "(top)", a, b)]


def _one_sided(keys: list[str], src: dict[str, Any], path: str, kafka_side: bool) -> list[Any]:
    if len(keys) > 3:  # many: one line naming them
        found = Summary(f"{len(keys)} entries: {', '.join(keys)}")
        pairs = [(found, ABSENT) if kafka_side else (ABSENT, found)]
        return [Difference(path or "(top)", *pair) for pair in pairs]
    return [
        Difference(_join(path, k), src[k], ABSENT)
        if kafka_side
        else Difference(_join(path, k), ABSENT, src[k])
        for k in keys
    ]


def jsonable(value: Any) -> Any:
    if isinstance(value, Masked):
        return jsonable(value.value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if value is ABSENT:
        return "(absent)"
    if isinstance(value, bytes):
        return "0x" + value.hex()
    return value


def show(value: Any, path: str = "", limit: int = 240) -> str:
    if value is ABSENT:
        return "(absent)"
    if path.endswith("error_code") and _is_int(value):
        return f"{value} {ERROR_NAMES.get(value, '?')}"
    if isinstance(value, Summary):
        return str(value)
    text = json.dumps(jsonable(value), separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."
