"""An asyncio Kafka admin client on kio, for any Kafka broker: Skiff sidecars or Apache Kafka.

    async with AdminClient("127.0.0.1:9092") as admin:
        listed = await admin.list_groups()
        [group] = await admin.describe_groups(["g"])
        committed = await admin.offset_fetch("g")
        ends = await admin.list_offsets(committed, LATEST)

Group requests go to the group's coordinator (FindCoordinator); NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE and a coordinator that stops
answering are retried with a fresh FindCoordinator until the operation's deadline
(`timeout`). Partition requests go to the leader, retried likewise on leadership errors.
The wire format is in `wire`, one broker connection in `connection`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from sidecar.admin.connection import Connection
from sidecar.admin.wire import (
    CONFIG_SOURCES,
    CONTROLLER_ERRORS,
    COORDINATOR_ERRORS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_GROUPS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    GROUP_ID_NOT_FOUND,
    INCREMENTAL_ALTER_CONFIGS,
    LEADER_ERRORS,
    LEADER_NOT_AVAILABLE,
    LIST_GROUPS,
    LIST_OFFSETS,
    METADATA,
    NO_ERROR,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    RESOURCE_BROKER,
    UNKNOWN_TOPIC,
    AdminError,
    BrokerUnavailable,
    KafkaError,
    NoBrokerReachable,
    TopicPartition,
    canonical_state,
    decode_assignment,
    kafka_error,
    parse_bootstrap,
)
from sidecar.config.settings import HostPort

T = TypeVar("T")

CONNECT_TIMEOUT = 10.0  # seconds; an unanswering address must not use up the whole deadline


# -- results -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Broker:
    node_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return str(HostPort(self.host, self.port))


@dataclass(frozen=True)
class PartitionMetadata:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error_code: int = 0


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    error_code: int
    leaders: dict[int, int]  # partition -> leader node id
    topic_id: uuid.UUID | None = None
    internal: bool = False
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterMetadata:
    cluster_id: str | None
    brokers: dict[int, Broker]
    topics: dict[str, TopicMetadata]
    controller_id: int = -1


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
class ConfigEntry:
    name: str
    value: str | None
    source: str  # Kafka's ConfigSource name, e.g. DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG
    read_only: bool
    sensitive: bool
    synonyms: list[tuple[str, str | None, str]] = field(default_factory=list)
    documentation: str | None = None


@dataclass(frozen=True)
class CreatedTopic:
    name: str
    topic_id: uuid.UUID | None
    partitions: int
    replication_factor: int
    configs: list[ConfigEntry] | None  # CreateTopics v5+ answers them


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    metadata: str | None
    leader_epoch: int


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
                await conn.wait_closed()

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
                        _topic_id(getattr(t, "topic_id", None)),
                        bool(getattr(t, "is_internal", False)),
                        {
                            int(p.partition_index): PartitionMetadata(
                                int(p.partition_index),
                                int(p.leader_id),
                                tuple(int(r) for r in p.replica_nodes),
                                tuple(int(r) for r in p.isr_nodes),
                                int(p.error_code),
                            )
                            for p in t.partitions
                        },
                    )
                    for t in resp.topics
                    if t.name is not None
                },
                controller_id=int(getattr(resp, "controller_id", -1)),
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
            if found.error_code == GROUP_ID_NOT_FOUND:  # v6+ says so instead of "Dead"
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
            error = kafka_error(resp.results[0].error_code, f"DeleteGroups for group {group!r}")
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
                if topic is not None and topic.error_code not in (NO_ERROR, UNKNOWN_TOPIC):
                    raise KafkaError(topic.error_code, f"Metadata for {tp}")
                leader = None if topic is None else topic.leaders.get(tp.partition)
                if leader is None:  # no such topic or partition
                    if skip_unknown:
                        continue
                    raise KafkaError(UNKNOWN_TOPIC, f"Metadata for {tp}")
                if leader not in meta.brokers:
                    raise KafkaError(LEADER_NOT_AVAILABLE, f"Metadata for {tp}")
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

    # topics

    async def _on_controller(
        self, call: Callable[[Connection, float], Awaitable[T]], deadline: float | None = None
    ) -> T:
        """call(connection, deadline) on the controller Metadata names (any broker when it
        names none: KRaft brokers forward), again after NOT_CONTROLLER."""

        async def once(deadline: float) -> T:
            meta = await self.metadata([], deadline)
            broker = meta.brokers.get(meta.controller_id)
            if broker is None:
                conn = await self._any_broker(deadline)
            else:
                conn = await self._connect(broker.host, broker.port, deadline)
            return await call(conn, deadline)

        return await self._retry(once, CONTROLLER_ERRORS, deadline)

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        validate_only: bool = False,
    ) -> CreatedTopic:
        """CreateTopics for one topic (-1: the broker's defaults); raises its KafkaError
        (TOPIC_ALREADY_EXISTS, INVALID_CONFIG, ...) with the broker's message."""

        async def call(conn: Connection, deadline: float) -> CreatedTopic:
            body = {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": replication_factor,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                    }
                ],
                "timeout": int(self._left(deadline) * 1000),
                "validate_only": validate_only,
            }
            version, resp = await conn.request(CREATE_TOPICS, body, self._left(deadline))
            [t] = resp.topics
            if t.error_code:
                raise KafkaError(
                    t.error_code, f"CreateTopics for {name!r}", getattr(t, "error_message", None)
                )
            return CreatedTopic(
                name,
                _topic_id(getattr(t, "topic_id", None)),
                int(getattr(t, "num_partitions", partitions)),
                int(getattr(t, "replication_factor", replication_factor)),
                None
                if version < 5
                else [
                    ConfigEntry(
                        c.name,
                        c.value,
                        CONFIG_SOURCES.get(int(c.config_source), str(c.config_source)),
                        bool(c.read_only),
                        bool(c.is_sensitive),
                    )
                    for c in t.configs
                ],
            )

        return await self._on_controller(call)

    async def delete_topics(self, names: Sequence[str]) -> dict[str, KafkaError | None]:
        """Per topic: None when deleted, else its error (UNKNOWN_TOPIC_OR_PARTITION, ...)."""

        async def call(conn: Connection, deadline: float) -> dict[str, KafkaError | None]:
            body = {
                "topic_names": list(names),
                "topics": [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names],
                "timeout": int(self._left(deadline) * 1000),
            }
            _, resp = await conn.request(DELETE_TOPICS, body, self._left(deadline))
            out: dict[str, KafkaError | None] = {}
            for r in resp.responses:
                error = None
                if r.error_code:
                    error = KafkaError(
                        r.error_code,
                        f"DeleteTopics for {r.name!r}",
                        getattr(r, "error_message", None),
                    )
                    if error.code in CONTROLLER_ERRORS:
                        raise error
                out[r.name] = error
            return out

        return await self._on_controller(call)

    async def create_partitions(self, name: str, count: int, validate_only: bool = False) -> None:
        """Grow a topic to `count` partitions; raises INVALID_PARTITIONS and the like."""

        async def call(conn: Connection, deadline: float) -> None:
            body = {
                "topics": [{"name": name, "count": count, "assignments": None}],
                "timeout": int(self._left(deadline) * 1000),
                "validate_only": validate_only,
            }
            _, resp = await conn.request(CREATE_PARTITIONS, body, self._left(deadline))
            [r] = resp.results
            if r.error_code:
                raise KafkaError(r.error_code, f"CreatePartitions for {name!r}", r.error_message)

        await self._on_controller(call)

    async def describe_configs(
        self, resource_type: int, name: str, *, synonyms: bool = False, documentation: bool = False
    ) -> list[ConfigEntry]:
        """Every config of a topic (RESOURCE_TOPIC) or broker (RESOURCE_BROKER, name = its
        node id, asked of that broker)."""

        async def once(deadline: float) -> list[ConfigEntry]:
            if resource_type == RESOURCE_BROKER:
                meta = await self.metadata([], deadline)
                broker = meta.brokers.get(int(name))
                if broker is None:
                    raise AdminError(f"no broker with node id {name} in Metadata")
                conn = await self._connect(broker.host, broker.port, deadline)
            else:
                conn = await self._any_broker(deadline)
            body = {
                "resources": [
                    {
                        "resource_type": resource_type,
                        "resource_name": name,
                        "configuration_keys": None,
                    }
                ],
                "include_synonyms": synonyms,
                "include_documentation": documentation,
            }
            version, resp = await conn.request(DESCRIBE_CONFIGS, body, self._left(deadline))
            [r] = resp.results
            if r.error_code:
                raise KafkaError(r.error_code, f"DescribeConfigs for {name!r}", r.error_message)
            return sorted(
                (
                    ConfigEntry(
                        c.name,
                        c.value,
                        CONFIG_SOURCES.get(int(c.config_source), str(c.config_source)),
                        bool(c.read_only),
                        bool(c.is_sensitive),
                        [
                            (s.name, s.value, CONFIG_SOURCES.get(int(s.source), str(s.source)))
                            for s in getattr(c, "synonyms", ())
                        ],
                        getattr(c, "documentation", None),
                    )
                    for c in r.configs
                ),
                key=lambda e: e.name,
            )

        return await self._retry(once, frozenset(), None)

    async def alter_configs(
        self,
        resource_type: int,
        name: str,
        ops: Sequence[tuple[str, int, str | None]],
        validate_only: bool = False,
    ) -> None:
        """IncrementalAlterConfigs: (config name, OP_SET/OP_DELETE/OP_APPEND/OP_SUBTRACT,
        value) for one resource; raises INVALID_CONFIG and the like with the message."""

        async def call(conn: Connection, deadline: float) -> None:
            body = {
                "resources": [
                    {
                        "resource_type": resource_type,
                        "resource_name": name,
                        "configs": [
                            {"name": n, "config_operation": op, "value": v} for n, op, v in ops
                        ],
                    }
                ],
                "validate_only": validate_only,
            }
            _, resp = await conn.request(INCREMENTAL_ALTER_CONFIGS, body, self._left(deadline))
            [r] = resp.responses
            if r.error_code:
                raise KafkaError(
                    r.error_code, f"IncrementalAlterConfigs for {name!r}", r.error_message
                )

        await self._on_controller(call)

    async def delete_records(
        self, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | KafkaError]:
        """DeleteRecords on each partition's leader: records before the offset (-1: the
        high watermark) go. Per partition the new log start offset, or its error."""
        wanted = dict(offsets)

        async def once(deadline: float) -> dict[TopicPartition, int | KafkaError]:
            meta = await self.metadata(sorted({tp.topic for tp in wanted}), deadline)
            out: dict[TopicPartition, int | KafkaError] = {}
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in wanted:
                topic = meta.topics.get(tp.topic)
                leader = None if topic is None else topic.leaders.get(tp.partition)
                if leader is None:
                    out[tp] = KafkaError(UNKNOWN_TOPIC, f"Metadata for {tp}")
                elif leader not in meta.brokers:
                    raise KafkaError(LEADER_NOT_AVAILABLE, f"Metadata for {tp}")
                else:
                    by_leader.setdefault(leader, []).append(tp)
            answers = await asyncio.gather(
                *(
                    self._delete_records_on(meta.brokers[leader], tps, wanted, deadline)
                    for leader, tps in by_leader.items()
                )
            )
            for answer in answers:
                out.update(answer)
            retry = [
                e for e in out.values() if isinstance(e, KafkaError) and e.code in LEADER_ERRORS
            ]
            if retry:
                raise retry[0]
            return out

        return await self._retry(once, LEADER_ERRORS)

    async def _delete_records_on(
        self,
        broker: Broker,
        partitions: list[TopicPartition],
        offsets: Mapping[TopicPartition, int],
        deadline: float,
    ) -> dict[TopicPartition, int | KafkaError]:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "offset": offsets[tp]}
            )
        body = {
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            "timeout": int(self._left(deadline) * 1000),
        }
        conn = await self._connect(broker.host, broker.port, deadline)
        _, resp = await conn.request(DELETE_RECORDS, body, self._left(deadline))
        out: dict[TopicPartition, int | KafkaError] = {}
        for topic in resp.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, int(p.partition_index))
                out[tp] = (
                    KafkaError(p.error_code, f"DeleteRecords for {tp} on {broker.address}")
                    if p.error_code
                    else int(p.low_watermark)
                )
        return out


def _topic_id(value: uuid.UUID | None) -> uuid.UUID | None:
    return None if value is None or value.int == 0 else value
