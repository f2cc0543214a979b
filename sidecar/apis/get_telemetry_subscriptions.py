"""GetTelemetrySubscriptions (key 71), v0 (KIP-714): what a client should push. A zero
client instance id gets a new random one. The subscription is --client-metrics (metric
name prefixes) every --client-metrics-push-interval-ms, with Kafka's telemetry.max.bytes
and delta temporality; its id changes when either flag does. Advertised in ApiVersions
only when --client-metrics is set (Kafka advertises it only with a telemetry receiver
plugin), answered either way as Kafka answers it (an empty subscription: push nothing)."""

from __future__ import annotations

import uuid
from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.telemetry import client_metrics

API_KEY = 71
MIN_VERSION = 0
MAX_VERSION = 0


def advertised(broker: Broker) -> bool:
    return bool(broker.settings.client_metrics)


async def handle(broker: Broker, request: Any) -> bytes:
    settings = broker.settings
    client = request.body.client_instance_id
    if client is None or client.int == 0:
        client = uuid.uuid4()
    metrics = settings.client_metrics
    interval = settings.client_metrics_push_interval_ms
    client_metrics.CLIENT_METRICS.interval_ms = interval
    return encode_response(
        API_KEY,
        0,
        {
            "throttle_time": 0,
            "error_code": errors.NONE,
            "client_instance_id": client,
            "subscription_id": client_metrics.subscription_id(metrics, interval),
            "accepted_compression_types": list(client_metrics.ACCEPTED_COMPRESSION),
            "push_interval": interval,
            "telemetry_max_bytes": client_metrics.TELEMETRY_MAX_BYTES,
            "delta_temporality": True,
            # Kafka's wildcard is "*"; a prefix asks for every metric starting with it.
            "requested_metrics": ["*"] if "*" in metrics else list(metrics),
        },
    )
