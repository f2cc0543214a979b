"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-219, KIP-546): what AlterClientQuotas
stores, what DescribeClientQuotas reads, and the enforcement of the produce/fetch byte
rates, of request_percentage (request_quota.py) and of controller_mutation_rate.

Stored in Redis, one hash (QUOTAS_KEY), so every sidecar sees the same quotas: field
`[[type, name|null], ...]\\0key` (the entity's components sorted by type, JSON; null
is the default entity) -> the value. One field per (entity, key), so two sidecars
altering different keys of one entity do not overwrite each other; a request's changes
go in one MULTI.

Enforcement is per sidecar, as each Kafka broker enforces its quotas on the traffic it
sees: a Rate over quota.window.num samples of quota.window.size.seconds each (Kafka's
SampledStat and Rate, same arithmetic), per quota "metric tags" (user, client id) as
Kafka's DefaultQuotaCallback picks them, and throttle_time_ms = (rate - bound) / bound *
window, as QuotaUtils.throttleTime. Rates idle a whole window are
dropped and at most MAX_RATES kept (Kafka expires its quota sensors after an hour idle;
that alone would not bound a client cycling client ids). The sidecar reads the hash again every
REFRESH_S seconds (and at once after its own AlterClientQuotas).

controller_mutation_rate (KIP-599) is a token bucket of partitions created or deleted,
as Kafka's ControllerMutationQuotaManager keeps it: it refills at the quota's rate up to
a burst of quota.window.num * quota.window.size.seconds * rate, and a request is over
quota once the bucket is below zero. Kafka's controller enforces it for the whole
cluster; here each sidecar does, and admin clients send CreateTopics, DeleteTopics and
CreatePartitions to the controller Metadata names, one sidecar."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from sidecar.protocol.java_order import string_hash

log = logging.getLogger(__name__)

QUOTAS_KEY = "skiff:quotas"
USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
# Kafka's QuotaConfig: the keys each entity type takes, with their ConfigDef types.
USER_CLIENT_KEYS = {
    PRODUCER_BYTE_RATE: "LONG",
    CONSUMER_BYTE_RATE: "LONG",
    REQUEST_PERCENTAGE: "DOUBLE",
    CONTROLLER_MUTATION_RATE: "DOUBLE",
}
IP_KEYS = {CONNECTION_CREATION_RATE: "INT"}
REFRESH_S = 1.0
# Rates this sidecar keeps at most: a client cycling client ids must not grow memory
# without bound. Past it the least recently used rate goes (its client starts afresh).
MAX_RATES = 10_000
JAVA_LONG_MAX = 2.0**63 - 1
JAVA_INT_MAX = 2**31 - 1

# An entity: its components as sorted (type, name) pairs; name None is the default.
Entity = tuple[tuple[str, str | None], ...]


def entity_of(pairs: Any) -> Entity:
    return tuple(sorted(pairs))


def _field(entity: Entity, key: str) -> str:
    return json.dumps([list(p) for p in entity], separators=(",", ":")) + "\0" + key


def _parse_field(raw: str) -> tuple[Entity, str]:
    head, _, key = raw.partition("\0")
    return entity_of((str(t), None if n is None else str(n)) for t, n in json.loads(head)), key


@dataclass(slots=True)
class Snapshot:
    """The stored quotas, and the order Kafka's maps would hold them in: each entity's
    and each (entity, key)'s insertion sequence number (see java_order)."""

    quotas: dict[Entity, dict[str, float]] = field(default_factory=dict)
    key_seq: dict[tuple[Entity, str], int] = field(default_factory=dict)
    entity_seq: dict[Entity, int] = field(default_factory=dict)


