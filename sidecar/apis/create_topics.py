"""CreateTopics (key 19), v2-v7: names, partition counts and topic configs (validated as
Kafka does, stored with the topic; v5+ answers list every config of the new topic);
replication factor -1 or 1, anything else is refused since Redis holds the copies."""

from __future__ import annotations

import uuid
from typing import Any

from ..broker import Broker
from ..protocol import errors
from ..protocol.kio_codec import encode_response
from ..topic_config import ConfigError, describe, validate
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
    try:
        configs = validate((c.name, c.value) for c in topic.configs)
    except ConfigError as exc:
        # Kafka reports a topic that exists before looking at its configs.
        if await broker.store.get_topic(name, fresh=True):
            return {
                **result,
                "error_code": errors.TOPIC_ALREADY_EXISTS,
                "error_message": f"Topic '{name}' already exists.",
            }
        return {**result, "error_code": errors.INVALID_CONFIG, "error_message": str(exc)}
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
        info = await broker.store.create_topic(name, partitions, configs)
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
        # validate_only: Kafka answers with a fresh id it does not keep.
        "topic_id": info.topic_id if info else uuid.uuid4(),
        "num_partitions": partitions,
        "replication_factor": 1,
        "configs": [
            {
                "name": e.name,
                "value": e.value,
                "read_only": e.read_only,
                "config_source": e.source,
                "is_sensitive": e.sensitive,
            }
            for e in describe(configs, broker.store.topic_defaults)
        ],
    }


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    results = [await _create(broker, t, body.validate_only) for t in body.topics]
    return encode_response(
        API_KEY, request.header.api_version, {"throttle_time": 0, "topics": results}
    )
