"""Request frames: the size prefix and the request header (v1, or v2 with tagged
fields for flexible versions). Response headers: v0, or v1 for flexible versions
except ApiVersions, whose response header is always v0."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, overload

from sidecar.protocol.primitives import pack_i32, read_uvarint, unpack_i16, unpack_i32

API_VERSIONS_KEY = 18


class BadFrame(Exception):
    pass


class CloseConnection(Exception):
    """Raised by a handler or the dispatcher: log the reason and close the connection.
    `response` (a handler's response body; the dispatcher frames it) is sent first, as
    Kafka answers a failed SASL authentication before closing."""

    def __init__(self, reason: str, response: bytes | None = None) -> None:
        super().__init__(reason)
        self.response = response


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def parse_header_prefix(frame: bytes) -> tuple[RequestHeader, int]:
    """Parse the fixed v1 part of the header; returns (header, body offset before any
    header tagged fields)."""
    if len(frame) < 10:
        raise BadFrame(f"request of {len(frame)} bytes is shorter than a request header")
    (api_key,) = unpack_i16(frame, 0)
    (api_version,) = unpack_i16(frame, 2)
    (correlation_id,) = unpack_i32(frame, 4)
    (client_len,) = unpack_i16(frame, 8)
    pos = 10
    client_id = None
    if client_len >= 0:
        if pos + client_len > len(frame):
            raise BadFrame("client id runs past the end of the request")
        client_id = frame[pos : pos + client_len].decode("utf-8", "replace")
        pos += client_len
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def skip_tagged_fields(frame: bytes, pos: int) -> int:
    count, pos = read_uvarint(frame, pos)
    for _ in range(count):
        _, pos = read_uvarint(frame, pos)
        size, pos = read_uvarint(frame, pos)
        pos += size
    if pos > len(frame):
        raise BadFrame("tagged fields run past the end of the request")
    return pos


# Parts of a response body smaller than this are joined with their neighbours; larger
# ones (stored batches, as memoryviews into Redis replies) are written as they are.
COALESCE_BELOW = 16384


@overload
def response_frame(correlation_id: int, flexible_header: bool, body: bytes) -> bytes: ...
@overload
def response_frame(correlation_id: int, flexible_header: bool, body: list[Any]) -> list[Any]: ...
def response_frame(
    correlation_id: int, flexible_header: bool, body: bytes | list[Any]
) -> bytes | list[Any]:
    """The response frame: size, header, body. A body given as parts (Fetch) stays
    parts, its small ones joined: the connection writes each, so a stored batch is
    copied at most once, into the transport's buffer when the socket is full (a joined
    frame was copied three times: the join, and asyncio's slice and buffer of what a
    send left)."""
    header = pack_i32(correlation_id) + (b"\x00" if flexible_header else b"")
    if isinstance(body, list):
        out: list[Any] = []
        small = [pack_i32(len(header) + sum(map(len, body))), header]
        for part in body:
            if len(part) < COALESCE_BELOW:
                small.append(part)
                continue
            if small:
                out.append(b"".join(small))
                small = []
            out.append(part)
        if small:
            out.append(b"".join(small))
        return out
    return pack_i32(len(header) + len(body)) + header + body
