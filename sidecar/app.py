"""Start-up and shutdown of one sidecar process."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal

from redis.exceptions import BusyLoadingError, ConnectionError

from . import topic_config
from .broker import Broker
from .cluster import Cluster
from .compactor import Compactor
from .embedded_redis import EmbeddedRedis
from .groups.coordinator import GroupCoordinator
from .longpoll import Wakeups
from .retention import RetentionSweeper
from .server import KafkaServer
from .settings import Settings
from .storage.group_store import GroupStore
from .storage.registry import Registry
from .storage.store import RedisStore
from .telemetry.runtime import Telemetry
from .udp_ingest import UdpIngest

log = logging.getLogger("skiff")


async def _connect(url: str, description: str, timeout: float = 30.0) -> RedisStore:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            return await RedisStore.connect(url, description)
        except (BusyLoadingError, ConnectionError, OSError) as exc:
            if loop.time() > deadline:
                raise RuntimeError(
                    f"cannot reach Redis at {description}: {exc}. Check that it runs and that "
                    "--redis-url is right."
                ) from exc
            await asyncio.sleep(0.2)


async def serve(settings: Settings, ready: asyncio.Event | None = None) -> None:
    embedded = None
    url = settings.redis_url
    if url is None:
        embedded = EmbeddedRedis(settings.data_dir)
        url = embedded.start()
        description = f"embedded redis-server at {url}"
    else:
        description = url
    try:
        store = await _connect(url, description, settings.redis_connect_timeout)
        store.producer_id_expiration_ms = settings.producer_id_expiration_ms
        store.topic_defaults = topic_config.server_defaults(settings)
        wakeups = Wakeups(store.redis)
        await wakeups.start()
        if embedded is not None and settings.node_id < 0:
            # The embedded Redis is private: any registration in it is a dead run's.
            settings = dataclasses.replace(settings, node_id=0)
        cluster = Cluster(settings, Registry(store.redis), force_node_id=embedded is not None)
        await cluster.start()
        groups = GroupCoordinator(settings, GroupStore(store.redis), cluster)
        await groups.start()
        sweeper = RetentionSweeper(store, cluster, settings.log_retention_check_interval_ms)
        await sweeper.start()
        compactor = Compactor(store, cluster, settings.log_cleaner_backoff_ms)
        await compactor.start()
        broker = Broker(settings, store, wakeups, await store.cluster_id(), cluster, groups)
        server = KafkaServer(broker)
        telemetry = await Telemetry.start(settings, broker, server)
        await server.start()
        udp = None
        if settings.udp_listen is not None and settings.udp_topic is not None:
            udp = UdpIngest(
                broker, settings.udp_listen, settings.udp_topic, settings.udp_stats_interval_ms
            )
            await udp.start()
        log.info(
            "Skiff node %d listening on %s (advertised as %s), Redis %s: %s",
            cluster.node_id,
            settings.listen,
            settings.advertised,
            store.redis_version,
            description,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if ready:
            ready.set()
        await stop.wait()
        log.info("shutting down")
        telemetry.shutting_down()
        if udp is not None:
            await udp.stop()
        await server.stop()
        await telemetry.stop()
        await compactor.stop()
        await sweeper.stop()
        await groups.stop()
        await cluster.stop()
        await wakeups.stop()
        await store.close()
    finally:
        if embedded:
            embedded.stop()
    log.info("stopped")
