"""TxnOffsetCommit (key 28), v0-v6: offsets a transaction commits for a group, held
apart until EndTxn commits them (then the group's) or aborts them (dropped); see
transactions/coordinator.py. The group's coordinator answers it and fences members of
other generations (KIP-447, groups/coordinator.py validate_txn_commit). Authorization
as Kafka's: WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
READ on the group (else GROUP_AUTHORIZATION_FAILED), READ on each topic (else
TOPIC_AUTHORIZATION_FAILED). v6 (KIP-1319) names topics by id (UNKNOWN_TOPIC_ID for an
id no topic has) and answers GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH where older
versions get ILLEGAL_GENERATION."""

from __future__ import annotations

import time
from typing import Any

from sidecar.apis.offset_commit import answer_by_id, checked_offsets, topics_by_id
from sidecar.apis.partition_errors import topic_partition_errors
from sidecar.broker import Broker
from sidecar.groups.coordinator import CoordinatorError
from sidecar.protocol.kio_codec import encode_response
from sidecar.queues.core import queue_store
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage import keys
from sidecar.storage.group_store import CommittedOffset
from sidecar.storage.store import StoreError

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 6
TOPIC_IDS_VERSION = 6


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    now = int(time.time() * 1000)
    txn_denied = not checks.allowed(
        broker, request, Operation.WRITE, checks.TRANSACTIONAL_ID, body.transactional_id
    )
    denied = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" if txn_denied else None
    by_id = await topics_by_id(broker, body.topics) if version >= TOPIC_IDS_VERSION else None
    known = None if by_id is None else [t for t in by_id if t.name is not None]
    results, valid = await checked_offsets(broker, request, now, -1, denied, topics=known)
    if valid:
        # As Kafka 4.x: the transaction is verified first, then the group's member.
        error = await _verify(broker, body, version)
        if error == "NONE":
            error = await _group_error(broker, body, version)
        if error == "NONE":
            error = await _stage(broker, body, valid)
        results.update(dict.fromkeys(valid, error))
    if by_id is None:
        answer = topic_partition_errors(body.topics, results)
    else:
        # An unknown id's partitions share a whole-request refusal (Kafka checks the
        # transactional id and the group before resolving ids), else UNKNOWN_TOPIC_ID.
        unknown = denied or "UNKNOWN_TOPIC_ID"
        if unknown == "UNKNOWN_TOPIC_ID" and not checks.group_allowed(
            broker, request, Operation.READ, body.group_id
        ):
            unknown = "GROUP_AUTHORIZATION_FAILED"
        answer = answer_by_id(by_id, results, unknown)
    return encode_response(API_KEY, version, {"throttle_time": 0, "topics": answer})


async def _group_error(broker: Broker, body: Any, version: int) -> str:
    """The group coordinator's checks (v3+ carry the member's generation, KIP-447)."""
    if await queue_store(broker).exists(body.group_id):
        return "GROUP_ID_NOT_FOUND"  # a share group's offsets move by acknowledgements
    try:
        return await broker.groups.validate_txn_commit(
            body.group_id,
            getattr(body, "generation_id", -1),
            getattr(body, "member_id", ""),
            getattr(body, "group_instance_id", None),
            precise_errors=version >= TOPIC_IDS_VERSION,
        )
    except CoordinatorError as exc:
        return exc.code


async def _verify(broker: Broker, body: Any, version: int) -> str:
    """Kafka accepts the commit only from the transaction's producer, at its epoch, with
    the group added (AddOffsetsToTxn). v5 is transaction version 2 (KIP-890): the group
    is added here, opening a transaction if none is."""
    txns = broker.transactions.txns
    txn_id, pid, epoch = body.transactional_id, body.producer_id, body.producer_epoch
    if version >= 5:
        # lua/txn.lua `add` checks the producer id and epoch itself: one round trip.
        try:
            await txns.add(txn_id, pid, epoch, "g", [body.group_id])
        except StoreError as exc:
            return "INVALID_PRODUCER_EPOCH" if exc.code == "PRODUCER_FENCED" else exc.code
        return "NONE"
    stored_pid, stored_epoch, state, _ = await txns.producer(txn_id, [])
    if stored_pid != pid:
        return "INVALID_PRODUCER_ID_MAPPING"
    if stored_epoch != epoch:
        return "INVALID_PRODUCER_EPOCH"
    if state != b"Ongoing" or not await txns.has_group(txn_id, body.group_id):
        return "INVALID_TXN_STATE"
    return "NONE"


async def _stage(broker: Broker, body: Any, valid: dict[tuple[str, int], CommittedOffset]) -> str:
    txns = broker.transactions.txns
    pairs: list[object] = []
    for (topic, partition), value in valid.items():
        pairs += [keys.offset_field(topic, partition), value.encode()]
    try:
        await txns.stage_offsets(
            body.group_id,
            body.producer_id,
            pairs,
            broker.settings.transactional_id_expiration_ms,
        )
    except StoreError as exc:
        return exc.code
    return "NONE"
