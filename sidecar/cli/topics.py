"""`skiff topics list|create|describe|alter|delete` and `skiff records delete-before`: topics,
their configs and their records through the Kafka protocol (CreateTopics, Metadata,
ListOffsets, DescribeConfigs, CreatePartitions, IncrementalAlterConfigs, DeleteTopics,
DeleteRecords), as Kafka's kafka-topics, kafka-configs and kafka-delete-records do, so
they work against Skiff and against any Kafka broker.

    skiff topics list [--exclude-internal]
    skiff topics create TOPIC [--partitions N] [--replication-factor R] [--config K=V]...
        [--format batch|record] [--if-not-exists] [--validate-only]
    skiff topics describe [TOPIC...] [--all-configs] [--exclude-internal]
    skiff topics alter TOPIC [--partitions N] [--config K=V]... [--delete-config K]...
        [--append-config K=V]... [--subtract-config K=V]... [--validate-only]
    skiff topics delete TOPIC... [--if-exists]
    skiff records delete-before TOPIC [--partition P]... (--offset O | --all)

Every subcommand takes --bootstrap HOST:PORT[,...] ($SKIFF_BOOTSTRAP), --json and
--timeout. Exit status: 0 done, 1 failed (the message says what to do), 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from sidecar.admin import (
    EARLIEST,
    LATEST,
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    RESOURCE_TOPIC,
    AdminClient,
    AdminError,
    BrokerUnavailable,
    ConfigEntry,
    KafkaError,
    TopicMetadata,
    TopicPartition,
    UnsupportedApi,
)
from sidecar.cli.groups import _json, _table, common_arguments
from sidecar.config import storage_format
from sidecar.validation import topic_configs, topic_names

WAIT_STEP = 0.1  # seconds between Metadata polls while a change settles


# -- arguments -----------------------------------------------------------------------------


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return key.strip(), value


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def add_parser(subparsers: Any) -> None:
    """Add `topics` and `records` to the `skiff` parser's subparsers."""
    common = common_arguments()
    topics = subparsers.add_parser(
        "topics",
        help="list, create, describe, alter, delete topics",
        description="Topics and their configs, through the Kafka protocol of a running "
        "sidecar (or any Kafka broker).",
    )
    topics.set_defaults(log_level="WARNING")
    sub = topics.add_subparsers(dest="topics_command", required=True)

    listing = sub.add_parser("list", parents=[common], help="every topic: partitions, id")
    listing.add_argument(
        "--exclude-internal", action="store_true", help="leave out internal topics"
    )

    create = sub.add_parser("create", parents=[common], help="create a topic")
    create.add_argument("topic")
    create.add_argument(
        "--partitions", type=_count, default=-1, help="partitions (default: the broker's)"
    )
    create.add_argument(
        "--replication-factor",
        type=_count,
        default=-1,
        help="replicas (default: the broker's; Skiff accepts 1 only, Redis keeps copies)",
    )
    create.add_argument(
        "--config",
        action="append",
        type=_key_value,
        default=[],
        metavar="NAME=VALUE",
        help="a topic config, e.g. retention.ms=86400000; repeatable",
    )
    create.add_argument(
        "--format",
        choices=storage_format.FORMATS,
        help="skiff.storage.format, fixed at creation: batch (an entry per produced batch) "
        "or record (an entry per record, XRANGE-readable); default: the broker's",
    )
    create.add_argument(
        "--if-not-exists", action="store_true", help="succeed if the topic exists already"
    )
    create.add_argument(
        "--validate-only", action="store_true", help="check the request, create nothing"
    )

    describe = sub.add_parser(
        "describe",
        parents=[common],
        help="partitions (leader, log start, high watermark) and configs",
    )
    describe.add_argument("topics", nargs="*", metavar="TOPIC", help="default: every topic")
    describe.add_argument(
        "--all-configs",
        action="store_true",
        help="list every config, not only those set on the topic or the server",
    )
    describe.add_argument(
        "--exclude-internal", action="store_true", help="leave out internal topics"
    )

    alter = sub.add_parser("alter", parents=[common], help="add partitions, set or delete configs")
    alter.add_argument("topic")
    alter.add_argument("--partitions", type=_count, help="grow the topic to N partitions")
    for flag, what in (
        ("--config", "set a config"),
        ("--append-config", "append to a list config (e.g. cleanup.policy)"),
        ("--subtract-config", "remove from a list config"),
    ):
        alter.add_argument(
            flag,
            action="append",
            type=_key_value,
            default=[],
            metavar="NAME=VALUE",
            help=f"{what}; repeatable",
        )
    alter.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="NAME",
        help="remove a config override (back to the server default); repeatable",
    )
    alter.add_argument(
        "--validate-only", action="store_true", help="check the changes, apply nothing"
    )

    delete = sub.add_parser("delete", parents=[common], help="delete topics and their records")
    delete.add_argument("topics", nargs="+", metavar="TOPIC")
    delete.add_argument("--if-exists", action="store_true", help="succeed if a topic is absent")

    records = subparsers.add_parser(
        "records",
        help="delete the records before an offset",
        description="Records of a topic, through the Kafka protocol (DeleteRecords).",
    )
    records.set_defaults(log_level="WARNING")
    rsub = records.add_subparsers(dest="records_command", required=True)
    before = rsub.add_parser(
        "delete-before",
        parents=[common],
        help="move the log start offset forward: records before it are deleted",
    )
    before.add_argument("topic")
    before.add_argument(
        "--partition",
        action="append",
        type=_non_negative,
        default=[],
        metavar="P",
        help="only this partition; repeatable (default: every partition)",
    )
    target = before.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--offset", type=_non_negative, metavar="O", help="delete the records before O"
    )
    target.add_argument(
        "--all", action="store_true", help="delete every record (up to the high watermark)"
    )


