"""Queue groups: records handed out one by one under leases, on Redis consumer groups.

How to call it (HTTP API in sidecar/queues/http_api.py, Kafka share groups):

    queues = queue_store(broker)                   # the sidecar's QueueStore (shared cache)
    cfg = await queues.configure("g", lock_ms=30_000, delivery_limit=5,
                                 dead_letter_topic="g.dlq", auto_offset_reset="earliest")
    cfg = await queues.config("g", create=True)    # share groups: created on first use
    await queues.exists("g")                       # is "g" a queue group (cached 1 s)
    got = await queues.acquire("g", holder, "orders", 0, max_records=100,
                               max_bytes=None)     # list[Acquired], leased to holder
    done = await queues.settle("g", holder, "orders", 0, [r.offset for r in got],
                               Action.ACCEPT)      # Settled: {offset: None | RecordError},
                                                   # .now_ms (renewed leases end +lock_ms)
    await queues.release_holder("g", holder)        # a member left: its records go back
    desc = await queues.describe("g")               # QueueDescription (.partitions)
    await queues.committed("g", "orders", 0)        # lowest unfinished offset, -1: none
    await queues.reset("g", "orders", 0, 0)          # or "earliest" / "latest"
    queues.wake_channels("orders", [0])             # for broker.wakeups.register(...):
                                                   # appends and releases publish there

Action: ACCEPT, RELEASE, REJECT, RENEW. Acquired: topic, partition, offset,
delivery_count, lease_deadline_ms (Redis time), timestamp, key, value, headers.
`holder` is any string not starting with '~' (an HTTP worker id, a share member id).
Whole-request problems raise QueueError(code, message) (codes: GROUP_NOT_FOUND,
UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG, INVALID_GROUP_ID, GROUP_ID_CONFLICT,
STORAGE_ERROR); Redis outages raise the store's RedisUnavailable / StoreError;
per-record problems of settle() are RecordError values (NOT_PENDING, OTHER_HOLDER,
LEASE_EXPIRED) and change nothing for that record.

Redis data model (docs/architecture.md, "Queue groups"): per partition the consumer
group `q:<group>` on `skiff:{t/p}:log`; its pending entries list is the lease table
(consumer = lease holder, idle time = lease age, delivery count = deliveries).
Released records belong to the consumer `~released` with an idle time near the epoch
(expired for every lock duration); records at the delivery limit pass through a
`~dead:<token>` holder while they are copied to the dead-letter topic, so a sidecar
dying in between leaves them to be found again. The due hint
`skiff:{t/p}:q:<group>:due` (lease start times) lets an acquire skip the O(pending)
expiry scan while no lease can have ended. Group config is the hash
`skiff:{q/<group>}:config`, its topics the set `skiff:{q/<group>}:topics`, and every
queue group is in the set `skiff:queues`. Every script touches one slot.

On `batch` topics (a stream entry is a whole batch) the per-record state is
lua/queue_inflight.lua's instead: the consumer group's last-delivered id is only the
cursor, leases are `skiff:{t/p}:q:<group>:lease` (offset -> lease start) and
`...:rec` (offset -> "count:holder"), with the same rules and answers.
"""

from __future__ import annotations

import enum
import logging
import re
import reprlib
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import ResponseError

from sidecar.config.topic import effective_config
from sidecar.groups.group_configs import BY_DURATION, duration_ms, valid_auto_offset_reset
from sidecar.protocol import stored_batch
from sidecar.protocol.record_batch import (
    FLAG_KEY_NULL,
    FLAG_VALUE_NULL,
    decode_headers,
    encode_headers,
    is_control_entry,
    record_in_aborted,
)
from sidecar.queues import metrics
from sidecar.storage import keys, scripts
from sidecar.storage.store import RedisStore, StoreError
from sidecar.tiered.remote_log import RemoteLog, RemoteReadError
from sidecar.validation.topic_names import invalid_name_reason

log = logging.getLogger(__name__)

QUEUES = keys.QUEUES  # set: every queue group id
CONFIG_CACHE_S = 1.0
DEFAULT_LOCK_MS = 30_000  # Kafka's share.record.lock.duration.ms
DEFAULT_DELIVERY_LIMIT = 5  # Kafka's share.delivery.count.limit
DEFAULT_MAX_RECORD_LOCKS = 2000  # Kafka's group.share.partition.max.record.locks
# A reservation's lifetime: from lua/queue_reserve.lua to the XREADGROUP that uses it (one
# round trip); it only matters when a sidecar dies in between.
RESERVATION_MS = 10_000
MAX_LOCK_MS = 3_600_000
MAX_DELIVERY_LIMIT = 1_000
DESCRIBE_SCAN = 10_000  # pending entries looked at per partition by describe()
DECODED_BATCHES = 16  # `batch` topics: expanded batches kept for the next acquires
RELEASED = "~released"
REASON_LIMIT = "delivery limit"
REASON_REJECTED = "rejected"
REJECT_MARK = 1_000_000  # added to a rejected record's count until its copy is made
# Stream entries: fields t, k, v, h, f in this order (docs/architecture.md, "Stream
# entries"); XRANGE and XREADGROUP replies stay flat lists (store.py), values at:
T, K, V, H, F = 1, 3, 5, 7, 9
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
GROUP_ID = re.compile(r"^[^\x00-\x1f]{1,249}$")  # Kafka group ids are any string


class Action(enum.Enum):
    ACCEPT = "accept"  # finished: XACK
    RELEASE = "release"  # available again at once, delivery count unchanged
    REJECT = "reject"  # finished unprocessed; copied to the dead-letter topic if any
    RENEW = "renew"  # the lease starts again


class RecordError(enum.Enum):
    NOT_PENDING = "RECORD_NOT_PENDING"  # never handed out, finished, or reset
    OTHER_HOLDER = "RECORD_HELD_BY_OTHER"  # pending under another holder (or released)
    LEASE_EXPIRED = "LEASE_EXPIRED"  # yours, but the lock duration has passed

    @property
    def message(self) -> str:
        return {
            "RECORD_NOT_PENDING": "the record is not pending: never read in this group, "
            "already finished, or the group was reset",
            "RECORD_HELD_BY_OTHER": "the record is not leased to this worker (another "
            "worker holds it, or it was cancelled)",
            "LEASE_EXPIRED": "the lease on the record expired; it may be handed to "
            "another worker: read it again",
        }[self.value]


_CODES = {1: RecordError.NOT_PENDING, 2: RecordError.OTHER_HOLDER, 3: RecordError.LEASE_EXPIRED}


class QueueError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class QueueConfig:
    group: str
    lock_ms: int = DEFAULT_LOCK_MS
    delivery_limit: int = DEFAULT_DELIVERY_LIMIT
    dead_letter_topic: str | None = None
    auto_offset_reset: str = "latest"
    # Kafka's share.isolation.level: read_committed hands out committed records only,
    # up to the last stable offset; records of aborted transactions are finished.
    isolation_level: str = "read_uncommitted"

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"

    def as_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "lock_ms": self.lock_ms,
            "delivery_limit": self.delivery_limit,
            "dead_letter_topic": self.dead_letter_topic,
            "auto_offset_reset": self.auto_offset_reset,
            "isolation_level": self.isolation_level,
        }


