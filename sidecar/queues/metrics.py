"""Queue-group counters (docs/operations.md), in Skiff's own Prometheus registry."""

from __future__ import annotations

from prometheus_client import Counter

from sidecar.telemetry.metrics import REGISTRY

RECORDS = Counter(
    "skiff_queue_records",
    "Queue-group records by what happened to them: delivered (first time), redelivered, "
    "acknowledged, released, rejected, renewed, delivery_limit (rejected at the delivery "
    "limit), dead_lettered (copied to the dead-letter topic), settle_refused "
    "(acknowledge/cancel/reject/renew of a record not leased to the worker)",
    ["group", "action"],
    registry=REGISTRY,
)


def count(group: str, action: str, n: int) -> None:
    if n:
        RECORDS.labels(group, action).inc(n)
