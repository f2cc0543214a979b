"""Kafka error codes, by the names Kafka's documentation uses."""

from __future__ import annotations

from kio.schema.errors import ErrorCode


def code(name: str) -> int:
    """Map a Kafka error name (e.g. 'UNKNOWN_TOPIC_OR_PARTITION') to its number."""
    try:
        return int(ErrorCode[name.lower()])
    except KeyError:
        return int(ErrorCode.unknown_server_error)


NONE = 0
UNKNOWN_SERVER_ERROR = int(ErrorCode.unknown_server_error)
OFFSET_OUT_OF_RANGE = int(ErrorCode.offset_out_of_range)
CORRUPT_MESSAGE = int(ErrorCode.corrupt_message)
UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.unknown_topic_or_partition)
INVALID_TOPIC_EXCEPTION = int(ErrorCode.invalid_topic_exception)
UNSUPPORTED_VERSION = int(ErrorCode.unsupported_version)
TOPIC_ALREADY_EXISTS = int(ErrorCode.topic_already_exists)
INVALID_PARTITIONS = int(ErrorCode.invalid_partitions)
INVALID_REPLICATION_FACTOR = int(ErrorCode.invalid_replication_factor)
INVALID_REQUEST = int(ErrorCode.invalid_request)
REBOOTSTRAP_REQUIRED = int(ErrorCode.rebootstrap_required)
INVALID_REQUIRED_ACKS = int(ErrorCode.invalid_required_acks)
UNKNOWN_TOPIC_ID = int(ErrorCode.unknown_topic_id)
INVALID_RECORD = int(ErrorCode.invalid_record)
NOT_ENOUGH_REPLICAS = int(ErrorCode.not_enough_replicas)
INVALID_CONFIG = int(ErrorCode.invalid_config)
NOT_LEADER_OR_FOLLOWER = int(ErrorCode.not_leader_or_follower)
KAFKA_STORAGE_ERROR = int(ErrorCode.kafka_storage_error)
LEADER_NOT_AVAILABLE = int(ErrorCode.leader_not_available)
INVALID_TRANSACTION_TIMEOUT = int(ErrorCode.invalid_transaction_timeout)
CONCURRENT_TRANSACTIONS = int(ErrorCode.concurrent_transactions)
INVALID_TXN_STATE = int(ErrorCode.invalid_txn_state)
INVALID_PRODUCER_ID_MAPPING = int(ErrorCode.invalid_producer_id_mapping)
INVALID_PRODUCER_EPOCH = int(ErrorCode.invalid_producer_epoch)
PRODUCER_FENCED = int(ErrorCode.producer_fenced)
UNSTABLE_OFFSET_COMMIT = int(ErrorCode.unstable_offset_commit)
COORDINATOR_NOT_AVAILABLE = int(ErrorCode.coordinator_not_available)
