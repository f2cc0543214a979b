"""`skiff groups list|describe|delete|reset-offsets`: consumer groups through the Kafka
protocol, as Kafka's kafka-consumer-groups does through its AdminClient. Asking the
coordinators (not Redis) means the answers cover every sidecar and the members the
coordinators currently see.

    skiff groups list [--state Stable,Empty]
    skiff groups describe GROUP
    skiff groups delete GROUP...
    skiff groups reset-offsets GROUP --topic T[:P,P] (--to-earliest | --to-latest |
        --to-datetime 2024-05-01T12:00:00Z | --to-offset N) [--dry-run]

Every subcommand takes --bootstrap HOST:PORT[,...] ($SKIFF_BOOTSTRAP), --json and
--timeout. Exit status: 0 done, 1 failed (the message says what to do), 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sidecar.admin import (
    EARLIEST,
    LATEST,
    AdminClient,
    AdminError,
    BrokerUnavailable,
    CommittedOffset,
    GroupDescription,
    KafkaError,
    MemberDescription,
    TopicPartition,
    parse_bootstrap,
)

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
INACTIVE_STATES = ("Empty", "Dead")  # Kafka's tool resets offsets only in these

TopicSpec = tuple[str, list[int] | None]  # a topic, and its partitions (None: all)


# -- arguments -----------------------------------------------------------------------------


def positive_seconds(text: str) -> float:
    """--timeout: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _bootstrap(text: str) -> str:
    try:
        parse_bootstrap(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _topic_spec(text: str) -> TopicSpec:
    topic, sep, parts = text.partition(":")  # ':' is not legal in topic names
    if not topic:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:P,P..., got {text!r}")
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"partitions must be numbers, got {parts!r}") from None
    if not partitions or partitions[0] < 0:
        raise argparse.ArgumentTypeError(f"expected partition numbers after ':', got {parts!r}")
    return topic, partitions


def _datetime_ms(text: str) -> int:
    """ISO 8601 to epoch ms; without a zone it is local time, as in Kafka's tool."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 time such as 2024-05-01T12:00:00Z, got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    return (moment - epoch) // datetime.timedelta(milliseconds=1)


def _offset(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an offset >= 0, got {text!r}")
    return value


def common_arguments() -> argparse.ArgumentParser:
    """--bootstrap, --json and --timeout, shared by the admin commands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--bootstrap",
        type=_bootstrap,
        default=os.environ.get("SKIFF_BOOTSTRAP", DEFAULT_BOOTSTRAP),
        metavar="HOST:PORT[,...]",
        help=f"any sidecar (or Kafka broker) to start from ($SKIFF_BOOTSTRAP; "
        f"default {DEFAULT_BOOTSTRAP})",
    )
    common.add_argument("--json", action="store_true", help="print JSON instead of tables")
    common.add_argument(
        "--timeout",
        type=positive_seconds,
        default=30.0,
        help="seconds to wait for the cluster, retries included (default 30)",
    )
    return common


