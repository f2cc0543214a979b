"""The replica-list checks CreateTopics, CreatePartitions and AlterPartitionReassignments
share for manual assignments, with Kafka 3.9's messages (ReplicationControlManager)."""

from __future__ import annotations

from sidecar.config.admin import AdminError
from sidecar.protocol import errors

INVALID_REPLICA_ASSIGNMENT = errors.code("INVALID_REPLICA_ASSIGNMENT")


def check_replicas(ids: list[int], live: set[int]) -> None:
    """A manual assignment's broker ids: not empty, no repeats, every one a live sidecar."""
    if not ids:
        raise AdminError(
            INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    for node in ids:
        if ids.count(node) > 1:
            raise AdminError(
                INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {node} more than once.",
            )
        if node not in live:
            raise AdminError(
                INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {node}, but no such "
                "broker is registered.",
            )


def one_copy_message(factor: int) -> str:
    return (
        f"Unable to replicate the partition {factor} time(s): Skiff keeps one copy of each "
        "partition in Redis (replicate Redis instead), so the replication factor must be 1 "
        "or -1."
    )
