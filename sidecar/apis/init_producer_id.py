"""InitProducerId (key 22), v0-v5: producer ids come from a Redis counter, so they
are unique across sidecars. A transactional id maps to a stable producer id whose
epoch each init bumps (lua/init_producer.lua), fencing the previous producer; its
open transaction is aborted first (transactions/coordinator.py). A transaction.timeout.ms
above transaction.max.timeout.ms gets INVALID_TRANSACTION_TIMEOUT, as on Kafka.
Authorization as Kafka's: WRITE on the transactional id, or for an idempotent producer
IDEMPOTENT_WRITE on the cluster or WRITE on some topic; denied, nothing is allocated."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response, ms
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage.store import StoreError

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5  # v5 (KIP-890) is v4 for a client that understands TRANSACTION_ABORTABLE

MAX_EPOCH = 32767


async def _denied(broker: Broker, request: Any, transactional_id: str | None) -> int:
    if transactional_id is not None:
        if checks.allowed(
            broker, request, Operation.WRITE, checks.TRANSACTIONAL_ID, transactional_id
        ):
            return errors.NONE
        return checks.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if checks.cluster_allowed(broker, request, Operation.IDEMPOTENT_WRITE):
        return errors.NONE
    if await checks.may_write_some_topic(broker, request):
        return errors.NONE
    return checks.CLUSTER_AUTHORIZATION_FAILED


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    pid = getattr(body, "producer_id", -1)
    epoch = getattr(body, "producer_epoch", -1)
    error = errors.NONE
    denied = await _denied(broker, request, body.transactional_id)
    if denied:
        error, new_pid, new_epoch = denied, -1, -1
    elif body.transactional_id is None:
        # Without a transactional id Kafka always hands out a new id at epoch 0.
        new_pid, new_epoch = await broker.store.next_producer_id(), 0
    elif not 0 < ms(body.transaction_timeout) <= broker.settings.transaction_max_timeout_ms:
        error, new_pid, new_epoch = errors.INVALID_TRANSACTION_TIMEOUT, -1, -1
    else:
        try:
            new_pid, new_epoch = await broker.transactions.init_producer(
                body.transactional_id,
                pid,
                epoch,
                ms(body.transaction_timeout),
                MAX_EPOCH - 1,  # Kafka moves to a new producer id before the last epoch
            )
        except StoreError as exc:
            # PRODUCER_FENCED exists from v4 (KIP-588); older clients know its old name.
            code = exc.code if version >= 4 else "INVALID_PRODUCER_EPOCH"
            error, new_pid, new_epoch = errors.code(code), -1, -1
    return encode_response(
        API_KEY,
        version,
        {
            "throttle_time": 0,
            "error_code": error,
            "producer_id": new_pid,
            "producer_epoch": new_epoch,
        },
    )
