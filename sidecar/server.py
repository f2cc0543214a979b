"""The Kafka listener: framing, per-connection ordering and dispatch to sidecar/apis.

Requests of one connection are handled one after another, as Kafka's broker does
(it mutes a connection until its response is sent): clients pipeline requests and
rely on in-order processing, e.g. for produce ordering within a partition.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any, cast

from sidecar import apis, connection_context, request_quota
from sidecar.apis import api_versions, sasl_authenticate, unavailable
from sidecar.append_order import AppendOrder, Ticket
from sidecar.broker import Broker
from sidecar.config.listeners import Listener
from sidecar.config.settings import Settings
from sidecar.protocol.framing import (
    API_VERSIONS_KEY,
    BadFrame,
    CloseConnection,
    RequestHeader,
    parse_header_prefix,
    response_frame,
    skip_tagged_fields,
)
from sidecar.protocol.kio_codec import (
    MAX_STRING_BYTES,
    decode_request,
    is_flexible_request,
    oversized_string,
)
from sidecar.protocol.primitives import unpack_i32
from sidecar.quotas import REQUEST_PERCENTAGE
from sidecar.security.sasl_config import SASL_SERVER_MAX_RECEIVE_SIZE
from sidecar.security.session import ConnectionSecurity
from sidecar.security.tls import ServerTls, TlsAcceptor, listener_tls
from sidecar.server_limits import ConnectionCounts, ListenerLimits, RequestMemory
from sidecar.storage import resilience
from sidecar.telemetry import metrics, requests
from sidecar.telemetry.logs import RateLimitedLog

log = logging.getLogger(__name__)

SHUTDOWN = "the sidecar is shutting down"
PAUSE_AT = 16  # queued requests per connection before we stop reading the socket
RESUME_AT = 4
MAX_IN_FLIGHT = 8  # pipelined Produce requests handled at once on one connection
PRODUCE_KEY = b"\x00\x00"
# Produce and Fetch skip the long-string check: their only strings are topic names
# (checked against the topic registry) and ids, and they carry the load.
HOT_PATH_KEYS = (0, 1)
_NO_DECODERS: dict[int, Callable[[bytes, int], Any]] = {}


class Request:
    __slots__ = ("header", "body", "flexible", "ticket", "security", "size")

    def __init__(
        self,
        header: RequestHeader,
        body: Any,
        flexible: bool,
        ticket: Ticket | None = None,
        security: ConnectionSecurity | None = None,
    ) -> None:
        self.header = header
        self.body = body
        self.flexible = flexible
        self.ticket = ticket  # Produce only: its place in the connection's append order
        # The connection's listener, protocol and principal (sidecar/security/session.py).
        self.security = security if security is not None else ConnectionSecurity()
        self.size = 0  # the request's size in bytes (client quotas count Produce's)

    @property
    def peer_host(self) -> str:
        """The client's address (JoinGroup's client host)."""
        return self.security.peer_host


async def dispatch(
    broker: Broker,
    frame: bytes,
    ticket: Ticket | None = None,
    security: ConnectionSecurity | None = None,
) -> bytes | list[Any] | None:
    """Handle one request frame; returns the response frame (Fetch: its parts, see
    framing.response_frame), or None (acks=0)."""
    if security is not None and security.sasl_unframed:
        if ticket is not None:
            ticket.release()
        return await _unframed_sasl_token(broker, frame, security)
    try:
        header, pos = parse_header_prefix(frame)
    except BadFrame as exc:
        raise CloseConnection(str(exc)) from None
    key, version = header.api_key, header.api_version
    if security is None:
        security = ConnectionSecurity()
    refusal = security.refusal(key)
    if refusal is not None:
        if ticket is not None:
            ticket.release()
        raise CloseConnection(refusal)
    handler = apis.HANDLERS.get(key)
    if key == API_VERSIONS_KEY and not (
        api_versions.MIN_VERSION <= version <= api_versions.MAX_VERSION
    ):
        return response_frame(header.correlation_id, False, api_versions.unsupported_body())
    if handler is None or not handler.MIN_VERSION <= version <= handler.MAX_VERSION:
        # Kafka closes the connection for an API or version it does not serve (clients
        # learn the ranges from ApiVersions first); so do we, with a log line.
        requests.rejected(handler)
        raise CloseConnection(f"unsupported API key {key} version {version}")
    # Metrics, and a span when tracing is on (sidecar/telemetry/requests.py).
    return await requests.observe(
        handler,
        header,
        security.peer_host,
        _handle(broker, handler, header, frame, pos, ticket, security),
    )


async def _handle(
    broker: Broker,
    handler: Any,
    header: RequestHeader,
    frame: bytes,
    pos: int,
    ticket: Ticket | None,
    security: ConnectionSecurity,
) -> bytes | list[Any] | None:
    key, version = header.api_key, header.api_version
    body, flexible = decode_body(handler, header, frame, pos)
    requests.decoded(body)
    request = Request(header, body, flexible, ticket, security)
    request.size = len(frame)
    identity = broker.store.identity
    if identity.lost is not None and key not in unavailable.NEEDS_NO_REDIS:
        # Redis lost the data this sidecar served (storage/identity.py): retriable errors
        # until the operator decides; the identity logs it, not each request.
        identity.refused += 1
        if ticket is not None:
            ticket.release()  # the Produce handler, which releases it, does not run
        result = unavailable.response(broker, request, identity.lost)
        if result is None:
            return None
        return response_frame(header.correlation_id, flexible, result)
    try:
        # Every Redis call of the request retries within one bound (resilience.py), so
        # the client hears back well within its request.timeout.ms.
        with resilience.request_deadline(resilience.POLICY.budget_s):
            if broker.quotas.enforces(REQUEST_PERCENTAGE):
                result = await _handle_within_quota(broker, handler, request)
            else:
                result = await handler.handle(broker, request)
    except CloseConnection as exc:
        if exc.response is not None:  # the answer to send before closing
            exc.response = response_frame(header.correlation_id, flexible, exc.response)
        raise
    except Exception as exc:
        reason = resilience.classify(exc)
        if reason is None:
            raise
        _log_unavailable(handler, version, exc)
        result = unavailable.response(broker, request, reason)
    if result is None:
        return None
    return response_frame(header.correlation_id, flexible and key != API_VERSIONS_KEY, result)


async def _handle_within_quota(broker: Broker, handler: Any, request: Request) -> Any:
    """handler.handle, its time on the event loop recorded against the client's
    request_percentage quota (request_quota.py)."""
    timed = request_quota.LoopTime(handler.handle(broker, request))
    result = await timed
    header = request.header
    throttle_ms = broker.quotas.record(
        REQUEST_PERCENTAGE,
        request.security.principal.name,
        header.client_id or "",
        timed.ns * request_quota.NANOS_TO_PERCENT,
        broker.quotas.window_ms,  # Kafka's ClientRequestQuotaManager.maxThrottleTimeMs
    )
    if throttle_ms <= 0 or result is None:
        return result
    connection_context.mute(throttle_ms)
    return request_quota.with_throttle(
        result, header.api_key, header.api_version, request.flexible, throttle_ms
    )


async def _unframed_sasl_token(broker: Broker, token: bytes, security: ConnectionSecurity) -> bytes:
    """A SASL token after SaslHandshake v0 (the frame is the token, no request header)."""
    try:
        with resilience.request_deadline(resilience.POLICY.budget_s):
            return await sasl_authenticate.handle_unframed(broker, token, security)
    except CloseConnection:
        raise
    except Exception as exc:
        if resilience.classify(exc) is None:
            raise
        # As SaslAuthenticate's (apis/unavailable.py): a close, which clients retry after.
        raise CloseConnection(
            f"{unavailable.UNAVAILABLE}: SASL credentials cannot be checked"
        ) from None


def decode_body(handler: Any, header: RequestHeader, frame: bytes, pos: int) -> tuple[Any, bool]:
    """The request body after the fixed header, and whether the version is flexible.
    A malformed body (bounds-checked before kio allocates anything, see
    protocol/bounds.py) raises CloseConnection with the reason; tests/test_fuzz.py
    holds this to raising nothing else."""
    key, version = header.api_key, header.api_version
    # A handler module decodes the old versions kio has no schema for itself: its
    # DECODERS maps such a version to a reader of the body (none of them is flexible).
    own_decoder = getattr(handler, "DECODERS", _NO_DECODERS).get(version)
    flexible = own_decoder is None and is_flexible_request(key, version)
    try:
        if flexible:
            pos = skip_tagged_fields(frame, pos)
        if own_decoder is not None:
            body = own_decoder(frame, pos)
        else:
            body = decode_request(key, version, frame, pos)
    except Exception as exc:
        raise CloseConnection(
            f"undecodable {handler.__name__.rsplit('.', 1)[-1]} v{version} request: {exc!r}"
        ) from None
    if key not in HOT_PATH_KEYS and oversized_string(body):
        raise CloseConnection(
            f"{handler.__name__.rsplit('.', 1)[-1]} v{version} request has a string longer "
            f"than {MAX_STRING_BYTES} bytes"
        )
    return body, flexible


_last_unavailable_log = 0.0


def _log_unavailable(handler: Any, version: int, exc: Exception) -> None:
    """One line per second at most: while Redis is down every request fails."""
    global _last_unavailable_log
    now = time.monotonic()
    if now - _last_unavailable_log >= 1.0:
        _last_unavailable_log = now
        log.warning(
            "%s v%d answered with retriable errors: %s",
            handler.__name__.rsplit(".", 1)[-1],
            version,
            exc,
        )


# A closed connection's tasks are referenced only by the connection; without a strong
# reference the garbage collector could destroy them while they still wind down.
_RUNNING: set[asyncio.Task[Any]] = set()


def _keep(task: asyncio.Task[Any]) -> asyncio.Task[Any]:
    _RUNNING.add(task)
    task.add_done_callback(_RUNNING.discard)
    return task


_expiry_log = RateLimitedLog(log)


class KafkaConnection(asyncio.Protocol):
    def __init__(
        self,
        broker: Broker,
        connections: set[KafkaConnection],
        counts: ConnectionCounts,
        memory: RequestMemory,
        listener: str = "PLAINTEXT",
        protocol: str = "PLAINTEXT",
    ) -> None:
        self.broker = broker
        self.listener = listener  # the listener's name and security protocol
        self.protocol = protocol
        self.security = ConnectionSecurity(listener, protocol)
        self.connections = connections
        self.counts = counts
        self.memory = memory
        # Received bytes of requests not yet split into frames: grows with what arrives,
        # never to a frame's declared size up front.
        self.buffer = bytearray()
        self.frames: deque[bytes | str] = deque()  # a str: close with that reason
        self.ready = asyncio.Event()
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.peer_host = ""
        self.paused = False  # reading is paused (for any of the reasons below)
        self.muted = False  # throttled by a client quota (connection_context.mute)
        self.muted_until = [0.0]
        self.backlogged = False  # PAUSE_AT frames wait for the worker
        self.closing = False  # a bad frame was seen: read nothing more
        self.draining = False  # shutting down: answer what was read, then close
        # queued.max.request.bytes (server_limits.RequestMemory): bytes this connection
        # holds reserved, the frame being read (its reservation made, 0: none), and the
        # size of the frame waiting for room.
        self.reserved = 0
        self.admitted = 0
        self.waiting_for = 0
        self._resume = self._room_made  # one bound method: RequestMemory.cancel compares it
        self.accepted = False  # False: refused by a connection limit, or not open yet
        self.lost = False
        # For connections.max.idle.ms and the partial-frame deadline.
        self.in_flight = 0
        self.last_active = time.monotonic()
        self.partial_since: float | None = None
        self.worker: asyncio.Task[None] | None = None
        # For the connection's open/close log lines.
        self.client_id: str | None = None
        self.served = 0
        self.opened = time.monotonic()
        self.close_reason = ""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport; uvloop's are not asyncio.Transport subclasses.
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.peer_host = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        self.security = ConnectionSecurity.for_listener(
            self.listener, self.protocol, self.peer_host
        )
        if not self.counts.admit(self.peer_host, self.peer):
            self.closing = True
            transport.close()  # as Kafka: closed at once, before any request is read
            return
        self.accepted = True
        throttle_ms = self.broker.quotas.connection_throttle_ms(self.peer_host)
        if throttle_ms:
            # As Kafka's Acceptor (KIP-612): read nothing, close once the throttle time
            # has passed, so the client does not come straight back.
            self.closing = True
            self.close_reason = f"connection_creation_rate of {self.peer_host} exceeded"
            self.counts.throttled(self.peer, throttle_ms)
            transport.pause_reading()
            asyncio.get_running_loop().call_later(throttle_ms / 1000, transport.close)
            return
        self.connections.add(self)
        self.worker = _keep(asyncio.create_task(self._work(), name=f"kafka-conn-{self.peer}"))
        log.info("connection from %s opened", self.peer, extra={"event": "open", "peer": self.peer})

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.accepted:
            return
        self.lost = True
        self.counts.release(self.peer_host)
        if self.waiting_for:
            self.memory.cancel(self._resume)
        if self.reserved:
            self.reserved, held = 0, self.reserved
            self.memory.release(held)
        self.buffer = bytearray()
        self.connections.discard(self)
        reason = self.close_reason or (f"lost: {exc}" if exc else "closed by the client")
        duration = time.monotonic() - self.opened
        log.info(
            "connection from %s (client id %s) closed after %d requests in %.3f s: %s",
            self.peer,
            self.client_id,
            self.served,
            duration,
            reason,
            extra={
                "event": "close",
                "peer": self.peer,
                "client_id": self.client_id,
                "requests": self.served,
                "duration_s": round(duration, 6),
                "reason": reason,
            },
        )
        if self.worker:
            self.worker.cancel()
        connection_context.closed(id(self))

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        self.last_active = time.monotonic()
        if not self.buffer and not self.waiting_for and self._whole_frame(data):
            return
        self.buffer += data
        if not self.waiting_for:
            self._split_frames()

    def _frame_limit(self) -> tuple[int, str]:
        """The largest frame this connection may send now, and the setting naming it."""
        limit, setting = self.broker.settings.max_request_bytes, "--max-request-bytes"
        if not self.security.authenticated and limit > SASL_SERVER_MAX_RECEIVE_SIZE:
            # Kafka's sasl.server.max.receive.size: small frames until authenticated.
            limit, setting = SASL_SERVER_MAX_RECEIVE_SIZE, "before SASL authentication"
        elif self.security.sasl_unframed and limit > SASL_SERVER_MAX_RECEIVE_SIZE:
            limit, setting = SASL_SERVER_MAX_RECEIVE_SIZE, "sasl.server.max.receive.size"
        return limit, setting

    def _whole_frame(self, data: bytes) -> bool:
        """The common read: nothing buffered and `data` exactly one frame that fits and
        has room in queued.max.request.bytes. Its frame is sliced straight out of `data`
        (one copy of a Produce's 100 KB, not two through self.buffer). False: nothing
        done, _split_frames handles it (and every limit and pause)."""
        if self.admitted or len(data) < 4:
            return False
        (size,) = unpack_i32(data, 0)
        need = 4 + size
        if need != len(data) or size > self._frame_limit()[0] or size < 0:
            return False
        if not self.memory.try_reserve(need):
            return False
        self.reserved += need
        self.frames.append(bytes(data[4:]))  # (bytes() of bytes is no copy)
        self.partial_since = None
        self.ready.set()
        if len(self.frames) >= PAUSE_AT and not self.backlogged:
            self.backlogged = True
            self._update_reading()
        return True

    def _split_frames(self) -> None:
        """Move the complete frames of the buffer to self.frames. Each frame first
        reserves its size in queued.max.request.bytes; without room, reading pauses
        here until _room_made."""
        buf = self.buffer
        limit, setting = self._frame_limit()
        split = False
        while len(buf) >= 4:
            (size,) = unpack_i32(buf, 0)
            if size < 0 or size > limit:
                # Answer the requests already read, then close (as Kafka, which reads
                # one request at a time, would reach the bad frame only after them).
                metrics.REQUEST_FRAMES_REFUSED.labels("socket.request.max.bytes").inc()
                self.frames.append(
                    f"request size {size} is outside 0..{limit} ({setting})"
                    + (" (a TLS client on a plaintext listener?)" if buf[:2] == b"\x16\x03" else "")
                )
                buf.clear()
                self.closing = True
                self._update_reading()
                self.ready.set()
                return
            need = 4 + size
            if not self.admitted:
                if not self.memory.try_reserve(need):
                    self.waiting_for = need
                    self.memory.wait(need, self._resume, self.peer)
                    self._update_reading()
                    break
                self.admitted = need
                self.reserved += need
            if len(buf) < need:
                break
            with memoryview(buf) as view:
                self.frames.append(bytes(view[4:need]))
            self.admitted = 0
            split = True
            if len(buf) == need:
                self.buffer = buf = bytearray()  # a large frame's buffer is freed now
            else:
                del buf[:need]
        if split or not buf:
            self.partial_since = time.monotonic() if buf else None
        elif self.partial_since is None:
            self.partial_since = time.monotonic()
        if self.frames:
            self.ready.set()
            if len(self.frames) >= PAUSE_AT and not self.backlogged:
                self.backlogged = True
                self._update_reading()

    def _room_made(self) -> None:
        """RequestMemory reserved the waiting frame's bytes: read on."""
        need, self.waiting_for = self.waiting_for, 0
        self.reserved += need
        if self.lost or self.closing or self.draining:
            return  # connection_lost gives the bytes back
        self.admitted = need
        self.partial_since = time.monotonic()  # its deadline starts when it may be read
        self._update_reading()
        self._split_frames()

    def _request_done(self, size: int, _task: object = None) -> None:
        """A request's frame is answered: its bytes go back to queued.max.request.bytes."""
        if self.lost:
            return  # connection_lost gave everything back
        self.in_flight -= 1
        self.last_active = time.monotonic()
        self.reserved -= size
        self.memory.release(size)

    def _update_reading(self) -> None:
        """Pause or resume reading the socket as the connection's state asks."""
        if self.transport is None:
            return
        pause = (
            self.closing or self.draining or self.backlogged or self.muted or bool(self.waiting_for)
        )
        if pause and not self.paused:
            self.paused = True
            self.transport.pause_reading()
        elif not pause and self.paused:
            self.paused = False
            self.transport.resume_reading()
            if self.buffer:  # a partial frame's deadline counts from now
                self.partial_since = time.monotonic()

    def expire(self, now: float, idle_s: float | None, partial_s: float | None) -> None:
        """Close the connection when a deadline has passed (KafkaServer's sweep): a
        partial frame held past partial_s, or nothing read or written for idle_s.
        Time spent paused by the sidecar itself does not count."""
        if self.closing or self.draining or self.transport is None or self.paused:
            return
        since = self.partial_since
        if partial_s is not None and since is not None and now - since > partial_s:
            limit = "partial.frame.timeout.ms"
            what = f"a partial frame ({len(self.buffer)} bytes) held for {now - since:.1f} s"
        elif (
            idle_s is not None
            and not self.in_flight
            and not self.frames
            and now - self.last_active > idle_s
        ):
            limit = "connections.max.idle.ms"
            what = f"idle for {now - self.last_active:.1f} s"
        else:
            return
        metrics.connections_expired[limit].inc()
        _expiry_log.warning("closing connection %s: %s (%s)", self.peer, what, limit)
        self.closing = True
        self.close_reason = f"{what} ({limit})"
        self.buffer = bytearray()
        self.frames.clear()
        self.transport.close()

    def eof_received(self) -> bool | None:
        if self.buffer:
            log.warning(
                "connection %s closed mid-request (%d bytes of a truncated frame)",
                self.peer,
                len(self.buffer),
            )
        return None

    def drain(self) -> None:
        """Graceful shutdown: read no more requests; the worker answers those already
        read (in order, as always) and then closes the connection."""
        self.draining = True
        self._update_reading()
        self.ready.set()

    def _close(self, reason: str) -> None:
        self.close_reason = reason
        if reason == SHUTDOWN:
            log.info("closing connection %s: %s", self.peer, reason)
        else:
            log.warning(
                "closing connection %s: %s",
                self.peer,
                reason,
                extra={"event": "error", "peer": self.peer, "client_id": self.client_id},
            )
        self.buffer.clear()
        self.frames.clear()
        if self.transport:
            self.transport.close()

    async def _work(self) -> None:
        """Start requests in order. Consecutive Produce requests run concurrently (their
        appends keep request order per partition, see append_order.py); any other
        request waits until everything before it finished, as on a Kafka broker.
        Responses are written in request order by _ResponseWriter."""
        connection_context.CONNECTION.set(id(self))  # seen by the request tasks below
        connection_context.MUTED_UNTIL.set(self.muted_until)
        responses = _ResponseWriter(self)
        order = AppendOrder()
        running: list[tuple[asyncio.Task[bytes | list[Any] | None], bool]] = []
        try:
            while True:
                if not self.frames:
                    if self.draining:
                        responses.put(SHUTDOWN)  # after every response due
                        break
                    self.ready.clear()
                    await self.ready.wait()
                    continue
                frame = self.frames.popleft()
                if self.backlogged and len(self.frames) <= RESUME_AT:
                    self.backlogged = False
                    self._update_reading()
                if isinstance(frame, str):
                    responses.put(frame)
                    break
                self.served += 1
                running = [(t, p) for t, p in running if not t.done()]
                # A bare SASL token (after SaslHandshake v0) may begin like a Produce.
                is_produce = frame[:2] == PRODUCE_KEY and not self.security.sasl_unframed
                if is_produce and all(p for _, p in running):
                    if len(running) >= MAX_IN_FLIGHT:
                        await asyncio.wait([running[0][0]])
                    if self.muted or self.muted_until[0] > time.monotonic():
                        await self._wait_muted()
                    task = asyncio.create_task(
                        dispatch(self.broker, frame, order.ticket(), self.security)
                    )
                else:
                    if running:
                        await asyncio.wait([t for t, _ in running])
                    is_produce = is_produce and not self.security.sasl_unframed
                    ticket = order.ticket() if is_produce else None
                    if self.muted or self.muted_until[0] > time.monotonic():
                        await self._wait_muted()
                    task = asyncio.create_task(dispatch(self.broker, frame, ticket, self.security))
                if self.client_id is None and not self.security.sasl_unframed:
                    # Never from a bare SASL token: it holds a password, not a header.
                    self.client_id = _client_id(frame)
                self.in_flight += 1
                task.add_done_callback(partial(self._request_done, 4 + len(frame)))
                running.append((task, is_produce))
                responses.put(task)
                # The task holds the frame now; a reference here would keep a large frame
                # alive while this coroutine waits for the next one (or, if it is
                # cancelled, in the traceback of its CancelledError).
                del frame
            await responses.finished
        finally:
            responses.stop()
            for task, _ in running:
                task.cancel()
            # Wait for them, so none is left pending when the loop closes at shutdown.
            await asyncio.gather(*(t for t, _ in running), return_exceptions=True)

    async def _wait_muted(self) -> None:
        """KIP-219: after a response carrying a quota's throttle time, read and start no
        further request until the throttle time has passed (as Kafka mutes the channel)."""
        while (left := self.muted_until[0] - time.monotonic()) > 0 and not self.draining:
            self.muted = True
            self._update_reading()
            await asyncio.sleep(left)
        if self.muted:
            self.muted = False
            self._update_reading()


class _ResponseWriter:
    """Writes a connection's responses in request order, each as soon as its request and
    those before it are done: from the request tasks' done callbacks, without a writer
    task woken (and an asyncio.Queue passed through) per response. A str in the queue
    closes the connection with that reason once everything before it is written.
    `finished` is done when writing stopped (a close), cancelled if a request task
    was."""

    __slots__ = ("conn", "queue", "finished")

    def __init__(self, conn: KafkaConnection) -> None:
        self.conn = conn
        self.queue: deque[asyncio.Task[bytes | list[Any] | None] | str] = deque()
        self.finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def put(self, item: asyncio.Task[bytes | list[Any] | None] | str) -> None:
        self.queue.append(item)
        if isinstance(item, str):
            self.flush()
        else:
            item.add_done_callback(self._done)

    def stop(self) -> None:
        if not self.finished.done():
            self.finished.set_result(None)

    def _done(self, _task: object) -> None:
        self.flush()

    def flush(self) -> None:
        queue, conn = self.queue, self.conn
        while queue and not self.finished.done():
            item = queue[0]
            if isinstance(item, str):
                queue.popleft()
                conn._close(item)
                self.stop()
                return
            if not item.done():
                return
            queue.popleft()
            if item.cancelled():
                self.finished.cancel()
                return
            exc = item.exception()
            if exc is not None:
                if isinstance(exc, CloseConnection):
                    if exc.response is not None and conn.transport:
                        conn.transport.write(exc.response)  # flushed before the close
                    conn._close(str(exc))
                else:
                    log.error(
                        "request from %s failed; closing the connection",
                        conn.peer,
                        exc_info=exc,
                        extra={"event": "error", "peer": conn.peer, "client_id": conn.client_id},
                    )
                    conn._close("internal error")
                self.stop()
                return
            response = item.result()
            transport = conn.transport
            if response is not None and transport and not transport.is_closing():
                conn.last_active = time.monotonic()
                if isinstance(response, list):  # a Fetch frame's parts (framing.py)
                    for part in response:
                        transport.write(part)
                else:
                    transport.write(response)


def _client_id(frame: bytes) -> str | None:
    """The request header's client id (for log lines), or None if unreadable."""
    try:
        return parse_header_prefix(frame)[0].client_id or ""
    except BadFrame:
        return None


class KafkaServer:
    """One listener (listeners=NAME://HOST:PORT): its socket and its connections, which
    start with the listener's name and security protocol (ConnectionSecurity). The
    listeners of a sidecar share one set of connection and memory limits (KafkaServers)."""

    def __init__(
        self,
        listener: Listener,
        limits: ListenerLimits,
        counts: ConnectionCounts,
        memory: RequestMemory,
        tls: ServerTls | None = None,
    ) -> None:
        self.listener = listener
        self.broker: Broker | None = None  # set by start()
        self.connections: set[KafkaConnection] = set()
        self.server: asyncio.Server | None = None
        self.limits = limits
        self.counts = counts
        self.memory = memory
        self.sweeper: asyncio.Task[None] | None = None
        # SSL and SASL_SSL: the listener's certificate, and the connections in their TLS
        # handshake (bounded like a partial frame: partial.frame.timeout.ms).
        self.tls = tls
        self.handshakes: set[asyncio.Task[None]] = set()
        partial_ms = limits.partial_frame_timeout_ms
        self.handshake_timeout = partial_ms / 1000 if partial_ms > 0 else 60.0

    async def bind(self) -> Listener:
        """Bind the listener's address without accepting yet (connections are refused
        until start); returns the listener with a port 0 resolved to the bound port."""
        loop = asyncio.get_running_loop()
        bind = self.listener.bind
        self.server = await loop.create_server(
            self._connection if self.tls is None else self._tls_connection,
            host=bind.host,
            port=bind.port,
            reuse_address=True,
            start_serving=False,
        )
        self.listener = self.listener.bound_to(self.port)
        return self.listener

    def _connection(self) -> KafkaConnection:
        assert self.broker is not None
        return KafkaConnection(
            self.broker,
            self.connections,
            self.counts,
            self.memory,
            self.listener.name,
            self.listener.protocol,
        )

    def _tls_connection(self) -> TlsAcceptor:
        assert self.tls is not None
        return TlsAcceptor(
            self.tls,
            self._connection,
            self.listener.protocol,
            self.handshake_timeout,
            self.handshakes,
            self.limits.max_connections,
        )

    async def start(self, broker: Broker) -> None:
        self.broker = broker
        if self.server is None:
            await self.bind()
        assert self.server is not None
        if self.tls is not None:
            self.tls.start()
        await self.server.start_serving()
        self.sweeper = _keep(
            asyncio.create_task(self._sweep(), name=f"kafka-conn-deadlines-{self.listener.name}")
        )

    async def _sweep(self) -> None:
        """Close connections past connections.max.idle.ms or the partial-frame deadline,
        checking a few times per the shorter one (at least once a second)."""
        idle_ms = self.limits.connections_max_idle_ms
        partial_ms = self.limits.partial_frame_timeout_ms
        idle_s = idle_ms / 1000 if idle_ms >= 0 else None
        partial_s = partial_ms / 1000 if partial_ms >= 0 else None
        bounds = [b for b in (idle_s, partial_s) if b is not None]
        if not bounds:
            return
        period = min(max(min(bounds) / 4, 0.01), 1.0)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for conn in list(self.connections):
                conn.expire(now, idle_s, partial_s)

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    def stop_accepting(self) -> None:
        """Graceful shutdown, first step: no new connections, no new requests."""
        if self.server:
            self.server.close()
        if self.sweeper:
            self.sweeper.cancel()
        for conn in list(self.connections):
            conn.drain()

    async def stop(self, timeout: float = 0.0) -> None:
        """Let every connection answer the requests it has read, for up to `timeout`
        seconds, then close whatever is left."""
        self.stop_accepting()
        workers = [c.worker for c in list(self.connections) if c.worker]
        if workers and timeout > 0:
            _, pending = await asyncio.wait(workers, timeout=timeout)
            if pending:
                log.warning("%d connection(s) still busy at the shutdown bound", len(pending))
        workers = []
        for conn in list(self.connections):
            if conn.transport:
                conn.transport.close()
            if conn.worker and not conn.worker.done():
                conn.worker.cancel()
                workers.append(conn.worker)
        for task in list(self.handshakes):
            task.cancel()
            workers.append(task)
        await asyncio.gather(*workers, return_exceptions=True)
        if self.tls is not None:
            await self.tls.stop()
        if self.server:
            await self.server.wait_closed()


class KafkaServers:
    """Every listener of the sidecar, one KafkaServer each, sharing Kafka's broker-wide
    bounds: max.connections, max.connections.per.ip, queued.max.request.bytes."""

    def __init__(self, settings: Settings, listeners: tuple[Listener, ...]) -> None:
        self.limits = ListenerLimits(
            max_connections=settings.max_connections,
            max_connections_per_ip=settings.max_connections_per_ip,
            per_ip_overrides=dict(settings.max_connections_per_ip_overrides),
            queued_max_request_bytes=settings.queued_max_request_bytes,
            connections_max_idle_ms=settings.connections_max_idle_ms,
            partial_frame_timeout_ms=settings.partial_frame_timeout_ms,
        )
        self.counts = ConnectionCounts(self.limits)
        self.memory = RequestMemory(self.limits.queued_max_request_bytes)
        self.servers = [
            KafkaServer(
                listener,
                self.limits,
                self.counts,
                self.memory,
                ServerTls(listener_tls(settings, listener)) if listener.tls else None,
            )
            for listener in listeners
        ]

    @property
    def listeners(self) -> tuple[Listener, ...]:
        """As bound (port 0 resolved), inter-broker listener first."""
        return tuple(server.listener for server in self.servers)

    @property
    def connections(self) -> list[KafkaConnection]:
        return [conn for server in self.servers for conn in server.connections]

    @property
    def port(self) -> int:
        """The first (inter-broker) listener's port."""
        return self.servers[0].port

    async def bind(self) -> tuple[Listener, ...]:
        """Bind every listener (refusing connections until start): a port 0 is then known
        before the sidecar registers what it advertises."""
        try:
            for server in self.servers:
                await server.bind()
        except BaseException:
            await self.stop()
            raise
        return self.listeners

    async def start(self, broker: Broker) -> None:
        for server in self.servers:
            await server.start(broker)
        metrics.QUEUED_REQUEST_BYTES.set_function(lambda: self.memory.used)

    def stop_accepting(self) -> None:
        for server in self.servers:
            server.stop_accepting()

    async def stop(self, timeout: float = 0.0) -> None:
        """Every listener answers what it has read within one shared `timeout`."""
        for server in self.servers:
            server.stop_accepting()
        await asyncio.gather(*(server.stop(timeout) for server in self.servers))
