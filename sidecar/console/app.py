"""The Skiff console (docs/console.md): server-rendered pages under /console on the HTTP
listener, behind its authentication (security/http_auth.py's middleware) and filtered by
the caller's ACLs (the authorizer the Kafka APIs use). Read-only except redrive, a POST
confirmed in the page and refused from another origin. Every user-controlled string is
escaped (`esc`) or URL-quoted (`q`) where it is put into the page."""

from __future__ import annotations

import html
import json
import math
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from aiohttp import web

from sidecar.console import data
from sidecar.queues import redrive as redrive_op
from sidecar.queues.core import QueueError, queue_store
from sidecar.security.authorizer import Operation, ResourceType
from sidecar.security.http_auth import NotAuthorized, allowed, require
from sidecar.storage.resilience import RedisUnavailable
from sidecar.storage.share_store import ShareStore
from sidecar.storage.store import StoreError
from sidecar.telemetry import metrics

PREFIX = "/console"
STATIC = {
    "uPlot.iife.min.js": "application/javascript",
    "uPlot.min.css": "text/css",
    "uPlot.LICENSE": "text/plain",
    "console.js": "application/javascript",
}
DEAD_LETTER_HEADERS = ("group", "reason", "topic", "partition", "offset", "delivery.count")
REDRIVE_LIMIT = 100_000

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def _int_arg(request: web.Request, name: str, default: int, low: int = 0) -> int:
    raw = request.query.get(name, "")
    try:
        value = int(raw) if raw else default
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name} must be a number, got {raw[:40]!r}") from None
    if value < low:
        raise web.HTTPBadRequest(text=f"{name} must be >= {low}")
    return value


def page(title: str, body: str, status: int = 200, scripts: str = "") -> web.Response:
    nav = (
        f'<a href="{PREFIX}">Cluster</a> <a href="{PREFIX}/topics">Topics</a> '
        f'<a href="{PREFIX}/groups">Groups</a>'
    )
    text = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)} - Skiff console</title>
