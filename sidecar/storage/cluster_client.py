"""Redis Cluster support: `redis+cluster://h1:p1[,h2:p2...]` (`rediss+cluster://` for
TLS) gives a redis-py asyncio RedisCluster that routes every command to its slot's
primary, under Skiff's retry policy (resilience.run) and instrumentation.

Division of labour: redis-py follows MOVED/ASK/TRYAGAIN inside one attempt and keeps
the slot map; its own retries are off (retries=0), so connection loss, timeouts,
CLUSTERDOWN and a slot left without a primary during a failover surface to
resilience.run, which retries them under the request's deadline (a retried call stays
one span) and re-discovers the topology before the next attempt (`_initialize`).

Two hot paths bypass redis-py's command routing, as on a single Redis:
- the append (scripts.Script.run_packed) sends its pre-packed EVALSHA (and WAIT) on a
  connection of the slot's primary (`node_for`), following MOVED by updating the slot
  map and retrying;
- Fetch's reads (`multi_each`): one MULTI/EXEC per partition (one slot), pipelined per
  node: one round trip per node, the nodes in parallel.

Scripts are loaded on every primary (SCRIPT LOAD is sent to all primaries); a NOSCRIPT,
e.g. from a replica promoted by a failover (Redis 7 does not replicate SCRIPT LOAD),
loads them on every primary again and resends.

Wake-ups use classic PUBLISH, which a Redis Cluster broadcasts to every node, so the
one pattern subscription per sidecar is on any one node (`pubsub()` takes the next
node on each (re)subscription).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import hiredis
from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, PipelineCommand, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ClusterDownError, MovedError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sidecar.storage import multi_host_url, resilience
from sidecar.telemetry import redis_calls

CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")


@dataclass(frozen=True, slots=True)
class ClusterUrl:
    nodes: list[tuple[str, int]]
    username: str | None = None
    password: str | None = None
    ssl: bool = False


def parse_cluster_url(url: str) -> ClusterUrl:
    """redis+cluster://[[user:]password@]h1:p1[,h2:p2...][/]: any reachable nodes of the
    cluster (the rest are discovered with CLUSTER SLOTS)."""
    u = multi_host_url.split(url, CLUSTER_SCHEMES, 6379, "Redis Cluster")
    if not u.hosts or u.path.strip("/") not in ("", "0"):
        raise ValueError(
            f"expected redis+cluster://[password@]host:port[,host:port...] (database 0 only), "
            f"got {url!r}"
        )
    return ClusterUrl(u.hosts, u.username, u.password, u.scheme == "rediss+cluster")


_cluster_types: dict[type, bool] = {}


def is_cluster(redis: Any) -> bool:
    # Per client class, once: RedisCluster's bases are typing Protocols, whose
    # isinstance costs microseconds, and every append asks.
    kind = type(redis)
    found = _cluster_types.get(kind)
    if found is None:
        found = _cluster_types[kind] = isinstance(redis, RedisCluster)
    return found


async def after_failure(cluster: RedisCluster, exc: BaseException) -> None:
    """Bring the slot map up to date after a failure on a path that routes by itself."""
    if isinstance(exc, MovedError):
        try:
            await cluster.nodes_manager.move_slot(exc)
        except Exception:  # an unknown slot: rediscover everything
            cluster._initialize = True
    elif isinstance(
        exc, (RedisConnectionError, RedisTimeoutError, OSError, TimeoutError, ClusterDownError)
    ):
        cluster._initialize = True


async def node_for(cluster: RedisCluster, key: str | bytes) -> ClusterNode:
    """The primary serving key's slot (discovering the cluster first if needed)."""
    if cluster._initialize:
        await cluster.initialize()
    return cluster.nodes_manager.get_node_from_slot(cluster.keyslot(key))


async def replica_counts(cluster: RedisCluster) -> dict[str, int]:
    """Connected replicas of every primary (node name -> count), by asking every known
    node its ROLE; a node whose answer contradicts the slot map (a demoted primary still
    mapped as one) makes the map be re-read. Nodes silent for a second are left out."""
    if cluster._initialize:
        await cluster.initialize()
    nodes = cluster.get_nodes()

    async def role(node: ClusterNode) -> Any:
        return await asyncio.wait_for(
            RedisCluster.execute_command(cluster, "ROLE", target_nodes=node), 1.0
        )

    replies = await asyncio.gather(*(role(n) for n in nodes), return_exceptions=True)
    counts: dict[str, int] = {}
    for node, reply in zip(nodes, replies, strict=True):
        if isinstance(reply, BaseException) or not reply:
            continue
        is_primary = reply[0] in (b"master", "master")
        if is_primary:
            counts[node.name] = len(reply[2])
        if is_primary != (node.server_type == "primary"):
            cluster._initialize = True  # a failover happened: rediscover the slot map
    return counts


