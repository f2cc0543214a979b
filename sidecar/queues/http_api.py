"""The HTTP queue API (docs/queues.md), served on the sidecar's HTTP listener next to
/healthz, /readyz and /metrics. Every route is in the OpenAPI document (openapi.py,
GET /v1/openapi.json); tests/test_queues_http.py checks both ways.

Errors are JSON {"error": {"code", "message"}} on every route of the listener (the
json_errors middleware: unknown routes, bad methods and oversized bodies too): 400 bad
input, 404 unknown group, topic or route, 405 method, 409 record state (per-record
results say which), 413 body or record batch too large, 503 Redis unavailable.
Topic names, configs and record sizes are checked by sidecar/validation, as on the
Kafka path. Each route asks broker.authorizer what Kafka asks for the same action
(`_may`, docs/security.md "HTTP API"): 403 with Kafka's error name when it says no,
checked before the group or topic is looked up and before anything changes."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import reprlib
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from sidecar.config.topic import effective_config
from sidecar.protocol.record_batch import (
    FLAG_KEY_NULL,
    FLAG_LOG_APPEND,
    FLAG_VALUE_NULL,
    DecodedBatch,
    InvalidBatch,
    encode_headers,
)
from sidecar.queues import codec, openapi, redrive
from sidecar.queues.codec import BadInput
from sidecar.queues.core import (
    Action,
    QueueError,
    check_holder,
    queue_store,
    retention_bytes,
    validate_config,
)
from sidecar.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from sidecar.security.http_auth import NotAuthorized, allowed, require
from sidecar.storage.resilience import RedisUnavailable
from sidecar.storage.store import StoreError
from sidecar.udp_ingest import partition_for_key
from sidecar.validation import produce_limits, record_sizes, topic_names
from sidecar.validation.topic_names import InvalidTopicName

log = logging.getLogger("skiff.queues.http")

MAX_RECORDS = 10_000  # per read or settle request
MAX_WAIT_MS = 60_000
MAX_RECHECK_S = 1.0  # a waiting read looks for expired leases at least this often
MAX_BODY = 16 * 1024 * 1024
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1  # offsets and timestamps (Kafka's longs; Redis stream ids too)
# Groups made over HTTP: names that need no escaping in URLs (Kafka share groups made by
# Kafka clients may use any id; the API serves those too, percent-encoded).
HTTP_GROUP_ID = re.compile(openapi.NEW_GROUP["pattern"])

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_STATUS = {
    "GROUP_NOT_FOUND": 404,
    "UNKNOWN_TOPIC_OR_PARTITION": 404,
    "INVALID_GROUP_ID": 400,
    "INVALID_WORKER": 400,
    "INVALID_CONFIG": 400,
    "GROUP_ID_CONFLICT": 409,
    "STORAGE_ERROR": 503,
    "KAFKA_STORAGE_ERROR": 503,  # tiered storage: the object store did not answer
}
_SETTLE = {
    "acknowledge": Action.ACCEPT,
    "cancel": Action.RELEASE,
    "reject": Action.REJECT,
    "renew": Action.RENEW,
}


_SHOW = reprlib.Repr()  # values echoed in messages: bounded in length and depth
_SHOW.maxstring = _SHOW.maxother = 60
_SHOW.maxlevel = 3


def show(value: Any) -> str:
    return _SHOW.repr(value)


def error(status: int, code: str, message: str, **extra: Any) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}, **extra}, status=status)


# aiohttp's own answers (no route, method not allowed, body too large, ...) as the API's
# documented JSON errors, for every route of the listener.
_HTTP_CODES = {
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "REQUEST_TOO_LARGE",
}


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if exc.status == 404:
            message = f"no route {request.method} {request.path}: see GET /v1/openapi.json"
        elif exc.status == 405:
            allowed = exc.headers.get("Allow", "")
            message = f"{request.method} is not allowed on {request.path}: allowed {allowed}"
        elif exc.status == 413:
            message = f"request bodies are at most {MAX_BODY} B"
        else:
            message = exc.reason
        response = error(exc.status, _HTTP_CODES.get(exc.status, "INVALID_REQUEST"), message)
        if "Allow" in exc.headers:
            response.headers["Allow"] = exc.headers["Allow"]
        return response
    except Exception as exc:  # a bug in a route outside the queue API: JSON, logged
        log.exception("%s %s failed", request.method, request.path)
        return error(500, "INTERNAL_ERROR", f"{type(exc).__name__}: {exc}")


class QueueApi:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.queues = queue_store(broker)
        self._rotation = 0

    def routes(self) -> list[web.RouteDef]:
        g = "/v1/queues/{group}"
        return [
            web.get("/v1/openapi.json", self._wrap(self.openapi_doc)),
            web.get("/v1/queues", self._wrap(self.list_groups)),
            web.put(g, self._wrap(self.configure)),
            web.get(g, self._wrap(self.describe)),
            web.delete(g, self._wrap(self.delete)),
            web.post(g + "/records:read", self._wrap(self.read)),
            *(web.post(f"{g}/records:{verb}", self._wrap(self._settler(verb))) for verb in _SETTLE),
            web.post(g + "/offsets:reset", self._wrap(self.reset)),
            web.post(g + "/dead-letters:redrive", self._wrap(self.redrive)),
            web.post("/v1/topics/{topic}/records", self._wrap(self.produce)),
        ]

    def _wrap(self, handler: Handler) -> Handler:
        async def run(request: web.Request) -> web.StreamResponse:
            try:
                return await handler(request)
            except BadInput as exc:
                return error(400, exc.code, exc.message)
            except NotAuthorized as exc:
                return error(403, exc.code, exc.message)
            except InvalidTopicName as exc:
                return error(400, "INVALID_TOPIC_EXCEPTION", str(exc))
            except InvalidBatch as exc:
                status = 413 if exc.code.endswith("_TOO_LARGE") else 400
                return error(status, exc.code, str(exc))
            except UnicodeEncodeError:  # a lone surrogate ("\ud800") in a JSON string
                return error(400, "INVALID_REQUEST", "strings must be valid Unicode text")
            except RecursionError:  # only input nested hundreds deep recurses this far
                return error(400, "MALFORMED_JSON", "malformed JSON: nested too deeply")
            except QueueError as exc:
                return error(_STATUS.get(exc.code, 400), exc.code, exc.message)
            except StoreError as exc:
                status = 404 if exc.code == "UNKNOWN_TOPIC_OR_PARTITION" else 503
                return error(status, exc.code, str(exc))
            except RedisUnavailable as exc:
                return error(503, "REDIS_UNAVAILABLE", str(exc))
            except web.HTTPRequestEntityTooLarge:
                return error(413, "REQUEST_TOO_LARGE", f"request bodies are at most {MAX_BODY} B")
            except web.HTTPException:
                raise
            except Exception as exc:  # a bug: answer JSON and log it, never a bare 500
                log.exception("%s %s failed", request.method, request.path)
                return error(500, "INTERNAL_ERROR", f"{type(exc).__name__}: {exc}")

        run.__name__ = handler.__name__
        return run

    # -- helpers -----------------------------------------------------------------------

    async def _body(self, request: web.Request) -> dict[str, Any]:
        raw = await request.read()  # over client_max_size: HTTPRequestEntityTooLarge
        if not raw:
            return {}
        try:
            body = json.loads(raw, parse_float=_number)
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadInput(f"malformed JSON: {exc}", "MALFORMED_JSON") from None
        except RecursionError:
            raise BadInput("malformed JSON: nested too deeply", "MALFORMED_JSON") from None
        if not isinstance(body, dict):
            raise BadInput("the request body must be a JSON object")
        return body

    @staticmethod
    def _fields(body: dict[str, Any], allowed: str) -> None:
        """Unknown fields are refused (400), as the document's schemas say."""
        if not body.keys() <= _names(allowed):  # one C-level set test per object
            unknown = sorted(body.keys() - _names(allowed))
            raise BadInput(f"unknown field(s) {show(unknown)}; allowed: {allowed}")

    @staticmethod
    def _int(body: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
        value = body.get(name, default)
        if type(value) is not int or not low <= value <= high:
            raise BadInput(f"{name} must be an integer in {low}..{high}, got {show(value)}")
        return value

    async def _group(self, request: web.Request, operation: Operation = Operation.READ) -> str:
        """The path's group, once the caller may do `operation` on it (before it is looked
        up: an unauthorized caller learns nothing of which groups exist)."""
        group = request.match_info["group"]
        self._may(request, operation, ResourceType.GROUP, group)
        await self.queues.config(group)  # GROUP_NOT_FOUND / INVALID_GROUP_ID
        return group

    def _may(
        self, request: web.Request, operation: Operation, kind: ResourceType, name: str
    ) -> None:
        require(self.broker, request, operation, kind, name)

    async def _partitions(self, topic: Any) -> int:
        topic_names.check(topic)
        info = await self.broker.store.get_topic(topic)
        if info is None:
            raise QueueError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {topic!r} does not exist")
        return int(info.partitions)

    # -- routes ------------------------------------------------------------------------

    async def openapi_doc(self, request: web.Request) -> web.Response:
        settings = self.broker.settings
        return web.json_response(openapi.document(settings.http_auth, settings.http_open_paths))

    async def list_groups(self, request: web.Request) -> web.Response:
        """As Kafka's ListGroups: the groups the caller may DESCRIBE."""
        groups = [
            g
            for g in await self.queues.groups()
            if allowed(self.broker, request, Operation.DESCRIBE, ResourceType.GROUP, g)
        ]
        return web.json_response({"groups": groups})

    async def configure(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]
        self._may(request, Operation.ALTER_CONFIGS, ResourceType.GROUP, group)
        if not HTTP_GROUP_ID.match(group):
            raise QueueError(
                "INVALID_GROUP_ID",
                f"queue group ids are 1-249 characters of A-Z a-z 0-9 . _ -, got {group!r}",
            )
        body = await self._body(request)
        validate_config(body)  # unknown fields and bad values: 400 before any write
        existed = await self.queues.exists(group)
        cfg = await self.queues.configure(group, **body)
        return web.json_response(cfg.as_dict(), status=200 if existed else 201)

    async def describe(self, request: web.Request) -> web.Response:
        group = await self._group(request, Operation.DESCRIBE)
        description = await self.queues.describe(group)
        # As Kafka's DescribeShareGroupOffsets: topics the caller may not DESCRIBE are
        # left out (and out of the totals).
        description.partitions = [
            p
            for p in description.partitions
            if allowed(self.broker, request, Operation.DESCRIBE, ResourceType.TOPIC, p.topic)
        ]
        return web.json_response(description.as_dict())

    async def delete(self, request: web.Request) -> web.Response:
        group = await self._group(request, Operation.DELETE)
        await self.queues.delete(group)
        return web.json_response({"deleted": group})

    async def read(self, request: web.Request) -> web.Response:
        group = await self._group(request)
        body = await self._body(request)
        self._fields(body, "topics max_records wait_ms max_bytes worker")
        topics = body.get("topics")
        if isinstance(topics, str):
            topics = [topics]
        if not isinstance(topics, list) or not topics or len(topics) > 100:
            raise BadInput("topics must be a list of 1..100 topic names")
        for topic in topics:
            topic_names.check(topic)
            self._may(request, Operation.READ, ResourceType.TOPIC, topic)
        max_records = self._int(body, "max_records", 100, 1, MAX_RECORDS)
        wait_ms = self._int(body, "wait_ms", 0, 0, MAX_WAIT_MS)
        max_bytes = body.get("max_bytes")
        if max_bytes is not None:
            max_bytes = self._int(body, "max_bytes", 0, 1, 2**31 - 1)
        worker = body.get("worker")
        if worker is None:
            worker = f"http-{secrets.token_hex(8)}"
        if not isinstance(worker, str):
            raise BadInput("worker must be a string")
        check_holder(worker)
        parts = [(t, p) for t in dict.fromkeys(topics) for p in range(await self._partitions(t))]
        cfg = await self.queues.config(group)
        records = await self._read(group, worker, parts, max_records, max_bytes, wait_ms, cfg)
        return web.json_response(
            {"worker": worker, "records": [codec.record_json(r) for r in records]}
        )

    async def _read(
        self,
        group: str,
        worker: str,
        parts: list[tuple[str, int]],
        max_records: int,
        max_bytes: int | None,
        wait_ms: int,
        cfg: Any,
    ) -> list[Any]:
        """Acquire from the partitions (starting at a rotating one, so readers spread);
        with nothing to hand out, wait on the partitions' append/release wake-up. Leases
        that expire publish nothing: a waiting read also looks again every
        min(lock_ms / 4, MAX_RECHECK_S)."""
        wakeups = self.broker.wakeups
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_ms / 1000
        channels = [self.queues.wake_channels(t, [p])[0] for t, p in parts]
        event = wakeups.register(channels) if wait_ms else None
        try:
            while True:
                if event is not None:
                    event.clear()
                out: list[Any] = []
                self._rotation += 1
                start = self._rotation % len(parts)
                for topic, partition in parts[start:] + parts[:start]:
                    left = max_records - len(out)
                    if left <= 0:
                        break
                    budget = None if max_bytes is None else max(max_bytes - _size(out), 1)
                    out += await self.queues.acquire(group, worker, topic, partition, left, budget)
                    if max_bytes is not None and _size(out) >= max_bytes:
                        break
                left_s = deadline - loop.time()
                if out or event is None or left_s <= 0 or wakeups.closing:
                    return out
                recheck = min(cfg.lock_ms / 4000, MAX_RECHECK_S)
                try:
                    await asyncio.wait_for(event.wait(), min(left_s, recheck))
                except TimeoutError:
                    pass
        finally:
            if event is not None:
                wakeups.unregister(event, channels)

    def _settler(self, verb: str) -> Handler:
        action = _SETTLE[verb]

        async def settle(request: web.Request) -> web.Response:
            group = await self._group(request)
            body = await self._body(request)
            self._fields(body, "worker records")
            worker = body.get("worker")
            if not isinstance(worker, str):
                raise BadInput("worker (the id the read answered with) is required")
            check_holder(worker)
            records = body.get("records")
            if not isinstance(records, list) or not 1 <= len(records) <= MAX_RECORDS:
                raise BadInput(f"records must be a list of 1..{MAX_RECORDS} records")
            by_partition: dict[tuple[str, int], list[int]] = {}
            for r in records:
                if not isinstance(r, dict):
                    raise BadInput("each record is {topic, partition, offset}")
                self._fields(r, "topic partition offset")
                topic, partition, offset = r.get("topic"), r.get("partition"), r.get("offset")
                topic_names.check(topic)
                self._may(request, Operation.READ, ResourceType.TOPIC, topic)
                if type(partition) is not int or not 0 <= partition <= INT32_MAX:
                    raise BadInput(f"each record needs topic and partition: {show(r)}")
                if type(offset) is not int or not 0 <= offset <= INT64_MAX:
                    raise BadInput(f"offsets are integers in 0..{INT64_MAX}: {show(r)}")
                by_partition.setdefault((topic, partition), []).append(offset)
            cfg = await self.queues.config(group)
            results: dict[tuple[str, int, int], Any] = {}
            deadlines: dict[tuple[str, int], int] = {}
            for topic, partition in by_partition:  # all checked before anything changes
                if partition >= await self._partitions(topic):
                    raise QueueError(
                        "UNKNOWN_TOPIC_OR_PARTITION",
                        f"topic {topic!r} has no partition {partition}",
                    )
            for (topic, partition), offsets in by_partition.items():
                offsets = list(dict.fromkeys(offsets))  # a record named twice: settled once
                done = await self.queues.settle(group, worker, topic, partition, offsets, action)
                deadlines[(topic, partition)] = done.now_ms + cfg.lock_ms
                for offset, err in done.items():
                    results[(topic, partition, offset)] = err
            out = []
            failed = 0
            for r in records:
                k = (r["topic"], r["partition"], r["offset"])
                entry: dict[str, Any] = {"topic": k[0], "partition": k[1], "offset": k[2]}
                err = results.get(k)
                if err is None:
                    if action is Action.RENEW:
                        entry["lease_deadline_ms"] = deadlines[(k[0], k[1])]
                    entry["error"] = None
                else:
                    failed += 1
                    entry["error"] = {"code": err.value, "message": err.message}
                out.append(entry)
            if failed:
                return error(
                    409,
                    "RECORD_STATE",
                    f"{failed} of {len(out)} record(s) were not {verb}d as asked: see results "
                    "(nothing changed for them)",
                    results=out,
                )
            return web.json_response({"results": out})

        settle.__name__ = verb
        return settle

    async def reset(self, request: web.Request) -> web.Response:
        group = await self._group(request)
        body = await self._body(request)
        self._fields(body, "topic partitions to")
        topic = body.get("topic")
        topic_names.check(topic)
        self._may(request, Operation.READ, ResourceType.TOPIC, topic)
        count = await self._partitions(topic)
        partitions = body.get("partitions", list(range(count)))
        if not isinstance(partitions, list) or any(
            type(p) is not int or not 0 <= p < count for p in partitions
        ):
            raise BadInput(f"partitions must be a list of partitions of {topic!r} (0..{count - 1})")
        to = body.get("to")
        if to not in ("earliest", "latest") and (type(to) is not int or not 0 <= to <= INT64_MAX):
            raise BadInput(f"to is 'earliest', 'latest' or an offset, got {show(to)}")
        out = []
        for p in partitions:
            position = await self.queues.reset(group, topic, p, to)
            out.append({"topic": topic, "partition": p, "offset": position})
        return web.json_response({"partitions": out})

    async def redrive(self, request: web.Request) -> web.Response:
        group = await self._group(request)
        body = await self._body(request)
        self._fields(body, "limit dead_letter_topic")
        limit = self._int(body, "limit", 1000, 1, 1_000_000)
        cfg = await self.queues.config(group)
        topic = body.get("dead_letter_topic", cfg.dead_letter_topic)
        if topic is None:
            raise BadInput("the group has no dead_letter_topic: name one in the request")
        topic_names.check(topic)
        self._may(request, Operation.READ, ResourceType.TOPIC, topic)

        def may_write(target: str) -> bool:
            return allowed(self.broker, request, Operation.WRITE, ResourceType.TOPIC, target)

        moved, skipped = await redrive.redrive(
            self.queues, self.broker, group, topic, limit, may_write
        )
        return web.json_response({"moved": moved, "skipped": skipped, "dead_letter_topic": topic})

    async def produce(self, request: web.Request) -> web.Response:
        topic = topic_names.check(request.match_info["topic"])
        self._may(request, Operation.WRITE, ResourceType.TOPIC, topic)
        body = await self._body(request)
        self._fields(body, "records")
        records = body.get("records")
        if not isinstance(records, list) or not 1 <= len(records) <= MAX_RECORDS:
            raise BadInput(f"records must be a list of 1..{MAX_RECORDS} records")
        # Auto-creation, as Kafka's Metadata: only for a caller who may CREATE it.
        if allowed(
            self.broker, request, Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME
        ) or allowed(self.broker, request, Operation.CREATE, ResourceType.TOPIC, topic):
            info = await self.broker.topic_for_produce_or_metadata(topic)
        else:
            info = await self.broker.store.get_topic(topic)
        if info is None:
            raise QueueError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {topic!r} does not exist")
        log_append = effective_config(info, "message.timestamp.type") == "LogAppendTime"
        now = int(time.time() * 1000)
        by_partition: dict[int, list[Any]] = {}
        order: list[tuple[int, int]] = []
        for i, r in enumerate(records):
            if not isinstance(r, dict):
                raise BadInput("each record is an object {key, value, headers, ...}")
            self._fields(r, PRODUCE_RECORD_FIELDS)
            key = codec.decode(r.get("key"), r.get("key_encoding", codec.UTF8), "key")
            value = codec.decode(r.get("value"), r.get("value_encoding", codec.UTF8), "value")
            headers = []
            given_headers = r.get("headers", [])
            if not isinstance(given_headers, list):
                raise BadInput(f"record {i}: headers are [{{key, value}}]")
            for h in given_headers:
                if not isinstance(h, dict) or not isinstance(h.get("key"), str) or "value" not in h:
                    raise BadInput(f"record {i}: headers are [{{key, value}}]")
                self._fields(h, "key value value_encoding")
                encoding = h.get("value_encoding", codec.UTF8)
                headers.append((h["key"], codec.decode(h["value"], encoding, "header value")))
            partition = r.get("partition")
            if partition is None:
                partition = (
                    partition_for_key(key, info.partitions)
                    if key is not None
                    else i % info.partitions
                )
            if type(partition) is not int or partition < 0:
                raise BadInput(f"record {i}: partitions are integers >= 0, got {show(partition)}")
            if partition >= info.partitions:
                raise QueueError(
                    "UNKNOWN_TOPIC_OR_PARTITION", f"topic {topic!r} has no partition {partition}"
                )
            ts = r.get("timestamp", now)
            if type(ts) is not int or not 0 <= ts <= INT64_MAX:
                raise BadInput(f"record {i}: timestamp is epoch milliseconds")
            flags = (
                (FLAG_LOG_APPEND if log_append else 0)
                | (FLAG_KEY_NULL if key is None else 0)
                | (FLAG_VALUE_NULL if value is None else 0)
            )
            batch = by_partition.setdefault(partition, [])
            order.append((partition, len(batch)))
            batch.append((ts, key or b"", value or b"", encode_headers(headers), flags))
        checked = [
            (partition, batch, _checked_batch(info.config, topic, partition, batch, now))
            for partition, batch in by_partition.items()
        ]  # every partition's batch is checked before anything is appended
        bases: dict[int, int] = {}
        store = self.broker.store
        for partition, batch, decoded in checked:
            size = sum(len(b[1]) + len(b[2]) + len(b[3]) for b in batch)
            args = [
                len(batch),
                1 if log_append else 0,
                decoded.max_timestamp,
                decoded.max_timestamp_delta,
                -1,
                -1,
                -1,
                *decoded.records,
            ]
            prepared = store.prepare_records(info, partition, args, size, retention_bytes(info))
            result = await store.append(prepared)
            bases[partition] = result.base_offset
        return web.json_response(
            {"offsets": [{"partition": p, "offset": bases[p] + i} for p, i in order]}
        )


PRODUCE_RECORD_FIELDS = "key key_encoding value value_encoding headers partition timestamp"


def _checked_batch(
    config: dict[str, Any],
    topic: str,
    partition: int,
    batch: list[tuple[int, bytes, bytes, bytes, int]],
    now: int,
) -> DecodedBatch:
    """A partition's records checked as Produce checks a producer's batch of them
    (sidecar/validation: max.message.bytes, keys of compacted topics, timestamps,
    segment.bytes); raises InvalidBatch. Returns them as the batch Produce would have
    decoded (max timestamp and its index, flat fields for the append script)."""
    size = record_sizes.batch_size(
        (
            ts,
            None if flags & FLAG_KEY_NULL else key,
            None if flags & FLAG_VALUE_NULL else value,
            headers,
        )
        for ts, key, value, headers, flags in batch
    )
    produce_limits.check_size(size, config, topic, partition)
    max_ts = max(b[0] for b in batch)
    delta = next(i for i, b in enumerate(batch) if b[0] == max_ts)
    decoded = DecodedBatch(len(batch), -1, -1, -1, max_ts, delta, [x for b in batch for x in b])
    produce_limits.check_keys(decoded, config, topic, partition)
    produce_limits.check_batch(decoded, size, config, topic, partition, now)
    return decoded


def _number(text: str) -> int | float:
    """A JSON number with a fraction or exponent: an int when it is whole (JSON Schema's
    "integer" includes 5.0, so the document's integers accept it too)."""
    value = float(text)
    return int(value) if value.is_integer() else value


@functools.cache
def _names(fields: str) -> frozenset[str]:
    return frozenset(fields.split())


def _size(records: list[Any]) -> int:
    return sum(len(r.key or b"") + len(r.value or b"") for r in records)


def add_routes(app: web.Application, broker: Any) -> QueueApi:
    api = QueueApi(broker)
    app.router.add_routes(api.routes())
    app.middlewares.append(json_errors)
    return api