def add_parser(subparsers: Any) -> None:
    """Add `groups` and its subcommands to the `skiff` parser's subparsers."""
    common = common_arguments()
    groups = subparsers.add_parser(
        "groups",
        help="list, describe, delete consumer groups or reset their offsets",
        description="Consumer groups, through the Kafka protocol of a running sidecar.",
    )
    groups.set_defaults(log_level="WARNING")  # `skiff` configures logging for every command
    sub = groups.add_subparsers(dest="groups_command", required=True)

    listing = sub.add_parser("list", parents=[common], help="every group: state, protocol type")
    listing.add_argument(
        "--state",
        action="append",
        default=[],
        help="only groups in these states (Stable, Empty, PreparingRebalance, "
        "CompletingRebalance, Dead); comma-separated or repeated",
    )

    describe = sub.add_parser(
        "describe", parents=[common], help="members, committed offsets, log end offsets, lag"
    )
    describe.add_argument("group")

    delete = sub.add_parser("delete", parents=[common], help="delete groups that have no members")
    delete.add_argument("groups", nargs="+", metavar="GROUP")

    reset = sub.add_parser(
        "reset-offsets",
        parents=[common],
        help="commit new offsets for a group that has no members",
    )
    reset.add_argument("group")
    reset.add_argument(
        "--topic",
        action="append",
        required=True,
        type=_topic_spec,
        metavar="TOPIC[:P,P...]",
        help="a topic, or some of its partitions; repeatable",
    )
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the log start offset")
    target.add_argument("--to-latest", action="store_true", help="the log end offset")
    target.add_argument(
        "--to-datetime",
        type=_datetime_ms,
        metavar="ISO8601",
        help="the first offset at or after this time (the log end if none); "
        "local time unless a zone is given",
    )
    target.add_argument(
        "--to-offset",
        type=_offset,
        metavar="N",
        help="this offset, moved into the partition's [log start, log end]",
    )
    reset.add_argument("--dry-run", action="store_true", help="print the plan, commit nothing")


