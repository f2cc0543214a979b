"""A small asyncio Kafka admin client (kio codec), used by `skiff groups`."""

from .client import (
    EARLIEST,
    LATEST,
    AdminClient,
    AdminError,
    Broker,
    BrokerUnavailable,
    ClusterMetadata,
    CommittedOffset,
    GroupDescription,
    GroupListing,
    KafkaError,
    MemberDescription,
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