@dataclass(slots=True)
class Acquired:
    """One record handed out under a lease."""

    topic: str
    partition: int
    offset: int
    delivery_count: int  # 1 on the first delivery
    lease_deadline_ms: int  # Redis TIME + lock ms
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class Settled(dict[int, RecordError | None]):
    """settle()'s answer: offset -> None (done) or the RecordError; .now_ms is Redis
    time when it ran (a renewed lease ends at now_ms + lock_ms)."""

    now_ms: int = 0


@dataclass(slots=True)
class PartitionState:
    topic: str
    partition: int
    high_watermark: int
    log_start_offset: int
    next_offset: int  # the next record never handed out
    pending: int  # handed out and not finished (leased, expired or released)
    committed: int  # lowest unfinished offset
    available: int  # pending records whose lease expired or that were released
    oldest_lease_ms: int  # age of the longest-held current lease
    delivery_counts: dict[int, int]  # delivery count -> records pending with it
    holders: dict[str, int]  # holder -> records pending under it

    @property
    def lag(self) -> int:
        """Records not finished: from the lowest unfinished offset to the end."""
        return max(self.high_watermark - self.committed, 0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "high_watermark": self.high_watermark,
            "log_start_offset": self.log_start_offset,
            "next_offset": self.next_offset,
            "committed_offset": self.committed,
            "lag": self.lag,
            "pending": self.pending,
            "available_pending": self.available,
            "oldest_lease_ms": self.oldest_lease_ms,
            "delivery_counts": {str(k): v for k, v in sorted(self.delivery_counts.items())},
            "holders": dict(sorted(self.holders.items())),
        }


@dataclass(slots=True)
class QueueDescription:
    config: QueueConfig
    partitions: list[PartitionState] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.config.as_dict(),
            "pending": sum(p.pending for p in self.partitions),
            "lag": sum(p.lag for p in self.partitions),
            "partitions": [p.as_dict() for p in self.partitions],
        }


def consumer_group(group: str) -> str:
    return f"q:{group}"


def config_key(group: str) -> str:
    return f"skiff:{{q/{group}}}:config"


def topics_key(group: str) -> str:
    return keys.queue_topics_key(group)


def due_key(group: str, topic: str, partition: int) -> str:
    """The group's due hint on a partition (lua/queue_acquire.lua)."""
    return keys.queue_partition_keys(group, topic, partition)[0]


def reservation_key(group: str, topic: str, partition: int) -> str:
    """`record` topics: room reserved under the cap on records in flight (lua/queue_reserve.lua)."""
    return keys.queue_partition_keys(group, topic, partition)[3]


def lease_key(group: str, topic: str, partition: int) -> str:
    """`batch` topics: the group's lease starts per in-flight offset (lua/queue_inflight.lua)."""
    return keys.queue_partition_keys(group, topic, partition)[1]


def records_key(group: str, topic: str, partition: int) -> str:
    """`batch` topics: the group's delivery count and holder per in-flight offset."""
    return keys.queue_partition_keys(group, topic, partition)[2]


def inflight_keys(group: str, topic: str, partition: int) -> list[str]:
    log_key, meta, _, _ = keys.partition_keys(topic, partition)
    return [log_key, meta, lease_key(group, topic, partition), records_key(group, topic, partition)]


def hint_ttl_ms(cfg: QueueConfig) -> int:
    return 2 * cfg.lock_ms + 60_000


def check_group_id(group: str) -> None:
    if not GROUP_ID.match(group):
        raise QueueError(
            "INVALID_GROUP_ID",
            f"queue group ids are 1-249 characters without control characters, got {group!r}",
        )


def check_holder(holder: str) -> None:
    if not holder or holder.startswith("~") or len(holder) > 255:
        raise QueueError(
            "INVALID_WORKER", f"worker ids are 1-255 characters not starting with '~': {holder!r}"
        )


def _parse_config(
    group: str,
    raw: dict[bytes, bytes],
    lock_ms: int = DEFAULT_LOCK_MS,
    delivery_limit: int = DEFAULT_DELIVERY_LIMIT,
) -> QueueConfig:
    """A group's config hash; what it does not set takes the server defaults given."""
    get = {k.decode(): v.decode() for k, v in raw.items()}
    return QueueConfig(
        group,
        int(get.get("lock_ms", lock_ms)),
        int(get.get("delivery_limit", delivery_limit)),
        get.get("dead_letter_topic") or None,
        get.get("auto_offset_reset", "latest"),
        get.get("isolation_level", "read_uncommitted"),
    )


def validate_config(changes: dict[str, Any]) -> dict[str, Any]:
    """Checked config fields as stored (strings); raises QueueError INVALID_CONFIG."""
    out: dict[str, Any] = {}
    for name, value in changes.items():
        if value is None and name != "dead_letter_topic":
            continue
        if name == "lock_ms":
            if type(value) is not int or not 1 <= value <= MAX_LOCK_MS:
                raise QueueError(
                    "INVALID_CONFIG", f"lock_ms must be 1..{MAX_LOCK_MS}: {reprlib.repr(value)}"
                )
        elif name == "delivery_limit":
            if type(value) is not int or not 1 <= value <= MAX_DELIVERY_LIMIT:
                raise QueueError(
                    "INVALID_CONFIG",
                    f"delivery_limit must be 1..{MAX_DELIVERY_LIMIT}: {reprlib.repr(value)}",
                )
        elif name == "auto_offset_reset":
            if not isinstance(value, str) or not valid_auto_offset_reset(value):
                raise QueueError(
                    "INVALID_CONFIG",
                    "auto_offset_reset is earliest, latest or by_duration:<ISO-8601 duration>: "
                    f"{reprlib.repr(value)}",
                )
        elif name == "isolation_level":
            if value not in ISOLATION_LEVELS:
                raise QueueError(
                    "INVALID_CONFIG",
                    f"isolation_level is read_committed or read_uncommitted: {reprlib.repr(value)}",
                )
        elif name == "dead_letter_topic":
            if value is not None and (not isinstance(value, str) or not value):
                raise QueueError("INVALID_CONFIG", f"dead_letter_topic: {reprlib.repr(value)}")
            reason = value and invalid_name_reason(value)
            if reason:  # the group would create it: Kafka's rules, as for any topic
                raise QueueError("INVALID_CONFIG", f"dead_letter_topic: {reason}")
            value = value or ""
        else:
            raise QueueError("INVALID_CONFIG", f"unknown queue group setting {reprlib.repr(name)}")
        out[name] = value
    return out