class QuotaStore:
    """Field `entity\\0key` -> "value seq"; `entity\\0` -> the entity's seq; SEQ_FIELD:
    the counter the seqs come from."""

    SEQ_FIELD = "\0seq"

    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def snapshot(self) -> Snapshot:
        raw = await self.redis.hgetall(QUOTAS_KEY)
        snap = Snapshot()
        for f, v in raw.items():
            f = f.decode() if isinstance(f, bytes) else f
            v = v.decode() if isinstance(v, bytes) else v
            if f == self.SEQ_FIELD:
                continue
            try:
                entity, key = _parse_field(f)
                if not key:
                    snap.entity_seq[entity] = int(v)
                    continue
                value, _, seq = v.partition(" ")
                snap.quotas.setdefault(entity, {})[key] = float(value)
                snap.key_seq[(entity, key)] = int(seq or 0)
            except (ValueError, TypeError):
                log.warning("ignoring a malformed quota field in %s: %r", QUOTAS_KEY, f)
        for entity in snap.quotas:
            snap.entity_seq.setdefault(entity, 0)
        return snap

    async def all(self) -> dict[Entity, dict[str, float]]:
        return (await self.snapshot()).quotas

    async def apply(self, have: Snapshot, changes: list[tuple[Entity, str, float | None]]) -> None:
        """Set (a value) or remove (None) each (entity, key), in one MULTI. Keys and
        entities new to `have` get the next sequence numbers, in the order given."""
        if not changes:
            return
        fresh = sum(1 for e, k, v in changes if v is not None and (e, k) not in have.key_seq)
        fresh += len({e for e, _, v in changes if v is not None and e not in have.quotas})
        seq = await self.redis.hincrby(QUOTAS_KEY, self.SEQ_FIELD, fresh) - fresh
        left = {e: set(have.quotas.get(e, ())) for e, _, _ in changes}
        pipe = self.redis.pipeline(transaction=True)
        for entity, key, value in changes:
            if value is None:
                pipe.hdel(QUOTAS_KEY, _field(entity, key))
                left[entity].discard(key)
                continue
            if entity not in have.quotas and not left[entity]:
                seq += 1
                pipe.hset(QUOTAS_KEY, _field(entity, ""), str(seq))
            if (entity, key) in have.key_seq:
                order = have.key_seq[(entity, key)]
            else:
                seq += 1
                order = seq
            left[entity].add(key)
            pipe.hset(QUOTAS_KEY, _field(entity, key), f"{float(value)!r} {order}")
        for entity, keys in left.items():
            if not keys:
                pipe.hdel(QUOTAS_KEY, _field(entity, ""))
        await pipe.execute()


# -- Kafka's Rate (org.apache.kafka.common.metrics.stats.Rate over a WindowedSum) ------


@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0
    events: int = 0

    def reset(self, now: int) -> None:
        self.start_ms = self.last_event_ms = now
        self.value, self.events = 0.0, 0


@dataclass(slots=True)
class Rate:
    samples_n: int
    window_ms: int
    samples: list[_Sample] = field(default_factory=list)
    current: int = 0
    used_ms: int = 0  # the last record(): QuotaManager drops rates idle a whole window

    def _current(self, now: int) -> _Sample:
        if not self.samples:
            self.samples.append(_Sample(now, now))
        return self.samples[self.current]

    def record(self, value: float, now: int) -> None:
        self.used_ms = now
        sample = self._current(now)
        if now - sample.start_ms >= self.window_ms:
            # one extra sample for the one overlapping the window's start (Kafka's)
            self.current = (self.current + 1) % (self.samples_n + 1)
            if self.current >= len(self.samples):
                sample = _Sample(now, now)
                self.samples.append(sample)
            else:
                sample = self.samples[self.current]
                sample.reset(now)
        sample.value += value
        sample.events += 1
        sample.last_event_ms = now

    def _purge(self, now: int) -> None:
        expire = self.samples_n * self.window_ms
        for s in self.samples:
            if now - s.last_event_ms >= expire:
                s.reset(now)

    def window_size(self, now: int) -> int:
        self._purge(now)
        if not self.samples:
            self.samples.append(_Sample(now, now))
        elapsed = now - min(s.start_ms for s in self.samples)
        full = elapsed // self.window_ms
        if full < self.samples_n - 1:
            elapsed += (self.samples_n - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now: int) -> float:
        """Per second."""
        self._purge(now)
        total = sum(s.value for s in self.samples)
        return total / (self.window_size(now) / 1000)


# -- which quota applies (Kafka's DefaultQuotaCallback) --------------------------------


