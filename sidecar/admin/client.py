"""An asyncio Kafka admin client on kio, for any Kafka broker: Skiff sidecars or Apache Kafka.

    async with AdminClient("127.0.0.1:9092") as admin:
        listed = await admin.list_groups()
        [group] = await admin.describe_groups(["g"])
        committed = await admin.offset_fetch("g")
        ends = await admin.list_offsets(committed, LATEST)

Request bodies are plain dicts that the sidecar's `kio_codec.build` turns into the
negotiated version's kio dataclass (keys a version lacks are dropped), so one call site
serves every version. Each connection asks ApiVersions first and then uses, per API, the
highest version both sides support. Group requests go to the group's coordinator
(FindCoordinator); NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE
and a coordinator that stops answering are retried with a fresh FindCoordinator until the
operation's deadline (`timeout`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import io
import struct
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, TypeVar

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from ..protocol.kio_codec import build
from ..protocol.tolerant_decoder import decode_tolerant
from ..settings import HostPort

T = TypeVar("T")

LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 2, 3, 8, 9, 10
DESCRIBE_GROUPS, LIST_GROUPS, API_VERSIONS, DELETE_GROUPS = 15, 16, 18, 42
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
}
CLIENT_SOFTWARE = ("skiff-admin", "1.0")
CONNECT_TIMEOUT = 10.0  # seconds; an unanswering address must not use up the whole deadline

EARLIEST, LATEST = -2, -1  # ListOffsets timestamps

_NO_ERROR = 0
_UNSUPPORTED_VERSION = int(ErrorCode.unsupported_version)
_UNKNOWN_TOPIC = int(ErrorCode.unknown_topic_or_partition)
_LEADER_NOT_AVAILABLE = int(ErrorCode.leader_not_available)
_GROUP_ID_NOT_FOUND = int(ErrorCode.group_id_not_found)
COORDINATOR_ERRORS = frozenset(
    int(e)
    for e in (
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
    )
)
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


class KafkaError(AdminError):
    """A Kafka error code in a response; `name` is Kafka's name (e.g. NOT_COORDINATOR)."""

    def __init__(self, code: int, context: str, message: str | None = None) -> None:
        self.code = int(code)
        self.name = error_name(self.code)
        self.context = context
        super().__init__(f"{context}: {self.name}" + (f" ({message})" if message else ""))


# -- results -------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class Broker:
    node_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return str(HostPort(self.host, self.port))


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    error_code: int
    leaders: dict[int, int]  # partition -> leader node id


@dataclass(frozen=True)
class ClusterMetadata:
    cluster_id: str | None
    brokers: dict[int, Broker]
    topics: dict[str, TopicMetadata]


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    state: str | None  # None: the broker's ListGroups version has no state
    protocol_type: str


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition] | None  # None: not a consumer-protocol assignment


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str  # the assignor, for consumer groups
    members: list[MemberDescription]
    coordinator: Broker


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    metadata: str | None
    leader_epoch: int


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
    if api_key == API_VERSIONS and frame[pos : pos + 2] == struct.pack(">h", _UNSUPPORTED_VERSION):
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


# -- one connection ----------------------------------------------------------------------------


