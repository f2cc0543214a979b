"""A redis-py asyncio client whose round trips are timed and traced
(sidecar/telemetry/redis_calls.py): single commands, pipelines (MULTI/EXEC or plain)
and the pre-packed script calls of scripts.Script.run_packed (decorated with
round_trip). Instrumenting the client, not the store's methods, covers every caller;
the client class it wraps (resilience.ResilientRedis) retries inside, so a retried
call is one span covering all its attempts.

The instrumentation is a mixin over any redis.asyncio.Redis subclass:
instrument(SomeRedis) returns SomeRedis with timing on top (its pipelines too,
whatever pipeline class SomeRedis makes), e.g. a client class that retries."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from sidecar.telemetry import redis_calls

T = TypeVar("T")
_script_names: dict[str, str] = {}


def _script_name(sha: Any) -> str:
    if not _script_names:
        from sidecar.storage import scripts

        _script_names.update({s.sha: s.name for s in scripts.ALL})
    text = sha.decode() if isinstance(sha, bytes) else str(sha)
    return _script_names.get(text, "?")


def server_attributes(pool: Any) -> dict[str, Any]:
    """server.address / server.port / db.namespace of a pool, computed once per pool."""
    cached = getattr(pool, "_skiff_server_attributes", None)
    if cached is not None:
        return cached
    if hasattr(pool, "nodes_manager"):  # a Redis Cluster client: its first seed node
        from sidecar.storage.cluster_client import endpoint

        return endpoint(pool)
    kwargs = pool.connection_kwargs
    attributes: dict[str, Any] = {"db.namespace": str(kwargs.get("db", 0))}
    if "path" in kwargs:
        attributes["server.address"] = kwargs["path"]
    else:
        attributes["server.address"] = str(kwargs.get("host", "localhost"))
        attributes["server.port"] = int(kwargs.get("port", 6379))
    pool._skiff_server_attributes = attributes
    return attributes


class InstrumentedMixin:
    """Put before a redis.asyncio.Redis (subclass) in the bases; see instrument()."""

    connection_pool: Any

    def _attributes(self) -> dict[str, Any]:
        return server_attributes(getattr(self, "connection_pool", None) or self)

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        name = args[0]
        operation = name.decode() if isinstance(name, bytes) else str(name)
        if operation.upper() == "EVALSHA" and len(args) > 1:
            operation = f"EVALSHA {_script_name(args[1])}"
        started = redis_calls.begin(operation, self._attributes())
        try:
            result = await super().execute_command(*args, **options)
        except BaseException as exc:
            redis_calls.end(started, exc)
            raise
        redis_calls.end(started)
        return result

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        pipe = super().pipeline(transaction, shard_hint)  # type: ignore[misc]
        # The base's pipeline class with execute() timed on top (no new state, so
        # swapping the instance's class is safe).
        pipe.__class__ = _instrumented_pipeline(type(pipe))
        return pipe


class InstrumentedPipelineMixin:
    command_stack: Any
    is_transaction: bool
    connection_pool: Any

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        if not self.command_stack:
            return await super().execute(raise_on_error)
        extra = None
        if redis_calls.wants_span():
            commands = sorted({str(args[0]).upper() for args, _ in self.command_stack})
            extra = {
                "db.operation.batch.size": len(self.command_stack),
                "skiff.redis.commands": commands,
            }
        operation = "MULTI/EXEC" if self.is_transaction else "PIPELINE"
        started = redis_calls.begin(operation, server_attributes(self.connection_pool), extra)
        try:
            result = await super().execute(raise_on_error)  # type: ignore[misc]
        except BaseException as exc:
            redis_calls.end(started, exc)
            raise
        redis_calls.end(started)
        return result


_operations: dict[str, str] = {}  # script name -> "EVALSHA <name>"
_pipelines: dict[type, type] = {}
_clients: dict[type, type] = {}


def _instrumented_pipeline(base: type) -> type:
    if issubclass(base, InstrumentedPipelineMixin):
        return base
    cls = _pipelines.get(base)
    if cls is None:
        cls = _pipelines[base] = type(
            f"Instrumented{base.__name__}", (InstrumentedPipelineMixin, base), {}
        )
    return cls


def instrument(base: type[Redis]) -> type[Redis]:
    """`base` (redis.asyncio.Redis or a subclass) with its round trips timed and traced;
    use it for Redis.from_url and Sentinel.master_for(redis_class=...)."""
    if issubclass(base, InstrumentedMixin):
        return base
    cls = _clients.get(base)
    if cls is None:
        cls = _clients[base] = type(
            f"Instrumented{base.__name__}", (InstrumentedMixin, base), {"__module__": __name__}
        )
    return cls


InstrumentedRedis = instrument(Redis)


def round_trip(
    method: Callable[..., Awaitable[T]],
) -> Callable[..., Awaitable[T]]:
    """For Script.run_packed(self, redis, packed, keys, args, wait, ...): one EVALSHA
    (plus WAIT when asked) sent on a pooled connection, outside execute_command."""

    @functools.wraps(method)
    async def wrapper(self: Any, redis: Any, *args: Any, **kwargs: Any) -> T:
        operation = _operations.get(self.name)
        if operation is None:
            operation = _operations[self.name] = f"EVALSHA {self.name}"
        if not redis_calls.wants_span():  # timed only: no attributes to build
            started: Any = (operation, redis_calls.perf_counter(), None)
        else:
            wait = args[3] if len(args) > 3 else kwargs.get("wait")
            extra = {"db.stored_procedure.name": self.name}
            if wait is not None:
                extra["skiff.redis.wait_replicas"] = wait[0]
            pool = getattr(redis, "connection_pool", None) or redis
            started = redis_calls.begin(operation, server_attributes(pool), extra)
        try:
            result = await method(self, redis, *args, **kwargs)
        except BaseException as exc:
            redis_calls.end(started, exc)
            raise
        redis_calls.end(started)
        return result

    return wrapper
