"""RedisStore: topics registry, partition appends, reads and offset lookups."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from sidecar.config import storage_format
from sidecar.config import topic as topic_config
from sidecar.protocol import errors, stored_batch
from sidecar.storage import append_channel, cluster_client, keys, resilience, scripts
from sidecar.storage.connection import client_for
from sidecar.storage.identity import StorageIdentity
from sidecar.storage.log_ops import PartitionLogOps
from sidecar.storage.resilience import RedisUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")

MIN_REDIS = (7, 0)
REPLICA_CACHE_SECONDS = 0.5
TOPIC_CACHE_SECONDS = 1.0
STALE_FALLBACK_S = 0.5  # how long a cached lookup waits for an unavailable Redis


class Subscription(Protocol):
    """The wake-up subscription's state (longpoll.WatermarkCache): live() while proven
    in place; epoch changes whenever it was lost, so nothing seen before counts."""

    epoch: int

    def live(self) -> bool: ...


# A registry cache entry: (read at, value, the subscription epoch it is valid in, or None
# for the TOPIC_CACHE_SECONDS expiry only).
Cached = tuple[float, T, int | None]


class StoreError(Exception):
    """A Kafka error raised by a script or a lookup; .code is the Kafka error name."""

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(message or code)
        self.code = code


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    # Config overrides as given to CreateTopics (raw strings, stored with the topic) and
    # the effective config: overrides parsed over the server defaults. Hot paths read it
    # with topic_config.effective_config(info, name).
    configs: Mapping[str, str] = field(default_factory=dict, hash=False)
    config: Mapping[str, Any] = field(
        default_factory=lambda: dict(topic_config.KAFKA_DEFAULTS), hash=False
    )
    # skiff.storage.format (config/storage_format.py): fixed when the topic was created.
    storage_format: str = storage_format.LEGACY
    # CreateTopics named the format (DescribeConfigs: a topic config, not a default).
    storage_format_set: bool = False

    @property
    def batch_format(self) -> bool:
        return self.storage_format == storage_format.BATCH


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    log_start_offset: int
    append_time: int  # -1 for CreateTime
    duplicate: bool


@dataclass(slots=True)
class PreparedAppend:
    keys: list[str]
    argv: list[Any]
    packed: bytes | None  # the EVALSHA; for a `batch` topic made when first needed
    batch: bytes | None = None  # a `batch` topic's stored bytes (argv's last item)


@dataclass(slots=True)
class PartitionRead:
    high_watermark: int
    log_start_offset: int
    entries: list[Any]  # raw XRANGE reply: [[id, [field, value, ...]], ...]
    # The last stable offset: the first open transaction's first offset, else the hw.
    stable: int = -1
    # The offset of the partition's last ABORT marker (-1: none): a read_committed
    # fetch from at or below it asks for the aborted transactions (aborted()).
    last_abort: int = -1
    # Tiered storage: the first offset still in Redis (-1: nothing archived); below it,
    # from the log start on, the batches are in the object store (sidecar/tiered/).
    local_start: int = -1


def _raw(response: Any, **_: Any) -> Any:
    return response


# Aborted transactions one read_committed fetch lists at most (the ones with the earliest
# markers): a reader far behind a log of many aborts gets them over several fetches.
MAX_ABORTED = 10_000


class RedisStore(PartitionLogOps):
    def __init__(self, redis: Redis, description: str) -> None:
        self.redis = redis
        self.description = description
        # Caches of the topic registry, so the hot paths do not read it on every request
        # (the append script re-checks that a partition exists). An entry read while the
        # wake-up subscription was live stays valid as long as it stays live: every
        # registry write publishes the topic's name on keys.TOPICS_CHANNEL afterwards,
        # and topic_changed() expires it. Otherwise (no subscription, a Redis Cluster,
        # a loss since) an entry lasts TOPIC_CACHE_SECONDS.
        self._topics: dict[str, Cached[TopicInfo | None]] = {}
        self._topic_names: dict[uuid.UUID, Cached[str | None]] = {}
        self.subscription: Subscription | None = None  # set when the wake-ups start
        self._registry_changes = 0  # topic_changed() calls: a read spanning one is not kept
        # Server defaults of topic configs (topic_config.server_defaults(settings)).
        self.topic_defaults: dict[str, Any] = dict(topic_config.KAFKA_DEFAULTS)
        self.storage_format_default = storage_format.DEFAULT  # --storage-format
        self.producer_id_expiration_ms = 86_400_000  # Kafka's producer.id.expiration.ms
        self._replicas: tuple[float, int] = (float("-inf"), 0)
        self._shard_replicas: dict[str, int] | None = None  # Redis Cluster: primary -> replicas
        self._all_topics: list[TopicInfo] | None = None  # the last full list (Metadata)
        self._lookups: dict[Any, asyncio.Future[Any]] = {}  # registry reads in flight
        # `batch` topics: per log key, the base offset this sidecar's next append there
        # gets if no other sidecar appends first (see append).
        self._next_base: dict[str, int] = {}
        self.identity = StorageIdentity(redis)
        self.identity.on_reset(lambda _cluster_id: self.forget_topics())

    def forget_topics(self) -> None:
        """Drop what is remembered of the topic registry (an operator reset the storage)."""
        self._registry_changes += 1
        self._topics.clear()
        self._topic_names.clear()
        self._all_topics = None

    def set_topic_defaults(self, defaults: dict[str, Any]) -> None:
        """New server defaults of topic configs (a dynamic broker config changed,
        storage/broker_configs.py): every cached topic's effective config is derived
        again, so the hot paths see them at once."""
        self.topic_defaults = defaults  # reads in flight parse with these once back

        def again(info: TopicInfo | None) -> TopicInfo | None:
            if info is None:
                return None
            return replace(info, config=topic_config.effective(info.configs, defaults))

        self._topics = {n: (c[0], again(c[1]), c[2]) for n, c in self._topics.items()}
        if self._all_topics is not None:
            self._all_topics = [again(t) or t for t in self._all_topics]

    def topic_changed(self, name: str) -> None:
        """A registry write for `name` was published (keys.TOPICS_CHANNEL): what is cached
        of it expires, but stays as the answer while Redis is unavailable."""
        self._registry_changes += 1
        cached = self._topics.get(name)
        if cached is not None:
            self._topics[name] = (float("-inf"), cached[1], None)
        for topic_id, (_, known, _) in list(self._topic_names.items()):
            if known == name:
                self._topic_names[topic_id] = (float("-inf"), known, None)

    def _valid(self, cached: Cached[Any], now: float) -> bool:
        if now - cached[0] < TOPIC_CACHE_SECONDS:
            return True
        sub = self.subscription
        return cached[2] is not None and sub is not None and sub.epoch == cached[2] and sub.live()

    def _watch_mark(self) -> tuple[int, int] | None:
        """Before a registry read: what _kept_epoch() needs to tell whether it may be kept
        for as long as the subscription stays live."""
        sub = self.subscription
        return (sub.epoch, self._registry_changes) if sub is not None and sub.live() else None

    def _kept_epoch(self, mark: tuple[int, int] | None) -> int | None:
        """After the read: its subscription epoch if the subscription was live throughout
        and no registry change came meanwhile (the read may predate the change), else
        None (TOPIC_CACHE_SECONDS only)."""
        sub = self.subscription
        if mark is None or sub is None or not sub.live():
            return None
        return mark[0] if (sub.epoch, self._registry_changes) == mark else None

    @classmethod
    async def connect(cls, url: str, description: str | None = None) -> RedisStore:
        # Commands time out after --redis-timeout-ms and are retried by resilience.run;
        # the client's round trips are timed and traced (storage/instrumented.py).
        redis = client_for(url, resilience.POLICY.timeout_s)
        # Stream entries stay as flat lists: no per-record dict building in redis-py.
        for command in ("XRANGE", "XREVRANGE", "XREADGROUP"):
            redis.set_response_callback(command, _raw)
        store = cls(redis, description or url)
        await store._check_version()
        for script in scripts.ALL:
            await script.load(redis)
        await store.identity.establish()
        return store

    async def _check_version(self) -> None:
        info = await self.redis.info("server")
        version = str(info.get("redis_version", "0"))
        parts = tuple(int(p) for p in version.split(".")[:2])
        if parts < MIN_REDIS:
            raise RuntimeError(
                f"Redis {version} at {self.description} is too old: Skiff needs Redis 7.0 or "
                "newer (streams with XADD 0-* auto-sequence IDs). Upgrade Redis or point "
                "--redis-url at a newer server."
            )
        self.redis_version = version

    async def close(self) -> None:
        await append_channel.close_for(self.redis)
        await self.redis.aclose()
        sentinel = getattr(getattr(self.redis, "connection_pool", None), "sentinel_manager", None)
        if sentinel is not None:  # redis+sentinel://: its connections to the sentinels
            await sentinel.aclose()

    async def cluster_id(self) -> str:
        if self.identity.cluster_id is not None:
            return self.identity.cluster_id
        value = await self.redis.get(keys.CLUSTER_ID)
        return value.decode() if value else ""

    # -- topics ---------------------------------------------------------------

    def cached_topic(self, name: str) -> TopicInfo | None:
        """The topic as get_topic would answer it from the cache, or None (unknown, or
        not cached and valid: then ask get_topic). No coroutine: Produce asks per topic
        of every request."""
        cached = self._topics.get(name)
        if cached and self._valid(cached, time.monotonic()):
            return cached[1]
        return None

    async def get_topic(self, name: str, fresh: bool = False) -> TopicInfo | None:
        now = time.monotonic()
        cached = self._topics.get(name)
        if cached and not fresh and self._valid(cached, now):
            return cached[1]
        if fresh:
            return await self._lookup_topic(name, cached, now)
        # Requests that find the entry expired together share one lookup: many idle
        # consumers of one topic then cost one HGET a second, not one each.
        return await _shared(self._lookups, name, lambda: self._lookup_topic(name, cached, now))

    async def _lookup_topic(
        self, name: str, cached: Cached[TopicInfo | None] | None, now: float
    ) -> TopicInfo | None:
        mark = self._watch_mark()
        try:
            with _stale_ok(cached is not None and cached[1] is not None):
                raw = await self.redis.hget(keys.TOPICS, name)
        except RedisUnavailable:
            if cached and cached[1] is not None:
                return cached[1]  # Redis is down: a known topic stays known
            raise
        info = self._topic_from_json(name, raw) if raw else None
        self._topics[name] = (now, info, self._kept_epoch(mark))
        return info

    def _topic_info(
        self,
        name: str,
        topic_id: uuid.UUID,
        partitions: int,
        configs: dict[str, str],
        fmt: str = storage_format.LEGACY,
        fmt_set: bool = False,
    ) -> TopicInfo:
        return TopicInfo(
            name,
            topic_id,
            partitions,
            configs,
            topic_config.effective(configs, self.topic_defaults),
            fmt,
            fmt_set,
        )

    def _topic_from_json(self, name: str, raw: bytes) -> TopicInfo:
        doc = json.loads(raw)
        configs = {str(k): str(v) for k, v in (doc.get("configs") or {}).items()}
        fmt = doc.get("format")
        return self._topic_info(
            name,
            uuid.UUID(hex=doc["id"]),
            int(doc["partitions"]),
            configs,
            fmt if fmt in storage_format.FORMATS else storage_format.LEGACY,
            bool(doc.get("format_set")),
        )

    async def list_topics(self, fresh: bool = False) -> list[TopicInfo]:
        """fresh: raise RedisUnavailable rather than answer from memory."""
        stale_ok = self._all_topics is not None and not fresh
        try:
            with _stale_ok(stale_ok):
                raw = await self.redis.hgetall(keys.TOPICS)
        except RedisUnavailable:
            if stale_ok:
                return self._all_topics  # Redis is down: Metadata answers from memory
            raise
        self._all_topics = sorted(
            (self._topic_from_json(k.decode(), v) for k, v in raw.items()),
            key=lambda t: t.name,
        )
        return self._all_topics

    async def topic_by_id(self, topic_id: uuid.UUID | None) -> TopicInfo | None:
        # Fetch v13+ names topics by id on every request: cache like get_topic.
        if not topic_id:
            return None  # kio reads the zero id (the client knows none) as None
        now = time.monotonic()
        cached = self._topic_names.get(topic_id)
        if cached and self._valid(cached, now):
            name = cached[1]
        else:
            name = await _shared(self._lookups, topic_id, lambda: self._lookup_id(topic_id, now))
        if name is None:
            return None
        info = await self.get_topic(name)
        return info if info is not None and info.topic_id == topic_id else None

    async def _lookup_id(self, topic_id: uuid.UUID, now: float) -> str | None:
        cached = self._topic_names.get(topic_id)
        mark = self._watch_mark()
        try:
            with _stale_ok(cached is not None and cached[1] is not None):
                raw = await self.redis.hget(keys.TOPIC_IDS, topic_id.hex)
        except RedisUnavailable:
            if not cached or cached[1] is None:
                raise
            raw = cached[1].encode()
        name = raw.decode() if raw else None
        # An unknown id stays unknown for TOPIC_CACHE_SECONDS only: a registry change
        # names a topic, not the ids looked up in vain.
        self._topic_names[topic_id] = (now, name, self._kept_epoch(mark) if name else None)
        return name

    async def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> TopicInfo | None:
        """Create a topic with config overrides (validated by topic_config.validate); None
        if it exists already. The registry entry is claimed with HSETNX first so two
        sidecars racing to create the same name agree."""
        configs = dict(configs or {})
        fmt = storage_format.chosen(configs, self.storage_format_default)
        # The format is kept beside the overrides, not among them: no alteration of the
        # overrides can change it.
        explicit = configs.pop(storage_format.CONFIG, None) is not None
        info = self._topic_info(name, uuid.uuid4(), partitions, configs, fmt, explicit)
        fields: dict[str, Any] = {
            "id": info.topic_id.hex,
            "partitions": partitions,
            "created_ms": _now_ms(),
            "format": fmt,
        }
        if explicit:
            fields["format_set"] = True  # DescribeConfigs: a topic config, not a default
        if configs:
            fields["configs"] = configs
        doc = json.dumps(fields)
        # Never re-create a topic in a Redis that lost the data this sidecar served: the
        # identity is read before the first write and again after the registry entry.
        await self.identity.verify()
        sid = self.identity.cluster_id or ""
        # Partition metas first (HSETNX: a re-run or a racing creator changes nothing),
        # so a registered topic always has them; then the registry entry decides.
        gone = self._publish_gone
        async with self.redis.pipeline(transaction=False) as pipe:
            for p in range(partitions):
                meta = keys.partition_keys(name, p)[1]
                pipe.hsetnx(meta, "hw", 0)
                pipe.hsetnx(meta, "lso", 0)
                pipe.hsetnx(meta, "sid", sid)
                if gone:  # sidecars forget what they kept of a partition of this name
                    pipe.publish(keys.wake_channel(name, p), "gone")
            await pipe.execute()
        if not await self.redis.hsetnx(keys.TOPICS, name, doc):
            # A resent HSETNX (lost reply) finds our own document: created by us.
            if await self.redis.hget(keys.TOPICS, name) != doc.encode():
                return None
        await self.redis.hset(keys.TOPIC_IDS, info.topic_id.hex, name)
        if gone:  # after the registry entry: what other sidecars read next is it
            await self.redis.publish(keys.TOPICS_CHANNEL, name)
        await self.identity.verify()
        self._topics[name] = (time.monotonic(), info, None)
        log.info(
            "created topic %s with %d partition(s), id %s, %s format",
            name,
            partitions,
            info.topic_id,
            fmt,
        )
        return info

    async def delete_topic(self, name: str) -> bool:
        info = await self.get_topic(name, fresh=True)
        if info is None:
            return False
        queue_groups = await self._queue_groups_reading(name)
        # Every consumer group's committed offsets of the topic go with it, as Kafka's
        # coordinator drops them (onPartitionsDeleted): a topic made again under this
        # name must not resume a group at the old topic's offsets.
        groups = await self.redis.smembers(keys.GROUPS)
        offset_fields = [keys.offset_field(name, p) for p in range(info.partitions)]
        async with self.redis.pipeline(transaction=False) as pipe:
            # Partition metas go first: the append script refuses a partition
            # without meta, so no produce recreates a half-deleted partition.
            for p in range(info.partitions):
                pipe.delete(*keys.all_partition_keys(name, p))
                if self._publish_gone:
                    pipe.publish(keys.wake_channel(name, p), "gone")
            # Then the queue groups' keys: with the log and meta gone no queue script
            # writes them again, so a topic made again under this name starts afresh.
            for p in range(info.partitions):
                for group in queue_groups:
                    pipe.delete(*keys.queue_partition_keys(group, name, p))
            for group in groups:  # group ids are any bytes: the key is built as bytes
                group_id = group.decode(errors="surrogateescape")
                offsets = keys.group_keys(group_id)[2].encode(errors="surrogateescape")
                pipe.hdel(offsets, *offset_fields)
            pipe.hdel(keys.TOPIC_IDS, info.topic_id.hex)
            pipe.hdel(keys.TOPIC_FETCHED, name)  # the console's count (console/traffic.py)
            pipe.hdel(keys.TOPICS, name)
            if self._publish_gone:  # after the registry entry (the pipeline keeps order)
                pipe.publish(keys.TOPICS_CHANNEL, name)
            await pipe.execute()
        self._topics.pop(name, None)
        log.info("deleted topic %s", name)
        return True

    async def _queue_groups_reading(self, topic: str) -> list[str]:
        """The queue groups that have read `topic` (each one's topics set names it)."""
        groups = [g.decode() for g in await self.redis.smembers(keys.QUEUES)]
        if not groups:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for group in groups:
                pipe.sismember(keys.queue_topics_key(group), topic)
            found = await pipe.execute()
        return [g for g, yes in zip(groups, found, strict=True) if yes]

    @property
    def _publish_gone(self) -> bool:
        """Creating or deleting a topic publishes "gone" on its partitions' channels, so
        sidecars drop the watermarks they keep (longpoll.py), and its name on
        keys.TOPICS_CHANNEL (registry caches). Not on a Redis Cluster: its pipelines
        refuse PUBLISH, and sidecars keep neither there (the subscription is not live)."""
        return not cluster_client.is_cluster(self.redis)

    @property
    def replicas_per_partition(self) -> bool:
        """A Redis Cluster: each partition's primary has replicas of its own."""
        return cluster_client.is_cluster(self.redis)

    async def connected_replicas(self, topic: str | None = None, partition: int = 0) -> int:
        """Replicas connected to the Redis primary now (ROLE), for acks=-1's check
        before appending; cached for REPLICA_CACHE_SECONDS. On a Redis Cluster: those of
        the primary holding `topic`/`partition` (without a topic: the fewest of any)."""
        now = time.monotonic()
        if cluster_client.is_cluster(self.redis):
            if now - self._replicas[0] >= REPLICA_CACHE_SECONDS or self._shard_replicas is None:
                self._shard_replicas = await cluster_client.replica_counts(self.redis)
                self._replicas = (now, min(self._shard_replicas.values(), default=0))
            if topic is None:
                return self._replicas[1]
            node = await cluster_client.node_for(
                self.redis, keys.partition_keys(topic, partition)[0]
            )
            return self._shard_replicas.get(node.name, 0)
        if now - self._replicas[0] >= REPLICA_CACHE_SECONDS:
            role = await self.redis.execute_command("ROLE")
            count = len(role[2]) if role and role[0] in (b"master", "master") else 0
            self._replicas = (now, count)
        return self._replicas[1]

    async def next_producer_id(self) -> int:
        return int(await self.redis.incr(keys.PRODUCER_ID_SEQ)) - 1

    async def init_transactional_producer(
        self,
        transactional_id: str,
        pid: int,
        epoch: int,
        expiration_ms: int,
        max_epoch: int,
        timeout_ms: int = 60_000,
    ) -> tuple[int, int]:
        """(producer id, epoch) for a transactional id: the next epoch of its producer
        id, or a new id. Raises StoreError PRODUCER_FENCED when the client names a
        producer id and epoch that are no longer current, CONCURRENT_TRANSACTIONS while
        a transaction of the id is open (transactions/coordinator.py aborts it)."""
        fresh = await self.next_producer_id()  # used only when the id needs a new one
        try:
            # The request token makes a resent call (lost reply) answer the first run's
            # result instead of bumping the epoch twice and fencing its own client.
            got_pid, got_epoch = await scripts.INIT_PRODUCER(
                self.redis,
                [keys.transactional_producer_key(transactional_id)],
                [fresh, pid, epoch, expiration_ms, max_epoch, secrets.token_hex(8), timeout_ms],
            )
        except ResponseError as exc:
            raise StoreError(str(exc).split(" ", 1)[0], str(exc)) from None
        await self.redis.sadd(keys.TXN_IDS, transactional_id)  # for ListTransactions
        return int(got_pid), int(got_epoch)

    # -- partitions -------------------------------------------------------------

    def forget_next_base(self, topic: str, partition: int) -> None:
        """Something other than an append (a transaction marker) took offsets."""
        self._next_base.pop(keys.partition_keys(topic, partition)[0], None)

    def prepare_append(
        self,
        topic: str,
        partition: int,
        args: list[Any],
        batch_bytes: int = 0,
        retention_bytes: int = -1,
        batch: bytes | None = None,
        transactional: bool = False,
    ) -> PreparedAppend:
        """args: ARGV of lua/append.lua without the wake-up channel, the append token,
        the producer expiry, the batch's byte size, retention.bytes and the format
        (inserted here); for a `batch` topic, `batch` holds the checked batch
        (protocol/stored_batch.py) and args only the seven fixed values. The token makes
        a resent append (after a lost reply) a no-op that returns the first one's
        offset."""
        argv = [
            *args[:7],
            keys.wake_channel(topic, partition),
            secrets.token_hex(8),
            self.producer_id_expiration_ms,
            batch_bytes,
            retention_bytes,
            self.identity.cluster_id or "",
        ]
        script_keys = keys.append_keys(topic, partition)
        if transactional:  # the batch opens (or continues) a transaction here
            script_keys.append(keys.open_txns_key(topic, partition))
        if batch is None:
            argv.append("r")
            argv += args[7:]
            return PreparedAppend(script_keys, argv, scripts.APPEND.pack(script_keys, argv))
        argv += ("b", batch)
        return PreparedAppend(script_keys, argv, None, batch)

    def prepare_records(
        self,
        info: TopicInfo,
        partition: int,
        args: list[Any],
        batch_bytes: int = 0,
        retention_bytes: int = -1,
    ) -> PreparedAppend:
        """prepare_append for records that came without a Kafka batch (flat t, k, v, h,
        f after the seven fixed values: the HTTP API, UDP ingest, redrive, legacy
        message sets): a `batch` topic gets them as one v2 batch, compressed and
        stamped as its configs say."""
        if not info.batch_format:
            return self.prepare_append(info.name, partition, args, batch_bytes, retention_bytes)
        checked = stored_batch.build(args[7:], info.config, tuple(args[4:7]))
        return self.prepare_batch(info.name, partition, checked, retention_bytes)

    def prepare_batch(
        self,
        topic: str,
        partition: int,
        checked: stored_batch.CheckedBatch,
        retention_bytes: int = -1,
        transactional: bool = False,
    ) -> PreparedAppend:
        """prepare_append of a checked batch for a `batch` topic (stored_batch.py)."""
        fixed = [
            checked.offsets,
            2 if checked.append_time >= 0 else 0,  # 2: the sidecar stamped LogAppendTime
            checked.max_timestamp,
            checked.max_timestamp_delta,
            checked.producer_id,
            checked.producer_epoch,
            checked.base_sequence,
        ]
        return self.prepare_append(
            topic, partition, fixed, len(checked.data), retention_bytes, checked.data, transactional
        )

    async def append(
        self, prepared: PreparedAppend, wait: tuple[int, int] | None = None
    ) -> AppendResult:
        """Run a prepared append under the retry policy (resilience.run). When the
        connection fails after the command may have run, the same command (same token)
        is sent again: the script recognises the token and answers with the first run's
        offset instead of appending twice. Out of retry time: REQUEST_TIMED_OUT, as
        Kafka answers when the outcome is unknown (an idempotent producer's retry is
        deduplicated).

        A `batch` topic's batch is XADDed outside Lua when this sidecar knows the
        partition's next base offset (from its last append there, kept in _next_base):
        MULTI, XADD at the ID that offset gives, the script in mode 'x', EXEC
        (scripts.Script.external_parts). Copying 100 KB into Lua and back out was over
        half of Redis's time per append (docs/performance.md). If another sidecar
        appended meanwhile, the script takes the entry back and answers
        SKIFF_MISPREDICT, and the append runs again the usual way."""
        log_key = prepared.keys[0]
        external = wait is None and not cluster_client.is_cluster(self.redis)
        if prepared.batch is not None and external:
            predicted = self._next_base.get(log_key)
            if predicted is not None:
                result = await self._run_append(prepared, None, predicted)
                if result is not None:
                    return result
        if prepared.packed is None:
            prepared.packed = scripts.APPEND.pack(prepared.keys, prepared.argv)
        result = await self._run_append(prepared, wait, None)
        assert result is not None
        return result

    async def _run_append(
        self, prepared: PreparedAppend, wait: tuple[int, int] | None, predicted: int | None
    ) -> AppendResult | None:
        """One append, the usual way (predicted None) or with the batch outside Lua
        (None if the prediction was wrong)."""
        log_key = prepared.keys[0]
        count = int(prepared.argv[0])
        if wait is not None:
            # WAIT must end within the first attempt's share of the request's retry time
            # (resilience.run gives an attempt half of it), so the answer comes in time.
            # Redis checks WAIT timeouts ~every 100 ms (hz 10): leave it room.
            left_ms = int(resilience.remaining() * 500) - 300
            wait = (wait[0], max(min(wait[1], left_ms), 10))  # WAIT n 0 blocks forever

        # An attempt is the script call's own awaitable (no coroutine around it):
        # run_packed's (reply, replicas acked), or run_parts' EXEC reply.
        attempt: Callable[[], Awaitable[Any]]
        if predicted is None:
            packed = prepared.packed
            assert packed is not None

            def attempt() -> Awaitable[tuple[Any, int | None]]:
                return scripts.APPEND.run_packed(
                    self.redis, packed, prepared.keys, prepared.argv, wait
                )

        else:
            assert prepared.batch is not None
            argv = [*prepared.argv[:13], "x", predicted]
            parts = scripts.APPEND.external_parts(
                prepared.keys, argv, prepared.batch, predicted, count
            )
            # Appends to the partition sent after this one predict from its end.
            self._next_base[log_key] = predicted + count

            def attempt() -> Awaitable[Any]:
                return scripts.APPEND.run_parts(self.redis, parts)

        try:
            # On the append channel (no WAIT, no Cluster) the channel bounds the wait.
            result = await resilience.run(
                attempt,
                "append",
                reload=lambda: scripts.APPEND.load(self.redis),
                bounded=wait is None and not cluster_client.is_cluster(self.redis),
            )
            if predicted is None:
                reply, acked = result
            else:
                added, reply = result
                acked = None
                if isinstance(reply, ResponseError):
                    raise reply
        except ResponseError as exc:
            self._next_base.pop(log_key, None)
            code = str(exc).split(" ", 1)[0]
            if code == "SKIFF_MISPREDICT":
                return None
            if errors.code(code) == errors.UNKNOWN_SERVER_ERROR:
                # Not one of lua/append.lua's Kafka error names, nor a Redis fault
                # resilience.classify knows: a bug or a new Redis error; say which.
                log.error("append to %s failed: %s", log_key, exc, exc_info=exc)
            elif code in ("UNKNOWN_TOPIC_OR_PARTITION", "KAFKA_STORAGE_ERROR"):
                self.identity.poke()  # a vanished partition may be a lost storage
            raise StoreError(code, str(exc)) from None
        except RedisUnavailable as exc:
            self._next_base.pop(log_key, None)
            raise StoreError(resilience.produce_error(exc.reason), str(exc)) from None
        base, lso, append_time, dup = reply
        if prepared.batch is not None:
            if dup:
                self._next_base.pop(log_key, None)
            elif predicted is None:
                self._next_base[log_key] = int(base) + count
            elif not isinstance(added, bytes):
                # Cannot happen while the log's last ID is its high watermark; if it did,
                # offsets base..base+count-1 would have no entry: say so loudly.
                self._next_base.pop(log_key, None)
                log.error("append to %s: the XADD before the script failed: %r", log_key, added)
        if wait is not None and acked is not None and acked < wait[0]:
            # Appended, but fewer Redis replicas have it than acks=-1 asks for.
            raise StoreError(
                "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
                f"{acked} of {wait[0]} Redis replicas acknowledged within {wait[1]} ms",
            )
        return AppendResult(base, lso, append_time, bool(dup))

    async def read(self, requests: list[tuple[str, int, int, int]]) -> list[PartitionRead]:
        """One MULTI/EXEC for all (topic, partition, offset, count): watermarks and
        records are read at one instant, so a record is never past the high watermark
        the same response reports. On a Redis Cluster: one MULTI/EXEC per partition (its
        slot), pipelined per node (cluster_client.multi_each)."""
        if cluster_client.is_cluster(self.redis):
            groups = []
            for topic, partition, offset, count in requests:
                log_key, meta_key, _, _ = keys.partition_keys(topic, partition)
                commands = [
                    ("HMGET", meta_key, "hw", "lso", "ls", "ab", "llso"),
                    ("XRANGE", log_key, f"0-{offset + 1}", "+", "COUNT", count),
                ]
                groups.append((meta_key, commands))
            replies = [
                r for pair in await cluster_client.multi_each(self.redis, groups) for r in pair
            ]
            return self._partition_reads(replies)
        async with self.redis.pipeline(transaction=True) as pipe:
            for topic, partition, offset, count in requests:
                log_key, meta_key, _, _ = keys.partition_keys(topic, partition)
                pipe.hmget(meta_key, "hw", "lso", "ls", "ab", "llso")
                pipe.xrange(log_key, f"0-{offset + 1}", "+", count=count)
            replies = await pipe.execute()
        return self._partition_reads(replies)

    @staticmethod
    def _partition_reads(replies: list[Any]) -> list[PartitionRead]:
        out = []
        for i in range(0, len(replies), 2):
            hw, lso, stable, last_abort, local_start = replies[i]
            if hw is None:
                raise StoreError("UNKNOWN_TOPIC_OR_PARTITION")
            out.append(
                PartitionRead(
                    int(hw),
                    int(lso),
                    replies[i + 1],
                    int(stable if stable is not None else hw),
                    int(last_abort or -1),
                    int(local_start or -1),
                )
            )
        return out

    async def aborted(self, topic: str, partition: int, start: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions whose ABORT marker is
        at or after `start`, oldest first: what a read_committed fetch from `start` must
        tell the consumer to skip."""
        members = await self.redis.zrangebyscore(keys.aborted_key(topic, partition), start, "+inf")
        out = []
        for m in members:
            pid, first = m.split()
            out.append((int(pid), int(first)))
        return out

    async def aborted_ranges(
        self, topic: str, partition: int, start: int, end: int, limit: int | None = 10_000
    ) -> list[tuple[int, int, int]]:
        """(producer id, first offset, ABORT marker offset) of the aborted transactions
        with data in [start, end): their markers are at or after `start`, their first
        offsets before `end` (at most `limit` looked at, as Fetch's aborted list; None:
        all, which the compactor needs to be exact: at most one per two offsets)."""
        page = (0, limit) if limit is not None else (None, None)
        members = await self.redis.zrangebyscore(
            keys.aborted_key(topic, partition), start, "+inf", *page, withscores=True
        )
        out = []
        for m, marker in members:
            pid, first = m.split()
            if int(first) < end:
                out.append((int(pid), int(first), int(marker)))
        return out

    async def watermarks(self, topic: str, partition: int) -> tuple[int, int, int, int]:
        """(log start offset, high watermark, max timestamp, offset of max timestamp)."""
        meta = keys.partition_keys(topic, partition)[1]
        hw, lso, maxts, maxtsoff = await self.redis.hmget(meta, "hw", "lso", "maxts", "maxtsoff")
        if hw is None:
            raise StoreError("UNKNOWN_TOPIC_OR_PARTITION")
        return int(lso), int(hw), int(maxts or -1), int(maxtsoff or -1)

    async def last_stable_offset(self, topic: str, partition: int) -> int:
        """The first open transaction's first offset, else the high watermark."""
        meta = keys.partition_keys(topic, partition)[1]
        hw, stable = await self.redis.hmget(meta, "hw", "ls")
        if hw is None:
            raise StoreError("UNKNOWN_TOPIC_OR_PARTITION")
        return int(stable if stable is not None else hw)

    async def offset_for_time(self, topic: str, partition: int, ts: int) -> tuple[int, int]:
        """First (offset, timestamp) whose timestamp >= ts, or (-1, -1)."""
        time_key = keys.partition_keys(topic, partition)[2]
        lso, hw, _, _ = await self.watermarks(topic, partition)
        hits = await self.redis.zrangebyscore(time_key, ts, "+inf", start=0, num=1)
        if not hits:
            return -1, -1
        async for entries in self.record_chunks(topic, partition, max(int(hits[0]), lso), hw):
            for entry_id, fields in entries:
                record_ts = int(fields[1])
                if record_ts >= ts:
                    return int(entry_id[2:]) - 1, record_ts
        return -1, -1


async def _shared(
    pending: dict[Any, asyncio.Future[Any]], key: Any, lookup: Callable[[], Awaitable[T]]
) -> T:
    """Await the lookup in flight for `key`, or start it: one Redis read for all."""
    future = pending.get(key)
    if future is None:
        future = asyncio.ensure_future(lookup())
        pending[key] = future

        def finished(done: asyncio.Future[Any]) -> None:
            pending.pop(key, None)
            if not done.cancelled():
                done.exception()  # retrieved: each waiter has raised it already

        future.add_done_callback(finished)
    # Shielded: a cancelled request does not cancel the lookup others wait for.
    return await asyncio.shield(future)


def _stale_ok(fallback: bool) -> AbstractContextManager[None]:
    """With a remembered answer to fall back on, a lookup waits for Redis only briefly:
    Metadata, Produce and Fetch keep going on what this sidecar knows."""
    return _briefly() if fallback else nullcontext()


@contextmanager
def _briefly() -> Iterator[None]:
    with resilience.request_deadline(STALE_FALLBACK_S), resilience.tentative():
        yield  # (tentative: missing so short a deadline under load is no outage)


def _now_ms() -> int:
    return int(time.time() * 1000)
