"""A minimal raw Kafka client for tests: one TCP socket, kio for bodies and headers.

    kafka = RawKafka("127.0.0.1", port)
    resp = kafka.request(3, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True})
    cid = kafka.send(0, 9, produce_body)      # pipelining: send several, then recv in order
    resp = kafka.recv(0, 9)                   # kafka.last_correlation_id is the answer's id

Request bodies are kio entities, raw bytes (already encoded), or plain dicts that
`make_request` turns into the kio entity of the requested version: keys a version lacks
are dropped, missing fields take the schema default or a zero value, and millisecond
ints are accepted for kio's timedelta fields. Nothing here imports the sidecar.
"""

from __future__ import annotations

import datetime
import io
import select
import socket
import struct
import time
import uuid
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import codec as codecs
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from aiokafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer

from sidecar.protocol import kio_codec
from sidecar.protocol.kio_codec import build
from sidecar.protocol.primitives import read_uvarint, uvarint

API_VERSIONS = 18
# Create/Renew/ExpireDelegationToken: their refusals carry -1 timestamps.
NEGATIVE_TIMESTAMPS = frozenset({38, 39, 40})


@dataclass(frozen=True)
class RefusedAnswer:
    """Such a refusal, read as far as its error code."""

    error_code: int


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


class ConnectionClosed(Exception):
    """The server closed the connection (EOF or reset) before a whole frame arrived."""


class ProtocolError(Exception):
    """A response that does not decode as the expected API version."""


# -- wire helpers ---------------------------------------------------------------------


def tagged_fields(tags: Sequence[tuple[int, bytes]]) -> bytes:
    """A tagged-field section: count, then (tag, size, data) per field."""
    return uvarint(len(tags)) + b"".join(
        uvarint(tag) + uvarint(len(data)) + data for tag, data in sorted(tags)
    )


def with_top_level_tags(body: bytes, tags: Sequence[tuple[int, bytes]]) -> bytes:
    """Replace the empty top-level tagged-field section that ends an encoded flexible
    body (a single 0 byte) with `tags`."""
    if not body.endswith(b"\x00"):
        raise ValueError("body does not end with an empty tagged-field section")
    return body[:-1] + tagged_fields(tags)


# Skiff's (kio's, and the versions kio lacks: sidecar/protocol/kio_extra.py)
request_type = kio_codec.request_type
response_type = kio_codec.response_type


def is_flexible(api_key: int, version: int) -> bool:
    return bool(request_type(api_key, version).__flexible__)


def header_is_flexible(api_key: int, version: int) -> bool:
    for v in range(version, -1, -1):
        try:
            return is_flexible(api_key, v)
        except Exception:
            continue
    return False


