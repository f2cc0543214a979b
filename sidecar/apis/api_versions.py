"""ApiVersions (key 18), v0-v5. Hand-encoded: every connection starts with it.

v5 (KIP-1242): a client that knows the cluster and node it means to reach names both;
an answer from another cluster, or from another node at that address, is
REBOOTSTRAP_REQUIRED, and the client looks the cluster up again. Skiff's cluster id is
its storage identity's (storage/identity.py), the node id this sidecar's registration."""

from __future__ import annotations

import re
from typing import Any

from sidecar.protocol import errors
from sidecar.protocol.primitives import (
    EMPTY_TAGS,
    array_len,
    pack_i16,
    pack_i32,
    pack_i64,
    string,
    uvarint,
)
from sidecar.storage.features import SUPPORTED
from sidecar.telemetry.requests import response_errors

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 5


def _ranges(broker: Any) -> list[tuple[int, int, int]]:
    """A module with advertised(broker) is listed only when that is true (the telemetry
    APIs: only with --client-metrics, as Kafka lists them only with a receiver)."""
    from sidecar.apis import HANDLERS  # the registry imports this module

    return sorted(
        (k, getattr(m, "ADVERTISED_MIN_VERSION", m.MIN_VERSION), m.MAX_VERSION)
        for k, m in HANDLERS.items()
        if not hasattr(m, "advertised") or m.advertised(broker)
    )


def _feature_tags(version: int, levels: dict[str, int], epoch: int) -> bytes:
    """The tagged fields of v3+ (storage/features.py): SupportedFeatures (0; from v4
    with the features whose minimum is 0, as Kafka leaves those out of v3, KAFKA-17492),
    FinalizedFeaturesEpoch (1) and FinalizedFeatures (2; a feature at level 0 is not
    listed)."""
    fields: list[tuple[int, bytes]] = []
    supported = [(n, lo, hi) for n, (lo, hi) in SUPPORTED.items() if version >= 4 or lo > 0]
    if supported:
        body = array_len(len(supported), True) + b"".join(
            string(name, True) + pack_i16(lo) + pack_i16(hi) + EMPTY_TAGS
            for name, lo, hi in supported
        )
        fields.append((0, body))
    fields.append((1, pack_i64(epoch)))
    finalized = [(name, level) for name, level in sorted(levels.items()) if level > 0]
    if finalized:
        body = array_len(len(finalized), True) + b"".join(
            string(name, True) + pack_i16(level) + pack_i16(level) + EMPTY_TAGS
            for name, level in finalized
        )
        fields.append((2, body))
    return uvarint(len(fields)) + b"".join(
        uvarint(tag) + uvarint(len(body)) + body for tag, body in fields
    )


def encode(
    version: int,
    error_code: int,
    ranges: list[tuple[int, int, int]],
    features: tuple[dict[str, int], int] | None = None,
) -> bytes:
    """features: (finalized levels, epoch); None: no features (error answers)."""
    response_errors({"error_code": error_code})  # for /metrics and the request's span
    flexible = version >= 3
    parts = [pack_i16(error_code), array_len(len(ranges), flexible)]
    for key, lo, hi in ranges:
        parts.append(pack_i16(key) + pack_i16(lo) + pack_i16(hi))
        if flexible:
            parts.append(EMPTY_TAGS)
    if version >= 1:
        parts.append(pack_i32(0))  # throttle_time_ms
    if flexible:
        if features is None:
            parts.append(EMPTY_TAGS)
        else:
            parts.append(_feature_tags(version, *features))
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
    if version >= 5:
        # Kafka's ApiVersionsRequest.isValid: both or neither.
        if (body.cluster_id is None) != (body.node_id == -1):
            return encode(version, errors.INVALID_REQUEST, [])
        if body.cluster_id is not None and (
            body.cluster_id != broker.cluster_id or body.node_id != broker.cluster.node_id
        ):
            return encode(version, errors.REBOOTSTRAP_REQUIRED, [])
    features = await broker.features.finalized() if version >= 3 else None
    return encode(version, errors.NONE, _ranges(broker), features)
