"""Redis clients for Skiff: redis-py asyncio connections that pack commands with
hiredis, mark each command as sent for the retry policy (resilience.py), and follow a
Sentinel-managed primary.

redis.asyncio packs arguments in pure Python: 8.1 ms for one append of 1,000 records
(5,000+ arguments) against 0.8 ms with hiredis.pack_command (measured here with
redis-py 8.1, hiredis 3.5), which made packing cost more than the script itself.

URLs: `redis://`, `rediss://` and `unix://` as redis-py reads them, for a Redis Cluster
`redis+cluster://[[user:]password@]host1:port[,host2:port...]` (cluster_client.py), and
for Sentinel

    redis+sentinel://[[user:]password@]host1:26379[,host2:26379...]/service[/db][?opts]

(`rediss+sentinel://` for TLS to the data nodes). The password authenticates to the
Redis primary; `?sentinel_password=...` (and `sentinel_username=`) to the sentinels,
which otherwise need none. The primary is asked of the sentinels on every new
connection, so after a failover the next connection goes to the promoted replica;
a demoted primary's READONLY closes the connection it came on (redis-py's
SentinelManagedConnection), and the retry policy sends the command again on a fresh
one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import hiredis
from redis.asyncio.connection import (
    BlockingConnectionPool,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import (
    Sentinel,
    SentinelConnectionPool,
    SentinelManagedConnection,
    SentinelManagedSSLConnection,
)
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from sidecar.storage import cluster_client, multi_host_url, resilience
from sidecar.storage.instrumented import instrument
from sidecar.telemetry.redact import redact_url

SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
HEALTH_CHECK_INTERVAL_S = 30


try:  # redis-py's private parser module: without it, its own parser is used
    from redis._parsers import _AsyncHiredisParser
    from redis._parsers.base import SERVER_CLOSED_CONNECTION_ERROR
except ImportError:  # pragma: no cover - a redis-py that moved them
    _AsyncHiredisParser = None  # type: ignore[assignment,misc]


class _WholeBufferParser(_AsyncHiredisParser or object):  # type: ignore[misc]
    """Feeds hiredis everything the connection's StreamReader holds, straight from its
    buffer: StreamReader.read copies 64 KB at a time out of it first, which for a
    Fetch's megabyte of stored batches was an extra copy and ~16 loop turns (asyncio
    3.11's StreamReader internals, as its own read() uses them)."""

    async def read_from_socket(self) -> bool:
        stream: Any = self._stream
        if stream is None:
            raise RedisConnectionError(SERVER_CLOSED_CONNECTION_ERROR)
        if stream._exception is not None:
            raise stream._exception
        if not stream._buffer and not stream._eof:
            await stream._wait_for_data("read")
        buffer = stream._buffer
        if not buffer:
            raise RedisConnectionError(SERVER_CLOSED_CONNECTION_ERROR) from None
        self._reader.feed(buffer)  # type: ignore[union-attr]
        buffer.clear()
        stream._maybe_resume_transport()
        return True


class _HiredisPack:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if _AsyncHiredisParser is not None:
            kwargs.setdefault("parser_class", _WholeBufferParser)
        super().__init__(*args, **kwargs)

    def pack_command(self, *args: Any) -> list[bytes]:
        head = args[0]
        if isinstance(head, str):
            args = tuple(head.encode().split()) + args[1:]
        elif b" " in head:
            args = tuple(head.split()) + args[1:]
        return [hiredis.pack_command(args)]

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        # Connect and health-check first: a failure there means nothing was sent.
        if not self.is_connected:  # type: ignore[attr-defined]
            await self.connect()  # type: ignore[attr-defined]
        if check_health:
            await self.check_health()  # type: ignore[attr-defined]
        resilience.mark_sent()
        # As redis-py's send_packed_command, without its asyncio.wait_for (a new task per
        # command, ~25 us): resilience.run bounds the whole attempt already.
        if isinstance(command, str):
            command = command.encode()
        if isinstance(command, bytes):
            command = [command]
        try:
            writer = self._writer  # type: ignore[attr-defined]
            writer.writelines(command)
            await writer.drain()
        except OSError as exc:
            await self.disconnect(nowait=True)  # type: ignore[attr-defined]
            raise RedisConnectionError(f"Error while writing to socket: {exc}") from exc
        except BaseException:
            await self.disconnect(nowait=True)  # type: ignore[attr-defined]
            raise


class FastConnection(_HiredisPack, Connection):
    pass


class FastSSLConnection(_HiredisPack, SSLConnection):
    pass


class FastUnixConnection(_HiredisPack, UnixDomainSocketConnection):
    pass


class FastSentinelConnection(_HiredisPack, SentinelManagedConnection):
    pass


class FastSentinelSSLConnection(_HiredisPack, SentinelManagedSSLConnection):
    pass