# -- running -------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    command = _COMMANDS[args.groups_command]
    try:
        return asyncio.run(command(args))
    except AdminError as exc:
        print(f"error: {exc}", file=sys.stderr)
        hint = _hint(exc, args)
        if hint:
            print(hint, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _hint(exc: AdminError, args: argparse.Namespace) -> str | None:
    """What the user can do about an error."""
    if isinstance(exc, BrokerUnavailable):
        return (
            f"Is Skiff running at {args.bootstrap}? Start it with `skiff serve`, or point "
            "--bootstrap (or $SKIFF_BOOTSTRAP) at a running sidecar."
        )
    if not isinstance(exc, KafkaError):
        return None
    if exc.name in ("COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR"):
        return (
            f"The group coordinator was still unavailable after {args.timeout:g}s: check that "
            "the sidecars and Redis are up, then retry (or raise --timeout)."
        )
    if exc.name in ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS"):
        return "Consumers joined the group meanwhile: stop them, then retry."
    if exc.name == "UNKNOWN_TOPIC_OR_PARTITION":
        return "Check the topic name and partition numbers (this command creates no topics)."
    if exc.name in ("GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED"):
        return "The broker denied access: use a principal allowed to describe and alter it."
    if exc.name == "INVALID_GROUP_ID":
        return "Group ids must not be empty."
    return None


def _admin(args: argparse.Namespace) -> AdminClient:
    return AdminClient(args.bootstrap, timeout=args.timeout)


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned columns; None prints as '-', as in kafka-consumer-groups."""
    cells = [list(headers)] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def _json(value: Any) -> None:
    print(json.dumps(value, indent=2))


# -- list ----------------------------------------------------------------------------------


async def _list(args: argparse.Namespace) -> int:
    states = [s.strip() for text in args.state for s in text.split(",") if s.strip()]
    async with _admin(args) as admin:
        groups = await admin.list_groups(states)
    if args.json:
        _json(
            [
                {"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type}
                for g in groups
            ]
        )
    else:
        rows = [(g.group_id, g.state, g.protocol_type or None) for g in groups]
        print(_table(("GROUP", "STATE", "PROTOCOL-TYPE"), rows))
    return 0


# -- describe ------------------------------------------------------------------------------


async def _describe(args: argparse.Namespace) -> int:
    async with _admin(args) as admin:
        [group] = await admin.describe_groups([args.group])
        committed = await admin.offset_fetch(args.group)
        if group.state == "Dead" and not committed:
            print(f"error: group {args.group!r} does not exist", file=sys.stderr)
            return 1
        owners = {tp: m for m in group.members for tp in m.assignment or ()}
        partitions = sorted(set(committed) | set(owners))
        ends = await admin.list_offsets(partitions, LATEST, skip_unknown=True)
    rows = [
        _partition_row(tp, committed.get(tp), ends.get(tp), owners.get(tp)) for tp in partitions
    ]
    total_lag = sum(r["lag"] for r in rows if r["lag"] is not None)
    if args.json:
        _json(_describe_json(group, rows, total_lag))
    else:
        _print_description(group, rows, total_lag)
    return 0


def _partition_row(
    tp: TopicPartition,
    committed: CommittedOffset | None,
    end: int | None,
    owner: MemberDescription | None,
) -> dict[str, Any]:
    offset = committed.offset if committed else None
    return {
        "topic": tp.topic,
        "partition": tp.partition,
        "committed_offset": offset,
        "log_end_offset": end,
        "lag": end - offset if end is not None and offset is not None else None,
        "metadata": committed.metadata if committed else None,
        "member_id": owner.member_id if owner else None,
        "client_id": owner.client_id if owner else None,
        "host": owner.host if owner else None,
    }


def _describe_json(
    group: GroupDescription, rows: list[dict[str, Any]], total_lag: int
) -> dict[str, Any]:
    c = group.coordinator
    return {
        "group": group.group_id,
        "state": group.state,
        "protocol_type": group.protocol_type,
        "protocol": group.protocol,
        "coordinator": {"node_id": c.node_id, "host": c.host, "port": c.port},
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "client_id": m.client_id,
                "host": m.host,
                "assignment": None
                if m.assignment is None
                else [{"topic": tp.topic, "partition": tp.partition} for tp in m.assignment],
            }
            for m in group.members
        ],
        "partitions": rows,
        "total_lag": total_lag,
    }


def _print_description(group: GroupDescription, rows: list[dict[str, Any]], total_lag: int) -> None:
    c = group.coordinator
    protocol = group.protocol_type or "-"
    if group.protocol:
        protocol += f" ({group.protocol})"
    print(f"Group:        {group.group_id}")
    print(f"State:        {group.state}")
    print(f"Protocol:     {protocol}")
    print(f"Coordinator:  {c.node_id} ({c.address})")
    print(f"Members:      {len(group.members)}")
    print(f"Total lag:    {total_lag}")
    print()
    headers = ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID")
    keys = ("topic", "partition", "committed_offset", "log_end_offset", "lag", "member_id")
    extra = (("HOST", "host"), ("CLIENT-ID", "client_id"), ("METADATA", "metadata"))
    table = [[r[k] for k in keys] + [r[k] or None for _, k in extra] for r in rows]
    print(_table([*headers, *(h for h, _ in extra)], table))
    print()
    if not group.members:
        print(f"Group {group.group_id!r} has no active members.")
        return
    members = [
        (
            m.member_id,
            m.instance_id,
            m.client_id,
            m.host,
            "?" if m.assignment is None else len(m.assignment),
            _assignment_text(m.assignment),
        )
        for m in group.members
    ]
    headers = ("MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "#PARTITIONS", "ASSIGNMENT")
    print(_table(headers, members))


def _assignment_text(assignment: list[TopicPartition] | None) -> str | None:
    """topic(0,1,2) other(5), as kafka-consumer-groups --members --verbose prints it."""
    if not assignment:
        return None
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return " ".join(f"{t}({','.join(map(str, ps))})" for t, ps in sorted(by_topic.items()))


# -- delete --------------------------------------------------------------------------------


async def _delete(args: argparse.Namespace) -> int:
    groups = list(dict.fromkeys(args.groups))
    async with _admin(args) as admin:
        results = await admin.delete_groups(groups)
    if args.json:
        _json(
            {
                g: None if e is None else {"error": e.name, "message": _delete_message(g, e)}
                for g, e in results.items()
            }
        )
    for group, error in results.items():
        if error is None and not args.json:
            print(f"Deleted group {group!r}.")
        elif error is not None:
            print(f"error: {_delete_message(group, error)}", file=sys.stderr)
    return 1 if any(results.values()) else 0


def _delete_message(group: str, error: KafkaError) -> str:
    if error.name == "NON_EMPTY_GROUP":
        return (
            f"group {group!r} still has active members (NON_EMPTY_GROUP): stop its consumers "
            "(or wait for their session timeout) and retry"
        )
    if error.name == "GROUP_ID_NOT_FOUND":
        return f"group {group!r} does not exist (GROUP_ID_NOT_FOUND)"
    return str(error)


# -- reset-offsets -------------------------------------------------------------------------


async def _reset_offsets(args: argparse.Namespace) -> int:
    async with _admin(args) as admin:
        [group] = await admin.describe_groups([args.group])
        if group.state not in INACTIVE_STATES:
            print(
                f"error: group {args.group!r} is {group.state} with {len(group.members)} "
                "member(s); offsets can only be reset while it has none. Stop its consumers "
                "(or wait for their session timeout) and retry.",
                file=sys.stderr,
            )
            return 1
        partitions = await _partitions(admin, args.topic)
        if partitions is None:
            return 1
        committed = await admin.offset_fetch(args.group)
        targets = await _targets(admin, partitions, args)
        if not args.dry_run:
            await admin.offset_commit(args.group, targets)
    rows = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "current_offset": committed[tp].offset if tp in committed else None,
            "new_offset": targets[tp],
        }
        for tp in partitions
    ]
    if args.json:
        _json({"group": args.group, "dry_run": args.dry_run, "partitions": rows})
        return 0
    headers = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET")
    print(_table(headers, [(args.group, *r.values()) for r in rows]))
    if args.dry_run:
        print("\nDry run: nothing committed.")
    else:
        print(f"\nCommitted new offsets for {len(rows)} partition(s) of group {args.group!r}.")
    return 0


async def _partitions(admin: AdminClient, specs: list[TopicSpec]) -> list[TopicPartition] | None:
    """The partitions --topic names, checked against Metadata (None after a message)."""
    meta = await admin.metadata(sorted({topic for topic, _ in specs}))
    chosen: set[TopicPartition] = set()
    for topic, wanted in specs:
        info = meta.topics.get(topic)
        if info is None or info.error_code:
            print(f"error: topic {topic!r} does not exist", file=sys.stderr)
            return None
        missing = sorted(set(wanted or ()) - set(info.leaders))
        if missing:
            print(
                f"error: topic {topic!r} has no partition {missing[0]} "
                f"(it has {len(info.leaders)}: 0-{len(info.leaders) - 1})",
                file=sys.stderr,
            )
            return None
        chosen.update(TopicPartition(topic, p) for p in (wanted or info.leaders))
    return sorted(chosen)


async def _targets(
    admin: AdminClient, partitions: list[TopicPartition], args: argparse.Namespace
) -> dict[TopicPartition, int]:
    if args.to_earliest:
        return await admin.list_offsets(partitions, EARLIEST)
    if args.to_latest:
        return await admin.list_offsets(partitions, LATEST)
    if args.to_datetime is not None:
        found = await admin.list_offsets(partitions, args.to_datetime)
        later = [tp for tp, offset in found.items() if offset < 0]
        if later:  # no record that new: the log end, as Kafka's tool does
            found.update(await admin.list_offsets(later, LATEST))
        return found
    start = await admin.list_offsets(partitions, EARLIEST)
    end = await admin.list_offsets(partitions, LATEST)
    targets = {}
    for tp in partitions:
        targets[tp] = min(max(args.to_offset, start[tp]), end[tp])
        if targets[tp] != args.to_offset:
            side = "before the log start" if args.to_offset < start[tp] else "past the log end"
            print(
                f"note: offset {args.to_offset} is {side} of {tp}; using {targets[tp]}",
                file=sys.stderr,
            )
    return targets


_COMMANDS: dict[str, Callable[[argparse.Namespace], Awaitable[int]]] = {
    "list": _list,
    "describe": _describe,
    "delete": _delete,
    "reset-offsets": _reset_offsets,
}