<link rel="stylesheet" href="{PREFIX}/static/uPlot.min.css">
<style>
body{{font-family:system-ui,sans-serif;margin:0;color:#222}}
header{{background:#1d3557;color:#fff;padding:.6em 1em}} header a{{color:#fff;margin-right:1em}}
main{{padding:1em}} table{{border-collapse:collapse;margin:.5em 0}}
td,th{{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}}
th{{background:#f1f1f1}} td.n{{text-align:right;font-variant-numeric:tabular-nums}}
pre{{margin:0;white-space:pre-wrap;word-break:break-all;max-width:50em}}
.muted{{color:#777}} .chart{{display:inline-block;margin-right:1em}}
</style></head>
<body><header><b>Skiff</b> &nbsp; {nav}</header><main><h1>{esc(title)}</h1>
{body}</main>
<script src="{PREFIX}/static/uPlot.iife.min.js"></script>
<script src="{PREFIX}/static/console.js"></script>{scripts}</body></html>"""
    return web.Response(text=text, content_type="text/html", status=status)


def table(headers: list[str], rows: list[list[str]], table_id: str = "") -> str:
    """Cells are HTML already (callers escape)."""
    ident = f' id="{esc(table_id)}"' if table_id else ""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def num(value: int, ident: str = "") -> str:
    """A number; `ident` names it for the polled endpoint's updates (console.js)."""
    attr = f' data-live="{esc(ident)}"' if ident else ""
    return f'<span class="n"{attr}>{value}</span>'


def counted(counter: Any, **labels: str) -> int:
    """A Prometheus counter of this sidecar summed over the samples matching `labels`."""
    total = 0.0
    for family in counter.collect():
        for sample in family.samples:
            if sample.name.endswith("_total") and all(
                sample.labels.get(k) == v for k, v in labels.items()
            ):
                total += sample.value
    return int(total)


def when(ms: int) -> str:
    if ms < 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


class Console:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.queues = queue_store(broker)

    @property
    def redis(self) -> Any:
        return self.broker.store.redis

    def routes(self) -> list[web.RouteDef]:
        w = self._wrap
        return [
            web.get(PREFIX, w(self.cluster)),
            web.get(PREFIX + "/", w(self.cluster)),
            web.get(PREFIX + "/api/cluster", w(self.cluster_json)),
            web.get(PREFIX + "/topics", w(self.topics)),
            web.get(PREFIX + "/topics/{topic}", w(self.topic)),
            web.get(PREFIX + "/topics/{topic}/records", w(self.records)),
            web.get(PREFIX + "/api/topics/{topic}", w(self.topic_json)),
            web.get(PREFIX + "/groups", w(self.groups)),
            web.get(PREFIX + "/groups/{group}", w(self.group)),
            web.get(PREFIX + "/api/groups/{group}", w(self.group_json)),
            web.get(PREFIX + "/queues/{group}", w(self.queue)),
            web.get(PREFIX + "/queues/{group}/redrive", w(self.confirm_redrive)),
            web.post(PREFIX + "/queues/{group}/redrive", w(self.redrive)),
            web.get(PREFIX + "/static/{name}", self.static),
        ]

    def _wrap(self, handler: Handler) -> Handler:
        async def run(request: web.Request) -> web.StreamResponse:
            try:
                return await handler(request)
            except NotAuthorized as exc:
                return page("Not authorized", f"<p>{esc(exc.code)}: {esc(exc.message)}</p>", 403)
            except (QueueError, StoreError) as exc:
                status = 404 if "NOT_FOUND" in exc.code or "UNKNOWN" in exc.code else 400
                return page("Not available", f"<p>{esc(exc.code)}: {esc(exc)}</p>", status)
            except RedisUnavailable as exc:
                return page("Redis unavailable", f"<p>{esc(exc)}</p>", 503)
            except web.HTTPClientError as exc:  # the page's own message, not just the reason
                return page(exc.reason, f"<p>{esc(exc.text or exc.reason)}</p>", exc.status)

        return run

    def _may(self, request: web.Request, op: Operation, kind: ResourceType, name: str) -> bool:
        return allowed(self.broker, request, op, kind, name)

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        kind = STATIC.get(name)
        if kind is None:
            raise web.HTTPNotFound()
        body = resources.files("sidecar.console").joinpath("static", name).read_bytes()
        return web.Response(
            body=body, content_type=kind, headers={"Cache-Control": "public, max-age=3600"}
        )

    # -- cluster ---------------------------------------------------------------------------

    async def _info(self) -> dict[str, Any]:
        info = await self.redis.info("all")
        return info if isinstance(info, dict) else {}

    async def cluster(self, request: web.Request) -> web.Response:
        require(self.broker, request, Operation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster")
        sidecars = [[esc(b.node_id), esc(b.host), esc(b.port)] for b in self.broker.cluster.live]
        info = await self._info()
        saved = int(info.get("rdb_last_save_time", 0)) * 1000
        persistence = (
            f"AOF {'on' if int(info.get('aof_enabled', 0)) else 'off'}; "
            f"last RDB save {when(saved) if saved else 'never'}"
        )
        rows = [
            ["version", esc(info.get("redis_version", "?"))],
            ["mode", esc(info.get("redis_mode", "?"))],
            [
                "used memory",
                f'<span id="used-memory">{esc(info.get("used_memory_human", "?"))}</span>',
            ],
            ["max memory", esc(info.get("maxmemory_human", "?"))],
            ["persistence", esc(persistence)],
            ["role", esc(info.get("role", "?"))],
            ["replicas", esc(info.get("connected_slaves", 0))],
        ]
        body = (
            "<h2>Sidecars</h2>"
            + table(["node id", "host", "port"], sidecars, "sidecars")
            + "<h2>Redis</h2>"
            + table(["Redis", ""], rows, "redis")
            + '<h2>Last minutes</h2><div class="chart" id="ops-chart"></div>'
            + '<div class="chart" id="memory-chart"></div>'
            + '<div class="chart" id="requests-chart"></div>'
            + '<div class="chart" id="errors-chart"></div>'
        )
        script = (
            f'<script>skiffCharts("{PREFIX}/api/cluster", '
            '[["ops-chart", "Redis commands/s", "ops_per_sec"], '
            '["memory-chart", "Redis memory (MiB)", "used_memory_mib"], '
            '["requests-chart", "Kafka requests/s (this sidecar)", "requests", true], '
            '["errors-chart", "Kafka errors/s (this sidecar)", "errors", true]]);</script>'
        )
        return page("Cluster", body, scripts=script)

    async def cluster_json(self, request: web.Request) -> web.Response:
        require(self.broker, request, Operation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster")
        info = await self.redis.info("all")
        return web.json_response(
            {
                "time": time.time(),
                "ops_per_sec": int(info.get("instantaneous_ops_per_sec", 0)),
                "used_memory_mib": round(int(info.get("used_memory", 0)) / 2**20, 2),
                "requests": counted(metrics.REQUESTS),
                "errors": counted(metrics.REQUEST_ERRORS),
            }
        )

    # -- topics ----------------------------------------------------------------------------

    async def topics(self, request: web.Request) -> web.Response:
        search = request.query.get("q", "")[:249]
        page_no = _int_arg(request, "page", 1, 1)
        names = [
            n
            for n in await data.topic_names(self.redis)
            if search in n and self._may(request, Operation.DESCRIBE, ResourceType.TOPIC, n)
        ]
        pages = max(math.ceil(len(names) / data.PAGE_TOPICS), 1)
        shown = names[(page_no - 1) * data.PAGE_TOPICS : page_no * data.PAGE_TOPICS]
        rows = [
            [
                f'<a href="{PREFIX}/topics/{q(r.name)}">{esc(r.name)}</a>',
                num(r.partitions),
                num(r.records) if r.records is not None else '<span class="muted">-</span>',
                esc(r.storage_format),
            ]
            for r in await data.topic_rows(self.redis, shown)
        ]
        links = []
        if page_no > 1:
            links.append(f'<a id="prev" href="?q={q(search)}&page={page_no - 1}">previous</a>')
        if page_no < pages:
            links.append(f'<a id="next" href="?q={q(search)}&page={page_no + 1}">next</a>')
        body = (
            f'<form method="get"><input name="q" value="{esc(search)}" placeholder="search">'
            ' <button type="submit">Search</button></form>'
            f'<p id="count">{len(names)} topics, page {page_no} of {pages}</p>'
            + table(["topic", "partitions", "records", "format"], rows, "topics")
            + " ".join(links)
        )
        return page("Topics", body)

    async def _topic_info(self, request: web.Request, op: Operation) -> Any:
        name = request.match_info["topic"]
        require(self.broker, request, op, ResourceType.TOPIC, name)
        info = await self.broker.store.get_topic(name, fresh=True)
        if info is None:
            raise StoreError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        return info

    async def topic(self, request: web.Request) -> web.Response:
        info = await self._topic_info(request, Operation.DESCRIBE)
        marks = await data.watermarks(self.redis, info.name, info.partitions)
        rows = [
            [
                f'<a href="{PREFIX}/topics/{q(info.name)}/records?partition={p}&offset={lso}">'
                f"{p}</a>",
                num(lso, f"lso:{p}"),  # kept current by the polled endpoint
                num(hw, f"hw:{p}"),
                num(hw - lso, f"records:{p}"),
            ]
            for p, (lso, hw) in enumerate(marks)
        ]
        configs = [
            [esc(k), esc(v)]
            for k, v in sorted(
                {**info.configs, "skiff.storage.format": info.storage_format}.items()
            )
        ]
        body = (
            f"<p>id {esc(info.topic_id)}, {info.partitions} partitions, "
            f"format {esc(info.storage_format)}</p>"
            + table(
                ["partition", "log start offset", "high watermark", "records"], rows, "partitions"
            )
            + '<div class="chart" id="in-chart"></div><div class="chart" id="out-chart"></div>'
            + "<h2>Configs (overrides)</h2>"
            + table(["name", "value"], configs, "configs")
        )
        script = (
            f"<script>skiffCharts({json.dumps(f'{PREFIX}/api/topics/{q(info.name)}')}, "
            '[["in-chart", "records produced/s", "log_end", true], '
            '["out-chart", "records fetched/s (this sidecar)", "fetched", true]]);</script>'
        )
        return page(f"Topic {info.name}", body, scripts=script)

    async def topic_json(self, request: web.Request) -> web.Response:
        info = await self._topic_info(request, Operation.DESCRIBE)
        marks = await data.watermarks(self.redis, info.name, info.partitions)
        live: dict[str, Any] = {
            "time": time.time(),
            "log_end": sum(hw for _, hw in marks),
            "fetched": counted(metrics.RECORDS_OUT, topic=info.name),
        }
        for p, (lso, hw) in enumerate(marks):
            live |= {f"lso:{p}": lso, f"hw:{p}": hw, f"records:{p}": hw - lso}
        return web.json_response(live)

    async def records(self, request: web.Request) -> web.Response:
        info = await self._topic_info(request, Operation.READ)
        partition = _int_arg(request, "partition", 0)
        if partition >= info.partitions:
            raise web.HTTPBadRequest(text=f"partition must be below {info.partitions}")
        mode = request.query.get("format", "text")
        if mode not in ("text", "json", "hex"):
            mode = "text"
        lso, hw, _, _ = await self.broker.store.watermarks(info.name, partition)
        offset = max(_int_arg(request, "offset", lso), lso)
        if request.query.get("timestamp"):  # the first record at or after it (ms)
            found_at, _ = await self.broker.store.offset_for_time(
                info.name, partition, _int_arg(request, "timestamp", 0)
            )
            offset = hw if found_at < 0 else found_at
        found = await data.records(self.broker.store, info.name, partition, offset, hw)
        rows = [
            [
                num(r.offset),
                esc(when(r.timestamp)),
                f"<pre>{esc(data.show_bytes(r.key, mode))}</pre>",
                f"<pre>{esc(data.show_bytes(r.value, mode))}</pre>",
                "<br>".join(
                    f"<b>{esc(k)}</b>: {esc(data.show_bytes(v, mode))}" for k, v in r.headers
                ),
            ]
            for r in found
        ]
        base = f"{PREFIX}/topics/{q(info.name)}/records?partition={partition}&format={mode}"
        nxt = found[-1].offset + 1 if found else offset
        formats = " ".join(
            f'<a href="{PREFIX}/topics/{q(info.name)}/records?partition={partition}'
            f'&offset={offset}&format={m}">{m}</a>'
            for m in ("text", "json", "hex")
        )
        more = f'<a id="next" href="{base}&offset={nxt}">next page</a>' if nxt < hw else ""
        body = (
            f"<p>partition {partition}: offsets {lso} to {hw - 1}; showing from {offset}. "
            f"Show as {formats}</p>"
            f'<form method="get"><input type="hidden" name="partition" value="{partition}">'
            f'<input type="hidden" name="format" value="{mode}">offset '
            f'<input name="offset" value="{offset}"> <button>Go</button></form>'
            f'<form method="get"><input type="hidden" name="partition" value="{partition}">'
            f'<input type="hidden" name="format" value="{mode}">timestamp (ms) '
            '<input name="timestamp"> <button>Go</button></form>'
            + table(["offset", "timestamp", "key", "value", "headers"], rows, "records")
            + more
        )
        return page(f"Records of {info.name}", body)

    # -- groups ----------------------------------------------------------------------------

    async def groups(self, request: web.Request) -> web.Response:
        """Consumer and queue groups whose id contains ?q=, PAGE_GROUPS of each a page."""
        search = request.query.get("q", "")[:249]
        page_no = _int_arg(request, "page", 1, 1)

        def visible(ids: list[str]) -> list[str]:
            return [
                g
                for g in ids
                if search in g
                and not g.startswith("skiff-redrive.")  # redrive's own queue groups
                and self._may(request, Operation.DESCRIBE, ResourceType.GROUP, g)
            ]

        consumer = visible(await data.group_ids(self.redis))
        queue_ids = visible(sorted(await self.queues.groups()))
        pages = max(math.ceil(max(len(consumer), len(queue_ids)) / data.PAGE_GROUPS), 1)
        shown = slice((page_no - 1) * data.PAGE_GROUPS, page_no * data.PAGE_GROUPS)
        links = []
        if page_no > 1:
            links.append(f'<a id="prev" href="?q={q(search)}&page={page_no - 1}">previous</a>')
        if page_no < pages:
            links.append(f'<a id="next" href="?q={q(search)}&page={page_no + 1}">next</a>')
        body = (
            f'<form method="get"><input name="q" value="{esc(search)}" placeholder="search">'
            ' <button type="submit">Search</button></form>'
            f"<p>{len(consumer)} consumer groups, {len(queue_ids)} queue groups, page "
            f"{page_no} of {pages}</p>"
            "<h2>Consumer groups</h2>"
            + table(
                ["group"],
                [[f'<a href="{PREFIX}/groups/{q(g)}">{esc(g)}</a>'] for g in consumer[shown]],
                "consumer-groups",
            )
            + "<h2>Queue groups</h2>"
            + table(
                ["group"],
                [[f'<a href="{PREFIX}/queues/{q(g)}">{esc(g)}</a>'] for g in queue_ids[shown]],
                "queue-groups",
            )
            + " ".join(links)
        )
        return page("Groups", body)

    async def _lag(self, request: web.Request) -> tuple[str, list[data.LagRow]]:
        group = request.match_info["group"]
        require(self.broker, request, Operation.DESCRIBE, ResourceType.GROUP, group)
        rows = [
            r
            for r in await data.group_lag(self.redis, group)
            if self._may(request, Operation.DESCRIBE, ResourceType.TOPIC, r.topic)
        ]
        return group, rows

    async def group(self, request: web.Request) -> web.Response:
        group, lag = await self._lag(request)
        rows = [
            [
                esc(r.topic),
                num(r.partition),
                num(r.committed, f"committed:{r.topic}:{r.partition}"),
                num(r.log_end, f"log_end:{r.topic}:{r.partition}"),
                num(r.lag, f"lag:{r.topic}:{r.partition}"),
            ]
            for r in lag
        ]
        total = sum(r.lag for r in lag)
        stored = await data.group_state(self.redis, group)
        about = "<p>no membership stored (offsets only)</p>"
        if stored is not None:
            members = [
                [esc(m.member_id), esc(m.client_id), esc(m.host), esc(m.assignment)]
                for m in stored.members
            ]
            about = (
                f'<p>state <span id="state">{esc(stored.state)}</span>, generation '
                f"{stored.generation}, assignor {esc(stored.protocol)}</p>"
                + table(["member", "client id", "host", "assignment"], members, "members")
            )
        body = (
            about
            + f'<p>total lag <span id="total-lag" data-live="total_lag">{total}</span></p>'
            + table(["topic", "partition", "committed", "log end", "lag"], rows, "lag")
            + '<div class="chart" id="lag-chart"></div>'
        )
        script = (
            f"<script>skiffCharts({json.dumps(f'{PREFIX}/api/groups/{q(group)}')}, "
            '[["lag-chart", "total lag (records)", "total_lag"]]);</script>'
        )
        return page(f"Consumer group {group}", body, scripts=script)

    async def group_json(self, request: web.Request) -> web.Response:
        _, lag = await self._lag(request)
        live: dict[str, int] = {"total_lag": sum(r.lag for r in lag)}
        for r in lag:
            live[f"committed:{r.topic}:{r.partition}"] = r.committed
            live[f"log_end:{r.topic}:{r.partition}"] = r.log_end
            live[f"lag:{r.topic}:{r.partition}"] = r.lag
        return web.json_response({"time": time.time(), **live})

    # -- queue groups and dead letters -----------------------------------------------------

    async def _queue(self, request: web.Request, op: Operation) -> Any:
        group = request.match_info["group"]
        require(self.broker, request, op, ResourceType.GROUP, group)
        return await self.queues.config(group)

    async def _dead_letters(self, group: str, topic: str) -> list[tuple[int, data.Record]]:
        """The group's dead letters not yet redriven: from the redrive group's position
        (the log start when none ran) on, a page at most per partition."""
        info = await self.broker.store.get_topic(topic)
        if info is None:
            return []
        out = []
        marks = await data.watermarks(self.redis, topic, info.partitions)
        redriver = redrive_op.redrive_group(group)
        has_redriver = await self.queues.exists(redriver)
        for p, (lso, hw) in enumerate(marks):
            start = lso
            if has_redriver:
                start = max(await self.queues.committed(redriver, topic, p), lso)
            for r in await data.records(self.broker.store, topic, p, start, hw):
                if _header(r, "group") == group.encode():
                    out.append((p, r))
        return out

    async def queue(self, request: web.Request) -> web.Response:
        cfg = await self._queue(request, Operation.DESCRIBE)
        described = await self.queues.describe(cfg.group)
        rows = [
            [
                esc(s.topic),
                num(s.partition),
                num(s.high_watermark),
                num(s.committed),
                num(s.lag),
                num(s.pending),
            ]
            for s in described.partitions
            if self._may(request, Operation.DESCRIBE, ResourceType.TOPIC, s.topic)
        ]
        body = (
            f"<p>lock {cfg.lock_ms} ms, delivery limit {cfg.delivery_limit}, dead-letter topic "
            f"{esc(cfg.dead_letter_topic or '-')}</p>"
            + table(
                ["topic", "partition", "high watermark", "committed", "lag", "pending"],
                rows,
                "queue-partitions",
            )
        )
        epoch, members = await ShareStore(self.redis).load(cfg.group)
        if members:  # a share group is the queue group of the same id (docs/share-groups.md)
            body += f"<h2>Share group members (epoch {epoch})</h2>" + table(
                ["member", "client id", "host", "subscribed topics"],
                [
                    [
                        esc(member),
                        esc(doc.get("client_id", "")),
                        esc(doc.get("client_host", "")),
                        esc(", ".join(map(str, doc.get("topics") or []))),
                    ]
                    for member, doc in sorted(members.items())
                ],
                "share-members",
            )
        dlq = cfg.dead_letter_topic
        if dlq and self._may(request, Operation.READ, ResourceType.TOPIC, dlq):
            dead = await self._dead_letters(cfg.group, dlq)
            dead_rows = [
                [
                    num(p),
                    num(r.offset),
                    f"<pre>{esc(data.show_bytes(r.key, 'text'))}</pre>",
                    f"<pre>{esc(data.show_bytes(r.value, 'text'))}</pre>",
                    *(esc(data.show_bytes(_header(r, h), "text")) for h in DEAD_LETTER_HEADERS[1:]),
                ]
                for p, r in dead
            ]
            body += f'<h2>Dead letters (<span id="dead-count">{len(dead)}</span>)</h2>' + table(
                ["dlq partition", "dlq offset", "key", "value", *DEAD_LETTER_HEADERS[1:]],
                dead_rows,
                "dead-letters",
            )
            if dead:
                body += (
                    f'<p><a id="redrive" href="{PREFIX}/queues/{q(cfg.group)}/redrive">'
                    "Redrive dead letters...</a></p>"
                )
        return page(f"Queue group {cfg.group}", body)

    async def confirm_redrive(self, request: web.Request) -> web.Response:
        """The confirmation step: redrive runs only from this page's POST."""
        cfg = await self._queue(request, Operation.READ)
        dlq = cfg.dead_letter_topic or "-"
        body = (
            f"<p>Move the dead letters of {esc(cfg.group)} in {esc(dlq)} back to the topics "
            "and partitions they came from?</p>"
            f'<form method="post" action="{PREFIX}/queues/{q(cfg.group)}/redrive">'
            '<input type="hidden" name="confirm" value="yes">'
            '<button id="confirm" type="submit">Yes, redrive</button> '
            f'<a href="{PREFIX}/queues/{q(cfg.group)}">cancel</a></form>'
        )
        return page("Confirm redrive", body)

    async def redrive(self, request: web.Request) -> web.Response:
        origin = request.headers.get("Origin")
        if origin is not None and urllib.parse.urlsplit(origin).netloc != request.host:
            raise web.HTTPForbidden(text="redrive is only accepted from the console's own pages")
        form = await request.post()
        if form.get("confirm") != "yes":
            raise web.HTTPBadRequest(text="redrive must be confirmed (confirm=yes)")
        cfg = await self._queue(request, Operation.READ)
        dlq = cfg.dead_letter_topic
        if dlq is None:
            raise web.HTTPBadRequest(text="the group has no dead-letter topic")
        require(self.broker, request, Operation.READ, ResourceType.TOPIC, dlq)

        def may_write(target: str) -> bool:
            return self._may(request, Operation.WRITE, ResourceType.TOPIC, target)

        moved, skipped = await redrive_op.redrive(
            self.queues, self.broker, cfg.group, dlq, REDRIVE_LIMIT, may_write
        )
        back = f"{PREFIX}/queues/{q(cfg.group)}"
        body = (
            f'<p id="redrive-result">moved {moved}, passed over {skipped}</p>'
            f'<p><a href="{back}">back to {esc(cfg.group)}</a></p>'
        )
        return page("Redrive", body)


def _header(r: data.Record, name: str) -> bytes | None:
    for key, value in r.headers:
        if key == redrive_op.PREFIX + name:
            return value
    return None


def add_routes(app: web.Application, broker: Any) -> Console:
    console = Console(broker)
    app.router.add_routes(console.routes())
    return console