# -- running -------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    if getattr(args, "records_command", None):
        command = _delete_before
    else:
        command = _COMMANDS[args.topics_command]
        refused = _refused_locally(args)
        if refused:
            print(f"error: {refused}; nothing was sent to the broker", file=sys.stderr)
            return 2
    try:
        return asyncio.run(command(args))
    except AdminError as exc:
        _fail(exc, args)
        return 1
    except KeyboardInterrupt:
        return 130


def _refused_locally(args: argparse.Namespace) -> str | None:
    """What the broker would refuse, checked here first (sidecar/validation, the rules
    Skiff's brokers apply): a new topic's name and configs, the configs an alteration
    sets. As Kafka's CLI, a name is not checked where it is only looked up."""
    try:
        if args.topics_command == "create":
            topic_names.check(args.topic)
            # Whether the server has tiered storage is the server's to say.
            configs = topic_configs.validate(args.config, remote_storage=True)
            named = configs.get(storage_format.CONFIG)
            if args.format and named and storage_format.parse(named) != args.format:
                return (
                    f"--format {args.format} and --config {storage_format.CONFIG}={named} "
                    "disagree: give one"
                )
        elif args.topics_command == "alter":
            named = [n for n, _ in args.config + args.append_config + args.subtract_config]
            named += args.delete_config
            if storage_format.CONFIG in named:
                return f"INVALID_CONFIG ({storage_format.ALTER_REFUSED})"
            for name, value in args.config:
                topic_configs.check_value(name, value)
    except topic_names.InvalidTopicName as exc:
        return f"INVALID_TOPIC_EXCEPTION ({exc})"
    except topic_configs.ConfigError as exc:
        return f"INVALID_CONFIG ({exc})"
    return None


def _fail(exc: AdminError, args: argparse.Namespace) -> None:
    print(f"error: {exc}", file=sys.stderr)
    hint = _hint(exc, args)
    if hint:
        print(hint, file=sys.stderr)


def _hint(exc: AdminError, args: argparse.Namespace) -> str | None:
    """What the user can do about an error."""
    if isinstance(exc, BrokerUnavailable):
        return (
            f"Is Skiff running at {args.bootstrap}? Start it with `skiff serve`, or point "
            "--bootstrap (or $SKIFF_BOOTSTRAP) at a running sidecar."
        )
    if isinstance(exc, UnsupportedApi):
        return (
            f"The broker does not serve {exc.api} (this Skiff build lacks it, or the broker "
            "is older): upgrade it, or use a command that does not need it."
        )
    if not isinstance(exc, KafkaError):
        return None
    if exc.name == "POLICY_VIOLATION" and getattr(args, "records_command", None):
        return (
            "Kafka refuses to delete records of a topic whose cleanup.policy is compact only; "
            "add delete (`skiff topics alter TOPIC --append-config cleanup.policy=delete`)."
        )
    return {
        "TOPIC_ALREADY_EXISTS": "Use --if-not-exists to accept an existing topic, or "
        "`skiff topics alter` to change it.",
        "UNKNOWN_TOPIC_OR_PARTITION": "Check the topic name and partitions with "
        "`skiff topics list` / `skiff topics describe`.",
        "UNKNOWN_TOPIC_ID": "Check the topic name with `skiff topics list`.",
        "INVALID_TOPIC_EXCEPTION": "Topic names use ASCII letters, digits, '.', '_' and '-', "
        "at most 249 characters, and are not '.' or '..'.",
        "INVALID_CONFIG": "Check the config names and values (`skiff topics describe TOPIC "
        "--all-configs` lists every config with its current value).",
        "INVALID_PARTITIONS": "A topic needs at least one partition, and partitions can only "
        "be added, never removed.",
        "INVALID_REPLICATION_FACTOR": "Use --replication-factor 1 (or leave it out): Skiff "
        "keeps one copy per partition and relies on Redis replication.",
        "POLICY_VIOLATION": "The broker's policy refused the change.",
        "OFFSET_OUT_OF_RANGE": "The offset is past the high watermark: use a smaller "
        "--offset, or --all to delete every record.",
        "TOPIC_AUTHORIZATION_FAILED": "The broker denied access: use a principal allowed to "
        "alter the topic.",
        "CLUSTER_AUTHORIZATION_FAILED": "The broker denied access: use a principal allowed "
        "to alter the cluster.",
        "TOPIC_DELETION_DISABLED": "The broker has topic deletion disabled.",
        "REQUEST_TIMED_OUT": "The broker did not finish in time: check it, then retry (or "
        "raise --timeout).",
    }.get(exc.name)