# -- the client -------------------------------------------------------------------------


class ResilientCluster(RedisCluster):
    """RedisCluster whose commands and pipelines go through resilience.run()."""

    _pubsub_turn = 0
    _node_kwargs: dict[str, Any]

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        name = args[0]
        reload = None
        if isinstance(name, (str, bytes)) and str(name).upper() in ("EVALSHA", "EVALSHA_RO"):
            sha = args[1] if isinstance(args[1], str) else args[1].decode()
            source = resilience.SCRIPTS.get(sha)
            if source is not None:

                async def reload() -> None:
                    await self.load_everywhere(source)

        return await resilience.run(
            lambda: RedisCluster.execute_command(self, *args, **dict(options)),
            str(name),
            reload,
        )

    async def load_everywhere(self, source: str) -> None:
        """SCRIPT LOAD on every primary (one attempt; the caller retries)."""
        await RedisCluster.execute_command(
            self, "SCRIPT", "LOAD", source, target_nodes=RedisCluster.PRIMARIES
        )

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> ClusterPipeline:
        if shard_hint:
            raise ValueError("shard_hint is not supported on a Redis Cluster")
        pipe = ResilientClusterPipeline(self, False)
        pipe._skiff_transaction = bool(transaction)
        return pipe

    def pubsub(self, **kwargs: Any) -> PubSub:  # type: ignore[override]
        """A plain subscription on one node, the next one at each call: classic pub/sub
        messages reach every node of a cluster."""
        nodes = list(self.nodes_manager.nodes_cache.values()) or list(self.startup_nodes)
        node = nodes[self._pubsub_turn % len(nodes)]
        self._pubsub_turn += 1
        client = Redis(host=node.host, port=node.port, **self._node_kwargs)
        return client.pubsub(**kwargs)


class ResilientClusterPipeline(ClusterPipeline):
    """A cluster pipeline whose execute() runs under resilience.run(); each attempt sends
    the whole stack. transaction=True: the commands must share one slot and run in one
    MULTI/EXEC on its primary (multi_each), without redis-py's cluster transaction
    (which queues every command through a thread)."""

    _skiff_transaction = False

    # redis-py blocks these in cluster pipelines; in a one-slot MULTI (and, for EVALSHA,
    # routed by its keys) they are what a single Redis does.
    def time(self) -> Any:  # type: ignore[override]
        return self.execute_command("TIME")

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:  # type: ignore[override]
        return self.execute_command("EVALSHA", sha, numkeys, *keys_and_args)

    @property
    def is_transaction(self) -> bool:
        return self._skiff_transaction

    @property
    def command_stack(self) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        return [(c.args, c.kwargs) for c in self._execution_strategy._command_queue]  # type: ignore[attr-defined]

    @property
    def connection_pool(self) -> RedisCluster:
        return self.cluster_client

    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> Any:
        strategy = self._execution_strategy
        stack = [(c.args, dict(c.kwargs)) for c in strategy._command_queue]  # type: ignore[attr-defined]
        if not stack:
            return []
        if self._skiff_transaction:
            await self.reset()
            commands = [args for args, _ in stack]
            # Timed by the instrumented pipeline's execute(): no second span here.
            (reply,) = await resilience.run(
                lambda: _multi_each_once(self.cluster_client, [(_first_key(commands), commands)]),
                "MULTI",
            )
            callbacks = self.cluster_client.response_callbacks
            out = []
            for (args, options), value in zip(stack, reply, strict=True):
                if isinstance(value, ResponseError):
                    if raise_on_error:
                        raise value
                    out.append(value)
                    continue
                callback = callbacks.get(str(args[0]).upper())
                out.append(callback(value, **options) if callback else value)
            return out

        async def attempt() -> Any:
            strategy._command_queue = [  # type: ignore[attr-defined]
                PipelineCommand(i, *args, **dict(kwargs)) for i, (args, kwargs) in enumerate(stack)
            ]
            return await ClusterPipeline.execute(self, raise_on_error, allow_redirections)

        return await resilience.run(attempt, "PIPELINE")


def _first_key(commands: Sequence[Sequence[Any]]) -> Any:
    for args in commands:
        if len(args) > 1:
            return args[1]
    raise ValueError("a transaction needs a keyed command")


