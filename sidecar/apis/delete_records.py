"""DeleteRecords (key 21), v0-v2: move partitions' log start offsets forward
(lua/trim.lua, the script time and size retention use), as Kafka's
Partition.deleteRecordsOnLeader: -1 means the high watermark; an offset below 0 or
above the high watermark is OFFSET_OUT_OF_RANGE; one below the log start changes
nothing; a topic whose cleanup.policy lacks `delete` is POLICY_VIOLATION. The answer's
low_watermark is the log start after the call (-1 with an error).
Needs DELETE on each topic (else TOPIC_AUTHORIZATION_FAILED per partition), as in Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage.store import StoreError

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2

POLICY_VIOLATION = 44


async def handle(broker: Broker, request: Any) -> bytes:
    store = broker.store
    topics = []
    deletable = checks.allowed_topics(
        broker, request, Operation.DELETE, (t.name for t in request.body.topics)
    )
    for t in request.body.topics:
        info = await store.get_topic(t.name)
        parts = []
        for p in t.partitions:
            low, error = -1, errors.NONE
            if t.name not in deletable:
                error = checks.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p.partition_index < info.partitions:
                error = errors.UNKNOWN_TOPIC_OR_PARTITION
            elif "delete" not in info.config["cleanup.policy"]:
                error = POLICY_VIOLATION
            else:
                try:
                    low, _ = await store.trim(t.name, p.partition_index, offset=p.offset)
                except StoreError as exc:
                    error = errors.code(exc.code)
            parts.append(
                {"partition_index": p.partition_index, "low_watermark": low, "error_code": error}
            )
        topics.append({"name": t.name, "partitions": parts})
    return encode_response(
        API_KEY, request.header.api_version, {"throttle_time": 0, "topics": topics}
    )
