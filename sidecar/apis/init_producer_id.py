"""InitProducerId (key 22), v0-v4: producer ids come from a Redis counter, so they
are unique across sidecars. A transactional producer that names its id and epoch
(v3+) gets the same id with the next epoch; fencing comes with transactions."""

from __future__ import annotations

from typing import Any

from ..broker import Broker
from ..protocol import errors
from ..protocol.kio_codec import encode_response

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 4

MAX_EPOCH = 32767


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    pid = getattr(body, "producer_id", -1)
    epoch = getattr(body, "producer_epoch", -1)
    if body.transactional_id is not None and pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        new_pid, new_epoch = pid, epoch + 1
    else:
        # Without a transactional id Kafka always hands out a new id at epoch 0.
        new_pid, new_epoch = await broker.store.next_producer_id(), 0
    return encode_response(
        API_KEY,
        request.header.api_version,
        {
            "throttle_time": 0,
            "error_code": errors.NONE,
            "producer_id": new_pid,
            "producer_epoch": new_epoch,
        },
    )
