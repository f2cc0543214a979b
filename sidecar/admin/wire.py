"""The Kafka wire side of the admin client: API keys and the versions this client speaks,
Kafka error codes and the exceptions that carry them, request frames and response decoding
on kio, consumer-protocol assignments and bootstrap addresses.

Request bodies are plain dicts that the sidecar's `kio_codec.build` turns into the
negotiated version's kio dataclass (keys a version lacks are dropped), so one call site
serves every version.
"""

from __future__ import annotations

import importlib
import io
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from sidecar.config.settings import HostPort
from sidecar.protocol.kio_codec import build
from sidecar.protocol.tolerant_decoder import decode_tolerant

LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 2, 3, 8, 9, 10
DESCRIBE_GROUPS, LIST_GROUPS, API_VERSIONS, DELETE_GROUPS = 15, 16, 18, 42
CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, DESCRIBE_CONFIGS = 19, 20, 21, 32
CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 37, 44
API_NAMES = {
    LIST_OFFSETS: "ListOffsets",
    METADATA: "Metadata",
    OFFSET_COMMIT: "OffsetCommit",
    OFFSET_FETCH: "OffsetFetch",
    FIND_COORDINATOR: "FindCoordinator",
    DESCRIBE_GROUPS: "DescribeGroups",
    LIST_GROUPS: "ListGroups",
    API_VERSIONS: "ApiVersions",
    DELETE_GROUPS: "DeleteGroups",
    CREATE_TOPICS: "CreateTopics",
    DELETE_TOPICS: "DeleteTopics",
    DELETE_RECORDS: "DeleteRecords",
    DESCRIBE_CONFIGS: "DescribeConfigs",
    CREATE_PARTITIONS: "CreatePartitions",
    INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigs",
}

# The versions this client builds and reads. OffsetCommit/OffsetFetch stop at v9 and
# ListOffsets at v9: later versions name topics by id or add a request timeout this client
# would have to fill in. OffsetFetch starts at v2, the first that fetches a whole group.
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    API_VERSIONS: (0, 3),
    METADATA: (1, 12),
    LIST_OFFSETS: (1, 9),
    OFFSET_COMMIT: (2, 9),
    OFFSET_FETCH: (2, 9),
    FIND_COORDINATOR: (0, 6),
    DESCRIBE_GROUPS: (0, 6),
    LIST_GROUPS: (0, 5),
    DELETE_GROUPS: (0, 2),
    # kio's ranges: CreateTopics from v2, DeleteTopics from v1, DescribeConfigs from v1.
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 6),
    DELETE_RECORDS: (0, 2),
    DESCRIBE_CONFIGS: (1, 4),
    CREATE_PARTITIONS: (0, 3),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
}

EARLIEST, LATEST = -2, -1  # ListOffsets timestamps

NO_ERROR = 0
UNSUPPORTED_VERSION = int(ErrorCode.unsupported_version)
UNKNOWN_TOPIC = int(ErrorCode.unknown_topic_or_partition)
LEADER_NOT_AVAILABLE = int(ErrorCode.leader_not_available)
GROUP_ID_NOT_FOUND = int(ErrorCode.group_id_not_found)
COORDINATOR_ERRORS = frozenset(
    int(e)
    for e in (
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
    )
)
# Topic changes go to the controller (KRaft brokers forward them): retry elsewhere.
CONTROLLER_ERRORS = frozenset({int(ErrorCode.not_controller)})
# Config resource types (DescribeConfigs, IncrementalAlterConfigs) and sources.
RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
# IncrementalAlterConfigs operations
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3

# Partition leadership moving (or not settled yet): ask Metadata again and retry.
LEADER_ERRORS = frozenset(
    int(e)
    for e in (
        ErrorCode.leader_not_available,
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.fenced_leader_epoch,
    )
)


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"ERROR_{code}"


class AdminError(Exception):
    """An admin operation failed; the message says what and where."""


class BrokerUnavailable(AdminError):
    """A broker refused the connection, closed it, or did not answer in time."""


class NoBrokerReachable(BrokerUnavailable):
    """None of the bootstrap (or known) brokers accepts a connection: not retried, so a
    command fails at once when nothing is running there."""


class UnsupportedApi(AdminError):
    """The broker does not serve an API (or no version this client speaks)."""

    def __init__(self, api: str, message: str) -> None:
        self.api = api
        super().__init__(message)


