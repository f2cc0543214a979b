"""This sidecar's place among the sidecars sharing one Redis: it registers a node id
and its advertised address, renews the registration every heartbeat interval, and
keeps the list of live sidecars that Metadata and FindCoordinator report.

A registration lives for broker_session_timeout_ms unless renewed (Kafka's
broker.session.timeout.ms). Group leases are valid while their holder's registration
lives, so one renewal keeps all of a sidecar's groups. A sidecar that cannot renew
in time stops acting as coordinator by itself (`owns_leases`), before another
sidecar can see its registration expire, and re-registers under a new incarnation
when Redis answers again."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import secrets
from collections.abc import Callable, Sequence

from sidecar.config import listeners as listener_config
from sidecar.config.listeners import Listener
from sidecar.config.settings import HostPort, Settings
from sidecar.storage.fault_stats import STATS
from sidecar.storage.registry import BrokerInfo, Registry
from sidecar.storage.resilience import request_deadline

log = logging.getLogger("skiff.cluster")

# How long Metadata waits for the registry before answering from the heartbeat's list.
CATCH_UP_WAIT_S = 0.5


def _weight(key: str, node_id: int) -> int:
    """Rendezvous (highest random weight) score of a node for a key."""
    return int.from_bytes(hashlib.blake2b(f"{key}\0{node_id}".encode(), digest_size=8).digest())


def rendezvous(key: str, node_ids: Sequence[int]) -> int:
    """The node a key belongs to: the one with the highest weight. When a node leaves,
    only its keys move; when one joins, it takes only the keys it now wins."""
    return max(node_ids, key=lambda n: _weight(key, n))


@functools.lru_cache(maxsize=4096)
def assign(topic: str, count: int, node_ids: tuple[int, ...]) -> tuple[int, ...]:
    """Leaders of a topic's partitions: rendezvous hashing with bounded loads. Partition
    p goes to the node of highest weight for "topic/p" that leads fewer than
    ceil(count / nodes) of the topic's partitions so far, so a topic is spread evenly
    (plain rendezvous left a 6-partition topic on 4/2/0 of 3 nodes) while a membership
    change moves few partitions: a leaving node's, plus the few the new caps reshuffle
    (measured in docs/architecture.md, "Sidecars and Metadata")."""
    cap = -(-count // len(node_ids))
    load = dict.fromkeys(node_ids, 0)
    out = []
    for p in range(count):
        key = f"{topic}/{p}"
        for node in sorted(node_ids, key=lambda n: _weight(key, n), reverse=True):
            if load[node] < cap:
                load[node] += 1
                out.append(node)
                break
    return tuple(out)


class Cluster:
    def __init__(
        self,
        settings: Settings,
        registry: Registry,
        force_node_id: bool,
        listeners: tuple[Listener, ...] | None = None,
    ) -> None:
        self.settings = settings
        # This sidecar's listeners as bound (port 0 resolved), inter-broker one first:
        # each is registered with its advertised address.
        self.listeners = listeners or listener_config.resolve(settings)
        self.advertised = self.listeners[0].advertised
        self._endpoints = tuple(
            (li.name, li.advertised.host, li.advertised.port) for li in self.listeners
        )
        self.registry = registry
        self.force = force_node_id
        self.node_id = -1
        self.incarnation = ""
        self.live: list[BrokerInfo] = []
        self._valid_until = 0.0  # loop time: our registration surely lives until then
        self._task: asyncio.Task[None] | None = None
        self._on_lost: list[Callable[[], None]] = []

    @property
    def token(self) -> str:
        return f"{self.node_id}:{self.incarnation}"

    @property
    def me(self) -> BrokerInfo:
        adv = self.advertised
        return BrokerInfo(self.node_id, adv.host, adv.port, self.incarnation, self._endpoints)

    def on_lost(self, callback: Callable[[], None]) -> None:
        """Called when this sidecar's registration (and so its leases) is lost."""
        self._on_lost.append(callback)

    def owns_leases(self) -> bool:
        return asyncio.get_running_loop().time() < self._valid_until

    async def wait_owns_leases(self, timeout: float) -> bool:
        """Whether this sidecar holds a live registration within `timeout` seconds: right
        after Redis returns, the heartbeat registers it again in a moment, and a group
        request waits for that rather than failing (librdkafka gives up fetching a
        partition's committed offset after a few COORDINATOR_NOT_AVAILABLE answers)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self.owns_leases():
            if loop.time() >= deadline or self._task is None:
                return False
            await asyncio.sleep(0.05)
        return True

    async def start(self) -> None:
        await self._register()
        self._task = asyncio.create_task(self._heartbeat())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        try:
            await self.registry.leave(self.node_id, self.incarnation)
        except Exception as exc:  # shutting down: Redis may be gone already
            log.warning("could not deregister node %d: %s", self.node_id, exc)

    async def _register(self) -> None:
        ttl = self.settings.broker_session_timeout_ms
        adv = self.advertised
        loop = asyncio.get_running_loop()
        while True:
            self.incarnation = secrets.token_hex(8)
            sent = loop.time()
            node_id, wait_ms = await self.registry.register(
                self.settings.node_id,
                self.incarnation,
                adv.host,
                adv.port,
                ttl,
                self.force,
                self._endpoints,
            )
            if node_id >= 0:
                break
            log.warning(
                "node id %d is registered by another live sidecar; waiting %d ms for it to "
                "expire (give each sidecar its own --node-id, or -1 to pick one)",
                self.settings.node_id,
                wait_ms,
            )
            await asyncio.sleep(min(wait_ms, ttl) / 1000 + 0.05)
        self.node_id = node_id
        self._valid_until = sent + ttl / 1000
        await self.refresh()
        log.info(
            "registered as node %d (%s)",
            node_id,
            ", ".join(f"{name}://{HostPort(h, p)}" for name, h, p in self._endpoints),
        )

    async def refresh(self) -> None:
        self.live = await self.registry.live()

    async def catch_up(self) -> None:
        """Re-read the live sidecars now, for Metadata. The heartbeat's list lags a sidecar
        that just registered by up to one heartbeat interval, and a client that one sidecar
        told of a broker and the next did not drops that broker: librdkafka 2.10+ closes
        its connection, failing what is in flight there (a consumer's join-time Metadata,
        which left it waiting for metadata for 5 minutes). While Redis is unreachable or
        slow, the heartbeat's list stands."""
        if not STATS.reachable:
            return
        try:
            with request_deadline(CATCH_UP_WAIT_S):
                await self.refresh()
        except Exception:  # noqa: BLE001 - the heartbeat logs Redis trouble; this only narrows a lag
            pass

    async def _heartbeat(self) -> None:
        interval = self.settings.broker_heartbeat_interval_ms / 1000
        ttl = self.settings.broker_session_timeout_ms
        loop = asyncio.get_running_loop()
        failing = False
        while True:
            await asyncio.sleep(interval)
            try:
                sent = loop.time()
                if await self.registry.renew(self.node_id, self.incarnation, ttl):
                    self._valid_until = sent + ttl / 1000
                else:
                    log.warning(
                        "registration of node %d expired or was unregistered; registering again",
                        self.node_id,
                    )
                    self._lost()
                    await self._register()
                await self.refresh()
                if failing:
                    log.info("broker registration renewed again")
                failing = False
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not failing:
                    log.warning("cannot renew broker registration: %s", exc)
                failing = True
                if not self.owns_leases():
                    self._lost()

    def _lost(self) -> None:
        self._valid_until = 0.0
        for callback in self._on_lost:
            callback()

    # -- what Metadata and FindCoordinator report --------------------------------

    def brokers(self, listener: str | None = None) -> list[BrokerInfo]:
        """The live sidecars; with `listener`, at their addresses on that listener (what
        a client that came in on it is told)."""
        live = self.live
        if not any(b.node_id == self.node_id for b in live):
            live = sorted([*live, self.me], key=lambda b: b.node_id)
        if listener is None:
            return live
        return [b.on(listener) for b in live]

    def leaders(self, topic: str, count: int) -> tuple[int, ...]:
        """Leaders of a topic's `count` partitions, spread over the live sidecars (see
        `assign`); any sidecar serves any partition, so this only spreads clients' load."""
        return assign(topic, count, tuple(b.node_id for b in self.brokers()))

    def leader(self, topic: str, partition: int, count: int) -> int:
        return self.leaders(topic, count)[partition]

    def preferred(self, key: str) -> BrokerInfo:
        """The sidecar a group or transactional id belongs to while no one holds it."""
        brokers = self.brokers()
        node = rendezvous(key, [b.node_id for b in brokers])
        return next(b for b in brokers if b.node_id == node)

    def by_token(self, token: str) -> BrokerInfo | None:
        for b in self.brokers():
            if b.token == token:
                return b
        return None

    async def live_holder(self, token: str) -> BrokerInfo | None:
        """The live sidecar holding a lease, re-reading the registry before declaring
        a holder dead (it may have registered after our last refresh)."""
        if token == self.token:
            return self.me if self.owns_leases() else None
        found = self.by_token(token)
        if found is None:
            await self.refresh()
            found = self.by_token(token)
        return found
