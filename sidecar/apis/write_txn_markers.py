"""WriteTxnMarkers (key 27), v1-v2: write COMMIT or ABORT markers for a producer on
partitions. Kafka's coordinator sends it to partition leaders; clients send it only to
abort a hanging transaction (`kafka-transactions abort`, AdminClient.abortTransaction),
which is what Skiff serves it for (its own coordinator writes markers through
transactions/coordinator.py). `record` topics take no transactions: INVALID_REQUEST.
Authorization as Kafka's: CLUSTER_ACTION on the cluster (else
CLUSTER_AUTHORIZATION_FAILED for every partition)."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage.store import StoreError
from sidecar.storage.txn_store import Decided

API_KEY = 27
MIN_VERSION = 1
MAX_VERSION = 2


async def _write(broker: Broker, marker: Any, topic: str, partition: int) -> int:
    info = await broker.store.get_topic(topic)
    if info is None or not 0 <= partition < info.partitions:
        return errors.UNKNOWN_TOPIC_OR_PARTITION
    decided = Decided(
        marker.transaction_result, -1, marker.producer_epoch, marker.producer_id, [], []
    )
    try:
        await broker.transactions.txns.write_marker(
            topic, partition, decided, broker.store.identity.cluster_id or "", info.batch_format
        )
    except StoreError as exc:
        return errors.code(exc.code)
    broker.store.forget_next_base(topic, partition)
    return errors.NONE


async def handle(broker: Broker, request: Any) -> bytes:
    allowed = checks.cluster_allowed(broker, request, Operation.CLUSTER_ACTION)
    results = []
    for marker in request.body.markers:
        topics = []
        for t in marker.topics:
            partitions = []
            for p in t.partition_indexes:
                code = (
                    await _write(broker, marker, t.name, p)
                    if allowed
                    else checks.CLUSTER_AUTHORIZATION_FAILED
                )
                partitions.append({"partition_index": p, "error_code": code})
            topics.append({"name": t.name, "partitions": partitions})
        results.append({"producer_id": marker.producer_id, "topics": topics})
    return encode_response(API_KEY, request.header.api_version, {"markers": results})
