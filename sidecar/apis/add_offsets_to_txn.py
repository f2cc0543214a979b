"""AddOffsetsToTxn (key 25), v0-v4: a group joins the producer's transaction, whose
TxnOffsetCommits then commit with it (transactions/coordinator.py).
Authorization as Kafka's: WRITE on the transactional id, READ on the group."""

from __future__ import annotations

from typing import Any

from sidecar.apis.add_partitions_to_txn import _fenced
from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage.store import StoreError

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    code = errors.NONE
    if not checks.allowed(
        broker, request, Operation.WRITE, checks.TRANSACTIONAL_ID, body.transactional_id
    ):
        code = checks.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not checks.group_allowed(broker, request, Operation.READ, body.group_id):
        code = checks.GROUP_AUTHORIZATION_FAILED
    else:
        try:
            await broker.transactions.txns.add(
                body.transactional_id, body.producer_id, body.producer_epoch, "g", [body.group_id]
            )
        except StoreError as exc:
            code = _fenced(exc.code, version)
    return encode_response(API_KEY, version, {"throttle_time": 0, "error_code": code})
