"""`skiff storage status|reset`: the operator's view of the storage identity
(sidecar/storage/identity.py) and the decision after Redis lost Skiff's data.

    skiff storage status [--json]
    skiff storage reset --fresh

Both talk to Redis directly, found as `skiff serve` finds it: --redis-url
($SKIFF_REDIS_URL), else the embedded redis-server of --data-dir ($SKIFF_DATA_DIR,
default skiff-data). `reset --fresh` deletes every Skiff key left in that Redis (what
remains after a loss would mix old and new offsets) except the live sidecars'
registrations, and writes a new cluster id; running sidecars notice within a second
and serve again, clients see a new cluster id and new topic ids. Without it sidecars
keep refusing. Exit status: 0 done (status: intact), 1 failed or (status) lost, 2 bad
usage."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import sys
from pathlib import Path
from typing import Any

from sidecar.storage import identity, keys, scripts
from sidecar.storage.connection import client_for, redact

TIMEOUT_S = 10.0
DELETE_BATCH = 500
# Kept by a reset: the identity, the broker registrations and the ACLs (security
# settings, not data: losing a DENY would open what it closed).
KEEP = frozenset(k.encode() for k in (keys.IDENTITY, keys.BROKERS, keys.ACLS, keys.ACLS_VERSION))


class UsageError(Exception):
    """A mistake of the user's: one line, exit status 2."""


def add_parser(subparsers: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--redis-url",
        default=os.environ.get("SKIFF_REDIS_URL"),
        help="the Redis the sidecars use ($SKIFF_REDIS_URL; default: the embedded "
        "redis-server of --data-dir)",
    )
    common.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("SKIFF_DATA_DIR", "skiff-data")),
        help="the data dir of a `skiff serve` running an embedded Redis ($SKIFF_DATA_DIR; "
        "default skiff-data)",
    )
    common.add_argument("--json", action="store_true", help="print JSON")
    storage = subparsers.add_parser(
        "storage", help="the storage identity: status, and the decision after a storage loss"
    )
    storage.set_defaults(log_level="WARNING")  # `skiff` configures logging for every command
    sub = storage.add_subparsers(dest="storage_command", required=True)
    sub.add_parser(
        "status", parents=[common], help="the cluster id, and whether Redis lost Skiff's data"
    )
    reset = sub.add_parser(
        "reset",
        parents=[common],
        help="end a storage loss: --fresh starts with a new cluster id and new topic ids",
    )
    reset.add_argument(
        "--fresh",
        action="store_true",
        help="delete what is left of Skiff's data in Redis and start with a new cluster id",
    )