def _lookup(
    quotas: dict[Entity, dict[str, float]], key: str, user: str, client_id: str
) -> tuple[float, tuple[str, str]] | None:
    """The bound for `key` and the metric tags (user, client id) whose traffic shares
    it, in Kafka's order of precedence; None: no quota."""
    order: list[tuple[Entity, tuple[str, str]]] = [
        (entity_of([(USER, user), (CLIENT_ID, client_id)]), (user, client_id)),
        (entity_of([(USER, user), (CLIENT_ID, None)]), (user, client_id)),
        (entity_of([(USER, user)]), (user, "")),
        (entity_of([(USER, None), (CLIENT_ID, client_id)]), (user, client_id)),
        (entity_of([(USER, None), (CLIENT_ID, None)]), (user, client_id)),
        (entity_of([(USER, None)]), (user, "")),
        (entity_of([(CLIENT_ID, client_id)]), ("", client_id)),
        (entity_of([(CLIENT_ID, None)]), ("", client_id)),
    ]
    for entity, tags in order:
        values = quotas.get(entity)
        if values is not None and key in values:
            return values[key], tags
    return None


def _throttle_ms(rate: Rate, bound: float, now: int, max_ms: int) -> int:
    """QuotaUtils.boundedThrottleTime: (rate - bound) / bound * window, at most max_ms;
    0 within the quota."""
    observed = rate.measure(now)
    if observed <= bound:
        return 0
    return int(min(round((observed - bound) / bound * rate.window_size(now)), max_ms))


