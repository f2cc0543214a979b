"""`skiff queues list|describe|redrive`: queue groups through a sidecar's HTTP queue API
(docs/queues.md), which every sidecar serves on its HTTP listener.

    skiff queues list
    skiff queues describe GROUP
    skiff queues redrive GROUP [--limit N] [--dead-letter-topic TOPIC]

Every subcommand takes --http URL ($SKIFF_HTTP, default http://127.0.0.1:8080), --json
and --timeout. Exit status: 0 done, 1 failed (the message says what to do), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from sidecar.cli.groups import _json, _table, positive_seconds
from sidecar.telemetry.redact import redact_url
from sidecar.validation import topic_names

DEFAULT_HTTP = "http://127.0.0.1:8080"


class CliError(Exception):
    pass


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--http",
        default=os.environ.get("SKIFF_HTTP", DEFAULT_HTTP),
        metavar="URL",
        help=f"a sidecar's HTTP endpoint ($SKIFF_HTTP; default {DEFAULT_HTTP})",
    )
    common.add_argument("--json", action="store_true", help="print JSON instead of tables")
    common.add_argument(
        "--timeout",
        type=positive_seconds,
        default=60.0,
        help="seconds to wait for an answer (default 60)",
    )
    return common


def add_parser(subparsers: Any) -> None:
    """Add `queues` and its subcommands to the `skiff` parser's subparsers."""
    common = _common()
    queues = subparsers.add_parser(
        "queues",
        help="describe queue groups, redrive dead letters",
        description="Queue groups (HTTP queue API and Kafka share groups) through a "
        "sidecar's HTTP endpoint.",
    )
    queues.set_defaults(log_level="WARNING")
    sub = queues.add_subparsers(dest="queues_command", required=True)
    sub.add_parser("list", parents=[common], help="every queue group")
    describe = sub.add_parser(
        "describe",
        parents=[common],
        help="settings, and per partition: committed offset, lag, pending records, "
        "delivery counts, lease holders",
    )
    describe.add_argument("group")
    redrive = sub.add_parser(
        "redrive",
        parents=[common],
        help="move the group's dead-lettered records back to their topic and partition",
    )
    redrive.add_argument("group")
    redrive.add_argument(
        "--limit", type=int, default=1000, help="move at most this many records (default 1000)"
    )
    redrive.add_argument(
        "--dead-letter-topic",
        type=topic_names.argument,
        help="the topic to take them from (default: the group's dead_letter_topic)",
    )


def _call(args: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    url = args.http.rstrip("/") + path
    if "://" not in url:
        url = "http://" + url
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=args.timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            err = json.loads(exc.read())["error"]
            message = f"{err['message']} ({err['code']})"
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {exc.code} from {url}"
        raise CliError(message) from None
    except (urllib.error.URLError, OSError) as exc:
        raise CliError(
            f"cannot reach {redact_url(args.http)}: {getattr(exc, 'reason', exc)}. Is a sidecar "
            "serving HTTP there? Point --http (or $SKIFF_HTTP) at its --http-listen address."
        ) from None


def _group_path(group: str) -> str:
    return "/v1/queues/" + urllib.parse.quote(group, safe="")


def _list(args: argparse.Namespace) -> int:
    groups = _call(args, "GET", "/v1/queues")["groups"]
    if args.json:
        _json(groups)
    else:
        for group in groups:
            print(group)
    return 0


def _describe(args: argparse.Namespace) -> int:
    desc = _call(args, "GET", _group_path(args.group))
    if args.json:
        _json(desc)
        return 0
    print(
        f"Queue group: {desc['group']}  lock: {desc['lock_ms']} ms  delivery limit: "
        f"{desc['delivery_limit']}  dead letters: {desc['dead_letter_topic'] or '-'}  "
        f"start: {desc['auto_offset_reset']}  isolation: {desc['isolation_level']}"
    )
    print()
    rows = [
        (
            p["topic"],
            p["partition"],
            p["committed_offset"],
            p["high_watermark"],
            p["lag"],
            p["pending"],
            p["available_pending"],
            p["oldest_lease_ms"],
            " ".join(f"{k}:{v}" for k, v in p["delivery_counts"].items()) or None,
            " ".join(f"{k}:{v}" for k, v in p["holders"].items()) or None,
        )
        for p in desc["partitions"]
    ]
    headers = (
        "TOPIC",
        "PARTITION",
        "COMMITTED",
        "HIGH-WATERMARK",
        "LAG",
        "PENDING",
        "AVAILABLE",
        "OLDEST-LEASE-MS",
        "DELIVERIES",
        "HOLDERS",
    )
    if rows:
        print(_table(headers, rows))
    else:
        print("The group has not read any partition yet.")
    return 0


def _redrive(args: argparse.Namespace) -> int:
    if args.limit < 1:
        print("error: --limit must be at least 1", file=sys.stderr)
        return 2
    body: dict[str, Any] = {"limit": args.limit}
    if args.dead_letter_topic:
        body["dead_letter_topic"] = args.dead_letter_topic
    result = _call(args, "POST", _group_path(args.group) + "/dead-letters:redrive", body)
    if args.json:
        _json(result)
    else:
        print(
            f"Moved {result['moved']} record(s) from {result['dead_letter_topic']} back to "
            f"their topics; passed over {result['skipped']} of other groups or gone topics."
        )
    return 0


_COMMANDS = {"list": _list, "describe": _describe, "redrive": _redrive}


def run(args: argparse.Namespace) -> int:
    try:
        return _COMMANDS[args.queues_command](args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
