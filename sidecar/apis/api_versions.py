"""ApiVersions (key 18), v0-v4. Hand-encoded: every connection starts with it."""

from __future__ import annotations

import re
from typing import Any

from sidecar.protocol import errors
from sidecar.protocol.primitives import EMPTY_TAGS, array_len, pack_i16, pack_i32

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4


def _ranges(broker: Any) -> list[tuple[int, int, int]]:
    """A module with advertised(broker) is listed only when that is true (the telemetry
    APIs: only with --client-metrics, as Kafka lists them only with a receiver)."""
    from sidecar.apis import HANDLERS  # the registry imports this module

    return sorted(
        (k, getattr(m, "ADVERTISED_MIN_VERSION", m.MIN_VERSION), m.MAX_VERSION)
        for k, m in HANDLERS.items()
        if not hasattr(m, "advertised") or m.advertised(broker)
    )


def encode(version: int, error_code: int, ranges: list[tuple[int, int, int]]) -> bytes:
    flexible = version >= 3
    parts = [pack_i16(error_code), array_len(len(ranges), flexible)]
    for key, lo, hi in ranges:
        parts.append(pack_i16(key) + pack_i16(lo) + pack_i16(hi))
        if flexible:
            parts.append(EMPTY_TAGS)
    if version >= 1:
        parts.append(pack_i32(0))  # throttle_time_ms
    if flexible:
        parts.append(EMPTY_TAGS)
    return b"".join(parts)


def unsupported_body() -> bytes:
    """A client asking with a version we do not know gets a v0 answer with
    UNSUPPORTED_VERSION and, as from Kafka (ApiVersionsRequest.getErrorResponse), only
    ApiVersions' own range, so it retries with a version we serve."""
    return encode(0, errors.UNSUPPORTED_VERSION, [(API_KEY, MIN_VERSION, MAX_VERSION)])


# ApiVersionsRequest.isValid: letters, digits, '-' and '.', alphanumeric at both ends.
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


async def handle(broker: Any, request: Any) -> bytes:
    version = request.header.api_version
    if version >= 3:
        body = request.body
        for text in (body.client_software_name, body.client_software_version):
            if not _SOFTWARE.fullmatch(text):
                return encode(version, errors.INVALID_REQUEST, [])
    return encode(version, errors.NONE, _ranges(broker))
