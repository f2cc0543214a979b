"""DescribeProducers (key 61), v0: the producers a partition knows (idempotent and
transactional), with their epoch, last sequence and append time, and the first offset
of each one's open transaction (`kafka-transactions describe-producers`, which finds
hanging transactions). Producers past producer.id.expiration.ms are left out, as Kafka
expires them. Authorization as Kafka's: READ on the topic (else
TOPIC_AUTHORIZATION_FAILED)."""

from __future__ import annotations

import time
from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0


async def _partition(broker: Broker, topic: str, partition: int) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "partition_index": partition,
        "error_code": errors.NONE,
        "error_message": None,
        "active_producers": [],
    }
    info = await broker.store.get_topic(topic)
    found = None
    if info is not None and 0 <= partition < info.partitions:
        found = await broker.transactions.txns.partition_producers(topic, partition)
    if found is None:
        entry["error_code"] = errors.UNKNOWN_TOPIC_OR_PARTITION
        return entry
    states, open_txns = found
    now = int(time.time() * 1000)
    expiry = broker.store.producer_id_expiration_ms
    producers = []
    for pid, state in sorted(states.items()):
        last_ms = int(state.get("t") or 0)
        if last_ms and now - last_ms > expiry and pid not in open_txns:
            continue
        batches = state.get("b") or []
        producers.append(
            {
                "producer_id": pid,
                "producer_epoch": int(state.get("e", -1)),
                "last_sequence": int(batches[-1][1]) if batches else -1,
                "last_timestamp": last_ms or -1,
                "coordinator_epoch": 0,
                "current_txn_start_offset": open_txns.get(pid, -1),
            }
        )
    entry["active_producers"] = producers
    return entry


async def handle(broker: Broker, request: Any) -> bytes:
    topics = []
    readable = checks.allowed_topics(
        broker, request, Operation.READ, (t.name for t in request.body.topics)
    )
    for t in request.body.topics:
        if t.name not in readable:
            partitions = [
                {
                    "partition_index": p,
                    "error_code": checks.TOPIC_AUTHORIZATION_FAILED,
                    "error_message": None,
                    "active_producers": [],
                }
                for p in t.partition_indexes
            ]
        else:
            partitions = [await _partition(broker, t.name, p) for p in t.partition_indexes]
        topics.append({"name": t.name, "partitions": partitions})
    return encode_response(
        API_KEY, request.header.api_version, {"throttle_time": 0, "topics": topics}
    )
