"""AlterClientQuotas (key 49), v0-v1: set or remove quota keys of user / client-id / ip
entities (a null name: the default entity), stored in Redis (sidecar/quotas.py), with
Kafka's checks and messages (ClientQuotaControlManager): the entity's types and their
combination, the keys each takes, values > 0 and whole for the integer keys. An entity
whose check fails changes nothing; the others are applied together; validate_only
applies nothing. As Kafka: ALTER_CONFIGS on the cluster or every entry
CLUSTER_AUTHORIZATION_FAILED. Results come in the order of Kafka's HashMap of them."""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

from sidecar import quotas
from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.java_order import string_hash
from sidecar.protocol.kio_codec import encode_response
from sidecar.security.authorizer import CLUSTER_NAME, Operation, ResourceType

API_KEY = 49
MIN_VERSION = 0
MAX_VERSION = 1

INVALID_REQUEST = errors.code("INVALID_REQUEST")
Result = tuple[int, str | None]


def _java_map(entity: dict[str, str | None]) -> str:
    """A HashMap<String, String>'s toString, as Kafka's messages print an entity."""
    inner = ", ".join(f"{k}={entity[k]}" for k in quotas.component_order(entity))
    return f"ClientQuotaEntity(entries={{{inner}}})"


async def _resolvable(host: str) -> bool:
    """Kafka's InetAddress.getByName: an IP address or a host name that resolves."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    try:
        await asyncio.get_running_loop().getaddrinfo(host, None)
        return True
    except (OSError, UnicodeError):
        return False


def _check_value(keys: dict[str, str], key: str, value: float) -> str | None:
    kind = keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    if kind == "DOUBLE":
        return None
    if kind == "LONG" and value > quotas.JAVA_LONG_MAX:
        return f"Proposed value for {key} is too large for a LONG."
    if kind == "INT" and value > quotas.JAVA_INT_MAX:
        return f"Proposed value for {key} is too large for an INT."
    if abs(value % 1.0) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


async def _check_entity(entity: dict[str, str | None]) -> str | None:
    if not entity:
        return "Invalid empty client quota entity"
    for kind in quotas.component_order(entity):
        if kind not in quotas.ENTITY_TYPES:
            return f"Unhandled client quota entity type: {kind}"
        name = entity[kind]
        if name is not None and not name:
            return f"Empty {kind} not supported"
    return None


async def _keys_for(entity: dict[str, str | None]) -> dict[str, str] | str:
    if quotas.IP in entity:
        if quotas.USER in entity or quotas.CLIENT_ID in entity:
            # sic: Kafka's message has no space before "not"
            return (
                "Invalid quota entity combination, IP entity shouldnot be combined with "
                "User or ClientId"
            )
        ip = entity[quotas.IP]
        if ip is not None and not await _resolvable(ip):
            return f"{ip} is not a valid IP or resolvable host."
        return quotas.IP_KEYS
    return quotas.USER_CLIENT_KEYS


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    if not broker.authorizer.authorize(
        request.security, Operation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        denied = errors.code("CLUSTER_AUTHORIZATION_FAILED")
        entries = [
            {
                "error_code": denied,
                "error_message": "Cluster authorization failed.",
                "entity": [
                    {"entity_type": e.entity_type, "entity_name": e.entity_name}
                    for e in entry.entity
                ],
            }
            for entry in body.entries
        ]
        return encode_response(API_KEY, version, {"throttle_time": 0, "entries": entries})
    store = quotas.QuotaStore(broker.store.redis)
    snap = await store.snapshot()
    current = snap.quotas
    results: dict[quotas.Entity, tuple[dict[str, str | None], Result]] = {}
    changes: list[tuple[quotas.Entity, str, float | None]] = []
    for entry in body.entries:
        entity = {e.entity_type: e.entity_name for e in entry.entity}  # the last one wins
        key = quotas.entity_of(entity.items())
        ops: dict[str, float | None] = {}
        duplicate = False
        for op in entry.ops:
            if op.key in ops:
                duplicate = True
            else:
                ops[op.key] = None if op.remove else float(op.value)
        if duplicate or key in results:
            message = f"Ignoring duplicate entity {_java_map(entity)}"
            results[key] = (entity, (INVALID_REQUEST, message))
            continue
        problem = await _check_entity(entity)
        keys = await _keys_for(entity) if problem is None else {}
        if isinstance(keys, str):
            problem = keys
        mine: list[tuple[quotas.Entity, str, float | None]] = []
        if problem is None:
            have = current.get(key, {})
            # Kafka's HashMap<>(ops.size()) of them: which refusal comes first
            for name in quotas.java_order(
                list(ops), string_hash, initial=quotas.table_size(len(ops))
            ):
                value = ops[name]
                if value is None:
                    if name in have:
                        mine.append((key, name, None))
                    continue
                problem = _check_value(keys, name, value)
                if problem is not None:
                    break
                if have.get(name) != value:
                    mine.append((key, name, value))
        if problem is not None:
            results[key] = (entity, (INVALID_REQUEST, problem))
        else:
            results[key] = (entity, (errors.NONE, None))
            # new keys join the entity's map in the order of Kafka's delta (a HashMap<>())
            changes.extend(quotas.java_order(mine, lambda c: string_hash(c[1])))
    if not body.validate_only and changes:
        # new entities join the image's map in the order of the delta's HashMap<>()
        order = {
            e: n
            for n, e in enumerate(quotas.entity_order(list(dict.fromkeys(c[0] for c in changes))))
        }
        await store.apply(snap, sorted(changes, key=lambda c: order[c[0]]))
        broker.quotas.set_quotas(await store.all())
    entries = []
    for key in quotas.entity_order(list(results)):
        entity, (code, message) = results[key]
        entries.append(
            {
                "error_code": code,
                "error_message": message,
                "entity": [
                    {"entity_type": t, "entity_name": entity[t]}
                    for t in quotas.component_order(entity)
                ],
            }
        )
    return encode_response(API_KEY, version, {"throttle_time": 0, "entries": entries})