def run(args: argparse.Namespace) -> int:
    try:
        url = _redis_url(args)
        command = _status if args.storage_command == "status" else _reset
        return asyncio.run(command(args, url))
    except UsageError as exc:
        print(f"skiff storage: error: {exc}", file=sys.stderr)
        return 2
    except (OSError, TimeoutError, ConnectionError) as exc:
        print(f"skiff storage: cannot reach Redis: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a Redis error: one line, no traceback
        print(f"skiff storage: failed: {exc}", file=sys.stderr)
        return 1


def _redis_url(args: argparse.Namespace) -> str:
    if args.redis_url:
        return str(args.redis_url)
    sock = Path(args.data_dir).resolve() / "redis.sock"
    if not sock.exists():
        raise UsageError(
            f"no --redis-url given and no embedded Redis runs in {args.data_dir}: pass "
            "--redis-url (or $SKIFF_REDIS_URL) as given to `skiff serve`, or the --data-dir "
            "of a running `skiff serve`"
        )
    return f"unix://{sock}"


def _connect(url: str) -> Any:
    try:
        return client_for(url, TIMEOUT_S)
    except ValueError as exc:
        raise UsageError(f"bad --redis-url {redact(url)}: {exc}") from None


def _when(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(timespec="seconds")


async def _describe(redis: Any) -> dict[str, Any]:
    _, doc = await identity.read(redis)
    topics = int(await redis.hlen(keys.TOPICS))
    if doc is None:
        return {"state": "missing", "cluster_id": None, "topics": topics}
    out: dict[str, Any] = {
        "state": "lost" if doc.lost else "intact",
        "cluster_id": doc.cluster_id,
        "created": _when(doc.created_ms),
        "previous_cluster_ids": doc.previous,
        "topics": topics,
    }
    if doc.lost:
        out["lost_since"] = _when(int(doc.lost.get("since_ms", 0)))
        out["lost_reason"] = doc.lost.get("reason")
    return out


async def _status(args: argparse.Namespace, url: str) -> int:
    redis = _connect(url)
    try:
        info = await _describe(redis)
    finally:
        await redis.aclose()
    if args.json:
        print(json.dumps(info, indent=2))
    elif info["state"] == "missing":
        print(
            f"No storage identity in {redact(url)}: no sidecar has used this Redis yet, or "
            "its data was just lost (a running sidecar marks it lost within a second)."
        )
    else:
        print(f"Storage identity: {info['state'].upper()}")
        print(f"Cluster id:       {info['cluster_id']} (created {info['created']})")
        print(f"Topics in Redis:  {info['topics']}")
        if info["state"] == "lost":
            print(f"Lost since:       {info['lost_since']}")
            print(f"Why:              {info['lost_reason']}")
            print(
                "Sidecars refuse every partition and group with retriable errors. Start "
                "fresh with `skiff storage reset --fresh` (new cluster id and topic ids; "
                "what is left in Redis is deleted), or restore Redis's data and its "
                "skiff:identity key."
            )
    return 1 if info["state"] == "lost" else 0


async def _reset(args: argparse.Namespace, url: str) -> int:
    if not args.fresh:
        raise UsageError("say how to reset: `skiff storage reset --fresh`")
    redis = _connect(url)
    try:
        await scripts.IDENTITY_CAS.load(redis)
        raw, doc = await identity.read(redis)
        if doc is not None and not doc.lost:
            raise UsageError(
                f"the storage identity is intact (cluster id {doc.cluster_id}): nothing to "
                "reset; `reset --fresh` only ends a storage loss (see `skiff storage status`)"
            )
        deleted = await _delete_skiff_keys(redis)
        replaced = []
        if doc is not None:
            replaced = [doc.cluster_id, *(doc.lost or {}).get("ids", []), *doc.previous]
        fresh = identity.IdentityDoc(
            identity.new_cluster_id(),
            identity.now_ms(),
            list(dict.fromkeys(replaced))[: identity.PREVIOUS_KEPT],
        )
        if not await identity.swap(redis, raw, fresh):
            print(
                "skiff storage: the storage identity changed while resetting; run "
                "`skiff storage status` and try again",
                file=sys.stderr,
            )
            return 1
        await redis.set(keys.CLUSTER_ID, fresh.cluster_id)
    finally:
        await redis.aclose()
    if args.json:
        print(json.dumps({"cluster_id": fresh.cluster_id, "replaced": fresh.previous,
                          "deleted_keys": deleted}, indent=2))  # fmt: skip
    else:
        print(
            f"Started fresh: new cluster id {fresh.cluster_id} (replaces "
            f"{', '.join(fresh.previous) or 'none'}); deleted {deleted} Skiff key(s) left in "
            "Redis. Running sidecars serve again within a second; topics are created anew "
            "with new ids, offsets start at 0, and consumers restart from their "
            "auto.offset.reset."
        )
    return 0


async def _delete_skiff_keys(redis: Any) -> int:
    """Every key under skiff: but those in KEEP."""
    deleted = 0
    batch: list[bytes] = []
    async for key in redis.scan_iter(match=keys.PREFIX + "*", count=1000):
        if key in KEEP:
            continue
        batch.append(key)
        if len(batch) >= DELETE_BATCH:
            deleted += int(await redis.unlink(*batch))
            batch = []
    if batch:
        deleted += int(await redis.unlink(*batch))
    return deleted
