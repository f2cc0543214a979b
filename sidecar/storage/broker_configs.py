"""Dynamic broker configs (KIP-226) in Redis, shared by every sidecar: what
AlterConfigs / IncrementalAlterConfigs set on a BROKER resource ("" the cluster default,
"<node id>" one sidecar), and what each sidecar makes of them.

`skiff:broker_configs` is a hash of resource -> JSON {config name: value as given}.
A change is a compare-and-set of the resource's entry (lua/broker_config_cas.lua) that
publishes the resource on keys.BROKER_CONFIGS_CHANNEL: every sidecar's wake-up
subscription (longpoll.py) hears it and reads the hash again at once, as a Kafka broker
hears its controller's metadata. While the subscription is not known to be live (a
Redis Cluster, a loss) a sidecar reads it every second, and every 30 s anyway.

Each read recomputes the server defaults of topic configs (Kafka's default < the flag <
the dynamic cluster default < the dynamic value for this sidecar's node id) into
store.topic_defaults, which re-derives the effective config of every topic the store
caches, and producer.id.expiration.ms. While Redis is unavailable the last values read
stand (DescribeConfigs answers with them); alterations need Redis."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from sidecar.config import broker as broker_config
from sidecar.config import dynamic_broker
from sidecar.config import topic as topic_config
from sidecar.config.settings import Settings
from sidecar.storage import cluster_client, keys, scripts
from sidecar.storage.store import RedisStore, StoreError
from sidecar.telemetry.logs import RateLimitedLog

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0  # how often a sidecar without a live subscription reads the hash
SAFETY_SECONDS = 30.0  # how often it reads it anyway
CAS_ATTEMPTS = 50
MAX_ENTRY_BYTES = 1 << 20  # an entry read from Redis larger than this is ignored

# A change: (the resource's stored set, with the cluster default's min.insync.replicas)
# -> the new set; raises AdminError.
Change = Callable[[dict[str, str]], dict[str, str]]


def _decode(raw: bytes) -> dict[str, str] | None:
    """A resource's entry, or None when it is not a JSON object of strings."""
    if len(raw) > MAX_ENTRY_BYTES:
        return None
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):  # written by hand into Redis
        return None
    if not isinstance(doc, dict):
        return None
    return {str(k): str(v) for k, v in doc.items() if isinstance(v, str)}