def _admin(args: argparse.Namespace) -> AdminClient:
    return AdminClient(args.bootstrap, timeout=args.timeout)


def kafka_uuid(value: uuid.UUID | None) -> str | None:
    """A topic id as Kafka prints it (Uuid.toString: URL-safe base64, no padding)."""
    if value is None:
        return None
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


async def _wait(
    admin: AdminClient, topic: str, done: Callable[[TopicMetadata | None], bool], seconds: float
) -> bool:
    """Poll Metadata until done(topic's metadata or None) or `seconds` pass: a Kafka
    broker applies topic changes a moment after answering."""
    deadline = time.monotonic() + seconds
    while True:
        meta = await admin.metadata([topic])
        found = meta.topics.get(topic)
        if found is not None and found.error_code:
            found = None
        if done(found):
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(WAIT_STEP)


def _led(count: int | None = None) -> Callable[[TopicMetadata | None], bool]:
    def check(found: TopicMetadata | None) -> bool:
        return (
            found is not None
            and (count is None or len(found.leaders) >= count)
            and all(leader >= 0 for leader in found.leaders.values())
        )

    return check


def _config_rows(configs: list[ConfigEntry]) -> list[dict[str, Any]]:
    return [
        {
            "name": c.name,
            "value": None if c.sensitive else c.value,
            "source": c.source,
            "is_default": c.source == "DEFAULT_CONFIG",
            "read_only": c.read_only,
            "sensitive": c.sensitive,
        }
        for c in configs
    ]


# -- list ----------------------------------------------------------------------------------


async def _list(args: argparse.Namespace) -> int:
    async with _admin(args) as admin:
        meta = await admin.metadata(None)
    topics = sorted(
        (t for t in meta.topics.values() if not (args.exclude_internal and t.internal)),
        key=lambda t: t.name,
    )
    if args.json:
        _json(
            [
                {
                    "topic": t.name,
                    "partitions": len(t.leaders),
                    "topic_id": kafka_uuid(t.topic_id),
                    "internal": t.internal,
                }
                for t in topics
            ]
        )
    else:
        rows = [(t.name, len(t.leaders), kafka_uuid(t.topic_id)) for t in topics]
        print(_table(("TOPIC", "PARTITIONS", "TOPIC-ID"), rows))
    return 0


# -- create --------------------------------------------------------------------------------


async def _create(args: argparse.Namespace) -> int:
    configs = dict(args.config)
    if args.format:
        configs[storage_format.CONFIG] = args.format
    async with _admin(args) as admin:
        try:
            created = await admin.create_topic(
                args.topic,
                args.partitions,
                args.replication_factor,
                configs,
                validate_only=args.validate_only,
            )
        except KafkaError as exc:
            if exc.name == "TOPIC_ALREADY_EXISTS" and args.if_not_exists:
                if args.json:
                    _json({"topic": args.topic, "created": False, "exists": True})
                else:
                    print(f"Topic {args.topic!r} exists already.")
                return 0
            raise
        settled = args.validate_only or await _wait(
            admin, args.topic, _led(created.partitions), min(args.timeout, 30)
        )
    if args.json:
        _json(
            {
                "topic": created.name,
                "created": not args.validate_only,
                "validate_only": args.validate_only,
                "topic_id": kafka_uuid(created.topic_id),
                "partitions": created.partitions,
                "replication_factor": created.replication_factor,
                "configs": None if created.configs is None else _config_rows(created.configs),
            }
        )
    elif args.validate_only:
        print(
            f"Valid: topic {created.name!r} with {created.partitions} partition(s) could be "
            "created (nothing was)."
        )
    else:
        print(f"Created topic {created.name!r} with {created.partitions} partition(s).")
    if not settled:
        print(
            f"note: the topic did not show up in Metadata within {min(args.timeout, 30):g}s",
            file=sys.stderr,
        )
    return 0


