"""Prometheus metrics, in Skiff's own CollectorRegistry (nothing from the client
library's global registry leaks in).

Counters and histograms are updated on the request path (requests.py,
redis_calls.py) through cached label children: one dict lookup and one locked add
each. Gauges that describe the present (open connections, long-poll waiters, Redis
fault counters, UDP ingest counters) are read at scrape time by LiveCollector, and
the Redis-side figures (high watermarks, committed offsets, lag) are read from
Redis by the /metrics handler just before it renders (redis_snapshot)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from sidecar.storage import keys
from sidecar.storage.fault_stats import STATS as REDIS_FAULTS

log = logging.getLogger("skiff.metrics")

REGISTRY = CollectorRegistry(auto_describe=False)

REQUEST_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
REDIS_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
)  # fmt: skip

REQUESTS = Counter(
    "skiff_requests", "Kafka requests handled", ["api", "version"], registry=REGISTRY
)
REQUEST_ERRORS = Counter(
    "skiff_request_errors",
    "Kafka error codes answered, one per partition/group/topic entry as Kafka's "
    "ErrorsPerSec counts them; error=CONNECTION_CLOSED for a request that closed the "
    "connection (undecodable, unsupported version, internal error)",
    ["api", "version", "error"],
    registry=REGISTRY,
)
REQUEST_SECONDS = Histogram(
    "skiff_request_duration_seconds",
    "Time from a request's decoding to its response (long-poll waits included)",
    ["api"],
    buckets=REQUEST_BUCKETS,
    registry=REGISTRY,
)
BYTES_IN = Counter(
    "skiff_topic_bytes_in",
    "Record batch bytes appended by Produce (as sent by the producer)",
    ["topic"],
    registry=REGISTRY,
)
RECORDS_IN = Counter(
    "skiff_topic_records_in",
    "Records appended by Produce (a deduplicated resend counts once)",
    ["topic"],
    registry=REGISTRY,
)
BYTES_OUT = Counter(
    "skiff_topic_bytes_out",
    "Record batch bytes returned by Fetch",
    ["topic"],
    registry=REGISTRY,
)
RECORDS_OUT = Counter(
    "skiff_topic_records_out", "Records returned by Fetch", ["topic"], registry=REGISTRY
)
REDIS_SECONDS = Histogram(
    "skiff_redis_round_trip_seconds",
    "Redis round trips by operation (a command, EVALSHA <script>, MULTI/EXEC or PIPELINE)",
    ["operation"],
    buckets=REDIS_BUCKETS,
    registry=REGISTRY,
)

# Listener limits (sidecar/server_limits.py) and the auto-creation budget (broker.py).
CONNECTIONS_REJECTED = Counter(
    "skiff_connections_rejected",
    "Connections closed on accept because a limit was reached "
    "(limit=max.connections or max.connections.per.ip; connection_creation_rate: "
    "closed once its throttle time has passed)",
    ["limit"],
    registry=REGISTRY,
)
CONNECTIONS_EXPIRED = Counter(
    "skiff_connections_expired",
    "Connections closed by a deadline (limit=connections.max.idle.ms or partial.frame.timeout.ms)",
    ["limit"],
    registry=REGISTRY,
)
REQUEST_FRAMES_REFUSED = Counter(
    "skiff_request_frames_refused",
    "Request frames whose size is outside 0..socket.request.max.bytes (connection closed)",
    ["limit"],
    registry=REGISTRY,
)
REQUEST_READS_PAUSED = Counter(
    "skiff_request_reads_paused",
    "Times a connection stopped reading because queued.max.request.bytes was reached",
    registry=REGISTRY,
)
QUEUED_REQUEST_BYTES = Gauge(
    "skiff_queued_request_bytes",
    "Bytes of requests read or being read and not yet answered (queued.max.request.bytes "
    "bounds it)",
    registry=REGISTRY,
)
TOPICS_AUTO_CREATE_REFUSED = Counter(
    "skiff_topic_auto_create_refused",
    "Unknown topics not auto-created because --auto-create-topics-per-minute was reached",
    registry=REGISTRY,
)


class _Children:
    """Label children by key, created once (labels() costs a lock and a tuple build)."""

    def __init__(self, make: Callable[[Any], Any]) -> None:
        self._make = make
        self._cache: dict[Any, Any] = {}

    def __getitem__(self, key: Any) -> Any:
        child = self._cache.get(key)
        if child is None:
            child = self._cache[key] = self._make(key)
        return child


requests_by_api = _Children(lambda k: REQUESTS.labels(k[0], str(k[1])))
errors_by_api = _Children(lambda k: REQUEST_ERRORS.labels(k[0], str(k[1]), k[2]))
seconds_by_api = _Children(lambda api: REQUEST_SECONDS.labels(api))
bytes_in = _Children(lambda topic: BYTES_IN.labels(topic))
records_in = _Children(lambda topic: RECORDS_IN.labels(topic))
bytes_out = _Children(lambda topic: BYTES_OUT.labels(topic))
records_out = _Children(lambda topic: RECORDS_OUT.labels(topic))
redis_seconds = _Children(lambda op: REDIS_SECONDS.labels(op))
connections_rejected = _Children(lambda limit: CONNECTIONS_REJECTED.labels(limit))
connections_expired = _Children(lambda limit: CONNECTIONS_EXPIRED.labels(limit))


# -- read at scrape time ------------------------------------------------------------

# Bounds of the Redis reads one scrape makes (a scrape must stay cheap whatever the
# cluster holds): high watermarks of at most this many partitions (in the order the
# topic registry scans), committed offsets of at most this many groups.
MAX_SCRAPE_PARTITIONS = 2000
MAX_SCRAPE_GROUPS = 200
MAX_SCRAPE_OFFSETS = 5000


@dataclass(slots=True)
class RedisSnapshot:
    ok: bool = False
    error: str = ""
    watermarks: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)  # hw, lso
    committed: dict[tuple[str, str, int], int] = field(default_factory=dict)
    truncated: bool = False
    # Tiered storage: bytes in the object store, of partitions that have archived any.
    remote_bytes: dict[tuple[str, int], int] = field(default_factory=dict)


async def redis_snapshot(redis: Any) -> RedisSnapshot:
    """High watermarks and committed offsets, within the MAX_SCRAPE_* bounds."""
    import json

    from sidecar.storage.group_store import CommittedOffset, split_field

    snap = RedisSnapshot()
    partitions: list[tuple[str, int]] = []
    async for name, raw in redis.hscan_iter(keys.TOPICS, count=200):
        count = int(json.loads(raw)["partitions"])
        topic = name.decode(errors="surrogateescape")
        partitions += [(topic, p) for p in range(count)]
        if len(partitions) >= MAX_SCRAPE_PARTITIONS:
            snap.truncated = True
            del partitions[MAX_SCRAPE_PARTITIONS:]
            break
    groups: list[str] = []
    async for member in redis.sscan_iter(keys.GROUPS, count=200):
        groups.append(member.decode(errors="surrogateescape"))
        if len(groups) >= MAX_SCRAPE_GROUPS:
            snap.truncated = True
            break
    async with redis.pipeline(transaction=False) as pipe:
        for topic, p in partitions:
            pipe.hmget(keys.partition_keys(topic, p)[1], "hw", "lso", "rbytes")
        for group in groups:
            pipe.hgetall(keys.group_keys(group)[2])
        replies = await pipe.execute()
    for (topic, p), (hw, lso, remote) in zip(partitions, replies[: len(partitions)], strict=True):
        if hw is not None:
            snap.watermarks[(topic, p)] = (int(hw), int(lso or 0))
        if remote is not None:
            snap.remote_bytes[(topic, p)] = int(remote)
    for group, offsets in zip(groups, replies[len(partitions) :], strict=True):
        for raw_field, value in offsets.items():
            if len(snap.committed) >= MAX_SCRAPE_OFFSETS:
                snap.truncated = True
                break
            try:
                topic, p = split_field(raw_field)
                snap.committed[(group, topic, p)] = CommittedOffset.decode(value).offset
            except ValueError:
                continue
    snap.ok = True
    return snap


def _udp_stats() -> Any:
    """UDP ingest's STATS (sidecar/udp_ingest.py), when that module is present."""
    try:
        from sidecar import udp_ingest  # type: ignore[attr-defined]
    except ImportError:
        return None
    return getattr(udp_ingest, "STATS", None)