class KafkaError(AdminError):
    """A Kafka error code in a response; `name` is Kafka's name (e.g. NOT_COORDINATOR)."""

    def __init__(self, code: int, context: str, message: str | None = None) -> None:
        self.code = int(code)
        self.name = error_name(self.code)
        self.context = context
        super().__init__(f"{context}: {self.name}" + (f" ({message})" if message else ""))


def kafka_error(code: int, context: str) -> KafkaError | None:
    """None for NO_ERROR, else the KafkaError."""
    return None if code == NO_ERROR else KafkaError(code, context)


# Here rather than with the results in `client`: decode_assignment returns it.
@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


# -- wire codec ------------------------------------------------------------------------------


@cache
def _request_type(api_key: int, version: int) -> type:
    return load_request_schema(api_key, version)


@cache
def _response_type(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


def _write(entity_type: type, data: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    entity_writer(entity_type)(out, build(entity_type, data))
    return out.getvalue()


def _read(entity_type: type, buf: bytes, offset: int) -> tuple[Any, int]:
    try:
        return entity_reader(entity_type)(buf, offset)
    except KeyError as exc:  # a tagged field kio does not know: Kafka's rule is to skip it
        if "tagged field" not in str(exc):
            raise
        return decode_tolerant(entity_type, buf, offset)


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str, body: dict[str, Any]
) -> bytes:
    """A whole request frame; kio's request class names its header version (v2 when
    flexible, else v1)."""
    request_type = _request_type(api_key, version)
    header = {
        "request_api_key": api_key,
        "request_api_version": version,
        "correlation_id": correlation_id,
        "client_id": client_id,
    }
    payload = _write(request_type.__header_schema__, header) + _write(request_type, body)
    return struct.pack(">i", len(payload)) + payload


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, body) of a frame without its size prefix. kio's response class
    names its header version (v1 when flexible, v0 for ApiVersions and older versions)."""
    response_type = _response_type(api_key, version)
    header, pos = _read(response_type.__header_schema__, frame, 0)
    if api_key == API_VERSIONS and frame[pos : pos + 2] == struct.pack(">h", UNSUPPORTED_VERSION):
        response_type = _response_type(API_VERSIONS, 0)  # Kafka answers an unknown version in v0
    body, size = _read(response_type, frame, pos)
    if pos + size != len(frame):
        raise AdminError(
            f"{API_NAMES.get(api_key, api_key)} v{version} response has "
            f"{len(frame) - pos - size} unread bytes"
        )
    return int(header.correlation_id), body


@cache
def _assignment_type(version: int) -> type:
    module = importlib.import_module(f"kio.schema.consumer_protocol_assignment.v{version}")
    entity: type = module.ConsumerProtocolAssignment
    return entity


def decode_assignment(data: bytes | None) -> list[TopicPartition] | None:
    """The partitions of a consumer-protocol assignment (int16 version, then the body);
    None when it does not decode. Newer versions only add fields, so they are read with
    the newest schema kio has, as Kafka's ConsumerProtocol does."""
    if not data:
        return []
    if len(data) < 2:
        return None
    (version,) = struct.unpack_from(">h", data, 0)
    if version < 0:
        return None
    try:
        assignment, _ = _read(_assignment_type(min(version, 3)), data, 2)
    except Exception:
        return None
    return sorted(
        TopicPartition(t.topic, int(p))
        for t in assignment.assigned_partitions
        for p in t.partitions
    )


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    """HOST:PORT[,HOST:PORT...]; raises ValueError naming the bad entry."""
    addresses = []
    for part in text.split(","):
        if part.strip():
            hp = HostPort.parse(part.strip())
            addresses.append((hp.host, hp.port))
    if not addresses:
        raise ValueError("expected HOST:PORT[,HOST:PORT...], got nothing")
    return addresses


# -- group states ----------------------------------------------------------------------------


_STATES = {
    s.lower(): s
    for s in (
        "Unknown",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
        "Dead",
        "Empty",
        "Assigning",
        "Reconciling",
    )
}


def canonical_state(state: str) -> str:
    """Kafka's spelling of a group state name given in any case (the brokers' ListGroups
    filter compares it as the Java AdminClient sends it)."""
    return _STATES.get(state.lower(), state)