def encode(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


# -- building kio entities from dicts -----------------------------------------------------


def make_request(api_key: int, version: int, data: dict[str, Any]) -> Any:
    return make(request_type(api_key, version), data)


def make(entity_type: type, data: Any) -> Any:
    """A kio entity from a dict (keys the version lacks are dropped), by Skiff's own
    dict-to-dataclass builder; an entity passes through."""
    return data if isinstance(data, entity_type) else build(entity_type, data)


# -- the client -------------------------------------------------------------------------


class RawKafka:
    def __init__(
        self,
        host: str,
        port: int,
        timeout: float = 10.0,
        client_id: str | None = "rawkafka",
        source_host: str | None = None,  # connect from this local address (127.0.0.2, ...)
    ) -> None:
        source = None if source_host is None else (source_host, 0)
        self.sock = socket.create_connection((host, port), timeout=timeout, source_address=source)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.client_id = client_id
        self.next_correlation_id = 1
        self.last_correlation_id: int | None = None
        self._buf = bytearray()
        self._eof = False

    @property
    def local_port(self) -> int:
        return int(self.sock.getsockname()[1])

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawKafka:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # sending

    def frame(
        self,
        api_key: int,
        version: int,
        request: Any,
        correlation_id: int,
        header_tags: Sequence[tuple[int, bytes]] = (),
        body_tags: Sequence[tuple[int, bytes]] = (),
    ) -> bytes:
        """The whole request frame (size prefix included). A version kio does not know
        only takes raw bytes; its header is v2 when the API's nearest lower known
        version is flexible (so ApiVersions v5 gets one), else v1."""
        flexible = header_is_flexible(api_key, version)
        if isinstance(request, bytes | bytearray | memoryview):
            body = bytes(request)
        else:
            if isinstance(request, dict):
                request = make_request(api_key, version, request)
            body = encode(request)
        if body_tags:
            body = with_top_level_tags(body, body_tags)
        if flexible:
            header = encode(
                RequestHeaderV2(
                    request_api_key=api_key,
                    request_api_version=version,
                    correlation_id=correlation_id,
                    client_id=self.client_id,
                )
            )
            if header_tags:
                header = with_top_level_tags(header, header_tags)
        else:
            header = encode(
                RequestHeaderV1(
                    request_api_key=api_key,
                    request_api_version=version,
                    correlation_id=correlation_id,
                    client_id=self.client_id,
                )
            )
        return struct.pack(">i", len(header) + len(body)) + header + body

    def send(
        self,
        api_key: int,
        version: int,
        request: Any,
        correlation_id: int | None = None,
        header_tags: Sequence[tuple[int, bytes]] = (),
        body_tags: Sequence[tuple[int, bytes]] = (),
    ) -> int:
        """Send one request; returns its correlation id."""
        if correlation_id is None:
            correlation_id = self.next_correlation_id
        self.next_correlation_id = correlation_id + 1
        self.send_raw(
            self.frame(
                api_key,
                version,
                request,
                correlation_id,
                header_tags=header_tags,
                body_tags=body_tags,
            )
        )
        return correlation_id

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    # receiving

    def _fill(self, n: int, timeout: float | None) -> None:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while len(self._buf) < n:
            if self._eof:
                raise ConnectionClosed(f"closed with {len(self._buf)} of {n} bytes received")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"no complete frame within the timeout ({len(self._buf)} of {n} bytes)"
                )
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                continue
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self._eof = True
            self._buf += chunk

    def recv_raw(self, timeout: float | None = None) -> bytes:
        """The next response frame without its size prefix."""
        self._fill(4, timeout)
        (size,) = struct.unpack_from(">i", self._buf, 0)
        if size < 4:
            raise ProtocolError(f"response frame size {size}")
        self._fill(4 + size, timeout)
        frame = bytes(self._buf[4 : 4 + size])
        del self._buf[: 4 + size]
        return frame

    def recv_sized(self, timeout: float | None = None) -> bytes:
        """The next size-prefixed payload, of any size (a SASL token after SaslHandshake
        v0 has no response header and may be empty)."""
        self._fill(4, timeout)
        (size,) = struct.unpack_from(">i", self._buf, 0)
        if size < 0:
            raise ProtocolError(f"token size {size}")
        self._fill(4 + size, timeout)
        payload = bytes(self._buf[4 : 4 + size])
        del self._buf[: 4 + size]
        return payload

    def recv(self, api_key: int, version: int, timeout: float | None = None) -> Any:
        """The next response, decoded as `version` of `api_key` (response header v0, or
        v1 for flexible versions except ApiVersions). Sets last_correlation_id."""
        frame = self.recv_raw(timeout)
        return self.decode_response(api_key, version, frame)

    def decode_response(self, api_key: int, version: int, frame: bytes) -> Any:
        (correlation_id,) = struct.unpack_from(">i", frame, 0)
        self.last_correlation_id = correlation_id
        pos = 4
        if api_key != API_VERSIONS and is_flexible(api_key, version):
            count, pos = read_uvarint(frame, pos)
            for _ in range(count):
                _, pos = read_uvarint(frame, pos)
                size, pos = read_uvarint(frame, pos)
                pos += size
        entity_type = response_type(api_key, version)
        try:
            entity, size = entity_reader(entity_type)(frame, pos)
        except Exception as exc:
            if "negative timestamp" in str(exc) and api_key in NEGATIVE_TIMESTAMPS:
                # Kafka answers -1 in a non-nullable timestamp (e.g. a refused
                # CreateDelegationToken's expiry), which kio's reader refuses: the error
                # code, the answer's first field, is what such an answer carries.
                (error_code,) = struct.unpack_from(">h", frame, pos)
                return RefusedAnswer(error_code)
            raise ProtocolError(
                f"cannot decode {entity_type.__name__} v{version}: {exc!r} in {frame!r}"
            ) from exc
        if pos + size != len(frame):
            raise ProtocolError(
                f"{entity_type.__name__} v{version}: {len(frame) - pos - size} trailing bytes"
            )
        return entity

    def request(
        self, api_key: int, version: int, request: Any, timeout: float | None = None, **kwargs: Any
    ) -> Any:
        correlation_id = self.send(api_key, version, request, **kwargs)
        response = self.recv(api_key, version, timeout)
        if self.last_correlation_id != correlation_id:
            raise ProtocolError(
                f"correlation id {self.last_correlation_id}, expected {correlation_id}"
            )
        return response

    def closed(self, timeout: float = 5.0) -> bool:
        """True when the server closes the connection (EOF or reset) within `timeout`.
        Bytes that arrive meanwhile are kept for recv_raw."""
        deadline = time.monotonic() + timeout
        while not self._eof:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            readable, _, _ = select.select([self.sock], [], [], remaining)
            if not readable:
                return False
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                chunk = b""
            if not chunk:
                self._eof = True
            self._buf += chunk
        return True


