"""Changes to an existing topic's registry entry: its config overrides (AlterConfigs,
IncrementalAlterConfigs) and its partition count (CreatePartitions).

Every change is a compare-and-set (lua/topic_cas.lua) of the topic's JSON in
`skiff:topics`: read the entry, compute the new one, replace it only if nobody changed
it meanwhile, else read again and re-apply. So two sidecars altering one topic at once
never lose an update, and fields this module does not know are kept. The sidecar that
made the change updates its own topic cache at once; the script publishes the topic's
name on keys.TOPICS_CHANNEL, so the others drop theirs as soon as the message reaches
them (on a Redis Cluster: within their TOPIC_CACHE_SECONDS, 1 s, cache)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from sidecar.storage import keys, scripts
from sidecar.storage.store import RedisStore, StoreError, TopicInfo

log = logging.getLogger(__name__)

CAS_ATTEMPTS = 50  # conflicts need another writer per attempt; 50 is never reached


class TopicGone(Exception):
    """The topic does not exist (or was deleted while being changed)."""


async def _read(store: RedisStore, name: str) -> tuple[bytes, dict[str, Any]]:
    raw = await store.redis.hget(keys.TOPICS, name)
    if raw is None:
        raise TopicGone(name)
    return raw, json.loads(raw)


async def _swap(store: RedisStore, name: str, old: bytes, doc: dict[str, Any]) -> TopicInfo | None:
    new = json.dumps(doc)
    channel = keys.TOPICS_CHANNEL if store._publish_gone else ""
    if not await scripts.TOPIC_CAS(store.redis, [keys.TOPICS], [name, old, new, channel]):
        return None
    info = store._topic_from_json(name, new.encode())
    store._topics[name] = (time.monotonic(), info, None)
    return info


def _configs_of(doc: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in (doc.get("configs") or {}).items()}


async def alter_configs(
    store: RedisStore,
    name: str,
    change: Callable[[dict[str, str]], dict[str, str]],
    validate_only: bool = False,
) -> dict[str, str]:
    """Replace a topic's overrides with `change(current overrides)` (which validates and
    raises on bad input); returns the new overrides. Raises TopicGone."""
    for _ in range(CAS_ATTEMPTS):
        raw, doc = await _read(store, name)
        new = change(_configs_of(doc))
        if validate_only:
            return new
        if new:
            doc["configs"] = new
        else:
            doc.pop("configs", None)
        if await _swap(store, name, raw, doc) is not None:
            log.info("topic %s: config overrides now %s", name, new)
            return new
    raise StoreError("CONCURRENT_TRANSACTIONS", f"topic {name} kept changing")


async def add_partitions(
    store: RedisStore,
    name: str,
    check: Callable[[int], None],
    count: int,
    validate_only: bool = False,
) -> int:
    """Grow a topic to `count` partitions; `check(current count)` raises when the request
    is not allowed. Returns the old count. New partitions get their meta hash (watermarks
    0) before the registry shows them, so a client that sees one can use it at once;
    existing partitions are not touched. Raises TopicGone."""
    created: list[int] = []  # partitions whose meta this call made
    if not validate_only:
        await store.identity.verify()  # no partition is made in a Redis that lost its data
    try:
        for _ in range(CAS_ATTEMPTS):
            raw, doc = await _read(store, name)
            current = int(doc["partitions"])
            check(current)
            if validate_only:
                return current
            async with store.redis.pipeline(transaction=False) as pipe:
                todo = [p for p in range(current, count) if p not in created]
                for p in todo:
                    meta = keys.partition_keys(name, p)[1]
                    pipe.hsetnx(meta, "hw", 0)
                    pipe.hsetnx(meta, "lso", 0)
                    pipe.hsetnx(meta, "sid", store.identity.cluster_id or "")
                replies = await pipe.execute()
            created += [p for i, p in enumerate(todo) if replies[3 * i]]
            doc["partitions"] = count
            if await _swap(store, name, raw, doc) is not None:
                created = []
                log.info("topic %s: %d -> %d partitions", name, current, count)
                return current
        raise StoreError("CONCURRENT_TRANSACTIONS", f"topic {name} kept changing")
    finally:
        if created:
            await _forget(store, name, created)


async def _forget(store: RedisStore, name: str, created: list[int]) -> None:
    """Remove the metas this call made for partitions the topic did not get (it was
    refused or deleted meanwhile); partitions another change added stay."""
    raw = await store.redis.hget(keys.TOPICS, name)
    count = int(json.loads(raw)["partitions"]) if raw else 0
    extra = [p for p in created if p >= count]
    if extra:
        await store.redis.delete(*(keys.partition_keys(name, p)[1] for p in extra))


async def topic_names(store: RedisStore) -> list[str]:
    """Every topic's name (CreateTopics checks new names for collisions against them)."""
    return [n.decode() for n in await store.redis.hkeys(keys.TOPICS)]
