"""Queue groups (issue 8): records handed to any number of workers one by one, under
leases, on Redis consumer groups. The core is core.py; front ends: http_api.py (HTTP)
and the Kafka share-group APIs."""

from sidecar.queues.core import (
    Acquired,
    Action,
    PartitionState,
    QueueConfig,
    QueueDescription,
    QueueError,
    QueueStore,
    RecordError,
    Settled,
    queue_store,
)

__all__ = [
    "Acquired",
    "Action",
    "PartitionState",
    "QueueConfig",
    "QueueDescription",
    "QueueError",
    "QueueStore",
    "RecordError",
    "Settled",
    "queue_store",
]
