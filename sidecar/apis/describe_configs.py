"""DescribeConfigs (key 32), v0-v4: topic resources (every topic config with its value,
source, synonyms, type and documentation, as Kafka 4.4 answers) and broker resources
(this sidecar's flags under Kafka's names with the dynamic broker configs over them, and
the cluster default's dynamic configs; see config/broker.py). Broker loggers are
answered with no entries. kio has no v0 schema: v0 is decoded and encoded here (its
entries carry is_default, always false as from Kafka 3.9, instead of a source).
Needs DESCRIBE_CONFIGS on the topic, group, or (broker resources) cluster, else
TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED for that resource, as in Kafka."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from sidecar.broker import Broker
from sidecar.config import dynamic_broker
from sidecar.config.admin import AdminError, describe_topic
from sidecar.config.broker import describe_broker, describe_cluster_default
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.protocol.primitives import Reader, array_len, pack_i16, pack_i32, string
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.share import group_configs
from sidecar.share.group_configs import GROUP
from sidecar.validation.topic_names import invalid_name_reason

API_KEY = 32
MIN_VERSION = 0
MAX_VERSION = 4

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
# What Kafka answers for every resource when one has an unknown type.
MALFORMED = (
    "This most likely occurs because of a request being malformed by the client library or "
    "the message was sent to an incompatible broker. See the broker logs for more details."
)


def _result(resource: Any, code: int = errors.NONE, message: str = "") -> dict[str, Any]:
    # Kafka's generated classes default error_message to "", also on success.
    return {
        "error_code": code,
        "error_message": message,
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
        "configs": [],
    }


async def _describe(broker: Broker, resource: Any, synonyms: bool, docs: bool) -> dict[str, Any]:
    if resource.resource_type == GROUP:  # share groups' configs
        return await group_configs.describe(broker, resource, synonyms, docs)
    answer = answer_without_redis(broker, resource, synonyms, docs)
    if answer is not None:
        return answer
    info = await broker.store.get_topic(resource.resource_name)
    if info is None:
        return _result(resource, errors.UNKNOWN_TOPIC_OR_PARTITION)
    configs = describe_topic(
        info.configs,
        broker.store.topic_defaults,
        resource.configuration_keys,
        synonyms,
        docs,
        (info.storage_format, info.storage_format_set),
        broker.dynamic.topic_synonyms,
    )
    return {**_result(resource), "configs": configs}


def answer_without_redis(
    broker: Broker, resource: Any, synonyms: bool, docs: bool
) -> dict[str, Any] | None:
    """The answer for a resource that needs no Redis (broker resources, bad topic
    names), or None for a topic to look up; unavailable.py answers while Redis is down
    with it too."""
    name = resource.resource_name
    keys = resource.configuration_keys
    if resource.resource_type == TOPIC:
        reason = invalid_name_reason(name)
        return _result(resource, errors.INVALID_TOPIC_EXCEPTION, reason) if reason else None
    if resource.resource_type == BROKER:
        dynamic = broker.dynamic
        if name == dynamic_broker.CLUSTER_DEFAULT:
            configs = describe_cluster_default(dynamic.cluster_default(), keys, synonyms, docs)
            return {**_result(resource), "configs": configs}
        node_id = broker.cluster.node_id
        try:
            dynamic_broker.node_id_of(name, node_id, describing=True)
        except AdminError as exc:
            return _result(resource, exc.code, exc.message or "")
        configs = describe_broker(
            broker.settings,
            node_id,
            dynamic.static_defaults,
            keys,
            synonyms,
            docs,
            dynamic.layers(),
        )
        return {**_result(resource), "configs": configs}
    return _result(resource)  # BROKER_LOGGER: Skiff has no run-time log levels to list


# -- v0 ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourceV0:
    resource_type: int
    resource_name: str
    configuration_keys: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class DescribeConfigsV0Request:
    resources: tuple[ResourceV0, ...]
    include_synonyms: bool = False


def decode_v0(buf: bytes, pos: int) -> DescribeConfigsV0Request:
    r = Reader(buf, pos)

    def resource() -> ResourceV0:
        (kind,) = struct.unpack_from(">b", r.buf, r.pos)
        r.pos += 1
        name = r.string()
        (n,) = struct.unpack_from(">i", r.buf, r.pos)
        keys = None if n < 0 else r.array(r.string)
        if keys is None:
            r.pos += 4
        return ResourceV0(kind, name, keys)

    return DescribeConfigsV0Request(r.array(resource))


DECODERS = {0: decode_v0}


def _bool(value: bool) -> bytes:
    return b"\x01" if value else b"\x00"


def encode_v0(results: list[dict[str, Any]]) -> bytes:
    """v0: throttle time, then per resource its error, type, name and entries of
    name, value, read_only, is_default, is_sensitive. Kafka 3.9 leaves is_default false
    on every entry (checked with tools/kafka_reference/), and so does Skiff."""
    parts = [pack_i32(0), array_len(len(results), False)]
    for r in results:
        parts.append(pack_i16(r["error_code"]) + string(r["error_message"], False))
        parts.append(struct.pack(">b", r["resource_type"]) + string(r["resource_name"], False))
        parts.append(array_len(len(r["configs"]), False))
        for c in r["configs"]:
            parts.append(string(c["name"], False) + string(c["value"], False))
            parts.append(_bool(c["read_only"]) + _bool(False))
            parts.append(_bool(c["is_sensitive"]))
    return b"".join(parts)


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    resources = body.resources
    if any(r.resource_type not in (TOPIC, BROKER, BROKER_LOGGER, GROUP) for r in resources):
        results = [_result(r, errors.INVALID_REQUEST, MALFORMED) for r in resources]
    else:
        docs = getattr(body, "include_documentation", False)  # v3+
        results = []
        for r in resources:
            denied = checks.config_resource_denied(
                broker, request, Operation.DESCRIBE_CONFIGS, r.resource_type, r.resource_name
            )
            if denied:
                results.append(_result(r, *denied))
            else:
                results.append(await _describe(broker, r, body.include_synonyms, docs))
    return encode(request.header.api_version, results)


def encode(version: int, results: list[dict[str, Any]]) -> bytes:
    if version == 0:
        return encode_v0(results)
    return encode_response(API_KEY, version, {"throttle_time": 0, "results": results})
