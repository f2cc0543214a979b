"""Transactions in Redis (docs/transactions.md): a transactional id's state
(lua/txn.lua, one slot per id), the markers written to each partition
(lua/txn_marker.lua) and the offsets a transaction commits for a group
(lua/txn_offsets.lua)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from sidecar.protocol import stored_batch
from sidecar.protocol.record_batch import FLAG_CONTROL, FLAG_TRANSACTIONAL
from sidecar.storage import keys, resilience, scripts
from sidecar.storage.store import StoreError

CHUNK = 2000  # members or offset pairs per script call


@dataclass(frozen=True, slots=True)
class TxnState:
    """What DescribeTransactions and ListTransactions report of a transactional id."""

    transactional_id: str
    producer_id: int
    epoch: int
    state: str
    timeout_ms: int
    start_ms: int  # when the last transaction began; -1 when none has
    partitions: list[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class Decided:
    """A transaction decided and to be completed: its markers and offsets written."""

    commit: bool
    seq: int  # the transaction's number within its transactional id
    epoch: int  # the epoch its markers carry
    producer_id: int
    partitions: list[tuple[str, int]]
    groups: list[str]
    # Transaction version 2 exhausted the epoch: the id's producer id once complete.
    next_producer_id: int = -1

    def producer_after(self) -> tuple[int, int]:
        """(producer id, epoch) an EndTxn v5 answers once it is complete."""
        if self.next_producer_id >= 0:
            return self.next_producer_id, 0
        return self.producer_id, self.epoch


def _raw_score(score: bytes) -> bytes:
    return score


def _error(exc: ResponseError) -> StoreError:
    return StoreError(str(exc).split(" ", 1)[0], str(exc))


def _decided(reply: list[bytes | int]) -> Decided | None:
    if not reply or reply[0] in (b"", ""):
        return None
    commit = reply[0] in (b"C", "C")
    seq, epoch, pid, next_pid, n = (int(x) for x in reply[1:6])
    partitions = []
    for raw in reply[6 : 6 + n]:
        topic, _, partition = bytes(raw).decode().rpartition("/")  # type: ignore[arg-type]
        partitions.append((topic, int(partition)))
    groups = [bytes(g).decode() for g in reply[6 + n :]]  # type: ignore[arg-type]
    return Decided(commit, seq, epoch, pid, partitions, groups, next_pid)


class TxnStore:
    def __init__(self, redis: Redis, expiration_ms: int) -> None:
        self.redis = redis
        self.expiration_ms = expiration_ms

    async def _txn(self, transactional_id: str, op: str, *args: object) -> list[bytes | int]:
        now = int(time.time() * 1000)
        try:
            # Not resent once it may have run: 'add' and 'end' answer a re-run the same way
            # (a set and a decision), 'expire' would bump the epoch twice.
            with resilience.no_resend():
                return await scripts.TXN(  # type: ignore[no-any-return]
                    self.redis,
                    keys.transaction_keys(transactional_id),
                    [op, now, self.expiration_ms, *args],
                )
        except ResponseError as exc:
            raise _error(exc) from None

    async def add(
        self, transactional_id: str, pid: int, epoch: int, kind: str, members: list[str]
    ) -> None:
        """Add partitions ("topic/partition", kind 'p') or groups (kind 'g') to the
        producer's transaction, opening one if none is. In chunks: Lua's unpack() takes at
        most ~8000 values."""
        for i in range(0, max(len(members), 1), CHUNK):
            chunk = members[i : i + CHUNK]
            started, deadline = await self._txn(transactional_id, "add", pid, epoch, kind, *chunk)
            if started:
                await self.redis.zadd(keys.TXN_DEADLINES, {transactional_id: int(deadline)})

    async def end(
        self, transactional_id: str, pid: int, epoch: int, commit: bool
    ) -> Decided | None:
        """Decide the open transaction (None: it completed already, a retried EndTxn)."""
        return _decided(
            await self._txn(transactional_id, "end", pid, epoch, "1" if commit else "0")
        )

    async def end_v2(
        self, transactional_id: str, pid: int, epoch: int, commit: bool, spare_pid: int | None
    ) -> Decided | tuple[int, int]:
        """EndTxn v5 (transaction version 2): the transaction to complete, or the
        (producer id, epoch) to answer when there is none (a retry, an empty abort).
        StoreError SKIFF_NEED_PID: the epoch is exhausted, call again with spare_pid."""
        reply = await self._txn(
            transactional_id,
            "end",
            pid,
            epoch,
            "1" if commit else "0",
            "2",
            "" if spare_pid is None else spare_pid,
        )
        decided = _decided(reply)
        if decided is not None:
            return decided
        return int(reply[1]), int(reply[2])

    async def expire(self, transactional_id: str, timed_out_only: bool) -> Decided | int | None:
        """Abort the open transaction (only if past its timeout), epoch bumped; or the
        decided one a coordinator left unfinished. An int: the deadline of an open
        transaction not yet due."""
        reply = await self._txn(transactional_id, "expire", "1" if timed_out_only else "0")
        if len(reply) == 2:
            return int(reply[1])
        return _decided(reply)

    async def refile(self, transactional_id: str, deadline: int) -> None:
        await self.redis.zadd(keys.TXN_DEADLINES, {transactional_id: deadline})

    async def done(self, transactional_id: str, decided: Decided) -> None:
        """Complete: its deadline stays filed until a sweep finds it past and not open
        (forget_deadline), so a transaction started meanwhile keeps its own."""
        await self._txn(transactional_id, "done", decided.seq, "C" if decided.commit else "A")

    async def due(self, now_ms: int) -> list[tuple[str, bytes]]:
        """(transactional id, deadline as filed) of transactions that may be past it."""
        raw = await self.redis.zrangebyscore(
            keys.TXN_DEADLINES,
            "-inf",
            now_ms,
            start=0,
            num=100,
            withscores=True,
            score_cast_func=_raw_score,
        )
        return [(bytes(member).decode(), score) for member, score in raw]

    async def forget_deadline(self, transactional_id: str, filed: bytes) -> None:
        await scripts.TXN_DEADLINE(self.redis, [keys.TXN_DEADLINES], [transactional_id, filed])

    async def producer(
        self, transactional_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[int, int, bytes, list[bool]]:
        """(producer id, epoch, state, whether each partition is in the transaction);
        producer id -1 when the id is unknown."""
        key, members, _ = keys.transaction_keys(transactional_id)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hmget(key, "pid", "epoch", "state")
            if partitions:
                pipe.smismember(members, [keys.offset_field(t, p) for t, p in partitions])
            replies = await pipe.execute()
        pid, epoch, state = replies[0]
        inside = [bool(x) for x in replies[1]] if partitions else []
        if pid is None:
            return -1, -1, b"Empty", inside
        return int(pid), int(epoch), state or b"Empty", inside

    async def has_group(self, transactional_id: str, group_id: str) -> bool:
        """Whether AddOffsetsToTxn added the group to the open transaction."""
        groups = keys.transaction_keys(transactional_id)[2]
        return bool(await self.redis.sismember(groups, group_id))

    async def describe(self, ids: list[str]) -> list[TxnState | None]:
        """Each id's state (None: unknown or expired)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for transactional_id in ids:
                key, partitions, _ = keys.transaction_keys(transactional_id)
                pipe.hmget(key, "pid", "epoch", "state", "timeout", "start")
                pipe.smembers(partitions)
            replies = await pipe.execute()
        out: list[TxnState | None] = []
        for i, transactional_id in enumerate(ids):
            pid, epoch, state, timeout, start = replies[2 * i]
            if pid is None:
                out.append(None)
                continue
            parts = []
            for raw in replies[2 * i + 1]:
                topic, _, partition = bytes(raw).decode().rpartition("/")
                parts.append((topic, int(partition)))
            out.append(
                TxnState(
                    transactional_id,
                    int(pid),
                    int(epoch),
                    (state or b"Empty").decode(),
                    int(timeout or 60_000),
                    int(start) if start is not None else -1,
                    sorted(parts),
                )
            )
        return out

    async def all_states(self) -> list[TxnState]:
        """Every live transactional id's state; expired ids leave the registry."""
        ids = sorted(bytes(m).decode() for m in await self.redis.smembers(keys.TXN_IDS))
        states = await self.describe(ids) if ids else []
        gone = [i for i, s in zip(ids, states, strict=True) if s is None]
        if gone:
            await self.redis.srem(keys.TXN_IDS, *gone)
        return [s for s in states if s is not None]

    async def partition_producers(
        self, topic: str, partition: int
    ) -> tuple[dict[int, dict[str, Any]], dict[int, int]] | None:
        """The partition's producer states (pid -> {e, t, b, x}, lua/append.lua) and open
        transactions (pid -> first offset); None if the partition does not exist."""
        log, meta, _, producers = keys.partition_keys(topic, partition)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.exists(meta)
            pipe.hgetall(producers)
            pipe.hgetall(keys.open_txns_key(topic, partition))
            exists, states, open_txns = await pipe.execute()
        if not exists:
            return None
        return (
            {int(pid): json.loads(raw) for pid, raw in states.items()},
            {int(pid): int(first) for pid, first in open_txns.items()},
        )

    async def write_marker(
        self, topic: str, partition: int, decided: Decided, identity: str, batch_format: bool
    ) -> int:
        """The transaction's marker on one partition: its offset, or -1 when the
        partition had it already. A seq of -1 (WriteTxnMarkers, as `kafka-transactions
        abort` sends) writes it whatever was marked before. On a `record` topic the
        marker is one record entry flagged as a control record."""
        log, meta, _, producers = keys.partition_keys(topic, partition)
        script_keys = [
            log,
            meta,
            producers,
            keys.bytes_key(topic, partition),
            keys.open_txns_key(topic, partition),
            keys.aborted_key(topic, partition),
        ]
        now = int(time.time() * 1000)
        marker = stored_batch.control_batch(decided.producer_id, decided.epoch, decided.commit, now)
        argv: list[object] = [
            decided.producer_id,
            decided.epoch,
            decided.seq,
            "C" if decided.commit else "A",
            keys.wake_channel(topic, partition),
            identity,
            marker,
            len(marker),
        ]
        if batch_format:
            argv.append("b")
        else:
            key, value = stored_batch.control_record(decided.commit)
            argv += ("r", key, value, FLAG_CONTROL | FLAG_TRANSACTIONAL)
        try:
            (offset,) = await scripts.TXN_MARKER(self.redis, script_keys, argv)
        except ResponseError as exc:
            raise _error(exc) from None
        return int(offset)

    async def stage_offsets(
        self, group_id: str, producer_id: int, pairs: list[object], keep_ms: int
    ) -> None:
        for i in range(0, len(pairs), 2 * CHUNK):
            await self._offsets(group_id, producer_id, "stage", keep_ms, *pairs[i : i + 2 * CHUNK])

    async def settle_offsets(self, group_id: str, producer_id: int, commit: bool) -> None:
        await self._offsets(group_id, producer_id, "C" if commit else "A", 0)

    async def _offsets(self, group_id: str, producer_id: int, op: str, *args: object) -> None:
        script_keys = [
            keys.pending_offsets_key(group_id, producer_id),
            keys.group_keys(group_id)[2],
            keys.pending_producers_key(group_id),
        ]
        try:
            await scripts.TXN_OFFSETS(self.redis, script_keys, [op, producer_id, *args])
        except ResponseError as exc:
            raise _error(exc) from None
        if op == "C":
            await self.redis.sadd(keys.GROUPS, group_id)

    async def unstable(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> set[tuple[str, int]]:
        """The partitions whose offsets an open transaction holds for the group
        (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for them)."""
        pids = await self.redis.smembers(keys.pending_producers_key(group_id))
        if not pids or not partitions:
            return set()
        fields = [keys.offset_field(t, p) for t, p in partitions]
        async with self.redis.pipeline(transaction=False) as pipe:
            for pid in pids:
                pipe.hmget(keys.pending_offsets_key(group_id, int(pid)), fields)
            replies = await pipe.execute()
        return {tp for reply in replies for tp, v in zip(partitions, reply, strict=True) if v}
