"""IncrementalAlterConfigs (key 44), v0-v1: SET, DELETE, APPEND and SUBTRACT (the last
two on list configs such as cleanup.policy) on a topic's overrides, validated as Kafka
does, with validate_only. Broker configs are not dynamically updatable in Skiff and are
refused. Group configs (type 32) are share groups' settings: sidecar/share/group_configs.py.
Needs ALTER_CONFIGS on the topic, group, or (broker resources) the cluster, else
TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED for that resource, as in Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.apis.config_alteration import alter, refusal
from sidecar.broker import Broker
from sidecar.config.admin import DELETE, incremental_alter
from sidecar.config.broker import NEVER_SET
from sidecar.protocol.kio_codec import encode_response
from sidecar.share import group_configs

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    defaults = broker.store.topic_defaults
    responses = []
    for resource in body.resources:
        refused = refusal(broker, request, resource)
        if refused is not None:
            responses.append(refused)
            continue
        if resource.resource_type == group_configs.GROUP:  # share groups' configs
            responses.append(await group_configs.alter(broker, resource, body.validate_only))
            continue
        ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
        # Broker configs to refuse: all but deletions of what a sidecar never holds.
        altered = [n for n, op, _ in ops if not (op == DELETE and n in NEVER_SET)]
        responses.append(
            await alter(
                broker,
                resource,
                altered,
                lambda ops=ops: incremental_alter(ops, defaults, broker.remote is not None),
                body.validate_only,
            )
        )
    return encode_response(
        API_KEY, request.header.api_version, {"throttle_time": 0, "responses": responses}
    )
