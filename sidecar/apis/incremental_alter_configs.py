"""IncrementalAlterConfigs (key 44), v0-v1: SET, DELETE, APPEND and SUBTRACT (the last
two on list configs such as cleanup.policy) on a topic's overrides, validated as Kafka
does, with validate_only. Broker resources: the dynamic broker configs of the cluster
default ("") or this sidecar (config/dynamic_broker.py). Group configs (type 32) are
share groups' settings: sidecar/share/group_configs.py. A resource named twice is
refused both times ("Each resource must appear at most once.", as Kafka's preprocess).
Needs ALTER_CONFIGS on the topic, group, or (broker resources) the cluster, else
TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED for that resource, as in Kafka."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sidecar.apis.config_alteration import BROKER, alter, alter_broker, answer, refusal
from sidecar.broker import Broker
from sidecar.config.admin import incremental_alter
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.share import group_configs

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1
ONCE = "Each resource must appear at most once."


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    defaults = broker.store.topic_defaults
    seen = Counter((r.resource_type, r.resource_name) for r in body.resources)
    responses = []
    for resource in body.resources:
        if seen[resource.resource_type, resource.resource_name] > 1:  # Kafka's preprocess
            responses.append(answer(resource, errors.INVALID_REQUEST, ONCE))
            continue
        refused = refusal(broker, request, resource)
        if refused is not None:
            responses.append(refused)
            continue
        if resource.resource_type == group_configs.GROUP:  # share groups' configs
            responses.append(await group_configs.alter(broker, resource, body.validate_only))
            continue
        ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
        if resource.resource_type == BROKER:
            responses.append(await alter_broker(broker, resource, ops, body.validate_only))
            continue
        responses.append(
            await alter(
                broker,
                resource,
                [n for n, _, _ in ops],
                lambda ops=ops: incremental_alter(ops, defaults, broker.remote is not None),
                body.validate_only,
            )
        )
    return encode_response(
        API_KEY, request.header.api_version, {"throttle_time": 0, "responses": responses}
    )
