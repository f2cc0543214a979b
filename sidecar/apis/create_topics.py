"""CreateTopics (key 19), v2-v7: names and partition counts (configs come later);
replication factor -1 or 1, anything else is refused since Redis holds the copies."""

from __future__ import annotations

from typing import Any

from ..broker import Broker
from ..protocol import errors
from ..protocol.kio_codec import encode_response
from ..topics import invalid_name_reason

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7


async def _create(broker: Broker, topic: Any, validate_only: bool) -> dict[str, Any]:
    name = topic.name
    partitions = topic.num_partitions
    if partitions == -1:
        partitions = broker.settings.num_partitions
    result: dict[str, Any] = {
        "name": name,
        "topic_id": None,
        "error_message": None,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": [],
    }
    reason = invalid_name_reason(name)
    if reason:
        return {**result, "error_code": errors.INVALID_TOPIC_EXCEPTION, "error_message": reason}
    if topic.assignments:
        partitions = len(topic.assignments)
    if partitions < 1:
        return {
            **result,
            "error_code": errors.INVALID_PARTITIONS,
            "error_message": "Number of partitions must be larger than 0.",
        }
    if topic.replication_factor not in (-1, 1):
        return {
            **result,
            "error_code": errors.INVALID_REPLICATION_FACTOR,
            "error_message": "Skiff keeps one copy per partition in Redis (replicate "
            "Redis instead): replication factor must be 1 or -1.",
        }
    if validate_only:
        exists = await broker.store.get_topic(name, fresh=True)
        info = None
    else:
        info = await broker.store.create_topic(name, partitions)
        exists = info is None
    if exists:
        return {
            **result,
            "error_code": errors.TOPIC_ALREADY_EXISTS,
            "error_message": f"Topic '{name}' already exists.",
        }
    return {
        **result,
        "error_code": errors.NONE,
        "topic_id": info.topic_id if info else None,
        "num_partitions": partitions,
        "replication_factor": 1,
        "configs": [],
    }


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    results = [await _create(broker, t, body.validate_only) for t in body.topics]
    return encode_response(
        API_KEY, request.header.api_version, {"throttle_time": 0, "topics": results}
    )
