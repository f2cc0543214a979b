"""A small asyncio Kafka admin client (kio codec), used by `skiff groups`: `wire` (API keys,
errors, request and response codec), `connection` (one broker connection) and `client`
(AdminClient and its results)."""

from .client import (
    AdminClient,
    Broker,
    ClusterMetadata,
    CommittedOffset,
    GroupDescription,
    GroupListing,
    MemberDescription,
)
from .wire import (
    EARLIEST,
    LATEST,
    AdminError,
    BrokerUnavailable,
    KafkaError,
    NoBrokerReachable,
    TopicPartition,
    decode_assignment,
    parse_bootstrap,
)

__all__ = [
    "EARLIEST",
    "LATEST",
    "AdminClient",
    "AdminError",
    "Broker",
    "BrokerUnavailable",
    "ClusterMetadata",
    "CommittedOffset",
    "GroupDescription",
    "GroupListing",
    "KafkaError",
    "MemberDescription",
    "NoBrokerReachable",
    "TopicPartition",
    "decode_assignment",
    "parse_bootstrap",
]