# -- record batches -----------------------------------------------------------------------


@dataclass(frozen=True)
class Rec:
    """One record as produced, or as fetched (offset and timestamp filled in)."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None
    offset: int | None = None


def build_batch(
    records: Iterable[Rec | bytes],
    base_timestamp: int | None = None,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """A v2 record batch (base offset 0) holding `records`. Records without a timestamp
    get base_timestamp (default: now) plus their index."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=int(transactional),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    now = int(time.time() * 1000) if base_timestamp is None else base_timestamp
    for i, rec in enumerate(records):
        if not isinstance(rec, Rec):
            rec = Rec(value=rec)
        ts = rec.timestamp if rec.timestamp is not None else now + i
        meta = builder.append(
            i, timestamp=ts, key=rec.key, value=rec.value, headers=list(rec.headers)
        )
        if meta is None:
            raise ValueError("record does not fit in the batch")
    return bytes(builder.build())


CRC_OFFSET = 17  # base offset 8, length 4, leader epoch 4, magic 1


def corrupt_crc(batch: bytes) -> bytes:
    """The batch with its CRC32C flipped (the records themselves are intact)."""
    crc = batch[CRC_OFFSET : CRC_OFFSET + 4]
    return batch[:CRC_OFFSET] + bytes(b ^ 0xFF for b in crc) + batch[CRC_OFFSET + 4 :]


@dataclass(frozen=True)
class Batch:
    base_offset: int
    crc_ok: bool
    timestamp_type: int
    records: tuple[Rec, ...]


def read_batches(data: bytes | None) -> list[Batch]:
    """Split a Fetch response's records field into v2 batches (a truncated trailing
    batch, which Kafka may send, is dropped)."""
    out: list[Batch] = []
    if not data:
        return out
    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        end = pos + 12 + length
        if end > len(data):
            break
        raw = bytes(data[pos:end])
        if raw[16] != 2:
            raise ProtocolError(f"batch magic {raw[16]} at byte {pos}")
        batch = DefaultRecordBatch(raw)
        crc_ok = batch.validate_crc()
        records = tuple(
            Rec(
                value=r.value,
                key=r.key,
                headers=tuple(r.headers),
                timestamp=r.timestamp,
                offset=r.offset,
            )
            for r in batch
        )
        out.append(Batch(batch.base_offset, crc_ok, batch.timestamp_type, records))
        pos = end
    return out


def fetched_records(data: bytes | None) -> list[Rec]:
    return [rec for batch in read_batches(data) for rec in batch.records]


# -- request bodies used by the tests --------------------------------------------------------


def metadata_request(
    names: Sequence[str] | None, allow_auto_topic_creation: bool = True
) -> dict[str, Any]:
    """None asks for all topics (v1+; v0 asks for all with an empty list)."""
    return {
        "topics": None if names is None else [{"name": n} for n in names],
        "allow_auto_topic_creation": allow_auto_topic_creation,
    }


def produce_request(
    topic: str,
    partitions: dict[int, bytes | None],
    acks: int = -1,
    timeout_ms: int = 5000,
    topic_id: uuid.UUID | None = None,
) -> dict[str, Any]:
    """Names the topic (v0-v12) and its id (v13+; None sends the zero id): make() keeps
    what the version has."""
    return {
        "acks": acks,
        "timeout": timeout_ms,
        "topic_data": [
            {
                "name": topic,
                "topic_id": topic_id,
                "partition_data": [{"index": p, "records": r} for p, r in partitions.items()],
            }
        ],
    }


