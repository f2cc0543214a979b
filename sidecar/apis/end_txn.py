"""EndTxn (key 26), v0-v5: commit or abort the producer's transaction. The answer comes
once its markers are on every partition and its offsets settled
(transactions/coordinator.py), as Kafka answers once the markers are written. v5 is
transaction version 2 (KIP-890): the epoch moves on, and the answer carries it.
Authorization as Kafka's: WRITE on the transactional id."""

from __future__ import annotations

import logging
from typing import Any

from sidecar.apis.add_partitions_to_txn import _fenced
from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage.store import StoreError

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 5

log = logging.getLogger(__name__)


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    code = errors.NONE
    after = (-1, -1)
    if not checks.allowed(
        broker, request, Operation.WRITE, checks.TRANSACTIONAL_ID, body.transactional_id
    ):
        code = checks.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        try:
            if version >= 5:  # transaction version 2: the answer carries the next epoch
                after = await broker.transactions.end_v2(
                    body.transactional_id, body.producer_id, body.producer_epoch, body.committed
                )
            else:
                await broker.transactions.end(
                    body.transactional_id, body.producer_id, body.producer_epoch, body.committed
                )
        except StoreError as exc:
            if errors.code(exc.code) == errors.UNKNOWN_SERVER_ERROR:
                # Redis failed while completing: decided, so the retry completes it.
                log.warning("EndTxn of %r: %s", body.transactional_id, exc)
                code = errors.COORDINATOR_NOT_AVAILABLE
            else:
                code = _fenced(exc.code, version)
    data: dict[str, Any] = {"throttle_time": 0, "error_code": code}
    if version >= 5:
        data |= {"producer_id": after[0], "producer_epoch": after[1]}
    return encode_response(API_KEY, version, data)
