"""AlterConfigs (key 33), v0-v2: the given configs replace a topic's whole override
set (a config not named goes back to the server default), validated as Kafka does.
Broker resources: the given configs replace the whole set of dynamic broker configs of
the cluster default ("") or this sidecar (config/dynamic_broker.py).
Needs ALTER_CONFIGS on the topic or (broker resources) the cluster, else
TOPIC_/CLUSTER_AUTHORIZATION_FAILED for that resource, as in Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.apis.config_alteration import BROKER, alter, alter_broker, refusal
from sidecar.broker import Broker
from sidecar.config.admin import SET, legacy_alter
from sidecar.protocol.kio_codec import encode_response

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    responses = []
    for resource in body.resources:
        refused = refusal(broker, request, resource)
        if refused is not None:
            responses.append(refused)
            continue
        pairs = [(c.name, c.value) for c in resource.configs]
        if resource.resource_type == BROKER:
            ops = [(n, SET, v) for n, v in pairs]
            responses.append(await alter_broker(broker, resource, ops, body.validate_only, False))
            continue
        responses.append(
            await alter(
                broker,
                resource,
                [n for n, _ in pairs],
                lambda pairs=pairs: legacy_alter(
                    pairs, broker.store.topic_defaults, broker.remote is not None
                ),
                body.validate_only,
            )
        )
    return encode_response(
        API_KEY, request.header.api_version, {"throttle_time": 0, "responses": responses}
    )
