"""DeleteTopics (key 20), v1-v6: by name, or by topic id from v6; every key of every
partition is removed."""

from __future__ import annotations

from typing import Any

from ..broker import Broker
from ..protocol import errors
from ..protocol.kio_codec import encode_response

API_KEY = 20
# v0 is gone from Kafka 4 (KIP-896) and from kio's schemas: advertising it made
# v0 requests fail with an internal error.
MIN_VERSION = 1
MAX_VERSION = 6


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    store = broker.store
    wanted: list[tuple[str | None, Any]] = []
    if version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    results = []
    for name, topic_id in wanted:
        if name is None and topic_id is not None:
            info = await store.topic_by_id(topic_id)
            if info is None:
                results.append(
                    {
                        "name": None,
                        "topic_id": topic_id,
                        "error_code": errors.UNKNOWN_TOPIC_ID,
                        "error_message": "This server does not host this topic ID.",
                    }
                )
                continue
            name = info.name
        info = await store.get_topic(name, fresh=True) if name else None
        ok = info is not None and await store.delete_topic(info.name)
        results.append(
            {
                "name": name,
                "topic_id": info.topic_id if info else topic_id,
                "error_code": errors.NONE if ok else errors.UNKNOWN_TOPIC_OR_PARTITION,
                "error_message": None
                if ok
                else "This server does not host this topic-partition.",  # Kafka's words
            }
        )
    return encode_response(API_KEY, version, {"throttle_time": 0, "responses": results})