# -- one MULTI/EXEC per slot, pipelined per node ------------------------------------------


async def multi_each(
    cluster: RedisCluster, groups: Sequence[tuple[Any, Sequence[Sequence[Any]]]]
) -> list[list[Any]]:
    """Run each group's commands (all keys of a group in one slot, routed by its key) in
    one MULTI/EXEC; the groups of one node go in one pipelined round trip, the nodes in
    parallel. Returns each group's raw EXEC reply, in order. One span, retried as one
    operation under the retry policy (a MOVED updates the slot map and resends)."""
    extra = None
    if redis_calls.wants_span():
        extra = {"db.operation.batch.size": sum(len(c) + 2 for _, c in groups)}
    started = redis_calls.begin("MULTI/EXEC", endpoint(cluster), extra)
    try:
        result = await resilience.run(lambda: _multi_each_once(cluster, groups), "MULTI")
    except BaseException as exc:
        redis_calls.end(started, exc)
        raise
    redis_calls.end(started)
    return result


async def _multi_each_once(
    cluster: RedisCluster, groups: Sequence[tuple[Any, Sequence[Sequence[Any]]]]
) -> list[list[Any]]:
    if cluster._initialize:
        await cluster.initialize()
    by_node: dict[str, tuple[ClusterNode, list[int]]] = {}
    for i, (key, _) in enumerate(groups):
        node = cluster.nodes_manager.get_node_from_slot(cluster.keyslot(key))
        by_node.setdefault(node.name, (node, []))[1].append(i)
    results: list[Any] = [None] * len(groups)
    jobs = [_node_multis(cluster, node, idx, groups, results) for node, idx in by_node.values()]
    if len(jobs) == 1:
        await jobs[0]
    else:
        outcomes = await asyncio.gather(*jobs, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
    return results


async def _node_multis(
    cluster: RedisCluster,
    node: ClusterNode,
    indexes: list[int],
    groups: Sequence[tuple[Any, Sequence[Sequence[Any]]]],
    results: list[Any],
) -> None:
    packed = []
    for i in indexes:
        packed.append(hiredis.pack_command(("MULTI",)))
        packed += [hiredis.pack_command(tuple(c)) for c in groups[i][1]]
        packed.append(hiredis.pack_command(("EXEC",)))
    conn = node.acquire_connection()
    try:
        await conn.send_packed_command(b"".join(packed))
        for i in indexes:
            await conn.read_response()  # +OK of MULTI
            for _ in groups[i][1]:
                await conn.read_response()  # +QUEUED (or MOVED: raised)
            results[i] = await conn.read_response()
    except BaseException as exc:
        # Replies may still be due on this connection: never reuse it.
        await conn.disconnect()
        node.release(conn)
        await after_failure(cluster, exc)
        raise
    node.release(conn)


# -- construction -------------------------------------------------------------------------


def endpoint(cluster: Any) -> dict[str, Any]:
    """server.address / server.port of a cluster client: its first seed node."""
    cached = getattr(cluster, "_skiff_server_attributes", None)
    if cached is not None:
        return cached
    seeds = list(getattr(cluster, "startup_nodes", []) or [])
    attributes: dict[str, Any] = {"db.namespace": "0"}
    if seeds:
        attributes["server.address"] = str(seeds[0].host)
        attributes["server.port"] = int(seeds[0].port)
    cluster._skiff_server_attributes = attributes
    return attributes


def cluster_client_for(
    url: str,
    timeout_s: float,
    client_class: type[RedisCluster],
    connection_class: type[Any],
    common: dict[str, Any],
) -> RedisCluster:
    spec = parse_cluster_url(url)
    kwargs = {k: v for k, v in common.items() if k != "retry"}
    client = client_class(
        startup_nodes=[ClusterNode(h, p) for h, p in spec.nodes],
        username=spec.username,
        password=spec.password,
        ssl=spec.ssl,
        retry=Retry(NoBackoff(), 0),
        require_full_coverage=True,
        **kwargs,
    )
    # Our connection class packs with hiredis and marks commands as sent for the retry
    # policy; NodesManager builds nodes from this same dict.
    client.connection_kwargs["connection_class"] = connection_class
    for seed in client.startup_nodes:
        seed.connection_class = connection_class
    client._node_kwargs = {
        "username": spec.username,
        "password": spec.password,
        "ssl": spec.ssl,
        "socket_timeout": timeout_s,
        "socket_connect_timeout": timeout_s,
        "health_check_interval": common.get("health_check_interval", 0),
    }
    return client
