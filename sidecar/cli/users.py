"""`skiff users set-scram|delete-scram|list`: SCRAM credentials in Redis
(storage/scram_store.py), as `kafka-configs --entity-type users` manages them through a
sidecar, for when none is reachable yet (the first admin) or from a Kubernetes Job.

    skiff users set-scram alice [--mechanism SCRAM-SHA-512] [--iterations 8192]
                                [--password-file FILE | --password-stdin]
    skiff users delete-scram alice [--mechanism SCRAM-SHA-256]
    skiff users list [--json]

The password is read from a prompt (asked twice), a file or stdin, never from the
command line (where `ps` and shell history would keep it), and is never printed.
Redis is found as `skiff storage` finds it (--redis-url, else --data-dir's embedded
Redis). Sidecars read credentials at each login: a change counts at once everywhere.
Exit status: 0 done, 1 failed, 2 a mistake of the user's."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from sidecar.cli.storage import UsageError, _connect, _redis_url
from sidecar.storage.scram_store import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramStore,
)


def add_parser(subparsers: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--redis-url",
        default=None,
        help="the Redis the sidecars use ($SKIFF_REDIS_URL; default: the embedded "
        "redis-server of --data-dir)",
    )
    common.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="the data dir of a `skiff serve` running an embedded Redis ($SKIFF_DATA_DIR)",
    )
    users = subparsers.add_parser("users", help="SCRAM users in Redis: set, delete, list")
    users.set_defaults(log_level="WARNING")
    sub = users.add_subparsers(dest="users_command", required=True)
    set_scram = sub.add_parser(
        "set-scram", parents=[common], help="create or replace a user's SCRAM credential"
    )
    set_scram.add_argument("name", help="the user name (the principal is User:NAME)")
    set_scram.add_argument(
        "--mechanism",
        action="append",
        choices=list(MECHANISMS),
        help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default both)",
    )
    set_scram.add_argument(
        "--iterations",
        type=int,
        default=MIN_ITERATIONS,
        help=f"PBKDF2 iterations, {MIN_ITERATIONS}..{MAX_ITERATIONS} (default {MIN_ITERATIONS})",
    )
    source = set_scram.add_mutually_exclusive_group()
    source.add_argument("--password-file", type=Path, help="read the password from this file")
    source.add_argument(
        "--password-stdin", action="store_true", help="read the password from stdin"
    )
    delete = sub.add_parser(
        "delete-scram", parents=[common], help="delete a user's SCRAM credential(s)"
    )
    delete.add_argument("name")
    delete.add_argument(
        "--mechanism",
        action="append",
        choices=list(MECHANISMS),
        help="the mechanism to delete (repeatable; default every one the user has)",
    )
    listing = sub.add_parser("list", parents=[common], help="users with SCRAM credentials")
    listing.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    try:
        if args.redis_url is None:
            args.redis_url = _env("SKIFF_REDIS_URL")
        if args.data_dir is None:
            args.data_dir = Path(_env("SKIFF_DATA_DIR") or "skiff-data")
        if args.users_command == "set-scram":
            password = _password(args)
            return asyncio.run(_set(args, password))
        if args.users_command == "delete-scram":
            return asyncio.run(_delete(args))
        return asyncio.run(_list(args))
    except UsageError as exc:
        print(f"skiff users: error: {exc}", file=sys.stderr)
        return 2
    except (OSError, TimeoutError, ConnectionError) as exc:
        print(f"skiff users: cannot reach Redis: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, EOFError):
        return 130
    except Exception as exc:  # a Redis error: one line, no traceback
        print(f"skiff users: failed: {exc}", file=sys.stderr)
        return 1


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def _password(args: argparse.Namespace) -> str:
    if args.password_file is not None:
        try:
            text = args.password_file.read_text()
        except OSError as exc:
            raise UsageError(f"cannot read --password-file: {exc.strerror or exc}") from None
        password = text.rstrip("\r\n")
    elif args.password_stdin:
        password = sys.stdin.read().rstrip("\r\n")
    elif sys.stdin.isatty():
        password = getpass.getpass(f"SCRAM password of {args.name}: ")
        if getpass.getpass("Again: ") != password:
            raise UsageError("the two passwords differ")
    else:
        raise UsageError(
            "no terminal to ask the password on: use --password-file or --password-stdin"
        )
    if not password:
        raise UsageError("the password is empty")
    return password


def _check_name(name: str) -> None:
    if not name:
        raise UsageError("the user name is empty")


async def _set(args: argparse.Namespace, password: str) -> int:
    _check_name(args.name)
    if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
        raise UsageError(f"--iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}")
    mechanisms = args.mechanism or list(MECHANISMS)
    upserts = []
    for mechanism in dict.fromkeys(mechanisms):
        credential = await asyncio.to_thread(
            ScramCredential.from_password,
            mechanism,
            password,
            secrets.token_bytes(32),
            args.iterations,
        )
        upserts.append((mechanism, args.name, credential))
    redis = _connect(_redis_url(args))
    try:
        await ScramStore(redis).alter(upserts, [])
    finally:
        await redis.aclose()
    print(f"set {', '.join(m for m, _, _ in upserts)} credential(s) of user {args.name}")
    return 0


async def _delete(args: argparse.Namespace) -> int:
    _check_name(args.name)
    redis = _connect(_redis_url(args))
    try:
        store = ScramStore(redis)
        have = await store.user(args.name)
        wanted = args.mechanism or list(have)
        missing = [m for m in wanted if m not in have]
        if missing or not wanted:
            raise UsageError(
                f"user {args.name} has no {' or '.join(missing or ['SCRAM'])} credential"
            )
        await store.alter([], [(m, args.name) for m in wanted])
    finally:
        await redis.aclose()
    print(f"deleted {', '.join(wanted)} credential(s) of user {args.name}")
    return 0


async def _list(args: argparse.Namespace) -> int:
    redis = _connect(_redis_url(args))
    try:
        users = await ScramStore(redis).all()
    finally:
        await redis.aclose()
    rows = {
        user: {m: c.iterations for m, c in sorted(credentials.items())}
        for user, credentials in sorted(users.items())
    }
    if args.json:
        print(json.dumps(rows))
    else:
        for user, mechanisms in rows.items():
            described = ", ".join(f"{m} (iterations {i})" for m, i in mechanisms.items())
            print(f"{user}: {described}")
    return 0