def _ip_quota(quotas: dict[Entity, dict[str, float]], ip: str) -> float | None:
    """connection_creation_rate of `ip`: its own entity (written as any form of the
    address), else the default ip entity."""
    address = _address(ip)
    default = None
    for entity, values in quotas.items():
        if len(entity) != 1 or entity[0][0] != IP or CONNECTION_CREATION_RATE not in values:
            continue
        name = entity[0][1]
        if name is None:
            default = values[CONNECTION_CREATION_RATE]
        elif name == ip or (address is not None and _address(name) == address):
            return values[CONNECTION_CREATION_RATE]
    return default


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address `text` writes (an IPv4-mapped IPv6 one as IPv4); None for a host
    name (Kafka resolves those; here they match only a peer named alike)."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class QuotaManager:
    """This sidecar's quota enforcement: the quotas last read from Redis, and one Rate
    per (quota key, metric tags), least recently used first."""

    def __init__(self, samples: int = 11, window_s: int = 1, max_rates: int = MAX_RATES) -> None:
        self.max_rates = max_rates
        self.samples = samples
        self.window_ms = window_s * 1000
        self.quotas: dict[Entity, dict[str, float]] = {}
        self.keys: set[str] = set()  # the keys any entity has a quota for
        self.rates: dict[tuple[str, str, str], Rate] = {}
        self.buckets: dict[tuple[str, str], TokenBucket] = {}  # controller mutations
        self.loaded_at = float("-inf")
        self._refreshing: asyncio.Task[None] | None = None
        self._store: QuotaStore | None = None

    def attach(self, redis: Redis) -> None:
        self._store = QuotaStore(redis)

    def set_quotas(self, quotas: dict[Entity, dict[str, float]]) -> None:
        self.quotas = quotas
        self.keys = {key for values in quotas.values() for key in values}
        self.loaded_at = time.monotonic()

    def enforces(self, key: str) -> bool:
        """Whether any entity has a quota for `key` (else nothing need be measured)."""
        self._maybe_refresh()
        return key in self.keys

    def _maybe_refresh(self) -> None:
        if self._store is None or time.monotonic() - self.loaded_at < REFRESH_S:
            return
        if self._refreshing is not None and not self._refreshing.done():
            return
        self.loaded_at = time.monotonic()  # one attempt per REFRESH_S, even failing
        self._refreshing = asyncio.get_running_loop().create_task(self._refresh())

    async def _refresh(self) -> None:
        assert self._store is not None
        try:
            self.set_quotas(await self._store.all())
        except Exception as exc:  # Redis away: keep enforcing what we had
            log.warning("could not read client quotas from Redis: %s", exc)

    def limit(self, key: str, user: str, client_id: str) -> float | None:
        self._maybe_refresh()
        found = _lookup(self.quotas, key, user, client_id)
        return None if found is None else found[0]

    def record(
        self, key: str, user: str, client_id: str, value: float, max_ms: int = JAVA_INT_MAX
    ) -> int:
        """Record `value` (bytes; request_percentage: percent of a second) for the
        client; the throttle time in ms (0: within quota, at most max_ms), as Kafka's
        ClientQuotaManager.recordAndGetThrottleTimeMs."""
        self._maybe_refresh()
        if not self.quotas:
            return 0
        found = _lookup(self.quotas, key, user, client_id)
        if found is None:
            return 0
        bound, tags = found
        now = int(time.time() * 1000)
        rate = self._recorded((key, *tags), value, now)
        return _throttle_ms(rate, bound, now, max_ms)

    def _recorded(self, tags: tuple[str, str, str], value: float, now: int) -> Rate:
        """The rate of `tags`, made the most recently used, with `value` recorded."""
        rate = self.rates.pop(tags, None) or Rate(self.samples, self.window_ms)
        self.rates[tags] = rate  # to the end: the most recently used
        self._expire(now)
        rate.record(value, now)
        return rate

    def _expire(self, now: int) -> None:
        """Drop rates idle for a whole quota window (all their samples would be purged:
        a fresh Rate measures the same) and, past max_rates, the least recently used."""
        idle = self.samples * self.window_ms
        while len(self.rates) > 1:
            oldest = next(iter(self.rates))
            if len(self.rates) <= self.max_rates and now - self.rates[oldest].used_ms < idle:
                break
            del self.rates[oldest]

    def mutation_quota(self, user: str, client_id: str, strict: bool) -> MutationQuota | None:
        """The client's controller mutation quota for one request; None: unbounded."""
        self._maybe_refresh()
        found = _lookup(self.quotas, CONTROLLER_MUTATION_RATE, user, client_id)
        if found is None:
            return None
        rate, tags = found
        burst = self.samples * self.window_ms / 1000 * rate
        bucket = self.buckets.pop(tags, None) or TokenBucket()
        self.buckets[tags] = bucket  # to the end: the most recently used
        now = int(time.time() * 1000)
        # Drop full buckets (a fresh one is the same) and, past max_rates, the least
        # recently used.
        while len(self.buckets) > 1:
            oldest_tags = next(iter(self.buckets))
            if len(self.buckets) <= self.max_rates and not self.buckets[oldest_tags].full(now):
                break
            del self.buckets[oldest_tags]
        return MutationQuota(bucket, rate, burst, strict)

    def connection_throttle_ms(self, ip: str) -> int:
        """Count a connection from `ip` against its connection_creation_rate (KIP-612:
        the ip's own quota, else the default ip's); the throttle time in ms if over it,
        at most one quota window, the connection then not counted (Kafka's
        ConnectionQuotas.recordIpConnectionMaybeThrottle)."""
        self._maybe_refresh()
        if CONNECTION_CREATION_RATE not in self.keys:
            return 0
        bound = _ip_quota(self.quotas, ip)
        if bound is None:
            return 0
        now = int(time.time() * 1000)
        rate = self._recorded((CONNECTION_CREATION_RATE, ip, ""), 1.0, now)
        throttle_ms = _throttle_ms(rate, bound, now, self.window_ms)
        if throttle_ms:
            rate.record(-1.0, now)
        return throttle_ms

    def unrecord(self, key: str, user: str, client_id: str, value: float) -> None:
        """Take back a recorded value (a throttled Fetch answers with no records)."""
        found = _lookup(self.quotas, key, user, client_id)
        if found is not None and (rate := self.rates.get((key, *found[1]))) is not None:
            rate.record(-value, int(time.time() * 1000))

    def max_value_in_window(self, key: str, user: str, client_id: str) -> float | None:
        """Kafka's getMaxValueInQuotaWindow: what a Fetch may return at most."""
        bound = self.limit(key, user, client_id)
        if bound is None:
            return None
        return bound * (self.samples - 1) * self.window_ms / 1000


class TokenBucket:
    """Kafka's metrics.stats.TokenBucket: starts full, refills at `rate` per second up
    to `burst`; a recording may take it below zero."""

    def __init__(self) -> None:
        self.tokens = 0.0
        self.last_ms = 0  # as Kafka's: the first refill fills the bucket
        self.rate = self.burst = 0.0  # the quota it was last used with

    def _refill(self, rate: float, burst: float, now: int) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = min(burst, self.tokens + rate * (now - self.last_ms) / 1000)
        self.last_ms = now

    def full(self, now: int) -> bool:
        """Whether it would be full now at its last quota: as good as a fresh one."""
        return self.tokens + self.rate * (now - self.last_ms) / 1000 >= self.burst

    def measure(self, rate: float, burst: float, now: int) -> float:
        self._refill(rate, burst, now)
        return self.tokens

    def record(self, value: float, rate: float, burst: float, now: int) -> None:
        self._refill(rate, burst, now)
        self.tokens = min(burst, self.tokens - value)