# -- describe ------------------------------------------------------------------------------


async def _describe(args: argparse.Namespace) -> int:
    wanted = list(dict.fromkeys(args.topics)) or None
    failed = False
    described: list[dict[str, Any]] = []
    async with _admin(args) as admin:
        meta = await admin.metadata(wanted)
        names = wanted or sorted(meta.topics)
        for name in names:
            found = meta.topics.get(name)
            if found is None or found.error_code:
                error = KafkaError(found.error_code if found else 3, f"Metadata for topic {name!r}")
                _fail(error, args)
                failed = True
                continue
            if args.exclude_internal and found.internal:
                continue
            described.append(await _describe_topic(admin, found))
    if args.json:
        _json(described)
    else:
        for i, topic in enumerate(described):
            if i:
                print()
            _print_topic(topic, args.all_configs)
    return 1 if failed else 0


async def _describe_topic(admin: AdminClient, found: TopicMetadata) -> dict[str, Any]:
    partitions = [TopicPartition(found.name, p) for p in sorted(found.partitions)]
    starts = await admin.list_offsets(partitions, EARLIEST, skip_unknown=True)
    ends = await admin.list_offsets(partitions, LATEST, skip_unknown=True)
    configs: list[ConfigEntry] | None
    try:
        configs = await admin.describe_configs(RESOURCE_TOPIC, found.name)
        note = None
    except UnsupportedApi as exc:
        configs, note = None, str(exc)
    replicas = {len(p.replicas) for p in found.partitions.values()}
    return {
        "topic": found.name,
        "topic_id": kafka_uuid(found.topic_id),
        "internal": found.internal,
        "replication_factor": replicas.pop() if len(replicas) == 1 else None,
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "log_start_offset": starts.get(TopicPartition(found.name, p.partition)),
                "high_watermark": ends.get(TopicPartition(found.name, p.partition)),
            }
            for p in (found.partitions[i] for i in sorted(found.partitions))
        ],
        # skiff.storage.format (None from a broker that does not report it)
        "storage_format": next(
            (c.value for c in configs or () if c.name == storage_format.CONFIG), None
        ),
        "configs": None if configs is None else _config_rows(configs),
        "configs_unavailable": note,
    }


def _print_topic(topic: dict[str, Any], all_configs: bool) -> None:
    print(
        f"Topic: {topic['topic']}  TopicId: {topic['topic_id'] or '-'}  "
        f"Partitions: {len(topic['partitions'])}  "
        f"ReplicationFactor: {topic['replication_factor'] or '-'}"
        + (f"  Format: {topic['storage_format']}" if topic["storage_format"] else "")
        + ("  (internal)" if topic["internal"] else "")
    )
    print()
    rows = [
        (
            p["partition"],
            p["leader"],
            ",".join(map(str, p["replicas"])),
            ",".join(map(str, p["isr"])),
            p["log_start_offset"],
            p["high_watermark"],
        )
        for p in topic["partitions"]
    ]
    headers = ("PARTITION", "LEADER", "REPLICAS", "ISR", "LOG-START", "HIGH-WATERMARK")
    print(_table(headers, rows))
    print()
    configs = topic["configs"]
    if configs is None:
        print(f"Configs: not available ({topic['configs_unavailable']})")
        return
    shown = configs if all_configs else [c for c in configs if not c["is_default"]]
    if shown:
        print(
            _table(
                ("CONFIG", "VALUE", "SOURCE"),
                [(c["name"], c["value"], c["source"]) for c in shown],
            )
        )
    hidden = len(configs) - len(shown)
    if hidden:
        print(
            f"{'' if not shown else chr(10)}{hidden} more config(s) at their defaults: "
            "--all-configs lists them."
        )


# -- alter ---------------------------------------------------------------------------------