def fetch_request(
    topic: str,
    offsets: dict[int, int],
    topic_id: uuid.UUID | None = None,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 << 20,
    partition_max_bytes: int = 10 << 20,
) -> dict[str, Any]:
    """Names the topic (v4-v12) and its id (v13+): make() keeps what the version has."""
    return {
        "replica_id": -1,
        "max_wait": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "topic_id": topic_id,
                "partitions": [
                    {"partition": p, "fetch_offset": o, "partition_max_bytes": partition_max_bytes}
                    for p, o in offsets.items()
                ],
            }
        ],
        "forgotten_topics_data": [],
    }


def list_offsets_request(topic: str, timestamps: dict[int, int]) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": p, "timestamp": ts} for p, ts in timestamps.items()
                ],
            }
        ],
    }


# -- old versions kio 0.6.5 has no schema for: Produce v0-v2, Fetch v0-v3, ListOffsets v0 --
# Bodies are built and answers read here by hand (send them as raw bytes, read the answer
# with recv_raw); message sets are built and read with aiokafka's legacy record classes.


def _str16(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def legacy_produce_body(
    topic: str, partitions: dict[int, bytes | None], acks: int = -1, timeout_ms: int = 5000
) -> bytes:
    """Produce v0-v2 (the three share one request layout)."""
    out = struct.pack(">hii", acks, timeout_ms, 1) + _str16(topic)
    out += struct.pack(">i", len(partitions))
    for index, data in partitions.items():
        out += struct.pack(">i", index)
        out += struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data
    return out


def legacy_fetch_body(
    version: int,
    topic: str,
    offsets: dict[int, int],
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 << 20,
    partition_max_bytes: int = 10 << 20,
) -> bytes:
    """Fetch v0-v3 (v3 adds the request-level max_bytes)."""
    out = struct.pack(">iii", -1, max_wait_ms, min_bytes)
    if version >= 3:
        out += struct.pack(">i", max_bytes)
    out += struct.pack(">i", 1) + _str16(topic) + struct.pack(">i", len(offsets))
    for partition, offset in offsets.items():
        out += struct.pack(">iqi", partition, offset, partition_max_bytes)
    return out


def list_offsets_v0_body(topic: str, asks: dict[int, tuple[int, int]]) -> bytes:
    """asks: partition -> (timestamp, max_num_offsets)."""
    out = struct.pack(">ii", -1, 1) + _str16(topic) + struct.pack(">i", len(asks))
    for partition, (timestamp, max_num) in asks.items():
        out += struct.pack(">iqi", partition, timestamp, max_num)
    return out


class _Cursor:
    def __init__(self, frame: bytes) -> None:
        self.frame = frame
        self.pos = 4  # after the correlation id

    def take(self, fmt: str) -> Any:
        values = struct.unpack_from(fmt, self.frame, self.pos)
        self.pos += struct.calcsize(fmt)
        return values[0] if len(values) == 1 else values

    def string(self) -> str:
        n = self.take(">h")
        text = self.frame[self.pos : self.pos + n].decode()
        self.pos += n
        return text

    def nbytes(self) -> bytes | None:
        n = self.take(">i")
        if n < 0:
            return None
        data = self.frame[self.pos : self.pos + n]
        self.pos += n
        return data

    def end(self) -> None:
        if self.pos != len(self.frame):
            raise ProtocolError(f"{len(self.frame) - self.pos} trailing bytes")


def read_legacy_produce_response(version: int, frame: bytes) -> dict[str, Any]:
    """A Produce v0-v2 answer (frame from recv_raw) as plain data."""
    c = _Cursor(frame)
    topics = []
    for _ in range(c.take(">i")):
        name = c.string()
        parts = []
        for _ in range(c.take(">i")):
            index, error_code, base_offset = c.take(">ihq")
            part = {"index": index, "error_code": error_code, "base_offset": base_offset}
            if version >= 2:
                part["log_append_time"] = c.take(">q")
            parts.append(part)
        topics.append({"name": name, "partition_responses": parts})
    out: dict[str, Any] = {"responses": topics}
    if version >= 1:
        out["throttle_time_ms"] = c.take(">i")
    c.end()
    return out


def read_legacy_fetch_response(version: int, frame: bytes) -> dict[str, Any]:
    """A Fetch v0-v3 answer as plain data; `records` stays raw bytes."""
    c = _Cursor(frame)
    out: dict[str, Any] = {}
    if version >= 1:
        out["throttle_time_ms"] = c.take(">i")
    topics = []
    for _ in range(c.take(">i")):
        name = c.string()
        parts = []
        for _ in range(c.take(">i")):
            index, error_code, high_watermark = c.take(">ihq")
            parts.append(
                {
                    "partition": index,
                    "error_code": error_code,
                    "high_watermark": high_watermark,
                    "records": c.nbytes(),
                }
            )
        topics.append({"topic": name, "partitions": parts})
    out["responses"] = topics
    c.end()
    return out


def read_list_offsets_v0_response(frame: bytes) -> dict[str, Any]:
    c = _Cursor(frame)
    topics = []
    for _ in range(c.take(">i")):
        name = c.string()
        parts = []
        for _ in range(c.take(">i")):
            index, error_code = c.take(">ih")
            offsets = [c.take(">q") for _ in range(c.take(">i"))]
            parts.append(
                {"partition_index": index, "error_code": error_code, "old_style_offsets": offsets}
            )
        topics.append({"name": name, "partitions": parts})
    c.end()
    return {"topics": topics}


def message_set(
    records: Iterable[Rec | bytes],
    magic: int,
    compression: int = 0,
    base_timestamp: int | None = None,
    first_offset: int = 0,
) -> bytes:
    """A v0/v1 message set with offsets first_offset, first_offset + 1, ...; with
    compression one wrapper message (offset 0) holding them, inner offsets 0, 1, ...
    by default (relative, as magic 1 wants). Headers cannot be carried. Records
    without a timestamp get base_timestamp (default: now) plus their index."""
    builder = LegacyRecordBatchBuilder(magic, compression, 1 << 30)
    now = int(time.time() * 1000) if base_timestamp is None else base_timestamp
    for i, rec in enumerate(records):
        if not isinstance(rec, Rec):
            rec = Rec(value=rec)
        ts = rec.timestamp if rec.timestamp is not None else now + i
        builder.append(first_offset + i, timestamp=ts, key=rec.key, value=rec.value)
    return bytes(builder.build())


def compressed_message(
    inner: bytes, magic: int, codec: int, offset: int = 0, timestamp: int = 0
) -> bytes:
    """One wrapper message (codec 1 gzip, 2 snappy, 3 lz4) holding the message set
    `inner` as it is: its offsets and CRCs are not touched, so tests can send wrong ones."""
    value = {1: codecs.gzip_encode, 2: codecs.snappy_encode, 3: codecs.lz4_encode}[codec](inner)
    body = struct.pack(">bb", magic, codec) + (struct.pack(">q", timestamp) if magic else b"")
    body += struct.pack(">ii", -1, len(value)) + value
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def corrupt_message_crc(data: bytes) -> bytes:
    """The message set with its first message's CRC32 flipped."""
    return data[:12] + bytes(b ^ 0xFF for b in data[12:16]) + data[16:]


@dataclass(frozen=True)
class Message:
    """One message of a fetched message set (an inner one for a compressed wrapper)."""

    offset: int
    magic: int
    crc_ok: bool
    timestamp: int | None
    timestamp_type: int | None
    key: bytes | None
    value: bytes | None


def read_message_set(data: bytes | None) -> list[Message]:
    """The messages of a Fetch v0-v3 records field (a truncated trailing message, which
    Kafka may send, is dropped)."""
    out: list[Message] = []
    data = data or b""
    pos = 0
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        end = pos + 12 + length
        if end > len(data):
            break
        magic = data[pos + 16]
        if magic > 1:
            raise ProtocolError(f"message magic {magic} at byte {pos}")
        batch = LegacyRecordBatch(data[pos:end], magic)
        crc_ok = batch.validate_crc()
        out.extend(
            Message(r.offset, magic, crc_ok, r.timestamp, r.timestamp_type, r.key, r.value)
            for r in batch
        )
        pos = end
    return out