class LiveCollector(Collector):
    """Gauges of the running sidecar, read when Prometheus scrapes."""

    def __init__(
        self, connections: Callable[[], int], waiters: Callable[[], int], identity: Any = None
    ) -> None:
        self.connections = connections
        self.waiters = waiters
        self.identity = identity  # storage/identity.py's StorageIdentity
        self.snapshot: RedisSnapshot | None = None  # set by /metrics before rendering

    def collect(self) -> Iterator[Any]:
        yield _gauge("skiff_open_connections", "Open Kafka client connections", self.connections())
        yield _gauge(
            "skiff_longpoll_waiters", "Fetch requests waiting for data (long polls)", self.waiters()
        )
        yield from self._faults()
        yield from self._storage()
        yield from self._udp()
        if self.snapshot is not None:
            yield from self._redis(self.snapshot)

    def _faults(self) -> Iterable[Any]:
        faults = REDIS_FAULTS
        yield _gauge(
            "skiff_redis_reachable",
            "1 unless the last Redis call failed for a reason a retry may cure",
            1 if faults.reachable else 0,
        )
        errors = CounterMetricFamily(
            "skiff_redis_errors", "Redis call failures by reason", labels=["reason"]
        )
        for reason, n in sorted(faults.errors.items()):
            errors.add_metric([reason], n)
        yield errors
        retries = CounterMetricFamily(
            "skiff_redis_retries", "Redis calls retried, by the reason", labels=["reason"]
        )
        for reason, n in sorted(faults.retries.items()):
            retries.add_metric([reason], n)
        yield retries

    def _storage(self) -> Iterable[Any]:
        if self.identity is None:
            return
        yield _gauge(
            "skiff_storage_lost",
            "1 while Redis has lost the data this sidecar served (storage identity); "
            "`skiff storage reset --fresh` decides",
            1 if self.identity.lost is not None else 0,
        )
        refused = CounterMetricFamily(
            "skiff_storage_lost_refused_requests",
            "Requests answered with retriable errors because the storage was lost",
        )
        refused.add_metric([], self.identity.refused)
        yield refused

    def _udp(self) -> Iterable[Any]:
        stats = _udp_stats()
        if stats is None or not dataclasses.is_dataclass(stats):
            return
        family = CounterMetricFamily(
            "skiff_udp_ingest", "UDP ingest counters (sidecar/udp_ingest.py)", labels=["counter"]
        )
        for f in dataclasses.fields(stats):
            value = getattr(stats, f.name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                family.add_metric([f.name], value)
        yield family

    def _redis(self, snap: RedisSnapshot) -> Iterable[Any]:
        yield _gauge(
            "skiff_scrape_redis_ok", "1 when this scrape could read Redis", 1 if snap.ok else 0
        )
        yield _gauge(
            "skiff_scrape_truncated",
            f"1 when this scrape hit its bounds (at most {MAX_SCRAPE_PARTITIONS} partitions, "
            f"{MAX_SCRAPE_GROUPS} groups, {MAX_SCRAPE_OFFSETS} committed offsets)",
            1 if snap.truncated else 0,
        )
        if not snap.ok:
            return
        hw = GaugeMetricFamily(
            "skiff_partition_high_watermark",
            "High watermark (next offset) of a partition",
            labels=["topic", "partition"],
        )
        lso = GaugeMetricFamily(
            "skiff_partition_log_start_offset",
            "Log start offset of a partition",
            labels=["topic", "partition"],
        )
        for (topic, p), (high, start) in snap.watermarks.items():
            hw.add_metric([topic, str(p)], high)
            lso.add_metric([topic, str(p)], start)
        yield hw
        yield lso
        remote = GaugeMetricFamily(
            "skiff_partition_remote_bytes",
            "Tiered storage: bytes of a partition's archived segments in the object store",
            labels=["topic", "partition"],
        )
        for (topic, p), size in snap.remote_bytes.items():
            remote.add_metric([topic, str(p)], size)
        yield remote
        committed = GaugeMetricFamily(
            "skiff_group_committed_offset",
            "Committed offset of a consumer group on a partition",
            labels=["group", "topic", "partition"],
        )
        lag = GaugeMetricFamily(
            "skiff_group_lag",
            "High watermark minus committed offset (partitions whose watermark this scrape read)",
            labels=["group", "topic", "partition"],
        )
        for (group, topic, p), offset in snap.committed.items():
            committed.add_metric([group, topic, str(p)], offset)
            marks = snap.watermarks.get((topic, p))
            if marks is not None:
                lag.add_metric([group, topic, str(p)], max(marks[0] - offset, 0))
        yield committed
        yield lag


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)