class Connection:
    """One broker connection. Requests go one at a time, so responses come in order (an
    admin tool needs no pipelining)."""

    def __init__(
        self,
        address: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client_id: str,
    ) -> None:
        self.address = address
        self.client_id = client_id
        self.versions: dict[int, tuple[int, int]] = {}
        self.closed = False
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()
        self._next_id = 1

    @classmethod
    async def open(cls, host: str, port: int, client_id: str, timeout: float) -> Connection:
        address = str(HostPort(host, port))
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except (OSError, TimeoutError) as exc:
            raise BrokerUnavailable(f"cannot connect to {address}: {exc or 'timed out'}") from None
        conn = cls(address, reader, writer, client_id)
        try:
            await conn._negotiate(timeout)
        except BaseException:
            conn.close()
            raise
        return conn

    async def _negotiate(self, timeout: float) -> None:
        body = {
            "client_software_name": CLIENT_SOFTWARE[0],
            "client_software_version": CLIENT_SOFTWARE[1],
        }
        version = CLIENT_VERSIONS[API_VERSIONS][1]
        resp = await self._roundtrip(API_VERSIONS, version, body, timeout)
        if resp.error_code == _UNSUPPORTED_VERSION:
            # The v0 answer lists the ApiVersions versions the broker serves: ask again.
            served = {int(k.api_key): int(k.max_version) for k in resp.api_keys}
            version = min(version, served.get(API_VERSIONS, 0))
            resp = await self._roundtrip(API_VERSIONS, version, body, timeout)
        if resp.error_code:
            raise KafkaError(resp.error_code, f"ApiVersions from {self.address}")
        self.versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys
        }

    def version(self, api_key: int) -> int:
        """The highest version of `api_key` this client and the broker both speak."""
        name = API_NAMES.get(api_key, str(api_key))
        lo, hi = CLIENT_VERSIONS[api_key]
        if api_key not in self.versions:
            raise AdminError(f"{self.address} does not serve {name} requests")
        broker_lo, broker_hi = self.versions[api_key]
        version = min(hi, broker_hi)
        if version < max(lo, broker_lo):
            raise AdminError(
                f"{self.address} serves {name} v{broker_lo}-{broker_hi}; "
                f"this client speaks v{lo}-{hi}"
            )
        return version

    async def request(self, api_key: int, body: dict[str, Any], timeout: float) -> tuple[int, Any]:
        """(version used, decoded response)."""
        version = self.version(api_key)
        return version, await self._roundtrip(api_key, version, body, timeout)

    async def _roundtrip(
        self, api_key: int, version: int, body: dict[str, Any], timeout: float
    ) -> Any:
        name = API_NAMES.get(api_key, str(api_key))
        async with self._lock:
            if self.closed:
                raise BrokerUnavailable(f"the connection to {self.address} is closed")
            correlation_id = self._next_id
            self._next_id += 1
            frame = encode_request(api_key, version, correlation_id, self.client_id, body)
            try:
                answer = await asyncio.wait_for(self._exchange(frame), timeout)
            except TimeoutError:
                self.close()  # a late answer would be read as the next request's
                raise BrokerUnavailable(
                    f"{self.address} did not answer {name} within {timeout:.1f}s"
                ) from None
            except (OSError, asyncio.IncompleteReadError) as exc:
                self.close()
                raise BrokerUnavailable(
                    f"{self.address} closed the connection during {name} v{version} ({exc!r})"
                ) from None
        got_id, response = decode_response(api_key, version, answer)
        if got_id != correlation_id:
            self.close()
            raise AdminError(f"{self.address}: correlation id {got_id}, expected {correlation_id}")
        return response

    async def _exchange(self, frame: bytes) -> bytes:
        self._writer.write(frame)
        await self._writer.drain()
        (size,) = struct.unpack(">i", await self._reader.readexactly(4))
        return await self._reader.readexactly(size)

    def close(self) -> None:
        self.closed = True
        self._writer.close()


# -- the client ----------------------------------------------------------------------------------


