"""DescribeLogDirs (key 35), v0-v5: one log dir, named after the Redis URL (without
credentials), holding the partitions this sidecar leads (Metadata's replicas), each with
its size from Skiff's byte accounting (docs/architecture.md, "Byte accounting"),
offset_lag 0 and is_future_key false. As Kafka's ReplicaManager.describeLogDirs, every
hosted topic is listed and only the requested partitions (all with a null topic list)
carry entries. v4's total/usable bytes are Redis's maxmemory and maxmemory - used_memory,
or -1 when Redis has no maxmemory.
With tiered storage, a request for every topic (Topics null, as kafka-log-dirs and
AdminClient.describeLogDirs send) also gets a second log dir named after the object
store's URL: each partition of a topic with remote storage, sized by the bytes archived
there (`rbytes`), total and usable bytes -1. A request naming partitions (as
AdminClient.describeReplicaLogDirs sends, asking where each replica lives) gets the Redis
dir only: the Java client would take whichever dir came last in a hash map as the
replica's. Kafka itself reports only the local tier (KIP-1187 proposes the remote one).
Needs DESCRIBE on the cluster (else no log dirs and, v3+, CLUSTER_AUTHORIZATION_FAILED),
as in Kafka."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.protocol.primitives import Reader
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage import cluster_client
from sidecar.tiered.archiver import remote_enabled

API_KEY = 35
MIN_VERSION = 0
MAX_VERSION = 5  # v5 (KIP-1066): is_cordoned, never: Skiff has no cordoned dirs


def log_dir_name(description: str) -> str:
    """The Redis URL without user and password (an embedded Redis: its description)."""
    parts = urlsplit(description)
    if not parts.scheme or not parts.hostname:
        return description
    # The host list as written (a redis+cluster:// or Sentinel URL names several).
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


async def _capacity(broker: Broker) -> tuple[int, int]:
    redis = broker.store.redis
    if cluster_client.is_cluster(redis):
        # A Redis Cluster: the sum over its primaries (-1 if any has no maxmemory).
        found = await redis.info("memory", target_nodes=redis.get_primaries())
        infos = list(found.values()) if len(redis.get_primaries()) > 1 else [found]
    else:
        infos = [await redis.info("memory")]
    limits = [int(info.get("maxmemory", 0) or 0) for info in infos]
    if not limits or min(limits) <= 0:
        return -1, -1
    used = sum(int(info.get("used_memory", 0) or 0) for info in infos)
    return sum(limits), max(sum(limits) - used, 0)


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    store, cluster = broker.store, broker.cluster
    wanted: dict[str, set[int]] | None = None
    if request.body.topics is not None:
        wanted = {}
        for t in request.body.topics:
            wanted.setdefault(t.topic, set()).update(t.partitions)
    if not checks.cluster_allowed(broker, request, Operation.DESCRIBE):
        # Kafka: no log dirs, and (v3+) CLUSTER_AUTHORIZATION_FAILED.
        denied = {
            "throttle_time": 0,
            "error_code": checks.CLUSTER_AUTHORIZATION_FAILED,
            "results": [],
        }
        return encode_response(API_KEY, max(version, 1), denied)
    topics: list[dict[str, Any]] = []
    remote_topics: list[dict[str, Any]] = []
    # Not from memory: while Redis is unreachable the log dir is offline (unavailable.py).
    for info in await store.list_topics(fresh=True):
        hosted = [
            p
            for p, leader in enumerate(cluster.leaders(info.name, info.partitions))
            if leader == cluster.node_id
        ]
        if not hosted:
            continue
        asked = hosted if wanted is None else [p for p in hosted if p in wanted.get(info.name, ())]
        sizes = await store.partition_sizes(info.name, asked) if asked else []
        pairs = list(zip(asked, sizes, strict=False))
        topics.append({"name": info.name, "partitions": _entries((p, s.size) for p, s in pairs)})
        remote = [(p, s.remote_size) for p, s in pairs]
        if not remote_enabled(info):
            remote = [(p, size) for p, size in remote if size > 0]  # still being deleted
        if remote:
            remote_topics.append({"name": info.name, "partitions": _entries(remote)})
    result: dict[str, Any] = {
        "error_code": errors.NONE,
        "log_dir": log_dir_name(store.description),
        "topics": topics,
    }
    results = [result]
    if broker.remote is not None and wanted is None:
        tier = {"error_code": errors.NONE, "log_dir": log_dir_name(broker.remote.store.url)}
        results.append(tier | {"topics": remote_topics, "total_bytes": -1, "usable_bytes": -1})
    if version >= 4:
        result["total_bytes"], result["usable_bytes"] = await _capacity(broker)
    body = {"throttle_time": 0, "error_code": errors.NONE, "results": results}
    # v0 is v1 on the wire; kio has no v0 schema.
    return encode_response(API_KEY, max(version, 1), body)


def _entries(sizes: Iterable[tuple[int, int]]) -> list[dict[str, Any]]:
    return [
        {"partition_index": p, "partition_size": size, "offset_lag": 0, "is_future_key": False}
        for p, size in sizes
    ]


# -- v0: kio 0.6.5 has no schema for it ------------------------------------------------


@dataclass(frozen=True, slots=True)
class LegacyTopic:
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class LegacyDescribeLogDirsRequest:
    topics: tuple[LegacyTopic, ...] | None


def decode_v0(buf: bytes, pos: int) -> LegacyDescribeLogDirsRequest:
    r = Reader(buf, pos)
    count = r.i32()
    if count < 0:
        return LegacyDescribeLogDirsRequest(None)
    topics = []
    for _ in range(count):
        name = r.string()
        topics.append(LegacyTopic(name, tuple(r.i32() for _ in range(max(r.i32(), 0)))))
    return LegacyDescribeLogDirsRequest(tuple(topics))


DECODERS: dict[int, Callable[[bytes, int], Any]] = {0: decode_v0}
