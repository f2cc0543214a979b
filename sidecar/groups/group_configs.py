"""Consumer groups' configs (KIP-848, Kafka's GroupConfig `consumer.*`), set with
IncrementalAlterConfigs and read with DescribeConfigs on resource type GROUP (32):

| group config | server default | bounds (Kafka's broker defaults) |
|---|---|---|
| consumer.session.timeout.ms | --group-consumer-session-timeout-ms | 45000..60000 |
| consumer.heartbeat.interval.ms | --group-consumer-heartbeat-interval-ms | 5000..15000 |

The bounds are Kafka's group.consumer.min/max.session.timeout.ms and
group.consumer.min/max.heartbeat.interval.ms defaults, with its messages (widened to
the server default where that lies outside them). The share
groups' configs of the same resource are sidecar/share/group_configs.py.

Stored in Redis, hash skiff:group_configs, field `<group>\\0<name>` -> the value, so two
sidecars altering different configs of one group do not overwrite each other. Each
sidecar keeps a copy for its coordinator (a heartbeat costs Redis nothing), read again
at most every REFRESH_S seconds when asked and at once after its own alteration."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from redis.asyncio import Redis

log = logging.getLogger(__name__)

CONFIGS_KEY = "skiff:group_configs"
SESSION = "consumer.session.timeout.ms"
HEARTBEAT = "consumer.heartbeat.interval.ms"
# name -> (Kafka's broker config of the bound's name, min, max)
BOUNDS: dict[str, tuple[str, int, int]] = {
    SESSION: ("group.consumer.%s.session.timeout.ms", 45_000, 60_000),
    HEARTBEAT: ("group.consumer.%s.heartbeat.interval.ms", 5_000, 15_000),
}
NAMES = tuple(BOUNDS)
SET, DELETE = 0, 1
REFRESH_S = 1.0


def _field(group_id: str, name: str) -> str:
    return f"{group_id}\0{name}"


def validate(resource: Any, defaults: dict[str, int]) -> tuple[dict[str, int], list[str]] | str:
    """The consumer configs a GROUP resource of IncrementalAlterConfigs sets and deletes,
    or Kafka's INVALID_CONFIG message. Configs of other families are left out. A server
    default outside Kafka's bounds (tests run with short sessions) widens them to it."""
    sets: dict[str, int] = {}
    deletes: list[str] = []
    for c in resource.configs:
        if c.name not in BOUNDS:
            continue
        if c.config_operation == DELETE:
            deletes.append(c.name)
            sets.pop(c.name, None)
            continue
        if c.config_operation != SET:
            return f"Config {c.name} is not a list: only SET and DELETE apply."
        if c.value is None:
            return f"Null value not supported for: {c.name}"
        try:
            value = int(c.value.strip())
        except ValueError:
            return f"Invalid value {c.value} for configuration {c.name}: Not a number of type INT"
        bound, low, high = BOUNDS[c.name]
        low, high = min(low, defaults[c.name]), max(high, defaults[c.name])
        if value < low:
            return f"{c.name} must be greater than or equal to {bound % 'min'}"
        if value > high:
            return f"{c.name} must be less than or equal to {bound % 'max'}"
        sets[c.name] = value
    return sets, deletes


class GroupConfigs:
    """This sidecar's copy of every group's consumer configs."""

    def __init__(self, redis: Redis | None, defaults: dict[str, int]) -> None:
        self.redis = redis
        self.defaults = defaults
        self.values: dict[str, dict[str, int]] = {}
        self.loaded_at = -REFRESH_S
        self._refreshing: asyncio.Task[None] | None = None

    def get(self, group_id: str, name: str) -> int:
        self._maybe_refresh()
        return self.values.get(group_id, {}).get(name, self.defaults[name])

    def explicit(self, group_id: str) -> dict[str, int]:
        return dict(self.values.get(group_id, {}))

    def _maybe_refresh(self) -> None:
        if self.redis is None or time.monotonic() - self.loaded_at < REFRESH_S:
            return
        if self._refreshing is not None and not self._refreshing.done():
            return
        self.loaded_at = time.monotonic()  # one attempt per REFRESH_S, even failing
        self._refreshing = asyncio.get_running_loop().create_task(self.refresh())

    async def refresh(self) -> None:
        assert self.redis is not None
        try:
            raw = await self.redis.hgetall(CONFIGS_KEY)
        except Exception as exc:  # Redis away: keep what we had
            log.warning("could not read group configs from Redis: %s", exc)
            return
        values: dict[str, dict[str, int]] = {}
        for field, value in raw.items():
            group_id, _, name = field.decode().partition("\0")
            if name in BOUNDS:
                values.setdefault(group_id, {})[name] = int(value)
        self.values = values
        self.loaded_at = time.monotonic()

    async def alter(self, group_id: str, sets: dict[str, int], deletes: list[str]) -> None:
        assert self.redis is not None
        async with self.redis.pipeline(transaction=True) as pipe:
            if deletes:
                pipe.hdel(CONFIGS_KEY, *(_field(group_id, n) for n in deletes))
            if sets:
                pipe.hset(CONFIGS_KEY, mapping={_field(group_id, n): v for n, v in sets.items()})
            await pipe.execute()
        await self.refresh()

    async def current(self, group_id: str) -> dict[str, int]:
        """The group's explicit values, read from Redis now (DescribeConfigs)."""
        assert self.redis is not None
        raw = await self.redis.hmget(CONFIGS_KEY, [_field(group_id, n) for n in NAMES])
        return {n: int(v) for n, v in zip(NAMES, raw, strict=True) if v is not None}
