"""PushTelemetry (key 72), v0 (KIP-714): a client's metrics, decoded and shown on /metrics
(sidecar/telemetry/client_metrics.py). Checked as Kafka's ClientMetricsManager checks
them: a zero client instance id is INVALID_REQUEST; a subscription id other than the
current one UNKNOWN_SUBSCRIPTION_ID (the client asks again); a payload over
telemetry.max.bytes TELEMETRY_TOO_LARGE; a compression type not offered
UNSUPPORTED_COMPRESSION_TYPE; one that does not decode INVALID_RECORD. A terminating
push is recorded like any other (the series expire later). Kafka's push-rate limit
(THROTTLING_QUOTA_EXCEEDED) is not enforced."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.telemetry import client_metrics

API_KEY = 72
MIN_VERSION = 0
MAX_VERSION = 0


def advertised(broker: Broker) -> bool:
    return bool(broker.settings.client_metrics)


def _answer(error: str) -> bytes:
    return encode_response(API_KEY, 0, {"throttle_time": 0, "error_code": errors.code(error)})


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    settings = broker.settings
    client = body.client_instance_id
    if client is None or client.int == 0:
        return _answer("INVALID_REQUEST")
    interval = settings.client_metrics_push_interval_ms
    if body.subscription_id != client_metrics.subscription_id(settings.client_metrics, interval):
        return _answer("UNKNOWN_SUBSCRIPTION_ID")
    if len(body.metrics) > client_metrics.TELEMETRY_MAX_BYTES:
        return _answer("TELEMETRY_TOO_LARGE")
    codec = body.compression_type
    if codec != client_metrics.NONE and codec not in client_metrics.ACCEPTED_COMPRESSION:
        return _answer("UNSUPPORTED_COMPRESSION_TYPE")
    try:
        points = client_metrics.decode(client_metrics.decompress(codec, bytes(body.metrics)))
    except client_metrics.BadPayload:
        return _answer("INVALID_RECORD")
    client_metrics.CLIENT_METRICS.interval_ms = interval
    client_metrics.CLIENT_METRICS.record(client, request.header.client_id or "", points)
    return _answer("NONE")