class QueueStore:
    """The queue core: every piece of state is in Redis; this object only caches the
    group configs (CONFIG_CACHE_S) and which consumer groups it has seen exist."""

    def __init__(
        self,
        store: RedisStore,
        dead_letter_partitions: int = 1,
        lock_ms: int = DEFAULT_LOCK_MS,
        delivery_limit: int = DEFAULT_DELIVERY_LIMIT,
        max_record_locks: int = DEFAULT_MAX_RECORD_LOCKS,
    ) -> None:
        self.store = store
        # Server defaults (group.share.record.lock.duration.ms, ...delivery.count.limit)
        # of groups that do not set their own.
        self.default_lock_ms = lock_ms
        self.default_delivery_limit = delivery_limit
        # group.share.partition.max.record.locks: the most records of one partition a
        # group has handed out and not finished; new ones wait for room.
        self.max_record_locks = max_record_locks
        self.redis = store.redis
        self.dead_letter_partitions = dead_letter_partitions  # a new dead-letter topic's
        self.dead_holder = f"~dead:{secrets.token_hex(6)}"
        self._configs: dict[str, tuple[float, QueueConfig | None]] = {}
        self._ready: set[tuple[str, str, int]] = set()  # consumer groups known to exist
        self._topics_seen: set[tuple[str, str]] = set()
        # A producer's batch may hold thousands of records and acquires take a few
        # hundred at a time: each batch is expanded once, not once per acquire. Keyed
        # by the entry and its CRC, so a rewritten entry is expanded again.
        self._decoded: OrderedDict[tuple[Any, ...], list[Any]] = OrderedDict()
        # Tiered storage: where archived batches are read from (the broker's RemoteLog).
        self.remote: RemoteLog | None = None

    # -- groups -----------------------------------------------------------------

    async def config(self, group: str, create: bool = False) -> QueueConfig:
        """The group's config (cached briefly). Unknown: GROUP_NOT_FOUND, or created
        with the defaults when `create`."""
        now = time.monotonic()
        cached = self._configs.get(group)
        if cached and cached[1] is not None and now - cached[0] < CONFIG_CACHE_S:
            return cached[1]
        raw = await self.redis.hgetall(config_key(group))
        if not raw:
            if not create:
                self._configs[group] = (now, None)
                raise QueueError("GROUP_NOT_FOUND", f"queue group {group!r} does not exist")
            return await self.configure(group)
        cfg = _parse_config(group, raw, self.default_lock_ms, self.default_delivery_limit)
        self._configs[group] = (now, cfg)
        return cfg

    async def exists(self, group: str) -> bool:
        """Whether `group` is a queue group (cached like config())."""
        cached = self._configs.get(group)
        if cached and time.monotonic() - cached[0] < CONFIG_CACHE_S:
            return cached[1] is not None
        try:
            await self.config(group)
        except QueueError:
            return False
        return True

    async def configure(self, group: str, **changes: Any) -> QueueConfig:
        """Create the group (defaults for what is not given) or change its settings:
        lock_ms, delivery_limit, dead_letter_topic (None/"" for none),
        auto_offset_reset (where partitions the group has not read yet start),
        isolation_level (read_uncommitted, read_committed)."""
        check_group_id(group)
        fields = validate_config(changes)
        if await self.redis.sismember(keys.GROUPS, group):
            raise QueueError(
                "GROUP_ID_CONFLICT", f"{group!r} is a consumer group; pick another queue group id"
            )
        key = config_key(group)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hsetnx(key, "created_ms", int(time.time() * 1000))
            if fields:
                pipe.hset(key, mapping=fields)
            await pipe.execute()
        await self.redis.sadd(QUEUES, group)
        self._configs.pop(group, None)
        return await self.config(group)

    async def unset(self, group: str, *names: str) -> None:
        """Settings back to the server defaults (Kafka's DELETE of a group config)."""
        if names:
            await self.redis.hdel(config_key(group), *names)
        self._configs.pop(group, None)

    async def groups(self) -> list[str]:
        return sorted(m.decode() for m in await self.redis.smembers(QUEUES))

    async def delete(self, group: str) -> None:
        """Forget the group: its consumer groups on every partition and its config."""
        for topic, partition in await self._partitions(group):
            await self._drop_partition(group, topic, partition)
        await self.redis.delete(config_key(group), topics_key(group))
        await self.redis.srem(QUEUES, group)
        self._configs.pop(group, None)
        self._ready = {r for r in self._ready if r[0] != group}
        self._topics_seen = {t for t in self._topics_seen if t[0] != group}

    async def _drop_partition(self, group: str, topic: str, partition: int) -> None:
        """The group's consumer group, leases, records and due hint on one partition."""
        log_key = keys.partition_keys(topic, partition)[0]
        try:
            await self.redis.xgroup_destroy(log_key, consumer_group(group))
        except ResponseError:
            pass
        await self.redis.delete(
            due_key(group, topic, partition),
            lease_key(group, topic, partition),
            records_key(group, topic, partition),
        )

    async def forget_topic(self, group: str, topic: str) -> None:
        """Drop the group's state on every partition of `topic` (DeleteShareGroupOffsets):
        consuming it again starts at auto_offset_reset."""
        info = await self.store.get_topic(topic)
        for partition in range(info.partitions if info else 0):
            await self._drop_partition(group, topic, partition)
            self._ready.discard((group, topic, partition))
        await self.redis.srem(topics_key(group), topic)
        self._topics_seen.discard((group, topic))

    async def topics(self, group: str) -> list[str]:
        return sorted(m.decode() for m in await self.redis.smembers(topics_key(group)))

    async def _partitions(self, group: str) -> list[tuple[str, int]]:
        out = []
        for topic in await self.topics(group):
            info = await self.store.get_topic(topic)
            if info is not None:
                out += [(topic, p) for p in range(info.partitions)]
        return out

    async def _batches(self, topic: str) -> bool:
        """Whether the topic stores whole batches (then lua/queue_inflight.lua keeps the
        per-record state)."""
        info = await self.store.get_topic(topic)
        return info is not None and info.batch_format

    async def _ensure(self, group: str, cfg: QueueConfig, topic: str, partition: int) -> None:
        """The consumer group exists on the partition (created at auto_offset_reset)."""
        if (group, topic, partition) in self._ready:
            return
        if (group, topic) not in self._topics_seen:
            await self.redis.sadd(topics_key(group), topic)
            self._topics_seen.add((group, topic))
        start, offset = await self._start(cfg, topic, partition)
        await self._init(group, topic, partition, start, offset, "create")
        self._ready.add((group, topic, partition))

    async def _start(self, cfg: QueueConfig, topic: str, partition: int) -> tuple[str, int]:
        """Where a group starts on a partition it never read: auto_offset_reset, whose
        by_duration:<d> (Kafka's share.auto.offset.reset) is the first record at most
        <d> old, else the high watermark."""
        reset = cfg.auto_offset_reset
        if not reset.startswith(BY_DURATION):
            return reset, 0
        since = int(time.time() * 1000) - (duration_ms(reset[len(BY_DURATION) :]) or 0)
        try:
            offset, _ = await self.store.offset_for_time(topic, partition, since)
        except StoreError:
            return "latest", 0  # _init answers UNKNOWN_TOPIC_OR_PARTITION
        return ("latest", 0) if offset < 0 else ("offset", offset)

    async def _init(
        self, group: str, topic: str, partition: int, start: str, offset: int, mode: str
    ) -> int:
        log_key, meta, _, _ = keys.partition_keys(topic, partition)
        script_keys = [log_key, meta, due_key(group, topic, partition)]
        try:
            if await self._batches(topic):
                return int(
                    await scripts.QUEUE_INFLIGHT(
                        self.redis,
                        inflight_keys(group, topic, partition),
                        ["init", consumer_group(group), start, offset, mode],
                    )
                )
            return int(
                await scripts.QUEUE_INIT(
                    self.redis, script_keys, [consumer_group(group), start, offset, mode]
                )
            )
        except ResponseError as exc:
            raise _queue_error(exc, topic, partition) from None

    # -- records ------------------------------------------------------------------

    async def acquire(
        self,
        group: str,
        holder: str,
        topic: str,
        partition: int,
        max_records: int,
        max_bytes: int | None = None,
    ) -> list[Acquired]:
        """Up to max_records records leased to `holder`: expired or released ones first
        (records at the delivery limit are rejected on the way), then new ones. With
        max_bytes the records past it (at least one is kept) are handed back at once
        without counting a delivery."""
        cfg = await self.config(group)
        await self._ensure(group, cfg, topic, partition)
        try:
            got = await self._acquire(cfg, holder, topic, partition, max_records)
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise _queue_error(exc, topic, partition) from None
            # The stream or the consumer group went away (topic recreated, group deleted
            # and made again elsewhere): forget what this sidecar saw and start over.
            self._ready.discard((group, topic, partition))
            self._topics_seen.discard((group, topic))
            await self._ensure(group, cfg, topic, partition)
            got = await self._acquire(cfg, holder, topic, partition, max_records)
        metrics.count(group, "redelivered", sum(1 for r in got if r.delivery_count > 1))
        metrics.count(group, "delivered", sum(1 for r in got if r.delivery_count == 1))
        if max_bytes is not None and len(got) > 1:
            size, keep = 0, 0
            for rec in got:
                size += len(rec.key or b"") + len(rec.value or b"")
                if keep and size > max_bytes:
                    break
                keep += 1
            extra = got[keep:]
            if extra:
                await self._run_settle(
                    cfg, holder, topic, partition, [r.offset for r in extra], "unacquire"
                )
                got = got[:keep]
        return got

    async def _reclaim(
        self, cfg: QueueConfig, holder: str, topic: str, partition: int, max_records: int
    ) -> tuple[int, dict[int, int]]:
        """Expired and released records leased to `holder` again (Redis time, offset ->
        delivery count); those at the delivery limit and rejected ones dead-lettered."""
        group = cfg.group
        grp = consumer_group(group)
        log_key, meta, _, _ = keys.partition_keys(topic, partition)
        due = due_key(group, topic, partition)
        ttl = hint_ttl_ms(cfg)
        batches = await self._batches(topic)
        if batches:
            reply = await scripts.QUEUE_INFLIGHT(
                self.redis,
                inflight_keys(group, topic, partition),
                ["reclaim", grp, holder, cfg.lock_ms, cfg.delivery_limit, max_records]
                + [self.dead_holder],
            )
        else:
            reply = await scripts.QUEUE_ACQUIRE(
                self.redis,
                [log_key, meta, due],
                [grp, holder, cfg.lock_ms, cfg.delivery_limit, max_records, self.dead_holder, ttl],
            )
        now = int(reply[0])
        again: dict[int, int] = {}
        dead: list[tuple[int, int]] = []
        rejected: list[tuple[int, int]] = []
        for i in range(1, len(reply), 3):
            offset, count, kind = int(reply[i]), int(reply[i + 1]), int(reply[i + 2])
            if kind == 1:
                again[offset] = count
            else:
                (dead if kind == 2 else rejected).append((offset, count))
        if dead:
            metrics.count(group, "delivery_limit", len(dead))
            await self._dead_letter(cfg, topic, partition, dead, REASON_LIMIT, self.dead_holder)
        if rejected:
            await self._dead_letter(
                cfg, topic, partition, rejected, REASON_REJECTED, self.dead_holder
            )
        return now, again

    async def _acquire(
        self, cfg: QueueConfig, holder: str, topic: str, partition: int, max_records: int
    ) -> list[Acquired]:
        grp = consumer_group(cfg.group)
        log_key, meta, _, _ = keys.partition_keys(topic, partition)
        due = due_key(cfg.group, topic, partition)
        ttl = hint_ttl_ms(cfg)
        batches = await self._batches(topic)
        now, again = await self._reclaim(cfg, holder, topic, partition, max_records)
        out: list[Acquired] = []
        deadline = now + cfg.lock_ms
        if again:
            bodies = await self._bodies(topic, partition, list(again))
            gone = []
            for offset, count in again.items():
                fields = bodies.get(offset)
                if fields is None:
                    gone.append(offset)  # deleted meanwhile (compaction): finished
                    continue
                out.append(_acquired(topic, partition, offset, count, deadline, fields))
            if gone:
                await self._run_settle(cfg, holder, topic, partition, gone, "finish")
        left = max_records - len(out)
        if left <= 0:
            return out
        if batches:
            return out + await self._claim(cfg, holder, topic, partition, left)
        # Room under group.share.partition.max.record.locks, reserved in Redis
        # (lua/queue_reserve.lua) so fetches from any sidecar cannot overshoot it; the
        # records themselves are read outside Lua. NOGROUP: acquire() creates the
        # consumer group and retries.
        resv = reservation_key(cfg.group, topic, partition)
        token = secrets.token_hex(8)
        room = int(
            await scripts.QUEUE_RESERVE(
                self.redis,
                [log_key, resv, meta],
                [
                    grp,
                    token,
                    left,
                    self.max_record_locks,
                    RESERVATION_MS,
                    "1" if cfg.read_committed else "0",
                ],
            )
        )
        if room <= 0:
            return out
        delivered = scripts.QUEUE_DELIVERED
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hmget(meta, "lso", "ab")
            pipe.xreadgroup(grp, holder, {log_key: ">"}, count=room)
            pipe.time()
            # The new leases' due hint, in the same transaction (lua/queue_delivered.lua).
            pipe.evalsha(delivered.sha, 1, due, ttl)
            # What was read is pending now: the reservation has served.
            pipe.zrem(resv, f"{token}:{room}")
            lso_raw, streams, (secs, micros), hinted, _ = await pipe.execute(raise_on_error=False)
        if isinstance(lso_raw, Exception):
            raise lso_raw
        if isinstance(streams, Exception):
            raise streams  # NOGROUP: acquire() creates the consumer group and retries
        if isinstance(hinted, Exception):
            # NOSCRIPT (Redis lost its scripts): load it and note the leases now; a
            # later TIME only moves the hint later, which stays correct.
            await delivered.load(self.redis)
            await delivered(self.redis, [due], [ttl])
        lso = int(lso_raw[0] or 0)
        last_abort = int(lso_raw[1] or -1)
        deadline = secs * 1000 + micros // 1000 + cfg.lock_ms
        below = []
        # A map {stream: entries} in RESP3, a list of [stream, entries] in RESP2.
        replies = streams.items() if isinstance(streams, dict) else (streams or ())
        read = [entry for _, entries in replies for entry in entries]
        aborted: list[tuple[int, int, int]] = []
        if read:
            first, end = int(read[0][0][2:]) - 1, int(read[-1][0][2:])
            aborted = await self._aborted(cfg, topic, partition, first, end, last_abort)
        for entry_id, fields in read:
            offset = int(entry_id[2:]) - 1
            # Under the log start (not trimmed yet), a marker, or (read_committed) an
            # aborted transaction's record: no one is handed it.
            if (
                offset < lso
                or is_control_entry(fields)
                or (aborted and record_in_aborted(offset, fields, aborted))
            ):
                below.append(offset)
                continue
            out.append(_acquired(topic, partition, offset, 1, deadline, fields))
        if below:
            await self._run_settle(cfg, holder, topic, partition, below, "finish")
        return out

    async def _claim(
        self, cfg: QueueConfig, holder: str, topic: str, partition: int, left: int
    ) -> list[Acquired]:
        """`batch` topics: lease up to `left` new records (the cursor moves past them in
        lua/queue_inflight.lua), then read their bodies from the batches. Offsets
        without a record (compacted away) are finished and more are claimed."""
        skeys = inflight_keys(cfg.group, topic, partition)
        out: list[Acquired] = []
        skip: list[int] = []  # [the next record's offset, the cursor when it was seen]
        committed = "1" if cfg.read_committed else "0"
        while left > 0:
            reply = await scripts.QUEUE_INFLIGHT(
                self.redis,
                skeys,
                ["claim", consumer_group(cfg.group), holder, left, self.max_record_locks]
                + [committed, *skip],
            )
            now, _, first, end, last_abort = (int(v) for v in reply)
            if end <= first:
                break
            following: list[int] = []
            aborted = await self._aborted(cfg, topic, partition, first, end, last_abort)
            bodies = await self._batch_bodies(
                topic, partition, list(range(first, end)), following, aborted
            )
            # Compaction may have left whole batches out: the next claim starts at the
            # next record, not one gap offset after another.
            skip = [following[0], end] if following and following[0] > end else []
            deadline = now + cfg.lock_ms
            gone = []
            for offset in range(first, end):
                fields = bodies.get(offset)
                if fields is None:
                    gone.append(offset)
                    continue
                out.append(_acquired(topic, partition, offset, 1, deadline, fields))
            left -= len(bodies)
            if not gone:
                break
            await self._run_settle(cfg, holder, topic, partition, gone, "finish")
        return out

    async def _aborted(
        self, cfg: QueueConfig, topic: str, partition: int, first: int, end: int, last_abort: int
    ) -> list[tuple[int, int, int]]:
        """read_committed: the aborted transactions with data among the claimed offsets
        first..end-1 (none to look up when the last ABORT marker is below them)."""
        if not cfg.read_committed or last_abort < first:
            return []
        return await self.store.aborted_ranges(topic, partition, first, end)

    async def acquire_batches(
        self,
        group: str,
        holder: str,
        topic: str,
        partition: int,
        max_records: int,
        max_bytes: int,
    ) -> tuple[list[tuple[int, int]], list[bytes]]:
        """`batch` topics, as Kafka's share partitions acquire: whole stored batches.
        New records are claimed up to the end of the batch holding the max_records-th
        (max_records is a soft limit); the answer is the acquired (offset, delivery
        count)s and the stored batches holding them, on the wire as Fetch sends them,
        whole batches up to max_bytes (the first whatever its size). Records of batches
        past max_bytes are handed back without counting a delivery; claimed offsets no
        batch holds (compacted or trimmed away) are finished."""
        cfg = await self.config(group)
        await self._ensure(group, cfg, topic, partition)
        try:
            _, got = await self._reclaim(cfg, holder, topic, partition, max_records)
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise _queue_error(exc, topic, partition) from None
            self._ready.discard((group, topic, partition))
            self._topics_seen.discard((group, topic))
            await self._ensure(group, cfg, topic, partition)
            _, got = await self._reclaim(cfg, holder, topic, partition, max_records)
        skeys = inflight_keys(group, topic, partition)
        left = max_records - len(got)
        claim_args = ["claim", consumer_group(group), holder]
        cap = self.max_record_locks
        committed = "1" if cfg.read_committed else "0"
        aborted: list[tuple[int, int, int]] = []
        if left > 0:
            _, _, first, end, last_abort = (
                int(v)
                for v in await scripts.QUEUE_INFLIGHT(
                    self.redis, skeys, [*claim_args, left, cap, committed]
                )
            )
            if end > first:
                got.update((o, 1) for o in range(first, end))
                # The rest of the batch holding the last claimed record, when no one
                # claimed it meanwhile (the claim continues from the cursor).
                tail = await self._holding(topic, partition, end - 1)
                last = stored_batch.last_offset(tail[0][0]) if tail else end - 1
                if last >= end:
                    _, _, f2, e2, _ = (
                        int(v)
                        for v in await scripts.QUEUE_INFLIGHT(
                            self.redis, skeys, [*claim_args, last + 1 - end, cap, committed]
                        )
                    )
                    got.update((o, 1) for o in range(f2, e2))
                    end = max(end, e2)
                aborted = await self._aborted(cfg, topic, partition, first, end, last_abort)
        if not got:
            return [], []
        entries = await self._batch_entries(topic, partition, sorted(got))
        out: list[bytes] = []
        size = 0
        covered: set[int] = set()
        back: list[int] = []
        for entry_id, data in entries:
            last = stored_batch.last_offset(entry_id)
            base = stored_batch.base_offset(entry_id, data)
            mine = [o for o in range(base, last + 1) if o in got]
            if not mine:
                continue
            # Markers hold no record for anyone, aborted data none for read_committed:
            # their offsets are finished (Kafka archives them), never sent.
            if stored_batch.is_control(data) or (
                aborted and stored_batch.in_aborted(entry_id, data, aborted)
            ):
                continue
            if out and size + len(data) > max_bytes:
                back += mine
                continue
            out.append(stored_batch.placed(entry_id, data))
            size += len(data)
            covered.update(mine)
        gone = [o for o in got if o not in covered and o not in back]
        if gone:
            await self._run_settle(cfg, holder, topic, partition, gone, "finish")
        if back:
            await self._run_settle(cfg, holder, topic, partition, back, "unacquire")
        acquired = sorted((o, got[o]) for o in covered)
        again = sum(1 for _, c in acquired if c > 1)
        metrics.count(group, "redelivered", again)
        metrics.count(group, "delivered", len(acquired) - again)
        return acquired, out

    async def _holding(self, topic: str, partition: int, offset: int) -> list[Any]:
        """[the stored batch holding `offset`, or the first after it], from Redis or,
        below the local log start (tiered storage), the object store."""
        log_key, meta_key = keys.partition_keys(topic, partition)[:2]
        if self.remote is not None:
            local_start = await self.redis.hget(meta_key, "llso")
            if local_start is not None and offset < int(local_start):
                return (await self._archived(topic, partition, offset, offset, offset + 1))[:1]
        return list(await self.redis.xrange(log_key, f"0-{offset + 1}", "+", count=1))

    async def _batch_runs(
        self, topic: str, partition: int, offsets: list[int]
    ) -> tuple[list[tuple[int, int]], list[Any]]:
        """Runs of consecutive offsets in `offsets` (sorted) and, in one pipeline, two
        XRANGE replies per run: the batches ending inside it, then the one holding its
        last offset (a batch's entry id is 0-<its last offset + 1>). Tiered storage:
        the part of a run below the local log start comes from the object store; the
        local start is read before and after the XRANGEs, and all is read again if the
        archiver moved it meanwhile."""
        log_key, meta_key = keys.partition_keys(topic, partition)[:2]
        runs: list[tuple[int, int]] = []
        for offset in offsets:
            if runs and runs[-1][1] == offset - 1:
                runs[-1] = (runs[-1][0], offset)
            else:
                runs.append((offset, offset))
        for _ in range(3):
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.hget(meta_key, "llso")
                for first, last in runs:
                    pipe.xrange(log_key, f"0-{first + 1}", f"0-{last + 1}")
                    pipe.xrange(log_key, f"(0-{last + 1}", "+", count=1)
                pipe.hget(meta_key, "llso")
                replies = await pipe.execute()
            if replies[0] == replies[-1]:
                break
        local_start = int(replies[0] or -1)
        replies = replies[1:-1]
        if self.remote is not None and runs and runs[0][0] < local_start:
            for i, (first, last) in enumerate(runs):
                if first < local_start:
                    archived = await self._archived(topic, partition, first, last, local_start)
                    replies[2 * i] = [*archived, *replies[2 * i]]
        return runs, replies

    async def _archived(
        self, topic: str, partition: int, first: int, last: int, local_start: int
    ) -> list[Any]:
        """The archived batches holding offsets first..min(last, local_start - 1)."""
        assert self.remote is not None
        out: list[Any] = []
        position = first
        while position <= last and position < local_start:
            try:
                entries = await self.remote.read(topic, partition, position, 8 << 20)
            except RemoteReadError as exc:
                raise QueueError("KAFKA_STORAGE_ERROR", str(exc)) from None
            if not entries:
                break
            out += entries
            position = stored_batch.last_offset(entries[-1][0]) + 1
        return out

    async def _batch_entries(
        self, topic: str, partition: int, offsets: list[int]
    ) -> list[tuple[bytes, bytes]]:
        """The stored batches holding any of `offsets` (sorted), in offset order, as
        (entry id, batch): per run of consecutive offsets the batches ending inside it
        and the one holding its last offset, in one pipeline."""
        _, replies = await self._batch_runs(topic, partition, offsets)
        seen: dict[bytes, bytes] = {}
        for reply in replies:
            for entry_id, fields in reply:
                seen[bytes(entry_id)] = bytes(fields[1])
        return sorted(seen.items(), key=lambda e: stored_batch.last_offset(e[0]))

    async def _batch_bodies(
        self,
        topic: str,
        partition: int,
        offsets: list[int],
        following: list[int] | None = None,
        aborted: list[tuple[int, int, int]] | None = None,
    ) -> dict[int, list[bytes]]:
        """Record fields by offset from a `batch` topic: per run of consecutive offsets
        the batches ending inside it and the one holding its last offset, in one
        pipeline (a batch's entry id is 0-<its last offset + 1>). `following` gets the
        offset of the first record read after the last offset asked for, if any.
        Batches of the `aborted` transactions (store.aborted_ranges) are left out."""
        runs, replies = await self._batch_runs(topic, partition, sorted(set(offsets)))
        wanted = set(offsets)
        top = runs[-1][1] if runs else -1
        after: int | None = None
        out: dict[int, list[bytes]] = {}
        for i in range(len(runs)):
            for entry in [*replies[2 * i], *replies[2 * i + 1]]:
                if aborted and stored_batch.in_aborted(entry[0], entry[1][1], aborted):
                    continue
                for entry_id, fields in self._expanded(topic, partition, entry):
                    offset = int(entry_id[2:]) - 1
                    if offset in wanted:
                        out[offset] = fields
                    elif offset > top and (after is None or offset < after):
                        after = offset
        if following is not None and after is not None:
            following.append(after)
        return out

    def _expanded(self, topic: str, partition: int, entry: Any) -> list[Any]:
        data = entry[1][1]
        key = (topic, partition, entry[0], len(data), bytes(data[17:21]))  # CRC at 17
        records = self._decoded.get(key)
        if records is None:
            records = stored_batch.record_entries([entry])
            self._decoded[key] = records
            if len(self._decoded) > DECODED_BATCHES:
                self._decoded.popitem(last=False)
        else:
            self._decoded.move_to_end(key)
        return records

    async def _bodies(
        self, topic: str, partition: int, offsets: list[int]
    ) -> dict[int, list[bytes]]:
        if await self._batches(topic):
            return await self._batch_bodies(topic, partition, offsets)
        log_key = keys.partition_keys(topic, partition)[0]
        async with self.redis.pipeline(transaction=False) as pipe:
            for offset in offsets:
                pipe.xrange(log_key, f"0-{offset + 1}", f"0-{offset + 1}")
            replies = await pipe.execute()
        out = {}
        for offset, entries in zip(offsets, replies, strict=True):
            if entries:
                out[offset] = entries[0][1]  # XRANGE replies stay flat lists (store.py)
        return out

    async def settle(
        self,
        group: str,
        holder: str,
        topic: str,
        partition: int,
        offsets: list[int],
        action: Action,
    ) -> Settled:
        """Finish, release, reject or renew records leased to `holder`. Per offset:
        None (done) or the RecordError that left it unchanged."""
        cfg = await self.config(group)
        if action is Action.REJECT and cfg.dead_letter_topic:
            done = await self._run_settle(cfg, holder, topic, partition, offsets, "dead")
            moved = [o for o, err in done.items() if err is None]
            if moved:
                counts = await self._counts(cfg.group, topic, partition, moved, self.dead_holder)
                await self._dead_letter(
                    cfg, topic, partition, list(counts.items()), REASON_REJECTED, self.dead_holder
                )
            _count_settled(group, action, done)
            return done
        done = await self._run_settle(cfg, holder, topic, partition, offsets, action.value)
        _count_settled(group, action, done)
        return done

    async def _run_settle(
        self,
        cfg: QueueConfig,
        holder: str,
        topic: str,
        partition: int,
        offsets: list[int],
        action: str,
    ) -> Settled:
        out = Settled()
        if not offsets:
            return out
        log_key = keys.partition_keys(topic, partition)[0]
        channel = keys.wake_channel(topic, partition)
        try:
            if await self._batches(topic):
                reply = await scripts.QUEUE_INFLIGHT(
                    self.redis,
                    inflight_keys(cfg.group, topic, partition),
                    [
                        "settle",
                        consumer_group(cfg.group),
                        holder,
                        cfg.lock_ms,
                        action,
                        self.dead_holder,
                        channel,
                        *offsets,
                    ],
                )
            else:
                reply = await scripts.QUEUE_SETTLE(
                    self.redis,
                    [log_key, due_key(cfg.group, topic, partition)],
                    [
                        consumer_group(cfg.group),
                        holder,
                        cfg.lock_ms,
                        action,
                        self.dead_holder,
                        channel,
                        hint_ttl_ms(cfg),
                        *offsets,
                    ],
                )
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise _queue_error(exc, topic, partition) from None
            reply = [0] + [1] * len(offsets)  # no consumer group: nothing is pending
        out.now_ms = int(reply[0])
        for offset, code in zip(offsets, reply[1:], strict=True):
            out[offset] = _CODES.get(int(code))
        if action in _REHOLD and await self._compacted_batches(topic):
            # Released records belong to RELEASED now, renewed ones still to `holder`.
            now_held_by = holder if action == "renew" else RELEASED
            await self._finish_removed(cfg, now_held_by, topic, partition, out)
        return out

    async def _compacted_batches(self, topic: str) -> bool:
        """A compacted `batch` topic: records may vanish under in-flight leases."""
        info = await self.store.get_topic(topic)
        return (
            info is not None
            and info.batch_format
            and "compact" in str(effective_config(info, "cleanup.policy"))
        )

    async def _finish_removed(
        self, cfg: QueueConfig, holder: str, topic: str, partition: int, done: Settled
    ) -> None:
        """Released or renewed records that compaction removed are finished at once, as
        on a `record` topic, where the XCLAIM of a deleted entry drops it from the
        pending list (the holder's answer stays: done)."""
        held = [o for o, err in done.items() if err is None]
        if not held:
            return
        bodies = await self._batch_bodies(topic, partition, held)
        gone = [o for o in held if o not in bodies]
        if gone:
            # A released one may already be someone else's: that reader finds no record
            # and finishes it (queues/core.py `_acquire`).
            await self._run_settle(cfg, holder, topic, partition, gone, "finish")

    async def _dead_letter(
        self,
        cfg: QueueConfig,
        topic: str,
        partition: int,
        items: list[tuple[int, int]],
        reason: str,
        holder: str,
    ) -> None:
        """Copy records (held by `holder`, the dead-letter holder) to the dead-letter
        topic through the normal append path, then finish them. When the copy fails
        they stay with the dead-letter holder: its lease expires and whoever acquires
        next dead-letters them again (at least once, never lost)."""
        offsets = [o for o, _ in items]
        if cfg.dead_letter_topic:
            bodies = await self._bodies(topic, partition, offsets)
            try:
                await self._append_dead(cfg, topic, partition, bodies, dict(items), reason)
                metrics.count(cfg.group, "dead_lettered", len(bodies))
            except (StoreError, QueueError) as exc:
                log.warning(
                    "queue group %s: dead-lettering %d record(s) of %s/%d to %s failed: %s",
                    cfg.group,
                    len(bodies),
                    topic,
                    partition,
                    cfg.dead_letter_topic,
                    exc,
                )
                return
        await self._run_settle(cfg, holder, topic, partition, offsets, "finish")

    async def _counts(
        self, group: str, topic: str, partition: int, offsets: list[int], holder: str
    ) -> dict[int, int]:
        if await self._batches(topic):
            raw = await self.redis.hmget(records_key(group, topic, partition), offsets)
            out = {}
            for o, v in zip(offsets, raw, strict=True):
                count, _, by = (v or b"0:").partition(b":")
                out[o] = int(count) % REJECT_MARK if by.decode() == holder else 0
            return out
        log_key = keys.partition_keys(topic, partition)[0]
        out = {}
        async with self.redis.pipeline(transaction=False) as pipe:
            for o in offsets:
                pipe.xpending_range(
                    log_key, consumer_group(group), f"0-{o + 1}", f"0-{o + 1}", 1, holder
                )
            replies = await pipe.execute()
        for o, rows in zip(offsets, replies, strict=True):
            # Rejected records carry REJECT_MARK until copied (lua/queue_settle.lua).
            out[o] = int(rows[0]["times_delivered"]) % REJECT_MARK if rows else 0
        return out

    async def _append_dead(
        self,
        cfg: QueueConfig,
        topic: str,
        partition: int,
        bodies: dict[int, list[bytes]],
        counts: dict[int, int],
        reason: str,
    ) -> None:
        if not bodies:
            return
        name = cfg.dead_letter_topic
        assert name is not None
        info = await self.store.get_topic(name)
        if info is None:
            info = await self.store.create_topic(name, self.dead_letter_partitions)
            if info is None:
                info = await self.store.get_topic(name, fresh=True)
            if info is None:
                raise QueueError("UNKNOWN_TOPIC_OR_PARTITION", f"cannot create {name}")
        target = partition % info.partitions
        records: list[Any] = []
        max_ts, max_delta = -1, 0
        for i, (offset, f) in enumerate(sorted(bodies.items())):
            flags = int(f[F])
            headers = decode_headers(f[H]) if f[H] else []
            headers += [
                ("skiff.dlq.reason", reason.encode()),
                ("skiff.dlq.group", cfg.group.encode()),
                ("skiff.dlq.topic", topic.encode()),
                ("skiff.dlq.partition", str(partition).encode()),
                ("skiff.dlq.offset", str(offset).encode()),
                ("skiff.dlq.delivery.count", str(counts.get(offset, 0)).encode()),
            ]
            ts = int(f[T])
            if ts > max_ts:
                max_ts, max_delta = ts, i
            records += (
                ts,
                f[K],
                f[V],
                encode_headers(headers),
                flags & (FLAG_KEY_NULL | FLAG_VALUE_NULL),
            )
        args = [len(bodies), 0, max_ts, max_delta, -1, -1, -1, *records]
        size = sum(len(r) for r in records if isinstance(r, bytes))
        prepared = self.store.prepare_records(info, target, args, size, retention_bytes(info))
        await self.store.append(prepared)

    async def release_holder(self, group: str, holder: str) -> int:
        """Release every record leased to `holder` (a member left or was fenced);
        returns how many."""
        cfg = await self.config(group)
        total = 0
        for topic, partition in await self._partitions(group):
            log_key = keys.partition_keys(topic, partition)[0]
            start = "-"
            if await self._batches(topic):
                total += await self._release_batch_holder(cfg, holder, topic, partition)
                continue
            while True:
                try:
                    rows = await self.redis.xpending_range(
                        log_key, consumer_group(group), start, "+", 1000, holder
                    )
                except ResponseError:
                    break  # no consumer group on this partition
                offsets = [int(r["message_id"][2:]) - 1 for r in rows]
                done = await self._run_settle(cfg, holder, topic, partition, offsets, "release")
                total += sum(1 for e in done.values() if e is None)
                if len(rows) < 1000:
                    break
                start = f"0-{offsets[-1] + 2}"
        return total

    async def held(
        self,
        group: str,
        holder: str,
        topic: str,
        partition: int,
        count: int = 1000,
        after: int = -1,
    ) -> list[int]:
        """Offsets above `after` leased to `holder` on one partition (the first `count`,
        ascending); none when the group does not read the partition."""
        if await self._batches(topic):
            reply = await scripts.QUEUE_INFLIGHT(
                self.redis,
                inflight_keys(group, topic, partition),
                ["held", consumer_group(group), holder, count, after],
            )
            return [int(o) for o in reply]
        log_key = keys.partition_keys(topic, partition)[0]
        try:
            rows = await self.redis.xpending_range(
                log_key, consumer_group(group), f"0-{after + 2}", "+", count, holder
            )
        except ResponseError:
            return []  # no consumer group on this partition
        return [int(r["message_id"][2:]) - 1 for r in rows]

    async def _release_batch_holder(
        self, cfg: QueueConfig, holder: str, topic: str, partition: int
    ) -> int:
        total, after = 0, -1
        while True:
            offsets = await self.held(cfg.group, holder, topic, partition, 1000, after)
            done = await self._run_settle(cfg, holder, topic, partition, offsets, "release")
            total += sum(1 for e in done.values() if e is None)
            if len(offsets) < 1000:
                return total
            after = offsets[-1]

    # -- state ----------------------------------------------------------------------

    async def partition_state(
        self, group: str, topic: str, partition: int, scan: int = DESCRIBE_SCAN
    ) -> PartitionState | None:
        cfg = await self.config(group)
        log_key, meta, _, _ = keys.partition_keys(topic, partition)
        try:
            if await self._batches(topic):
                r = await scripts.QUEUE_INFLIGHT(
                    self.redis,
                    inflight_keys(group, topic, partition),
                    ["state", consumer_group(group), cfg.lock_ms, scan],
                )
            else:
                r = await scripts.QUEUE_STATE(
                    self.redis, [log_key, meta], [consumer_group(group), cfg.lock_ms, scan]
                )
        except ResponseError as exc:
            raise _queue_error(exc, topic, partition) from None
        if int(r[0]) == 0:
            return None
        hist_n = int(r[9])
        hist = {int(r[10 + 2 * i]): int(r[11 + 2 * i]) for i in range(hist_n)}
        rest = r[10 + 2 * hist_n :]
        holders = {rest[i].decode(): int(rest[i + 1]) for i in range(0, len(rest), 2)}
        hw, lso, nxt, pending, lowest, _, available, oldest = (int(v) for v in r[1:9])
        return PartitionState(
            topic, partition, hw, lso, nxt, pending, lowest, available, oldest, hist, holders
        )

    async def describe(self, group: str) -> QueueDescription:
        cfg = await self.config(group)
        out = QueueDescription(cfg)
        for topic, partition in await self._partitions(group):
            state = await self.partition_state(group, topic, partition)
            if state is not None:
                out.partitions.append(state)
        return out

    async def committed(self, group: str, topic: str, partition: int) -> int:
        """The lowest unfinished offset (Kafka's committed offset of the group), -1 when
        the group has not read the partition."""
        try:
            state = await self.partition_state(group, topic, partition, scan=0)
        except QueueError:
            return -1
        return -1 if state is None else state.committed

    async def reset(self, group: str, topic: str, partition: int, offset: int | str) -> int:
        """Start the partition again at `offset` (or "earliest"/"latest"): pending
        records are dropped (their leases end). Returns the new position."""
        await self.config(group)
        if (group, topic) not in self._topics_seen:
            await self.redis.sadd(topics_key(group), topic)
            self._topics_seen.add((group, topic))
        if isinstance(offset, str):
            return await self._init(group, topic, partition, offset, 0, "reset")
        return await self._init(group, topic, partition, "offset", offset, "reset")

    @staticmethod
    def wake_channels(topic: str, partitions: list[int]) -> list[str]:
        """Wake-up channels (broker.wakeups.register): appends and releases publish."""
        return [keys.wake_channel(topic, p) for p in partitions]