class MutationQuota:
    """One request's controller mutation quota: Kafka's StrictControllerMutationQuota
    (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+: a mutation asked for
    while the bucket is below zero is refused with THROTTLING_QUOTA_EXCEEDED) or
    PermissiveControllerMutationQuota (older versions: every mutation is made and
    counted, and the answer is throttled)."""

    def __init__(self, bucket: TokenBucket, rate: float, burst: float, strict: bool) -> None:
        self.bucket = bucket
        self.rate = rate
        self.burst = burst
        self.strict = strict
        self._throttle_ms = 0
        self._throttled_at = 0

    def _note_violation(self, now: int) -> None:
        # ControllerMutationQuotaManager.throttleTimeMs: -tokens / rate, in ms.
        self._throttle_ms = round(-self.bucket.tokens / self.rate * 1000)
        self._throttled_at = now

    def record(self, partitions: int) -> bool:
        """Count `partitions` mutations; False if refused (strict, over quota)."""
        now = int(time.time() * 1000)
        if self.strict and self.bucket.measure(self.rate, self.burst, now) < 0:
            self._note_violation(now)
            return False
        self.bucket.record(partitions, self.rate, self.burst, now)
        if not self.strict and self.bucket.tokens < 0:
            self._note_violation(now)
        return True

    def throttle_time_ms(self) -> int:
        """What is left of the last violation's throttle time (Kafka's throttleTime)."""
        if self._throttle_ms == 0:
            return 0
        elapsed = int(time.time() * 1000) - self._throttled_at
        return min(max(self._throttle_ms - elapsed, 0), JAVA_INT_MAX)


# -- the order of Kafka's HashMaps ---------------------------------------------------


def _entity_hash(entity: Entity) -> int:
    """ClientQuotaEntity.hashCode: Objects.hash(entries), entries a HashMap<String, String>."""
    total = 0
    for kind, name in entity:
        total += string_hash(kind) ^ (0 if name is None else string_hash(name))
    return (31 + total) & 0xFFFFFFFF


def _bucket(h: int, buckets: int) -> int:
    return (h ^ (h >> 16)) & (buckets - 1)


def _buckets(n: int, initial: int) -> int:
    """A HashMap's table size holding n keys: `initial`, doubled past 3/4 full."""
    buckets = initial
    while n > buckets * 3 // 4:
        buckets *= 2
    return buckets


def java_order(items: list[Any], hash_of: Any, seq_of: Any = None, initial: int = 16) -> list[Any]:
    """`items` in a java.util.HashMap's iteration order: by bucket, then by insertion
    (seq_of, or the list's order). Kafka's quota images are rebuilt on each change as
    `new HashMap<>(oldSize)` (initial=1 here: the smallest table that holds them)."""
    buckets = _buckets(len(items), initial)
    position = {id(x): n for n, x in enumerate(items)}
    return sorted(
        items,
        key=lambda x: (
            _bucket(hash_of(x), buckets),
            seq_of(x) if seq_of else 0,
            position[id(x)],
        ),
    )


def entity_order(entities: list[Entity], seq: dict[Entity, int] | None = None) -> list[Entity]:
    if seq is None:  # a result map: HashMap<>() filled in request order
        return java_order(entities, _entity_hash)
    return java_order(entities, _entity_hash, lambda e: seq.get(e, 0), initial=1)


def key_order(entity: Entity, snap: Snapshot) -> list[str]:
    keys = list(snap.quotas.get(entity, {}))
    return java_order(keys, string_hash, lambda k: snap.key_seq.get((entity, k), 0), initial=1)


def table_size(n: int) -> int:
    """HashMap's tableSizeFor(n): the table a HashMap<>(n) starts with."""
    size = 1
    while size < n:
        size *= 2
    return size


def component_order(parts: dict[str, str | None]) -> list[str]:
    """An entity's types as Kafka's HashMap<>(n) of them iterates them."""
    return java_order(list(parts), string_hash, initial=table_size(len(parts)))
