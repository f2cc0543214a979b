"""ListOffsets (key 2), v1-v8: earliest (-2), latest (-1), max timestamp (-3),
earliest local (-4, same as earliest here), and the first offset whose timestamp is
>= a given time, found through the partition's time index."""

from __future__ import annotations

from typing import Any

from ..broker import Broker
from ..protocol import errors
from ..protocol.kio_codec import encode_response
from ..storage.store import StoreError

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 8

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
EARLIEST_PENDING_UPLOAD = -5


async def _lookup(broker: Broker, topic: str, partition: int, ts: int) -> tuple[int, int]:
    store = broker.store
    if ts >= 0:
        return await store.offset_for_time(topic, partition, ts)
    lso, hw, maxts, maxtsoff = await store.watermarks(topic, partition)
    if ts == LATEST:
        return hw, -1
    if ts in (EARLIEST, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD):
        return lso, -1
    if ts == MAX_TIMESTAMP:
        return (maxtsoff, maxts) if maxtsoff >= lso else (-1, -1)
    raise StoreError("INVALID_REQUEST", f"unknown timestamp spec {ts}")


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    topics_out = []
    for t in request.body.topics:
        info = await broker.store.get_topic(t.name)
        parts_out = []
        for p in t.partitions:
            entry: dict[str, Any] = {
                "partition_index": p.partition_index,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
            if info is None or not 0 <= p.partition_index < info.partitions:
                entry["error_code"] = errors.UNKNOWN_TOPIC_OR_PARTITION
            elif p.timestamp == MAX_TIMESTAMP and version < 7:
                entry["error_code"] = errors.UNSUPPORTED_VERSION  # as Kafka answers
            else:
                try:
                    offset, ts = await _lookup(broker, t.name, p.partition_index, p.timestamp)
                    entry.update(error_code=errors.NONE, offset=offset, timestamp=ts)
                except StoreError as exc:
                    entry["error_code"] = errors.code(exc.code)
            parts_out.append(entry)
        topics_out.append({"name": t.name, "partitions": parts_out})
    return encode_response(API_KEY, version, {"throttle_time": 0, "topics": topics_out})
