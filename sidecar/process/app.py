"""Start-up and shutdown of one sidecar process."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
from collections.abc import Callable

from redis.exceptions import BusyLoadingError, ConnectionError

from sidecar import share
from sidecar.broker import Broker
from sidecar.cluster import Cluster
from sidecar.config import listeners as listener_config
from sidecar.config import topic as topic_config
from sidecar.config.settings import Settings
from sidecar.groups.coordinator import GroupCoordinator
from sidecar.longpoll import Wakeups
from sidecar.maintenance.compactor import Compactor
from sidecar.maintenance.retention import RetentionSweeper
from sidecar.process.data_dir_lock import DataDirInUse
from sidecar.process.embedded_redis import EmbeddedRedis
from sidecar.process.redis_supervisor import RedisSupervisor
from sidecar.security import scram_config
from sidecar.security.acls import authorizer as acl_authorizer
from sidecar.security.sasl import oauthbearer
from sidecar.server import KafkaServers
from sidecar.storage import keys, resilience
from sidecar.storage.broker_configs import DynamicBrokerConfigs
from sidecar.storage.connection import redact
from sidecar.storage.group_store import GroupStore
from sidecar.storage.registry import Registry
from sidecar.storage.resilience import RedisUnavailable
from sidecar.storage.scram_store import ScramStore
from sidecar.storage.store import RedisStore
from sidecar.telemetry.runtime import Telemetry
from sidecar.tiered import parquet
from sidecar.tiered.archiver import Archiver
from sidecar.tiered.object_store import ObjectStore, ObjectStoreError
from sidecar.tiered.remote_log import RemoteLog
from sidecar.udp_ingest import UdpIngest

log = logging.getLogger("skiff")


async def _connect(url: str, description: str, timeout: float = 30.0) -> RedisStore:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            return await RedisStore.connect(url, description)
        except (BusyLoadingError, ConnectionError, OSError, RedisUnavailable) as exc:
            if loop.time() > deadline:
                raise RuntimeError(
                    f"cannot reach Redis at {description}: {exc}. Check that it runs and that "
                    "--redis-url is right."
                ) from exc
            await asyncio.sleep(0.2)


async def serve(
    settings: Settings,
    ready: asyncio.Event | None = None,
    private_redis: bool = False,
    redis_problem: Callable[[], str | None] | None = None,
) -> None:
    """One sidecar. `private_redis`: a `--workers` parent's embedded Redis, which only its
    workers use (node ids are forced as with a sidecar's own embedded Redis);
    `redis_problem`: the parent's word on whether that Redis can be brought back."""
    embedded = None
    supervisor = None
    url = settings.redis_url
    if url is None:
        embedded = EmbeddedRedis(settings.data_dir)
        try:
            url = embedded.start()
        except DataDirInUse as exc:
            log.error("%s", exc)
            raise SystemExit(2) from None
        description = f"embedded redis-server at {url}"
        supervisor = RedisSupervisor(embedded)
        redis_problem = supervisor.problem
    else:
        description = redact(url)
    resilience.configure(
        settings.redis_timeout_ms, settings.redis_retry_ms, settings.redis_max_connections
    )
    # What has started is stopped again, in reverse order, when start-up fails (else
    # background loops would outlive it and hold the process); SIGTERM takes the graceful
    # path below instead.
    async with contextlib.AsyncExitStack() as started:
        if embedded is not None:
            started.callback(embedded.stop)
        if supervisor is not None:
            supervising = asyncio.create_task(supervisor.run(), name="redis-supervisor")
            started.callback(supervising.cancel)
        store = await _connect(url, description, settings.redis_connect_timeout)
        started.push_async_callback(store.close)
        store.producer_id_expiration_ms = settings.producer_id_expiration_ms
        store.topic_defaults = topic_config.server_defaults(settings)
        store.storage_format_default = settings.storage_format
        wakeups = Wakeups(store.redis)
        store.identity.on_reset(lambda _cluster_id: wakeups.watermarks.clear())
        # The registry cache lasts while the subscription is live (store.py).
        store.subscription = wakeups.watermarks
        wakeups.topic_listeners.append(store.topic_changed)
        await wakeups.start()
        started.push_async_callback(wakeups.stop)
        if embedded is not None and settings.node_id < 0:
            # The embedded Redis is private: any registration in it is a dead run's.
            settings = dataclasses.replace(settings, node_id=0)
        # Bound (not yet accepting) before registering: a port 0 is advertised as bound.
        server = KafkaServers(settings, listener_config.resolve(settings))
        listeners = await server.bind()
        started.push_async_callback(server.stop)
        cluster = Cluster(
            settings,
            Registry(store.redis),
            force_node_id=embedded is not None or private_redis,
            listeners=listeners,
        )
        await cluster.start()
        started.push_async_callback(cluster.stop)
        # Dynamic broker configs (KIP-226) set the server defaults of topic configs: read
        # before the sweeper, compactor and listeners start.
        dynamic = DynamicBrokerConfigs(settings, store, lambda: cluster.node_id)
        wakeups.channel_listeners.setdefault(keys.BROKER_CONFIGS_CHANNEL.encode(), []).append(
            dynamic.published
        )
        await dynamic.start(wakeups.watermarks)
        started.push_async_callback(dynamic.stop)
        store.identity.on_reset(lambda _cluster_id: dynamic.published(b""))
        groups = GroupCoordinator(settings, GroupStore(store.redis), cluster)
        await groups.start()
        started.push_async_callback(groups.stop)
        sweeper = RetentionSweeper(store, cluster, settings.log_retention_check_interval_ms)
        await sweeper.start()
        started.push_async_callback(sweeper.stop)
        compactor = Compactor(store, cluster, settings.log_cleaner_backoff_ms)
        await compactor.start()
        started.push_async_callback(compactor.stop)
        for line in await scram_config.bootstrap(ScramStore(store.redis), settings.add_scram):
            log.info("%s", line)
        # ACLs are loaded before the listener opens: no request is judged without them.
        authorizer = await acl_authorizer.start(settings, store.redis)
        started.push_async_callback(acl_authorizer.stop, authorizer)
        broker = Broker(
            settings,
            store,
            wakeups,
            await store.cluster_id(),
            cluster,
            groups,
            authorizer,
            dynamic=dynamic,
        )
        remote_url = settings.remote_storage
        if remote_url is None and (embedded is not None or private_redis):
            remote_url = f"file://{settings.data_dir.resolve()}/remote"
        if remote_url is not None:
            try:
                broker.remote = store.remote = RemoteLog(ObjectStore(remote_url), store.redis)
            except ObjectStoreError as exc:
                log.error("%s: check --remote-storage and the AWS_* variables", exc)
                raise SystemExit(2) from None
            missing = parquet.available() if settings.remote_parquet else None
            if missing:
                log.error("%s", missing)
                raise SystemExit(2)
            archiver = Archiver(
                store,
                cluster,
                broker.remote,
                settings.remote_log_manager_task_interval_ms,
                parquet_files=settings.remote_parquet,
            )
            await archiver.start()
            started.push_async_callback(archiver.stop)
        await broker.transactions.start()
        started.push_async_callback(broker.transactions.stop)
        # An operator's `skiff storage reset --fresh` gives clients a new cluster id.
        store.identity.on_reset(lambda cluster_id: setattr(broker, "cluster_id", cluster_id))
        await store.identity.start()
        started.push_async_callback(store.identity.stop)
        telemetry = await Telemetry.start(settings, broker, server)
        started.push_async_callback(telemetry.stop)
        if telemetry.http is not None and redis_problem is not None:
            telemetry.http.liveness = redis_problem
        await oauthbearer.prepare(broker, [(lis.name, lis.protocol) for lis in listeners])
        await server.start(broker)
        udp = None
        if settings.udp_listen is not None and settings.udp_topic is not None:
            udp = UdpIngest(
                broker, settings.udp_listen, settings.udp_topic, settings.udp_stats_interval_ms
            )
            await udp.start()
            started.push_async_callback(udp.stop)
        log.info(
            "Skiff node %d listening on %s, Redis %s: %s",
            cluster.node_id,
            ", ".join(map(str, listeners)),
            store.redis_version,
            description,
        )
        if not listener_config.secured(listeners):
            log.info(
                "no security configured: every listener is PLAINTEXT, clients are not "
                "authenticated (docs/security.md)"
                if not settings.authorizer_class_name
                else "every listener is PLAINTEXT: clients are not authenticated and the ACL "
                "authorizer sees each as User:ANONYMOUS (docs/security.md)"
            )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if ready:
            ready.set()
        await stop.wait()
        started.pop_all()
    try:
        telemetry.shutting_down()
        if udp is not None:
            await udp.stop()
        await sweeper.stop()
        await compactor.stop()
        await broker.transactions.stop()
        await _shut_down(settings, server, wakeups, groups, cluster)
        await acl_authorizer.stop(authorizer)
        await telemetry.stop()
        await store.identity.stop()
        await store.close()
    finally:
        if supervisor is not None:
            supervising.cancel()  # no restart of the server being stopped
        if embedded:
            embedded.stop()
    log.info("stopped")


async def _shut_down(
    settings: Settings,
    server: KafkaServers,
    wakeups: Wakeups,
    groups: GroupCoordinator,
    cluster: Cluster,
) -> None:
    """SIGTERM: stop accepting connections and reading requests; answer long polls at
    once with what they have; hand the groups' leases and the broker registration back
    while in-flight requests (appends included) finish and are answered; after
    --shutdown-timeout-ms close whatever is left."""
    bound = settings.shutdown_timeout_ms / 1000
    loop = asyncio.get_running_loop()
    end = loop.time() + bound
    log.info("shutting down (in-flight requests get up to %.1f s)", bound)
    server.stop_accepting()
    wakeups.shutdown()
    with resilience.request_deadline(max(bound - 0.5, 0.1)):
        handback = asyncio.gather(
            groups.stop(), share.stop_all(), cluster.stop(), return_exceptions=True
        )
    await server.stop(timeout=max(end - loop.time(), 0.0))
    try:
        await asyncio.wait_for(handback, max(end - loop.time(), 0.5))
    except TimeoutError:
        log.warning("could not release groups or deregister within the shutdown bound")
    await wakeups.stop()