class DynamicBrokerConfigs:
    def __init__(self, settings: Settings, store: RedisStore, node_id: Callable[[], int]) -> None:
        self.settings = settings
        self.store = store
        self._node_id = node_id
        # The server defaults of topic configs from flags alone (STATIC_BROKER_CONFIG).
        self.static_defaults = topic_config.server_defaults(settings)
        self.resources: dict[str, dict[str, str]] = {}  # as last read
        self._applied: tuple[int, dict[str, dict[str, str]]] | None = None
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._subscription: Any = None  # longpoll.WatermarkCache: live() and epoch
        self._read_at = float("-inf")
        self._read_epoch = -1
        self._log = RateLimitedLog(log)

    # -- what the configs are -------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self._node_id()

    def cluster_default(self) -> dict[str, str]:
        """The cluster default's set, with min.insync.replicas: Kafka 4 writes it there
        when the cluster is formatted (KIP-966); until altered, this sidecar's flag."""
        stored = self.resources.get(dynamic_broker.CLUSTER_DEFAULT, {})
        if dynamic_broker.MIN_INSYNC in stored:
            return dict(stored)
        return {dynamic_broker.MIN_INSYNC: str(self.settings.min_insync_replicas), **stored}

    def node(self) -> dict[str, str]:
        return dict(self.resources.get(str(self.node_id), {}))

    def layers(self) -> broker_config.Dynamic:
        return broker_config.Dynamic(self.cluster_default(), self.node())

    def topic_synonyms(self, key: topic_config.ConfigKey) -> list[dict[str, Any]]:
        """A topic config's broker synonyms (its DescribeConfigs entry, its source in
        CreateTopics' answer)."""
        return broker_config.topic_synonyms(key, self.static_defaults, self.layers())

    def apply(self) -> None:
        """Recompute what this sidecar takes from the configs (after a read, or when its
        node id changed)."""
        node_id = self.node_id
        state = (node_id, self.resources)
        if state == self._applied:
            return
        self._applied = state
        default, node = self.cluster_default(), self.node()
        defaults = dynamic_broker.topic_defaults(self.static_defaults, default, node)
        if defaults != self.store.topic_defaults:
            self.store.set_topic_defaults(defaults)
        self.store.producer_id_expiration_ms = dynamic_broker.layered_value(
            dynamic_broker.PRODUCER_ID_EXPIRATION,
            self.settings.producer_id_expiration_ms,
            default,
            node,
        )

    # -- reading --------------------------------------------------------------------------

    async def read(self) -> None:
        """Read every resource's configs from Redis and apply them."""
        sub = self._subscription
        epoch = sub.epoch if sub is not None else -1
        raw = await self.store.redis.hgetall(keys.BROKER_CONFIGS)
        resources = {}
        for field, value in raw.items():
            decoded = _decode(value)
            if decoded is not None:
                resources[field.decode(errors="replace")] = decoded
        self.resources = resources
        self._read_at = time.monotonic()
        self._read_epoch = epoch
        self.apply()

    def published(self, _data: bytes) -> None:
        """A change was published (keys.BROKER_CONFIGS_CHANNEL): read again now."""
        self._changed.set()

    async def start(self, subscription: Any = None) -> None:
        """The first read (before the sidecar serves), then the refresh loop.
        `subscription`: the wake-up subscription's state (longpoll.WatermarkCache)."""
        self._subscription = subscription
        try:
            await self.read()
        except Exception as exc:  # noqa: BLE001 - the loop reads again in a second
            log.warning("cannot read the dynamic broker configs yet: %s", exc)
            self.apply()
        self._task = asyncio.create_task(self._refresh(), name="skiff-broker-configs")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _due(self) -> bool:
        sub = self._subscription
        age = time.monotonic() - self._read_at
        if self._changed.is_set() or age >= SAFETY_SECONDS:
            return True
        current = sub is not None and sub.live() and sub.epoch == self._read_epoch
        return not current and age >= POLL_SECONDS

    async def _refresh(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), POLL_SECONDS)
            self.apply()  # the node id may have changed (registered again)
            if not self._due():
                continue
            self._changed.clear()
            try:
                await self.read()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - Redis trouble: the last values stand
                self._log.warning("cannot read the dynamic broker configs: %s", exc)

    # -- changing -------------------------------------------------------------------------

    async def alter(self, resource: str, change: Change, validate_only: bool) -> dict[str, str]:
        """Replace a resource's configs with `change(its current set)`, which validates
        (raising AdminError); returns the new set. Compare-and-set: re-applied to a
        fresh read when another sidecar changed the resource meanwhile."""
        # Not on a Redis Cluster (no live subscription there: sidecars read every second).
        channel = "" if cluster_client.is_cluster(self.store.redis) else keys.BROKER_CONFIGS_CHANNEL
        for _ in range(CAS_ATTEMPTS):
            raw = await self.store.redis.hget(keys.BROKER_CONFIGS, resource)
            stored = (_decode(raw) if raw is not None else None) or {}
            current = dict(stored)
            if resource == dynamic_broker.CLUSTER_DEFAULT:
                current = {**self.cluster_default(), **stored}
            new = change(current)
            if validate_only:
                return new
            keep = dict(new)
            formatted = resource == dynamic_broker.CLUSTER_DEFAULT and (
                dynamic_broker.MIN_INSYNC not in stored
            )
            if formatted and keep.get(dynamic_broker.MIN_INSYNC) == current.get(
                dynamic_broker.MIN_INSYNC
            ):
                # Still the value the sidecars start with: not written down, so each
                # keeps its own flag's (as when formatted) until someone sets it.
                keep.pop(dynamic_broker.MIN_INSYNC, None)
            entry = json.dumps(keep, separators=(",", ":")) if keep else ""
            old = raw if raw is not None else b""
            if await scripts.BROKER_CONFIG_CAS(
                self.store.redis, [keys.BROKER_CONFIGS], [resource, old, entry, channel]
            ):
                resources = dict(self.resources)  # a new dict: apply() compares with the last
                if keep:
                    resources[resource] = keep
                else:
                    resources.pop(resource, None)
                self.resources = resources
                self.apply()
                log.info("dynamic broker configs of %s now %s", _label(resource), _loggable(keep))
                return new
        raise StoreError("CONCURRENT_TRANSACTIONS", f"broker configs of {resource!r} kept changing")


def _label(resource: str) -> str:
    return "the cluster default" if resource == "" else f"node {resource}"


def _loggable(configs: Mapping[str, str]) -> dict[str, str]:
    """Values Kafka would hide (unknown names: their type is unknown) masked in logs."""
    return {k: v if k in dynamic_broker.DYNAMIC else "[hidden]" for k, v in configs.items()}
