"""DescribeClientQuotas (key 48), v0-v1: the quotas AlterClientQuotas stored in Redis
(sidecar/quotas.py) matching the filter, as Kafka's ClientQuotasImage.describe: each
component matches a type's exact name, its default entity or any name; `strict` drops
entities with other types too. A malformed filter fails the whole request (error code
and message at the top, no entries). As Kafka: DESCRIBE_CONFIGS on the cluster or
CLUSTER_AUTHORIZATION_FAILED. Entities, their components and their values come in the
order of Kafka's HashMaps (clients print them in the order they get them)."""

from __future__ import annotations

from typing import Any

from sidecar import quotas
from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security.authorizer import CLUSTER_NAME, Operation, ResourceType

API_KEY = 48
MIN_VERSION = 0
MAX_VERSION = 1

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class BadFilter(Exception):
    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = errors.code(error)


def _filter(components: Any) -> tuple[dict[str, str | None], set[str]]:
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for c in components:
        kind = c.entity_type
        if not kind:
            raise BadFilter("INVALID_REQUEST", "Invalid empty entity type.")
        if kind in exact or kind in specified:
            raise BadFilter(
                "INVALID_REQUEST", f"Entity type {kind} cannot appear more than once in the filter."
            )
        if kind not in quotas.ENTITY_TYPES:
            raise BadFilter("UNSUPPORTED_VERSION", f"Unsupported entity type {kind}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise BadFilter(
                    "INVALID_REQUEST",
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                )
            exact[kind] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise BadFilter(
                    "INVALID_REQUEST",
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                )
            exact[kind] = None
        elif c.match_type == MATCH_SPECIFIED:
            if c.match is not None:
                raise BadFilter(
                    "INVALID_REQUEST",
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )
            specified.add(kind)
        else:
            raise BadFilter("INVALID_REQUEST", f"Unknown match type {c.match_type}")
    used = set(exact) | specified
    if quotas.IP in used and (quotas.USER in used or quotas.CLIENT_ID in used):
        raise BadFilter(
            "INVALID_REQUEST",
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
        )
    return exact, specified


def _matches(
    entity: quotas.Entity, exact: dict[str, str | None], specified: set[str], strict: bool
) -> bool:
    parts = dict(entity)
    if strict and len(parts) != len(exact) + len(specified):
        return False
    for kind, name in exact.items():
        if kind not in parts or parts[kind] != name:
            return False
    return all(kind in parts for kind in specified)


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    # Kafka's answer says "" where nothing went wrong
    out: dict[str, Any] = {"throttle_time": 0, "error_code": errors.NONE, "error_message": ""}
    if not broker.authorizer.authorize(
        request.security, Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        out["error_code"] = errors.code("CLUSTER_AUTHORIZATION_FAILED")
        out["error_message"] = "Cluster authorization failed."
        out["entries"] = None
        return encode_response(API_KEY, version, out)
    try:
        exact, specified = _filter(request.body.components)
    except BadFilter as exc:
        out.update(error_code=exc.error, error_message=str(exc), entries=None)
        return encode_response(API_KEY, version, out)
    snap = await quotas.QuotaStore(broker.store.redis).snapshot()
    broker.quotas.set_quotas(snap.quotas)
    entries = []
    for entity in quotas.entity_order(list(snap.quotas), snap.entity_seq):
        if not _matches(entity, exact, specified, request.body.strict):
            continue
        parts = dict(entity)
        values = snap.quotas[entity]
        entries.append(
            {
                "entity": [
                    {"entity_type": t, "entity_name": parts[t]}
                    for t in quotas.component_order(parts)
                ],
                "values": [{"key": k, "value": values[k]} for k in quotas.key_order(entity, snap)],
            }
        )
    out["entries"] = entries
    return encode_response(API_KEY, version, out)