class AdminClient:
    """Admin operations against a cluster reached through `bootstrap` ("HOST:PORT,..." or
    (host, port) pairs). Every operation, retries included, ends within `timeout` seconds."""

    def __init__(
        self,
        bootstrap: str | Sequence[tuple[str, int]],
        *,
        timeout: float = 30.0,
        client_id: str = "skiff-admin",
    ) -> None:
        self.bootstrap = (
            parse_bootstrap(bootstrap) if isinstance(bootstrap, str) else list(bootstrap)
        )
        self.timeout = timeout
        self.client_id = client_id
        self._conns: dict[tuple[str, int], Connection] = {}
        self._connecting: dict[tuple[str, int], asyncio.Lock] = {}
        self._brokers: dict[int, Broker] = {}  # from the last Metadata: more ways in

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            conn.close()
        for conn in conns:
            with contextlib.suppress(Exception):
                await conn._writer.wait_closed()

    # plumbing

    def _deadline(self, deadline: float | None) -> float:
        return time.monotonic() + self.timeout if deadline is None else deadline

    def _left(self, deadline: float) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AdminError(f"timed out after {self.timeout:g}s")
        return left

    async def _connect(self, host: str, port: int, deadline: float) -> Connection:
        key = (host, port)
        async with self._connecting.setdefault(key, asyncio.Lock()):
            conn = self._conns.get(key)
            if conn is None or conn.closed:
                timeout = min(self._left(deadline), CONNECT_TIMEOUT)
                conn = await Connection.open(host, port, self.client_id, timeout)
                self._conns[key] = conn
            return conn

    async def _any_broker(self, deadline: float) -> Connection:
        """A connection to a bootstrap address or, failing those, to a broker Metadata named."""
        errors: list[str] = []
        known = [(b.host, b.port) for b in self._brokers.values()]
        for host, port in dict.fromkeys([*self.bootstrap, *known]):
            try:
                return await self._connect(host, port, deadline)
            except BrokerUnavailable as exc:
                errors.append(str(exc))
        raise NoBrokerReachable("; ".join(errors))

    async def _retry(
        self,
        once: Callable[[float], Awaitable[T]],
        retry_codes: frozenset[int],
        deadline: float | None = None,
    ) -> T:
        """once(deadline), again while it fails with one of `retry_codes` or because a broker
        stopped answering (a coordinator or leader that went away), backing off up to 1 s,
        until the deadline; then the last error."""
        deadline = self._deadline(deadline)
        delay = 0.05
        while True:
            try:
                return await once(deadline)
            except NoBrokerReachable:
                raise
            except (KafkaError, BrokerUnavailable) as exc:
                if isinstance(exc, KafkaError) and exc.code not in retry_codes:
                    raise
                if time.monotonic() + delay >= deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def _on_coordinator(
        self,
        group: str,
        call: Callable[[Connection, Broker, float], Awaitable[T]],
        deadline: float | None = None,
    ) -> T:
        """call(connection, coordinator, deadline) on the group's coordinator, found afresh
        after each coordinator error."""

        async def once(deadline: float) -> T:
            broker = await self._find_coordinator_once(group, deadline)
            conn = await self._connect(broker.host, broker.port, deadline)
            return await call(conn, broker, deadline)

        return await self._retry(once, COORDINATOR_ERRORS, deadline)

    # cluster

    async def metadata(
        self, topics: Sequence[str] | None = (), deadline: float | None = None
    ) -> ClusterMetadata:
        """Brokers, plus the named topics (None: every topic). Never creates a topic."""

        async def once(deadline: float) -> ClusterMetadata:
            conn = await self._any_broker(deadline)
            names = (
                None
                if topics is None
                else [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics]
            )
            body = {"topics": names, "allow_auto_topic_creation": False}
            _, resp = await conn.request(METADATA, body, self._left(deadline))
            brokers = {
                int(b.node_id): Broker(int(b.node_id), b.host, int(b.port)) for b in resp.brokers
            }
            self._brokers = brokers
            return ClusterMetadata(
                cluster_id=getattr(resp, "cluster_id", None),
                brokers=brokers,
                topics={
                    t.name: TopicMetadata(
                        t.name,
                        int(t.error_code),
                        {int(p.partition_index): int(p.leader_id) for p in t.partitions},
                    )
                    for t in resp.topics
                    if t.name is not None
                },
            )

        return await self._retry(once, frozenset(), deadline)

    async def find_coordinator(self, group: str) -> Broker:
        return await self._retry(
            lambda deadline: self._find_coordinator_once(group, deadline), COORDINATOR_ERRORS
        )

    async def _find_coordinator_once(self, group: str, deadline: float) -> Broker:
        conn = await self._any_broker(deadline)
        body = {"key": group, "key_type": 0, "coordinator_keys": [group]}
        version, resp = await conn.request(FIND_COORDINATOR, body, self._left(deadline))
        found = resp.coordinators[0] if version >= 4 else resp  # v4+ batches keys
        if found.error_code:
            raise KafkaError(
                found.error_code,
                f"FindCoordinator for group {group!r} (asked {conn.address})",
                getattr(found, "error_message", None),
            )
        return Broker(int(found.node_id), found.host, int(found.port))

    # groups

    async def list_groups(self, states: Sequence[str] = ()) -> list[GroupListing]:
        """Every group of the cluster, sorted: ListGroups answers only for the groups a
        broker coordinates, so it goes to every broker Metadata lists. `states` filters
        (case-insensitive)."""
        wanted = {s.lower() for s in states}

        async def once(deadline: float) -> dict[str, GroupListing]:
            meta = await self.metadata([], deadline)
            answers = await asyncio.gather(
                *(self._list_groups_on(b, states, deadline) for b in meta.brokers.values())
            )
            merged: dict[str, GroupListing] = {}
            for listing in answers:
                for group in listing:
                    merged.setdefault(group.group_id, group)
            return merged

        merged = await self._retry(once, COORDINATOR_ERRORS)
        stateless = [g.group_id for g in merged.values() if g.state is None]
        if stateless:  # ListGroups before v4 has no state: DescribeGroups knows it
            for described in await self.describe_groups(stateless):
                merged[described.group_id] = replace(
                    merged[described.group_id], state=described.state
                )
        return sorted(
            (g for g in merged.values() if not wanted or (g.state or "").lower() in wanted),
            key=lambda g: g.group_id,
        )

    async def _list_groups_on(
        self, broker: Broker, states: Sequence[str], deadline: float
    ) -> list[GroupListing]:
        conn = await self._connect(broker.host, broker.port, deadline)
        body = {"states_filter": [canonical_state(s) for s in states], "types_filter": []}
        version, resp = await conn.request(LIST_GROUPS, body, self._left(deadline))
        if resp.error_code:
            raise KafkaError(resp.error_code, f"ListGroups on {broker.address}")
        return [
            GroupListing(g.group_id, g.group_state if version >= 4 else None, g.protocol_type)
            for g in resp.groups
        ]

    async def describe_groups(self, groups: Sequence[str]) -> list[GroupDescription]:
        return list(await asyncio.gather(*(self._describe_group(g) for g in groups)))

    async def _describe_group(self, group: str) -> GroupDescription:
        async def call(conn: Connection, broker: Broker, deadline: float) -> GroupDescription:
            body = {"groups": [group], "include_authorized_operations": False}
            _, resp = await conn.request(DESCRIBE_GROUPS, body, self._left(deadline))
            found = resp.groups[0]
            if found.error_code == _GROUP_ID_NOT_FOUND:  # v6+ says so instead of "Dead"
                return GroupDescription(group, "Dead", "", "", [], broker)
            if found.error_code:
                raise KafkaError(
                    found.error_code,
                    f"DescribeGroups for group {group!r} on {broker.address}",
                    getattr(found, "error_message", None),
                )
            consumer = found.protocol_type == "consumer"
            return GroupDescription(
                group_id=found.group_id,
                state=found.group_state,
                protocol_type=found.protocol_type,
                protocol=found.protocol_data,
                members=[
                    MemberDescription(
                        member_id=m.member_id,
                        instance_id=getattr(m, "group_instance_id", None),
                        client_id=m.client_id,
                        host=m.client_host,
                        assignment=decode_assignment(m.member_assignment) if consumer else None,
                    )
                    for m in found.members
                ],
                coordinator=broker,
            )

        return await self._on_coordinator(group, call)

    async def delete_groups(self, groups: Sequence[str]) -> dict[str, KafkaError | None]:
        """Per group: None when deleted, else its error (e.g. NON_EMPTY_GROUP)."""
        results = await asyncio.gather(*(self._delete_group(g) for g in groups))
        return dict(zip(groups, results, strict=True))

    async def _delete_group(self, group: str) -> KafkaError | None:
        async def call(conn: Connection, broker: Broker, deadline: float) -> KafkaError | None:
            _, resp = await conn.request(
                DELETE_GROUPS, {"groups_names": [group]}, self._left(deadline)
            )
            error = _error(resp.results[0].error_code, f"DeleteGroups for group {group!r}")
            if error is not None and error.code in COORDINATOR_ERRORS:
                raise error  # retried on the group's (new) coordinator
            return error

        return await self._on_coordinator(group, call)

    # offsets

    async def offset_fetch(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        """Every committed offset of the group."""

        async def call(
            conn: Connection, broker: Broker, deadline: float
        ) -> dict[TopicPartition, CommittedOffset]:
            body = {
                "group_id": group,  # v2-v7
                "topics": None,  # null: all topics
                "require_stable": False,
                "groups": [
                    {"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}
                ],
            }
            version, resp = await conn.request(OFFSET_FETCH, body, self._left(deadline))
            answer = resp.groups[0] if version >= 8 else resp  # v8+ batches groups
            context = f"OffsetFetch for group {group!r} on {broker.address}"
            if answer.error_code:
                raise KafkaError(answer.error_code, context)
            committed: dict[TopicPartition, CommittedOffset] = {}
            for topic in answer.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.name, int(p.partition_index))
                    if p.error_code:
                        raise KafkaError(p.error_code, f"{context}, partition {tp}")
                    if p.committed_offset >= 0:
                        committed[tp] = CommittedOffset(
                            int(p.committed_offset),
                            p.metadata,
                            int(getattr(p, "committed_leader_epoch", -1)),
                        )
            return committed

        return await self._on_coordinator(group, call)

    async def offset_commit(
        self, group: str, offsets: Mapping[TopicPartition, int], metadata: str = ""
    ) -> None:
        """Commit as an admin (generation -1, no member id): Kafka accepts that only while
        the group has no members."""

        async def call(conn: Connection, broker: Broker, deadline: float) -> None:
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for tp, offset in sorted(offsets.items()):
                by_topic.setdefault(tp.topic, []).append(
                    {
                        "partition_index": tp.partition,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": metadata,
                    }
                )
            body = {
                "group_id": group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            }
            _, resp = await conn.request(OFFSET_COMMIT, body, self._left(deadline))
            errors = [
                KafkaError(
                    p.error_code,
                    f"OffsetCommit for group {group!r}, partition {t.name}-{p.partition_index}",
                )
                for t in resp.topics
                for p in t.partitions
                if p.error_code
            ]
            # A coordinator error first, so the whole commit is retried (it is idempotent).
            errors.sort(key=lambda e: e.code not in COORDINATOR_ERRORS)
            if errors:
                raise errors[0]

        await self._on_coordinator(group, call)

    async def list_offsets(
        self, partitions: Iterable[TopicPartition], spec: int, *, skip_unknown: bool = False
    ) -> dict[TopicPartition, int]:
        """Per partition, asked of its leader: EARLIEST (log start), LATEST (log end, the
        high watermark), or for spec >= 0 the first offset whose timestamp is >= spec ms
        (-1 when no record is that new). Unknown topics or partitions raise
        UNKNOWN_TOPIC_OR_PARTITION, or are left out with `skip_unknown`."""
        wanted = sorted(set(partitions))

        async def once(deadline: float) -> dict[TopicPartition, int]:
            meta = await self.metadata(sorted({tp.topic for tp in wanted}), deadline)
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in wanted:
                topic = meta.topics.get(tp.topic)
                if topic is not None and topic.error_code not in (_NO_ERROR, _UNKNOWN_TOPIC):
                    raise KafkaError(topic.error_code, f"Metadata for {tp}")
                leader = None if topic is None else topic.leaders.get(tp.partition)
                if leader is None:  # no such topic or partition
                    if skip_unknown:
                        continue
                    raise KafkaError(_UNKNOWN_TOPIC, f"Metadata for {tp}")
                if leader not in meta.brokers:
                    raise KafkaError(_LEADER_NOT_AVAILABLE, f"Metadata for {tp}")
                by_leader.setdefault(leader, []).append(tp)
            answers = await asyncio.gather(
                *(
                    self._list_offsets_on(meta.brokers[leader], tps, spec, deadline)
                    for leader, tps in by_leader.items()
                )
            )
            return {tp: offset for answer in answers for tp, offset in answer.items()}

        return await self._retry(once, LEADER_ERRORS)

    async def _list_offsets_on(
        self, broker: Broker, partitions: list[TopicPartition], spec: int, deadline: float
    ) -> dict[TopicPartition, int]:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "timestamp": spec, "current_leader_epoch": -1}
            )
        body = {
            "replica_id": -1,
            "isolation_level": 0,  # read_uncommitted, as Kafka's AdminClient by default
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        conn = await self._connect(broker.host, broker.port, deadline)
        _, resp = await conn.request(LIST_OFFSETS, body, self._left(deadline))
        offsets: dict[TopicPartition, int] = {}
        for topic in resp.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, int(p.partition_index))
                if p.error_code:
                    raise KafkaError(p.error_code, f"ListOffsets for {tp} on {broker.address}")
                offsets[tp] = int(p.offset)
        return offsets


def _error(code: int, context: str) -> KafkaError | None:
    return None if code == _NO_ERROR else KafkaError(code, context)


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
