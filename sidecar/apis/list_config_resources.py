"""ListConfigResources (key 74, formerly ListClientMetricsResources), v0-v1: the resources
DescribeConfigs can be asked about, as Kafka 4.4 lists them (checked against a Kafka 4.4.0
broker): v1 lists, for the requested types (none: all), the broker loggers and brokers
(every live sidecar's id) and the topics, in that order; an unknown type fails the
request with UNSUPPORTED_VERSION. Consumer groups with configs of their own
(consumer.*, sidecar/groups/group_configs.py) come last. Client-metrics resources (v0's
only type) do not exist in Skiff (--client-metrics is one unnamed subscription), so they
list nothing; v0 answers an empty list whatever it asks for, as Kafka does. Needs
DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 74
MIN_VERSION = 0
MAX_VERSION = 1

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED = {TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP}


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    out: dict[str, Any] = {"throttle_time": 0, "error_code": errors.NONE, "config_resources": []}
    if not checks.cluster_allowed(broker, request, Operation.DESCRIBE_CONFIGS):
        out["error_code"] = checks.CLUSTER_AUTHORIZATION_FAILED
        return encode_response(API_KEY, version, out)
    if version == 0:
        return encode_response(API_KEY, version, out)
    types = set(request.body.resource_types) or SUPPORTED
    if not types <= SUPPORTED:
        out["error_code"] = errors.UNSUPPORTED_VERSION
        return encode_response(API_KEY, version, out)
    resources: list[dict[str, Any]] = []
    await broker.cluster.catch_up()
    node_ids = [str(b.node_id) for b in broker.cluster.brokers(request.security.listener)]
    for kind in (BROKER_LOGGER, BROKER):
        if kind in types:
            resources += [{"resource_name": n, "resource_type": kind} for n in node_ids]
    if TOPIC in types:
        topics = sorted(t.name for t in await broker.store.list_topics())
        resources += [{"resource_name": n, "resource_type": TOPIC} for n in topics]
    if GROUP in types:  # consumer groups with configs of their own (groups/group_configs.py)
        await broker.groups.configs.refresh()
        groups = sorted(broker.groups.configs.values)
        resources += [{"resource_name": g, "resource_type": GROUP} for g in groups]
    out["config_resources"] = resources
    return encode_response(API_KEY, version, out)
