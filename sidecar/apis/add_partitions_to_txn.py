"""AddPartitionsToTxn (key 24), v0-v5: partitions join the producer's transaction
(transactions/coordinator.py); the first one opens it. v0-v3 come from clients, one
transaction each; v4-v5 batch transactions and may only verify (verify_only), as
brokers send them (they need CLUSTER_ACTION on the cluster, as in Kafka).
Authorization as Kafka's: WRITE on the transactional id (else every partition
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic (else
TOPIC_AUTHORIZATION_FAILED there); when a partition fails, the others are
OPERATION_NOT_ATTEMPTED and nothing is added."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage import keys
from sidecar.storage.store import StoreError

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 5

OPERATION_NOT_ATTEMPTED = errors.code("OPERATION_NOT_ATTEMPTED")


def _fenced(code: str, version: int) -> int:
    # PRODUCER_FENCED exists from v2 (KIP-588); older clients know its old name.
    if code == "PRODUCER_FENCED" and version < 2:
        code = "INVALID_PRODUCER_EPOCH"
    return errors.code(code)


async def _one(
    broker: Broker,
    request: Any,
    version: int,
    transactional_id: str,
    pid: int,
    epoch: int,
    topics: Any,
    verify_only: bool = False,
) -> list[dict[str, Any]]:
    """The per-topic results of one transaction's partitions."""
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    results: dict[tuple[str, int], int] = {}
    if not checks.allowed(
        broker, request, Operation.WRITE, checks.TRANSACTIONAL_ID, transactional_id
    ):
        results = dict.fromkeys(wanted, checks.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    else:
        writable = checks.allowed_topics(broker, request, Operation.WRITE, (t.name for t in topics))
        for topic, partition in wanted:
            if topic not in writable:
                results[(topic, partition)] = checks.TOPIC_AUTHORIZATION_FAILED
                continue
            info = await broker.store.get_topic(topic)
            if info is None or not 0 <= partition < info.partitions:
                results[(topic, partition)] = errors.UNKNOWN_TOPIC_OR_PARTITION
        if results:
            for tp in wanted:
                results.setdefault(tp, OPERATION_NOT_ATTEMPTED)
        elif verify_only:
            got_pid, got_epoch, state, inside = await broker.transactions.txns.producer(
                transactional_id, wanted
            )
            for tp, member in zip(wanted, inside, strict=True):
                ok = got_pid == pid and got_epoch == epoch and state == b"Ongoing" and member
                results[tp] = errors.NONE if ok else errors.INVALID_TXN_STATE
        else:
            try:
                await broker.transactions.txns.add(
                    transactional_id,
                    pid,
                    epoch,
                    "p",
                    [keys.offset_field(t, p) for t, p in wanted],
                )
                code = errors.NONE
            except StoreError as exc:
                code = _fenced(exc.code, version)
            results = dict.fromkeys(wanted, code)
    return [
        {
            "name": t.name,
            "results_by_partition": [
                {"partition_index": p, "partition_error_code": results[(t.name, p)]}
                for p in t.partitions
            ],
        }
        for t in topics
    ]


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    if version <= 3:
        topics = await _one(
            broker,
            request,
            version,
            body.v3_and_below_transactional_id,
            body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch,
            body.v3_and_below_topics,
        )
        data: dict[str, Any] = {"throttle_time": 0, "results_by_topic_v3_and_below": topics}
        return encode_response(API_KEY, version, data)
    if not checks.cluster_allowed(broker, request, Operation.CLUSTER_ACTION):
        data = {
            "throttle_time": 0,
            "error_code": checks.CLUSTER_AUTHORIZATION_FAILED,
            "results_by_transaction": [],
        }
        return encode_response(API_KEY, version, data)
    results = []
    for txn in body.transactions:
        topics = await _one(
            broker,
            request,
            version,
            txn.transactional_id,
            txn.producer_id,
            txn.producer_epoch,
            txn.topics,
            txn.verify_only,
        )
        results.append({"transactional_id": txn.transactional_id, "topic_results": topics})
    data = {"throttle_time": 0, "error_code": errors.NONE, "results_by_transaction": results}
    return encode_response(API_KEY, version, data)