async def _alter(args: argparse.Namespace) -> int:
    ops: list[tuple[str, int, str | None]] = [(k, OP_SET, v) for k, v in args.config]
    ops += [(k, OP_APPEND, v) for k, v in args.append_config]
    ops += [(k, OP_SUBTRACT, v) for k, v in args.subtract_config]
    ops += [(k, OP_DELETE, None) for k in args.delete_config]
    if args.partitions is None and not ops:
        print(
            "error: nothing to change: give --partitions, --config, --delete-config, "
            "--append-config or --subtract-config",
            file=sys.stderr,
        )
        return 2
    done: list[str] = []
    async with _admin(args) as admin:
        if args.partitions is not None:
            await admin.create_partitions(args.topic, args.partitions, args.validate_only)
            if not args.validate_only:
                await _wait(admin, args.topic, _led(args.partitions), min(args.timeout, 30))
            done.append(f"partitions: {args.partitions}")
        if ops:
            await admin.alter_configs(RESOURCE_TOPIC, args.topic, ops, args.validate_only)
            names = {OP_SET: "set", OP_APPEND: "append", OP_SUBTRACT: "subtract"}
            done += [
                f"{names[op]} {k}={v}" if op != OP_DELETE else f"delete {k}" for k, op, v in ops
            ]
    if args.json:
        _json(
            {
                "topic": args.topic,
                "validate_only": args.validate_only,
                "partitions": args.partitions,
                "configs": [
                    {"name": k, "operation": _OP_NAMES[op], "value": v} for k, op, v in ops
                ],
            }
        )
    else:
        verb = "Valid (nothing applied)" if args.validate_only else "Altered"
        print(f"{verb}: topic {args.topic!r}: " + "; ".join(done))
    return 0


_OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}


# -- delete --------------------------------------------------------------------------------


async def _delete(args: argparse.Namespace) -> int:
    names = list(dict.fromkeys(args.topics))
    async with _admin(args) as admin:
        results = await admin.delete_topics(names)
        for name, error in results.items():
            if error is None:
                await _wait(admin, name, lambda found: found is None, min(args.timeout, 30))
    failed = {
        n: e
        for n, e in results.items()
        if e is not None and not (args.if_exists and e.name == "UNKNOWN_TOPIC_OR_PARTITION")
    }
    if args.json:
        _json(
            {
                n: None if e is None else {"error": e.name, "message": str(e)}
                for n, e in results.items()
            }
        )
    for name in names:
        error = results.get(name)
        if error is None and not args.json:
            print(f"Deleted topic {name!r}.")
        elif error is not None and name not in failed and not args.json:
            print(f"Topic {name!r} does not exist.")
    for error in failed.values():
        _fail(error, args)
    return 1 if failed else 0


# -- records delete-before -------------------------------------------------------------------


async def _delete_before(args: argparse.Namespace) -> int:
    async with _admin(args) as admin:
        meta = await admin.metadata([args.topic])
        found = meta.topics.get(args.topic)
        if found is None or found.error_code:
            raise KafkaError(found.error_code if found else 3, f"Metadata for {args.topic!r}")
        partitions = sorted(set(args.partition)) or sorted(found.leaders)
        missing = [p for p in partitions if p not in found.leaders]
        if missing:
            print(
                f"error: topic {args.topic!r} has no partition {missing[0]} "
                f"(it has {len(found.leaders)}: 0-{len(found.leaders) - 1})",
                file=sys.stderr,
            )
            return 1
        tps = [TopicPartition(args.topic, p) for p in partitions]
        before = await admin.list_offsets(tps, EARLIEST)
        target = -1 if args.all else args.offset  # -1: the high watermark, as Kafka's tool
        results = await admin.delete_records({tp: target for tp in tps})
    rows = []
    errors = []
    for tp in tps:
        result = results[tp]
        if isinstance(result, KafkaError):
            errors.append(result)
            rows.append(
                {
                    "partition": tp.partition,
                    "old_log_start_offset": before[tp],
                    "log_start_offset": None,
                    "error": result.name,
                }
            )
        else:
            rows.append(
                {
                    "partition": tp.partition,
                    "old_log_start_offset": before[tp],
                    "log_start_offset": result,
                    "error": None,
                }
            )
    if args.json:
        _json({"topic": args.topic, "partitions": rows})
    else:
        print(
            _table(
                ("TOPIC", "PARTITION", "OLD-LOG-START", "LOG-START", "ERROR"),
                [
                    (
                        args.topic,
                        r["partition"],
                        r["old_log_start_offset"],
                        r["log_start_offset"],
                        r["error"],
                    )
                    for r in rows
                ],
            )
        )
    for error in errors[:1]:
        _fail(error, args)
    return 1 if errors else 0


_COMMANDS: dict[str, Callable[[argparse.Namespace], Awaitable[int]]] = {
    "list": _list,
    "create": _create,
    "describe": _describe,
    "alter": _alter,
    "delete": _delete,
}
