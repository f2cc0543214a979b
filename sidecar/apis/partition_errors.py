"""The per-topic, per-partition error lists that OffsetCommit, TxnOffsetCommit and
OffsetDelete answer with: in the order of the request, or (OffsetCommit) in the order
Kafka's OffsetCommitResponse.Builder gives them."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from sidecar.protocol import errors


def topic_partition_errors(topics: Any, results: dict[tuple[str, int], str]) -> list[Any]:
    """topics: the request's topics (each with .name and .partitions[].partition_index);
    results: the Kafka error name for every (topic, partition) in them."""
    return [
        {
            "name": topic.name,
            "partitions": [
                {
                    "partition_index": p.partition_index,
                    "error_code": errors.code(results[(topic.name, p.partition_index)]),
                }
                for p in topic.partitions
            ],
        }
        for topic in topics
    ]


# The errors Kafka's KafkaApis gives before the group coordinator sees the request.
REFUSED_BEFORE_THE_COORDINATOR = frozenset(
    {"TOPIC_AUTHORIZATION_FAILED", "UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_ID"}
)


def refused_first(
    entries: Iterable[tuple[Hashable, int, str]],
) -> list[tuple[Hashable, list[tuple[int, str]]]]:
    """(topic, [(partition, error)]) from (topic, partition, error) in request order,
    as Kafka 4's OffsetCommit answers: KafkaApis adds the partitions it refuses first,
    each topic where it first appears, and merges the coordinator's answers after them
    into their topic (OffsetCommitResponse.Builder), so a topic with a refused partition
    comes before the others and lists its refused partitions first."""
    items = list(entries)
    by_topic: dict[Hashable, list[tuple[int, str]]] = {}
    for early in (True, False):
        for topic, partition, error in items:
            if (error in REFUSED_BEFORE_THE_COORDINATOR) == early:
                by_topic.setdefault(topic, []).append((partition, error))
    return list(by_topic.items())