def connection_class_for(url: str) -> type[Connection] | type[UnixDomainSocketConnection]:
    scheme = urlparse(url).scheme
    if scheme == "unix":
        return FastUnixConnection
    if scheme == "rediss":
        return FastSSLConnection
    if scheme == "rediss+sentinel":
        return FastSentinelSSLConnection
    if scheme == "redis+sentinel":
        return FastSentinelConnection
    return FastConnection


@dataclass(frozen=True, slots=True)
class SentinelUrl:
    sentinels: list[tuple[str, int]]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    ssl: bool = False
    sentinel_kwargs: dict[str, str] = field(default_factory=dict)


def parse_sentinel_url(url: str) -> SentinelUrl:
    """redis+sentinel://[[user:]password@]h1:p1,h2:p2/service[/db][?sentinel_password=..]"""
    u = multi_host_url.split(url, SENTINEL_SCHEMES, 26379, "Sentinel")
    segments = [s for s in u.path.split("/") if s]
    if not u.hosts or not segments or len(segments) > 2:
        raise ValueError(
            f"expected redis+sentinel://[password@]host:port[,host:port...]/service[/db], "
            f"got {url!r}"
        )
    db = int(segments[1]) if len(segments) == 2 else 0
    opts = {k: v[-1] for k, v in parse_qs(u.query).items()}
    sentinel_kwargs = {
        k.removeprefix("sentinel_"): v
        for k, v in opts.items()
        if k in ("sentinel_password", "sentinel_username")
    }
    return SentinelUrl(
        u.hosts,
        unquote(segments[0]),
        db,
        u.username,
        u.password,
        u.scheme == "rediss+sentinel",
        sentinel_kwargs,
    )


def redact(url: str) -> str:
    """The URL without its password (userinfo and query parameters), for logs."""
    return redact_url(url)


def client_for(url: str, timeout_s: float) -> Any:
    """The Redis client for a URL: commands time out after timeout_s, redis-py's own
    retries are off (resilience.run retries, knowing which writes may be resent).
    A resilience.ResilientRedis, or for redis+cluster:// a cluster_client.ResilientCluster.

    One client per process, shared by every Kafka connection: its pool (per node on a
    Redis Cluster) holds resilience.pool_size() connections, a few more than the
    commands resilience.run lets run at once (--redis-max-connections), so many
    concurrent clients queue for a connection instead of failing with redis-py's
    "Too many connections"; a single Redis's pool also waits (BlockingConnectionPool)
    for calls made outside run()."""
    common: dict[str, Any] = {
        "decode_responses": False,
        "health_check_interval": HEALTH_CHECK_INTERVAL_S,
        "socket_timeout": timeout_s,
        "socket_connect_timeout": timeout_s,
        "retry": Retry(NoBackoff(), 0),
        "max_connections": resilience.pool_size(),
    }
    scheme = urlparse(url).scheme
    if scheme in cluster_client.CLUSTER_SCHEMES:
        return cluster_client.cluster_client_for(
            url,
            timeout_s,
            instrument(cluster_client.ResilientCluster),  # type: ignore[arg-type]
            FastSSLConnection if scheme.startswith("rediss") else FastConnection,
            common,
        )
    if scheme in SENTINEL_SCHEMES:
        spec = parse_sentinel_url(url)
        sentinel_kwargs: dict[str, Any] = {
            "socket_timeout": timeout_s,
            "socket_connect_timeout": timeout_s,
            **spec.sentinel_kwargs,
        }
        sentinel = Sentinel(spec.sentinels, sentinel_kwargs=sentinel_kwargs)
        client = sentinel.master_for(
            spec.service,
            redis_class=instrument(resilience.ResilientRedis),
            connection_pool_class=SentinelConnectionPool,
            connection_class=connection_class_for(url),
            db=spec.db,
            username=spec.username,
            password=spec.password,
            **common,
        )
        assert isinstance(client, resilience.ResilientRedis)
        return client
    pool = BlockingConnectionPool.from_url(url, timeout=timeout_s, **common)
    client = instrument(resilience.ResilientRedis).from_pool(pool)
    # from_url lets the URL scheme pick the connection class, so set ours afterwards.
    client.connection_pool.connection_class = connection_class_for(url)
    return client


def take_over(conn: Any, protocol: Any) -> tuple[Any, Any, bytes]:
    """Put `protocol` on an open redis-py connection's transport in place of redis-py's
    stream reader (append_channel.py, longpoll.py: replies handled as they are read, no
    reader task). Returns the transport, redis-py's protocol (to be told of the
    connection's loss, which ends its disconnect()) and the bytes its stream reader had
    buffered, for `protocol` to take first. The one place of these redis-py internals."""
    transport = conn._writer.transport
    replaced = transport.get_protocol()
    transport.set_protocol(protocol)
    buffered = conn._reader._buffer
    data = bytes(buffered)
    buffered.clear()
    return transport, replaced, data