# Settle actions that keep a record in flight (lua/queue_settle.lua XCLAIMs for them).
_REHOLD = ("release", "renew")

_SETTLED = {
    Action.ACCEPT: "acknowledged",
    Action.RELEASE: "released",
    Action.REJECT: "rejected",
    Action.RENEW: "renewed",
}


def _count_settled(group: str, action: Action, done: Settled) -> None:
    refused = sum(1 for err in done.values() if err is not None)
    metrics.count(group, _SETTLED[action], len(done) - refused)
    metrics.count(group, "settle_refused", refused)


def retention_bytes(info: Any) -> int:
    """The append script's retention.bytes argument for a topic (as Produce passes it)."""
    if "delete" not in str(effective_config(info, "cleanup.policy")):
        return -1
    return int(effective_config(info, "retention.bytes"))


_STORES: dict[int, QueueStore] = {}


def queue_store(broker: Any) -> QueueStore:
    """The sidecar's QueueStore (one per RedisStore, so the config cache is shared by
    the HTTP API, OffsetFetch and the share-group APIs)."""
    store = broker.store
    queues = _STORES.get(id(store))
    if queues is None or queues.store is not store:
        settings = broker.settings
        partitions = max(int(getattr(settings, "num_partitions", 1)), 1)
        queues = _STORES[id(store)] = QueueStore(
            store,
            partitions,
            int(getattr(settings, "group_share_record_lock_duration_ms", DEFAULT_LOCK_MS)),
            int(getattr(settings, "group_share_delivery_count_limit", DEFAULT_DELIVERY_LIMIT)),
            int(
                getattr(
                    settings, "group_share_partition_max_record_locks", DEFAULT_MAX_RECORD_LOCKS
                )
            ),
        )
    queues.remote = getattr(broker, "remote", None)
    return queues


def _acquired(
    topic: str, partition: int, offset: int, count: int, deadline: int, f: list[bytes]
) -> Acquired:
    flags = int(f[F])
    return Acquired(
        topic,
        partition,
        offset,
        count,
        deadline,
        int(f[T]),
        None if flags & FLAG_KEY_NULL else f[K],
        None if flags & FLAG_VALUE_NULL else f[V],
        decode_headers(f[H]) if f[H] else [],
    )


def _queue_error(exc: ResponseError, topic: str, partition: int) -> QueueError:
    text = str(exc)
    if text.startswith("UNKNOWN_TOPIC_OR_PARTITION"):
        return QueueError(
            "UNKNOWN_TOPIC_OR_PARTITION", f"topic {topic!r} has no partition {partition}"
        )
    return QueueError("STORAGE_ERROR", text)
