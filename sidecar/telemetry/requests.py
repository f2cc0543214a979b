"""Per-request accounting: metrics always, a span when tracing is on.

server.dispatch runs each request inside observe(), which keeps a RequestScope in a
context variable for the request's task (and the tasks it starts), so handlers and
the Redis layer can report what they know without passing it around: Produce and
Fetch report partitions, records and bytes (batch_decoded, batch_appended,
fetched), kio-encoded responses report their error codes (response_errors), Redis
round trips find the span to hang their child spans on.

When tracing is off, the cost is the scope object, a context variable set/reset,
two counter updates and one histogram observation per request."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Iterable
from contextvars import ContextVar
from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode

from sidecar.telemetry import metrics, tracing

perf_counter = time.perf_counter
CLOSED = "CONNECTION_CLOSED"
MAX_NAMED_TOPICS = 32  # destination names listed on one span

# OpenTelemetry messaging semantic conventions: messaging.operation.type.
OPERATION_TYPES = {"produce": "send", "fetch": "receive", "offset_commit": "settle"}


class RequestScope:
    __slots__ = (
        "api",
        "version",
        "span",
        "context",
        "errors",
        "records",
        "pending",
        "topics",
        "linked",
    )

    def __init__(self, api: str, version: int) -> None:
        self.api = api
        self.version = version
        self.span: Any = None  # a recording span, or None
        self.context: Any = None  # an OpenTelemetry Context holding the span
        self.errors: dict[str, int] | None = None
        self.records: int | None = None  # records produced or fetched
        self.pending: dict[tuple[str, int], tuple[int, int]] = {}  # produce: records, bytes
        self.topics: dict[str, set[int]] | None = None  # named topics (spans only)
        self.linked: set[tuple[int, int]] | None = None

    def error(self, name: str, n: int = 1) -> None:
        if self.errors is None:
            self.errors = {}
        self.errors[name] = self.errors.get(name, 0) + n

    def topic(self, name: str, partition: int | None = None) -> None:
        if self.topics is None:
            self.topics = {}
        partitions = self.topics.setdefault(name, set())
        if partition is not None:
            partitions.add(partition)


CURRENT: ContextVar[RequestScope | None] = ContextVar("skiff_request", default=None)

_api_names: dict[ModuleType, str] = {}
_error_names: dict[int, str] = {}


def api_name(handler: ModuleType) -> str:
    name = _api_names.get(handler)
    if name is None:
        name = _api_names[handler] = handler.__name__.rsplit(".", 1)[-1]
    return name


def error_name(code: int) -> str:
    name = _error_names.get(code)
    if name is None:
        try:
            name = ErrorCode(code).name.upper()
        except ValueError:
            name = str(code)
        _error_names[code] = name
    return name


async def observe(
    handler: ModuleType, header: Any, peer: str, work: Awaitable[bytes | list[Any] | None]
) -> bytes | list[Any] | None:
    """Await `work` (the request's decoding and handling) inside a RequestScope."""
    api = api_name(handler)
    version = header.api_version
    scope = RequestScope(api, version)
    if tracing.TRACER is not None:
        _start_span(scope, header, peer)
    token = CURRENT.set(scope)
    start = perf_counter()
    failure: BaseException | None = None
    try:
        return await work
    except BaseException as exc:
        failure = exc
        raise
    finally:
        CURRENT.reset(token)
        metrics.seconds_by_api[api].observe(perf_counter() - start)
        metrics.requests_by_api[(api, version)].inc()
        if failure is not None:
            scope.error(CLOSED)
        if scope.errors:
            for name, n in scope.errors.items():
                metrics.errors_by_api[(api, version, name)].inc(n)
        if scope.span is not None:
            _end_span(scope, failure)


def rejected(handler: ModuleType | None) -> None:
    """A request for an API or version this sidecar does not serve (the connection is
    closed). The version label is 'unsupported', so a client cannot mint labels."""
    api = api_name(handler) if handler is not None else "unknown"
    metrics.requests_by_api[(api, "unsupported")].inc()
    metrics.errors_by_api[(api, "unsupported", CLOSED)].inc()


def decoded(body: Any) -> None:
    """The request body: topics, partitions and group it names (for the span)."""
    scope = CURRENT.get()
    if scope is None or scope.span is None:
        return
    group = getattr(body, "group_id", None)
    if isinstance(group, str) and group:
        scope.span.set_attribute("messaging.consumer.group.name", group)
    items = getattr(body, "topic_data", None) or getattr(body, "topics", None)
    if not items:
        return
    for t in items[:MAX_NAMED_TOPICS]:
        name = t if isinstance(t, str) else getattr(t, "name", None) or getattr(t, "topic", None)
        if not isinstance(name, str) or not name:
            continue  # Fetch v13+ names topics by id: fetched() names them
        scope.topic(name)
        parts = (
            getattr(t, "partition_data", None)
            or getattr(t, "partitions", None)
            or getattr(t, "partition_indexes", None)
            or ()
        )
        for p in parts:
            index = p if isinstance(p, int) else _partition_index(p)
            if index is not None:
                scope.topic(name, index)


def _partition_index(p: Any) -> int | None:
    for attr in ("index", "partition", "partition_index"):
        value = getattr(p, attr, None)
        if isinstance(value, int):
            return value
    return None


# -- Produce and Fetch --------------------------------------------------------------


def batch_decoded(topic: str, partition: int, wire_bytes: int, batch: Any) -> None:
    """Produce decoded a partition's batch (a DecodedBatch: count, flat records)."""
    scope = CURRENT.get()
    if scope is None:
        return
    scope.pending[(topic, partition)] = (batch.count, wire_bytes)
    scope.records = (scope.records or 0) + batch.count
    if scope.span is not None:
        scope.topic(topic, partition)
        _link_producers(scope, batch.records)
        for raw in getattr(batch, "trace_parents", ()):  # a `batch` topic's checked batch
            _link(scope, raw)


def batch_appended(topic: str, partition: int, duplicate: bool) -> None:
    """The batch batch_decoded reported is stored (a deduplicated resend is not)."""
    scope = CURRENT.get()
    if scope is None:
        return
    got = scope.pending.pop((topic, partition), None)
    if got is None or duplicate:
        return
    metrics.records_in[topic].inc(got[0])
    metrics.bytes_in[topic].inc(got[1])


def partition_errors(codes: Iterable[int]) -> None:
    scope = CURRENT.get()
    if scope is None:
        return
    for code in codes:
        if code:
            scope.error(error_name(code))


def fetched(topic: str, partition: int, records: int, nbytes: int, error: int) -> None:
    """Fetch answers a partition with `records` records in `nbytes` bytes."""
    scope = CURRENT.get()
    if scope is None:
        return
    if records:
        metrics.records_out[topic].inc(records)
        metrics.bytes_out[topic].inc(nbytes)
    scope.records = (scope.records or 0) + records
    if error:
        scope.error(error_name(error))
    if scope.span is not None and topic:
        scope.topic(topic, partition)


def response_errors(data: Any) -> None:
    """Count the error codes of a response given as kio_codec.encode_response's dict."""
    scope = CURRENT.get()
    if scope is None:
        return
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key == "error_code":
                    if value:
                        scope.error(error_name(int(value)))
                elif isinstance(value, dict | list | tuple):
                    stack.append(value)
        elif isinstance(item, list | tuple):
            stack.extend(v for v in item if isinstance(v, dict | list | tuple))


# -- spans --------------------------------------------------------------------------


_otel: Any = None  # (SpanKind.SERVER, set_span_in_context, an empty Context), once imported


def _start_span(scope: RequestScope, header: Any, peer: str) -> None:
    global _otel
    if _otel is None:
        from opentelemetry.context import Context
        from opentelemetry.trace import SpanKind, set_span_in_context

        _otel = (SpanKind.SERVER, set_span_in_context, Context())
    server_kind, set_span_in_context, root = _otel
    assert tracing.TRACER is not None
    # Kafka requests carry no trace context: every request span is a root (the empty
    # context also spares the SDK a look-up of the current span).
    span = tracing.TRACER.start_span(scope.api, context=root, kind=server_kind)
    if not span.is_recording():
        return
    attributes: dict[str, Any] = {
        "messaging.system": "kafka",
        "messaging.operation.name": scope.api,
        "skiff.kafka.api_key": header.api_key,
        "skiff.kafka.api_version": header.api_version,
    }
    kind = OPERATION_TYPES.get(scope.api)
    if kind is not None:
        attributes["messaging.operation.type"] = kind
    if header.client_id:
        attributes["messaging.client.id"] = header.client_id
    if peer:
        attributes["network.peer.address"] = peer
    span.set_attributes(attributes)
    scope.span = span
    scope.context = set_span_in_context(span)


def _end_span(scope: RequestScope, failure: BaseException | None) -> None:
    from opentelemetry.trace import StatusCode

    span = scope.span
    attributes: dict[str, Any] = {}
    if scope.topics:
        names = list(scope.topics)
        if len(names) == 1:
            attributes["messaging.destination.name"] = names[0]
            partitions = scope.topics[names[0]]
            if len(partitions) == 1:
                attributes["messaging.destination.partition.id"] = str(next(iter(partitions)))
        else:
            attributes["skiff.messaging.destination.names"] = names[:MAX_NAMED_TOPICS]
    if scope.records is not None:
        attributes["messaging.batch.message_count"] = scope.records
    if failure is not None:
        attributes["error.type"] = type(failure).__qualname__
        span.set_status(StatusCode.ERROR, str(failure)[:200])
    elif scope.errors:
        first = next(iter(scope.errors))
        attributes["error.type"] = first
        code = _code_of(first)
        if code is not None:
            attributes["skiff.kafka.error_code"] = code
        attributes["skiff.kafka.error_names"] = sorted(scope.errors)
        span.set_status(StatusCode.ERROR, first)
    if attributes:
        span.set_attributes(attributes)
    span.end()


def _code_of(name: str) -> int | None:
    try:
        return int(ErrorCode[name.lower()])
    except KeyError:
        return None


def _link_producers(scope: RequestScope, flat: list[Any]) -> None:
    """Link the span to the producer spans named by records' traceparent headers."""
    from sidecar.protocol.record_batch import decode_headers

    headers = flat[3::5]  # per record: timestamp, key, value, headers, flags
    # The common case, no record with a traceparent, costs two C-level passes.
    if not any(headers) or b"traceparent" not in b"".join(headers):
        return
    for raw in headers:
        if not raw or b"traceparent" not in raw:
            continue
        try:
            headers = decode_headers(raw)
        except (ValueError, IndexError, UnicodeDecodeError):
            continue
        for key, value in headers:
            if key == "traceparent":
                _link(scope, value)


def _link(scope: RequestScope, traceparent: bytes | str | None) -> None:
    """Link the span to the producer span one traceparent header names (valid, new, and
    within tracing.MAX_LINKS)."""
    context = tracing.parse_traceparent(traceparent)
    if context is None:
        return
    if scope.linked is None:
        scope.linked = set()
    ids = (context.trace_id, context.span_id)
    if ids in scope.linked or len(scope.linked) >= tracing.MAX_LINKS:
        return
    scope.linked.add(ids)
    scope.span.add_link(context)
