"""What the kafka-python style adapters share."""

from __future__ import annotations

from typing import Any


def consumer_record(r: Any) -> dict[str, Any]:
    """A kafka-python or aiokafka ConsumerRecord as the adapters' common dict."""
    return {
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "timestamp_type": r.timestamp_type,
        "key": r.key,
        "value": r.value,
        "headers": [(name, value) for name, value in r.headers or []],
    }
