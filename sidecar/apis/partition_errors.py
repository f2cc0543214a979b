"""The per-topic, per-partition error list that OffsetCommit and OffsetDelete answer
with, in the order of the request."""

from __future__ import annotations

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
