"""DescribeTransactions (key 65), v0: a transactional id's state, timeout, start time,
producer id and epoch and the partitions of its open transaction
(`kafka-transactions describe`). An unknown id gets TRANSACTIONAL_ID_NOT_FOUND.
Authorization as Kafka's: DESCRIBE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); partitions of topics one may not DESCRIBE are
left out."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 65
MIN_VERSION = 0
MAX_VERSION = 0

NOT_FOUND = errors.code("TRANSACTIONAL_ID_NOT_FOUND")


def unknown(transactional_id: str, code: int) -> dict[str, Any]:
    """As Kafka answers an id it does not describe: the schema's zero values."""
    return {
        "error_code": code,
        "transactional_id": transactional_id,
        "transaction_state": "",
        "transaction_timeout": 0,
        "transaction_start_time": 0,
        "producer_id": 0,
        "producer_epoch": 0,
        "topics": [],
    }


async def handle(broker: Broker, request: Any) -> bytes:
    ids = list(request.body.transactional_ids)
    visible = [
        i
        for i in ids
        if checks.allowed(broker, request, Operation.DESCRIBE, checks.TRANSACTIONAL_ID, i)
    ]
    found = dict(zip(visible, await broker.transactions.txns.describe(visible), strict=True))
    states = []
    for transactional_id in ids:
        if transactional_id not in found:
            states.append(unknown(transactional_id, checks.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            continue
        state = found[transactional_id]
        if state is None:
            states.append(unknown(transactional_id, NOT_FOUND))
            continue
        described = checks.allowed_topics(
            broker, request, Operation.DESCRIBE, (t for t, _ in state.partitions)
        )
        topics: dict[str, list[int]] = {}
        for topic, partition in state.partitions:
            if topic in described:
                topics.setdefault(topic, []).append(partition)
        states.append(
            {
                "error_code": errors.NONE,
                "transactional_id": transactional_id,
                "transaction_state": state.state,
                "transaction_timeout": state.timeout_ms,
                "transaction_start_time": state.start_ms,
                "producer_id": state.producer_id,
                "producer_epoch": state.epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            }
        )
    return encode_response(
        API_KEY, request.header.api_version, {"throttle_time": 0, "transaction_states": states}
    )
