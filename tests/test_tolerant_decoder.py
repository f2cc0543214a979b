"""Tests for sidecar.protocol.tolerant_decoder.

1. Round trip: for every kio request schema (and both request header versions) build
   non-trivial instances, encode with kio's writer and check decode_tolerant matches
   kio's native reader exactly (values, leaf types and bytes consumed).
2. Unknown tags: re-encode flexible instances with extra, undefined tagged fields in the
   top-level and nested tagged sections; kio's reader must raise KeyError while
   decode_tolerant must return the clean entity and consume every byte.
"""

from __future__ import annotations

import datetime
import io
import uuid
from collections.abc import Callable, Iterator
from dataclasses import MISSING, Field, fields, is_dataclass, replace
from functools import partial
from types import ModuleType
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_new_batch
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
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
from kio.serial._serialize import get_field_writer
from kio.serial.errors import BufferUnderflow
from kio.serial.writers import write_int8, write_int32, write_unsigned_varint
from kio.static.constants import EntityType

from sidecar.protocol import kio_extra
from sidecar.protocol.tolerant_decoder import _entity_reader, decode_tolerant

# --------------------------------------------------------------------------- helpers


def encode(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def kio_decode(entity_type: type, data: bytes | memoryview, offset: int = 0) -> tuple[Any, int]:
    return entity_reader(entity_type)(data, offset)


def assert_identical(a: Any, b: Any, path: str = "$") -> None:
    """Deep equality that also requires identical runtime types at every leaf.

    Plain ``==`` would accept 1 == True, bytes vs Records, timedelta subclasses, ...
    """
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if is_dataclass(a):
        for f in fields(a):
            assert_identical(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, tuple):
        assert len(a) == len(b), f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_identical(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def all_request_types() -> list[type]:
    types: list[type] = [RequestHeaderV1, RequestHeaderV2]
    for api_key, name in sorted(api_key_map.items()):
        for version in sorted(schema_name_map[name]):
            if EntityType.request in schema_name_map[name][version]:
                types.append(load_request_schema(api_key, version))
    return types + list(kio_extra.REQUESTS.values())  # the versions kio lacks


def type_id(entity_type: type) -> str:
    api_key = getattr(entity_type, "__api_key__", "hdr")
    return f"{entity_type.__name__}-k{api_key}-v{entity_type.__version__}"


def _record_batch(count: int, seed: int) -> bytes:
    """A real v2 RecordBatch, as a producer would put in Produce.records."""
    base = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.UTC)
    records = tuple(
        Record(
            attributes=0,
            timestamp=base + datetime.timedelta(milliseconds=seed * 10 + i),
            offset=i,
            key=f"key-{seed}-{i}".encode(),
            value=f'{{"order": {seed * 100 + i}, "note": "ünïcode"}}'.encode(),
            headers=(RecordHeader(key=b"trace-id", value=f"t{seed}{i}".encode()),),
        )
        for i in range(count)
    )
    out = io.BytesIO()
    write_new_batch(
        out,
        NewRecordBatch(
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            records=records,
            attributes=0,
        ),
    )
    return out.getvalue()


# ------------------------------------------------------------ generic instance builder


class ValueFactory:
    """Builds instances of any kio schema from its field metadata.

    ``full`` sets every optional / tagged field to a non-default value and fills arrays
    with two items; sparse (``full=False``) uses nulls, empty arrays and defaults.
    """

    def __init__(self, full: bool) -> None:
        self.full = full
        self.counter = 0

    def _next(self) -> int:
        self.counter += 1
        return self.counter

    def primitive(self, kafka_type: str) -> Any:
        n = self._next()
        match kafka_type:
            case "int8":
                return n % 100 + 1
            case "int16":
                return 1000 + n
            case "int32":
                return 100_000 + n
            case "int64":
                return 2**40 + n
            case "uint16":
                return 40_000 + n
            case "uint8" | "uint32" | "uint64":
                return n
            case "float64":
                return 0.25 * n
            case "bool":
                return n % 2 == 1
            case "string":
                return f"value-{n}-ø"
            case "bytes":
                return bytes([n % 256, 0, 255]) + b"payload"
            case "records":
                return _record_batch(2, n)
            case "uuid":
                return uuid.UUID(int=(n << 64) | 0xABCDEF)
            case "error_code":
                return ErrorCode.not_coordinator
            case "timedelta_i32" | "timedelta_i64":
                return datetime.timedelta(milliseconds=1500 + n)
            case "datetime_i64":
                return datetime.datetime.fromtimestamp(1_700_000_000 + n, datetime.UTC)
        raise AssertionError(f"no generator for {kafka_type}")

    def field_value(self, field: Field) -> Any:
        kind = classify_field(field)
        if isinstance(kind, PrimitiveField):
            return self.primitive(get_schema_field_type(field))
        if isinstance(kind, PrimitiveTupleField):
            kafka_type = get_schema_field_type(field)
            return tuple(self.primitive(kafka_type) for _ in range(2))
        if isinstance(kind, EntityField):
            return self.build(kind.type_)
        if isinstance(kind, EntityTupleField):
            return tuple(self.build(kind.type_) for _ in range(2))
        raise AssertionError(kind)

    def build(self, entity_type: type) -> Any:
        kwargs: dict[str, Any] = {}
        for field in fields(entity_type):
            has_default = field.default is not MISSING
            if get_field_tag(field) is not None:
                if self.full:
                    kwargs[field.name] = self.field_value(field)
                elif not has_default:
                    kwargs[field.name] = get_tagged_field_default(field)
            elif self.full or not (has_default or is_optional(field)):
                kwargs[field.name] = (
                    ()
                    if not self.full and classify_field(field).is_array
                    else self.field_value(field)
                )
            elif not has_default:
                kwargs[field.name] = None
        return entity_type(**kwargs)


# ----------------------------------------------------------- realistic request builders


def _make(entity_type: type, **kwargs: Any) -> Any:
    """Instantiate, dropping kwargs this version's schema does not have."""
    names = {f.name for f in fields(entity_type)}
    return entity_type(**{k: v for k, v in kwargs.items() if k in names})


def _module(entity_type: type) -> ModuleType:
    import sys

    return sys.modules[entity_type.__module__]


TOPIC_ID = uuid.UUID("6c4c1a8e-8f5a-4f1e-9d56-3a2b1c0d9e8f")
CLUSTER_ID = "lkc-7Zq9XnQbQ1WvM3cR8bT0Ag"


def realistic_produce(t: type) -> Any:
    m = _module(t)
    topics = tuple(
        _make(
            m.TopicProduceData,
            name=name,
            topic_id=TOPIC_ID if name == "orders" else uuid.UUID(int=7),
            partition_data=tuple(
                _make(m.PartitionProduceData, index=p, records=_record_batch(3, p) if p else None)
                for p in range(3)
            ),
        )
        for name in ("orders", "payments.v1")
    )
    return _make(
        t,
        transactional_id="tx-checkout-1",
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=topics,
    )


def realistic_fetch(t: type) -> Any:
    m = _module(t)
    partitions = tuple(
        _make(
            m.FetchPartition,
            partition=p,
            current_leader_epoch=5,
            fetch_offset=1_000 * p + 17,
            last_fetched_epoch=4,
            log_start_offset=0,
            partition_max_bytes=1_048_576,
            replica_directory_id=uuid.UUID(int=0xD1 + p) if p % 2 else None,
            high_watermark=12_345 if p == 1 else 2**63 - 1,
        )
        for p in range(3)
    )
    topics = (
        _make(m.FetchTopic, topic="orders", topic_id=TOPIC_ID, partitions=partitions),
        _make(m.FetchTopic, topic="payments.v1", topic_id=uuid.UUID(int=9), partitions=()),
    )
    extra: dict[str, Any] = {}
    if hasattr(m, "ForgottenTopic"):
        extra["forgotten_topics_data"] = (
            _make(m.ForgottenTopic, topic="old", topic_id=uuid.UUID(int=3), partitions=(0, 4)),
        )
    if hasattr(m, "ReplicaState"):
        extra["replica_state"] = m.ReplicaState(replica_id=3, replica_epoch=42)
    return _make(
        t,
        cluster_id=CLUSTER_ID,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=52_428_800,
        isolation_level=1,
        session_id=77,
        session_epoch=3,
        topics=topics,
        rack_id="eu-west-1a",
        **extra,
    )


def realistic_metadata(t: type) -> Any:
    m = _module(t)
    topics = tuple(
        _make(m.MetadataRequestTopic, name=name, topic_id=None) for name in ("orders", "audit")
    )
    return _make(
        t,
        topics=topics,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )


def realistic_api_versions(t: type) -> Any:
    return _make(t, client_software_name="confluent-kafka-python", client_software_version="2.4.0")


def realistic_join_group(t: type) -> Any:
    m = _module(t)
    protocols = tuple(
        _make(m.JoinGroupRequestProtocol, name=name, metadata=b"\x00\x03" + name.encode() * 3)
        for name in ("cooperative-sticky", "range")
    )
    return _make(
        t,
        group_id="billing-consumers",
        session_timeout=datetime.timedelta(seconds=45),
        rebalance_timeout=datetime.timedelta(minutes=5),
        member_id="rdkafka-4f9c1a2e-1b7d-4c55-9a0e-d1e2f3a4b5c6",
        group_instance_id="billing-0",
        protocol_type="consumer",
        protocols=protocols,
        reason="rebalance after restart",
    )


def realistic_offset_commit(t: type) -> Any:
    m = _module(t)
    topics = tuple(
        _make(
            m.OffsetCommitRequestTopic,
            name=name,
            topic_id=TOPIC_ID,
            partitions=tuple(
                _make(
                    m.OffsetCommitRequestPartition,
                    partition_index=p,
                    committed_offset=10_000 + p,
                    committed_leader_epoch=7,
                    committed_metadata="host=worker-3" if p else None,
                )
                for p in range(2)
            ),
        )
        for name in ("orders", "payments.v1")
    )
    return _make(
        t,
        group_id="billing-consumers",
        generation_id_or_member_epoch=12,
        member_id="member-1",
        group_instance_id=None,
        retention_time=datetime.timedelta(days=7),
        topics=topics,
    )


def realistic_create_topics(t: type) -> Any:
    m = _module(t)
    topics = (
        _make(
            m.CreatableTopic,
            name="orders",
            num_partitions=-1,
            replication_factor=-1,
            assignments=tuple(
                _make(m.CreatableReplicaAssignment, partition_index=p, broker_ids=(1, 2, 3))
                for p in range(2)
            ),
            configs=(
                _make(m.CreatableTopicConfig, name="cleanup.policy", value="compact"),
                _make(m.CreatableTopicConfig, name="retention.ms", value=None),
            ),
        ),
        _make(
            m.CreatableTopic,
            name="audit",
            num_partitions=6,
            replication_factor=3,
            assignments=(),
            configs=(),
        ),
    )
    return _make(t, topics=topics, timeout=datetime.timedelta(seconds=60), validate_only=True)


REALISTIC: dict[int, Callable[[type], Any]] = {
    0: realistic_produce,
    1: realistic_fetch,
    3: realistic_metadata,
    8: realistic_offset_commit,
    11: realistic_join_group,
    18: realistic_api_versions,
    19: realistic_create_topics,
}


def realistic_cases() -> Iterator[Any]:
    for api_key, builder in REALISTIC.items():
        for version in sorted(schema_name_map[api_key_map[api_key]]):
            entity_type = load_request_schema(api_key, version)
            yield pytest.param(builder, entity_type, id=f"{api_key_map[api_key]}-v{version}")


def generic_instances(entity_type: type) -> list[Any]:
    return [ValueFactory(full=True).build(entity_type), ValueFactory(full=False).build(entity_type)]


# --------------------------------------------------------- encoder with unknown tags

UnknownTags = list[tuple[int, bytes]]

UNKNOWN_TAGS: UnknownTags = [
    (99, b"\x01\x02\x03"),  # the tag from the production incident
    (77, b""),  # empty payload
    (300, b"\xaa" * 200),  # 2-byte tag varint and 2-byte length varint
    (10_000_000, b"future-field"),  # 4-byte tag varint
]


class InjectingEncoder:
    """Re-implements kio's entity writer, adding unknown tags to chosen entities.

    With nothing to inject it must produce exactly kio's bytes; a test checks that, so
    the injected variants differ from kio's encoding only by the extra tags.
    """

    def __init__(self, select: Callable[[Any, bool], bool], tags: UnknownTags) -> None:
        self.select = select  # (entity, is_root) -> inject here?
        self.tags = tags
        self.injected = 0

    def encode(self, entity: Any) -> bytes:
        out = io.BytesIO()
        self._entity(out, entity, is_root=True)
        return out.getvalue()

    def _entity(self, out: io.BytesIO, entity: Any, is_root: bool = False) -> None:
        entity_type = type(entity)
        flexible = entity_type.__flexible__
        entries: list[tuple[int, bytes]] = []
        for field in fields(entity_type):
            value = getattr(entity, field.name)
            tag = get_field_tag(field)
            if tag is None:
                self._field(out, entity_type, field, value, is_tag=False)
                continue
            if value == field.default or (
                field.default is MISSING and value == get_tagged_field_default(field)
            ):
                continue
            tag_out = io.BytesIO()
            self._field(tag_out, entity_type, field, value, is_tag=True)
            entries.append((int(tag), tag_out.getvalue()))
        if not flexible:
            return
        if self.select(entity, is_root):
            entries.extend(self.tags)
            self.injected += 1
        entries.sort(key=lambda entry: entry[0])
        write_unsigned_varint(out, len(entries))
        for tag, payload in entries:
            write_unsigned_varint(out, tag)
            write_unsigned_varint(out, len(payload))
            out.write(payload)

    def _field(
        self, out: io.BytesIO, entity_type: type, field: Field, value: Any, is_tag: bool
    ) -> None:
        kind = classify_field(field)
        flexible = entity_type.__flexible__
        if isinstance(kind, PrimitiveField | PrimitiveTupleField):
            is_header = entity_type.__name__ == "RequestHeader"
            get_field_writer(field, flexible, is_header, is_tag)(out, value)
        elif isinstance(kind, EntityField):
            if not is_tag and is_optional(field):
                write_int8(out, -1 if value is None else 1)
            if value is not None:
                self._entity(out, value)
        elif isinstance(kind, EntityTupleField):
            if flexible:
                write_unsigned_varint(out, 0 if value is None else len(value) + 1)
            else:
                write_int32(out, -1 if value is None else len(value))
            for item in value or ():
                self._entity(out, item)
        else:
            raise AssertionError(kind)


def inject(entity: Any, where: str, tags: UnknownTags = UNKNOWN_TAGS) -> tuple[bytes, int]:
    select = {
        "top": lambda e, is_root: is_root,
        "nested": lambda e, is_root: not is_root,
        "everywhere": lambda e, is_root: True,
    }[where]
    encoder = InjectingEncoder(select, tags)
    return encoder.encode(entity), encoder.injected


# ---------------------------------------------------------------------------- tests

REQUEST_TYPES = all_request_types()
FLEXIBLE_TYPES = [t for t in REQUEST_TYPES if t.__flexible__]


def test_schema_sweep_is_complete() -> None:
    # Guards against the parametrisation silently shrinking after a kio upgrade.
    assert len(REQUEST_TYPES) > 250
    assert len(FLEXIBLE_TYPES) > 150


@pytest.mark.parametrize("entity_type", REQUEST_TYPES, ids=type_id)
def test_round_trip_matches_kio(entity_type: type) -> None:
    for instance in generic_instances(entity_type):
        data = encode(instance)
        expected, expected_size = kio_decode(entity_type, data)
        got, size = decode_tolerant(entity_type, data)
        assert size == expected_size == len(data)
        assert_identical(got, expected)
        assert got == instance


@pytest.mark.parametrize(("builder", "entity_type"), list(realistic_cases()))
def test_realistic_requests_match_kio(builder: Callable[[type], Any], entity_type: type) -> None:
    instance = builder(entity_type)
    data = encode(instance)
    expected, expected_size = kio_decode(entity_type, data)
    got, size = decode_tolerant(entity_type, data)
    assert size == expected_size == len(data)
    assert_identical(got, expected)
    assert got == instance


def test_offset_and_memoryview_input() -> None:
    entity_type = load_request_schema(1, 15)
    instance = realistic_fetch(entity_type)
    payload = encode(instance)
    data = b"\x00\x00\x01\x2c" + payload + b"trailing"
    expected = kio_decode(entity_type, memoryview(data), 4)
    got = decode_tolerant(entity_type, memoryview(data), 4)
    assert got[1] == expected[1] == len(payload)
    assert_identical(got[0], expected[0])


@pytest.mark.parametrize("entity_type", REQUEST_TYPES, ids=type_id)
def test_injecting_encoder_matches_kio_writer(entity_type: type) -> None:
    # Validates the test's encoder: without injection it is byte-identical to kio.
    for instance in generic_instances(entity_type):
        assert inject(instance, "top", tags=[])[0] == encode(instance)


def _check_unknown_tags(entity_type: type, instance: Any, where: str) -> bool:
    """Returns False when ``instance`` has no entity matching ``where`` to inject into."""
    clean = encode(instance)
    clean_entity, _ = kio_decode(entity_type, clean)
    data, injected = inject(instance, where)
    if injected == 0:
        return False
    assert len(data) > len(clean)

    with pytest.raises(KeyError, match="Unknown tagged field tag"):
        kio_decode(entity_type, data)

    got, size = decode_tolerant(entity_type, data)
    assert size == len(data)
    assert_identical(got, clean_entity)

    # Also at a non-zero offset with trailing bytes after the message.
    framed = b"\xff" * 7 + data + b"\x00\x01"
    got, size = decode_tolerant(entity_type, memoryview(framed), 7)
    assert size == len(data)
    assert_identical(got, clean_entity)
    return True


def test_injected_tags_are_unknown_to_every_schema() -> None:
    injected = {tag for tag, _ in UNKNOWN_TAGS}
    seen: set[type] = set()

    def walk(entity_type: type) -> None:
        if entity_type in seen:
            return
        seen.add(entity_type)
        for f in fields(entity_type):
            assert get_field_tag(f) not in injected, (entity_type, f.name)
            kind = classify_field(f)
            if isinstance(kind, EntityField | EntityTupleField):
                walk(kind.type_)

    for entity_type in REQUEST_TYPES:
        walk(entity_type)


@pytest.mark.parametrize("where", ["top", "nested", "everywhere"])
@pytest.mark.parametrize("entity_type", FLEXIBLE_TYPES, ids=type_id)
def test_unknown_tags_are_skipped(entity_type: type, where: str) -> None:
    results = [
        _check_unknown_tags(entity_type, instance, where)
        for instance in generic_instances(entity_type)
    ]
    if not any(results):
        pytest.skip("schema has no nested entities")


@pytest.mark.parametrize("where", ["top", "nested", "everywhere"])
@pytest.mark.parametrize(("builder", "entity_type"), list(realistic_cases()))
def test_unknown_tags_in_realistic_requests(
    builder: Callable[[type], Any], entity_type: type, where: str
) -> None:
    if not entity_type.__flexible__:
        pytest.skip("tagged fields only exist in flexible versions")
    if not _check_unknown_tags(entity_type, builder(entity_type), where):
        pytest.skip("schema has no nested entities")


def test_unknown_tag_in_request_header() -> None:
    # Header v2 carries a tagged section too, and clients do put tags there.
    header = RequestHeaderV2(
        request_api_key=3, request_api_version=12, correlation_id=42, client_id="rdkafka"
    )
    data, _ = inject(header, "top")
    with pytest.raises(KeyError):
        kio_decode(RequestHeaderV2, data)
    got, size = decode_tolerant(RequestHeaderV2, data)
    assert size == len(data)
    assert_identical(got, header)


def test_unknown_tag_mixed_with_known_tags() -> None:
    # FetchRequest v17: known tags 0 (cluster_id) and 1 (replica_state) around tag 99,
    # plus unknown tags inside FetchPartition next to its known tagged field.
    entity_type = load_request_schema(1, 17)
    instance = realistic_fetch(entity_type)
    data, injected = inject(instance, "everywhere", tags=[(0x7F, b"x"), (99, b"\x00" * 3)])
    assert injected > 3
    got, size = decode_tolerant(entity_type, data)
    assert size == len(data)
    assert_identical(got, kio_decode(entity_type, encode(instance))[0])
    assert got.cluster_id == CLUSTER_ID
    assert got.replica_state.replica_epoch == 42
    assert got.topics[0].partitions[1].replica_directory_id == uuid.UUID(int=0xD2)


def test_nullable_nested_entity_with_unknown_tags() -> None:
    # DescribeTopicPartitions.cursor is a nullable struct (int8 marker before it).
    entity_type = load_request_schema(75, 0)
    module = _module(entity_type)
    for cursor in (module.Cursor(topic_name="orders", partition_index=3), None):
        instance = entity_type(
            topics=(module.TopicRequest(name="orders"),),
            response_partition_limit=2000,
            cursor=cursor,
        )
        data, _ = inject(instance, "everywhere")
        got, size = decode_tolerant(entity_type, data)
        assert size == len(data)
        assert_identical(got, kio_decode(entity_type, encode(instance))[0])


def test_truncated_unknown_tag_payload_raises() -> None:
    entity_type = load_request_schema(18, 3)
    instance = realistic_api_versions(entity_type)
    data, _ = inject(instance, "top", tags=[(99, b"\x01\x02\x03\x04")])
    with pytest.raises(BufferUnderflow):
        decode_tolerant(entity_type, data[:-1])


def _outcome(decode: Callable[[], tuple[Any, int]]) -> tuple[Any, ...]:
    try:
        entity, size = decode()
    except Exception as exc:  # comparing failure modes is the point
        return ("error", type(exc), str(exc))
    return ("ok", entity, size)


def _fetch_with_null_cluster_id() -> tuple[type, bytes]:
    # cluster_id is `str | None` but tagged: kio reads it with the non-nullable reader.
    entity_type = load_request_schema(1, 12)
    instance = replace(realistic_fetch(entity_type), cluster_id=None)
    return entity_type, inject(instance, "top", tags=[(0, b"\x00")])[0]


def _cursor_with_marker_zero() -> tuple[type, bytes]:
    # kio treats any nullable-struct marker other than -1 as "present".
    entity_type = load_request_schema(75, 0)
    module = _module(entity_type)
    cursor = module.Cursor(topic_name="t", partition_index=1)
    instance = entity_type(topics=(), response_partition_limit=5, cursor=cursor)
    data = bytearray(encode(instance))
    marker_at = 1 + 4  # empty compact array + int32 limit
    assert data[marker_at] == 1
    data[marker_at] = 0
    return entity_type, bytes(data)


def _known_tag_with_oversized_length() -> tuple[type, bytes]:
    # Like Kafka's generated readers, kio reads a known tag's value with its own reader
    # and ignores the declared length; the fallback must not diverge from that.
    entity_type = load_request_schema(1, 12)
    data = encode(replace(realistic_fetch(entity_type), cluster_id=None))
    assert data[-1] == 0  # empty top-level tagged section
    return entity_type, data[:-1] + b"\x01\x00\x05\x03ab\xee\xee"


MALFORMED: dict[str, Callable[[], tuple[type, Any]]] = {
    "known-tag-length-mismatch": _known_tag_with_oversized_length,
    "null-in-tagged-string": _fetch_with_null_cluster_id,
    "negative-legacy-array": lambda: (load_request_schema(3, 1), b"\xff\xff\xff\xfe"),
    "null-legacy-array": lambda: (load_request_schema(3, 1), b"\xff\xff\xff\xff"),
    "struct-marker-zero": _cursor_with_marker_zero,
    "writable-buffer": lambda: (load_request_schema(18, 3), bytearray(b"\x02a\x02b\x00")),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_edge_cases_behave_like_kio(case: str) -> None:
    entity_type, data = MALFORMED[case]()
    expected = _outcome(lambda: kio_decode(entity_type, data))
    got = _outcome(lambda: decode_tolerant(entity_type, data))
    assert got[0] == expected[0]
    if got[0] == "error":
        assert got[1:] == expected[1:]
    else:
        assert got[2] == expected[2]
        assert_identical(got[1], expected[1])


@pytest.mark.parametrize(("builder", "entity_type"), list(realistic_cases())[::5])
def test_truncated_input_fails_like_kio(builder: Callable[[type], Any], entity_type: type) -> None:
    data = encode(builder(entity_type))
    for end in range(len(data)):
        prefix = data[:end]
        expected = _outcome(partial(kio_decode, entity_type, prefix))
        got = _outcome(partial(decode_tolerant, entity_type, prefix))
        assert expected[0] == "error"
        assert got[:2] == expected[:2], end


def test_decode_plans_are_cached() -> None:
    entity_type = load_request_schema(0, 9)
    assert _entity_reader(entity_type, False) is _entity_reader(entity_type, False)
    decode_tolerant(entity_type, encode(realistic_produce(entity_type)))
    hits = _entity_reader.cache_info().hits
    decode_tolerant(entity_type, encode(realistic_produce(entity_type)))
    assert _entity_reader.cache_info().hits == hits + 1
