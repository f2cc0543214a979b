"""Log compaction (cleanup.policy=compact, or compact,delete), as Kafka's log cleaner
does it but without rewriting: superseded records are XDELed in place, so every kept
record keeps its offset (its stream id).

A pass over one partition:
  1. the dirty part is [cleaned, end): `cleaned` (meta) is where the last pass stopped,
     `end` the high watermark, or earlier where min.compaction.lag.ms makes records
     uncleanable (the first batch whose running max timestamp is newer than now - lag);
  2. it runs when the dirty share of the records, dirty / (kept by the last pass +
     dirty), reaches min.cleanable.dirty.ratio (Kafka measures bytes; Skiff counts
     records), or the first dirty record is older than max.compaction.lag.ms, or a kept
     tombstone has outlived delete.retention.ms;
  3. the dirty part is read in bounded XRANGE chunks into a key -> latest offset map;
  4. the whole log [lso, end) is read again in chunks, and every record whose key has a
     later offset in the map, every record without a key (as Kafka's cleaner drops
     them) and every tombstone (null value) whose timestamp is older than
     delete.retention.ms is XDELed in bounded batches, as are aborted transactions'
     records and the markers of transactions with no record left (`Markers`). The
     last record of the log is never removed: a consumer must always find a record at
     or after any offset below the high watermark, or it could not move past a gap at
     the end;
  5. lua/cleaner.lua records `cleaned` = end, the records kept and the bytes removed.

Every Redis call is bounded (CHUNK entries read, DELETE_BATCH ids deleted), so Redis is
never blocked for long. One sidecar compacts a partition at a time: its leader (as
Metadata spreads leadership), holding a short lease (`skiff:{t/p}:cleaner`, PX) renewed
per chunk; a pass that loses the lease stops. With nothing to clean the compactor sleeps
log.cleaner.backoff.ms, as Kafka's cleaner threads do.

`batch` topics (one stream entry per batch) cannot XDEL single records: `_batch_pass`
rebuilds the cleaned batches into a new stream and swaps it in (lua/cleaner.lua)."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

from sidecar.cluster import Cluster
from sidecar.config.topic import LONG_MAX
from sidecar.maintenance.background import BackgroundLoop
from sidecar.maintenance.log_bytes import record_bytes
from sidecar.protocol import stored_batch
from sidecar.protocol.record_batch import (
    FLAG_CONTROL,
    FLAG_KEY_NULL,
    FLAG_VALUE_NULL,
    record_in_aborted,
    transactional_producer_of_entry,
)
from sidecar.storage import keys
from sidecar.storage.store import RedisStore, StoreError, TopicInfo

log = logging.getLogger(__name__)

CHUNK = 1000  # entries per XRANGE
DELETE_BATCH = 500  # ids per XDEL
MAX_KEYS = 1_000_000  # keys in one pass's map (Kafka: log.cleaner.dedupe.buffer.size)
LEASE_MS = 30_000
# `batch` topics: stream entries per XRANGE, and what one write to the cleaned log
# carries at most (entries, bytes); entries the final swap copies at most.
BATCH_CHUNK = 100
WRITE_ENTRIES = 100
WRITE_BYTES = 4 << 20
SWAP_COPY = 1000
CATCH_UP_ROUNDS = 20


@dataclass(frozen=True, slots=True)
class Plan:
    hw: int
    lso: int
    start: int  # the dirty part is [start, end)
    end: int
    horizon: int  # tombstones older than this go
    total: int  # bytes appended (meta)


@dataclass(slots=True)
class PassResult:
    cleaned_to: int
    removed: int
    kept: int


class Compactor(BackgroundLoop):
    def __init__(self, store: RedisStore, cluster: Cluster, backoff_ms: int) -> None:
        super().__init__()
        self.store = store
        self.cluster = cluster
        self.backoff = backoff_ms / 1000
        self.token = secrets.token_hex(8)

    async def _run(self) -> None:
        while not self._stopping:
            try:
                worked = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis away: back off and try again
                log.warning("compaction failed: %s", exc)
                worked = False
            await asyncio.sleep(0.01 if worked else self.backoff)

    async def run_once(self) -> bool:
        """Compact every partition this sidecar leads that needs it; True if any did."""
        worked = False
        for info in await self.store.list_topics():
            if "compact" not in info.config["cleanup.policy"]:
                continue
            for p in range(info.partitions):
                if self.cluster.leader(info.name, p, info.partitions) != self.cluster.node_id:
                    continue
                try:
                    if await self.compact(info, p) is not None:
                        worked = True
                except StoreError:
                    continue  # deleted meanwhile
        return worked

    async def compact(self, info: TopicInfo, partition: int) -> PassResult | None:
        """One pass over a partition if it is due and its lease is free; else None."""
        store, name = self.store, info.name
        # Not due: no lease taken (no write to Redis for a partition with nothing to do).
        if await self._plan(info, partition) is None:
            return None
        if not await store.cleaner_lease(name, partition, "acquire", self.token, LEASE_MS):
            return None
        try:
            return await self._pass(info, partition)
        finally:
            await store.cleaner_lease(name, partition, "release", self.token, LEASE_MS)

    async def _plan(self, info: TopicInfo, partition: int) -> Plan | None:
        """What a pass would clean now, or None when the partition is not due."""
        store, name, config = self.store, info.name, info.config
        hw, lso, cleaned, kept_before, tomb_ts, total, stable = await store.meta(
            name, partition, "hw", "lso", "cleaned", "ckept", "ctombts", "bytes", "ls"
        )
        if hw is None or lso is None:
            return None
        now = int(time.time() * 1000)
        start = max(cleaned or 0, lso)
        # As Kafka's cleaner: nothing at or past the last stable offset (an open
        # transaction's records may still be aborted).
        end = hw if stable is None else min(hw, stable)
        lag = config["min.compaction.lag.ms"]
        if lag > 0:
            young = await store.first_offset_at_or_after(name, partition, now - lag)
            if young is not None:
                end = min(end, young)
        horizon = now - config["delete.retention.ms"]
        dirty = max(end - start, 0)
        due = (
            dirty > 0
            and dirty / ((kept_before or 0) + dirty) >= config["min.cleanable.dirty.ratio"]
        )
        if not due and dirty > 0 and config["max.compaction.lag.ms"] < LONG_MAX:
            first = await store.read_entries(name, partition, start, 1)
            if first:
                entry_id, f = first[0]
                ts = (
                    stored_batch.first_timestamp(entry_id, f[1]) if info.batch_format else int(f[1])
                )
                if now - ts > config["max.compaction.lag.ms"]:
                    due = True
        if not due and tomb_ts is not None and 0 <= tomb_ts < horizon:
            due = True  # a kept tombstone has outlived delete.retention.ms
        if not due:
            return None
        return Plan(hw, lso, start, end, horizon, total or 0)

    async def _pass(self, info: TopicInfo, partition: int) -> PassResult | None:
        store, name = self.store, info.name
        plan = await self._plan(info, partition)  # again, now under the lease
        if plan is None:
            return None
        if info.batch_format:
            return await self._batch_pass(info, partition, plan)
        hw, lso, start, end, horizon, total = (
            plan.hw,
            plan.lso,
            plan.start,
            plan.end,
            plan.horizon,
            plan.total,
        )
        # As on `batch` topics: aborted transactions' records go and never shadow a key's
        # committed record; a marker goes once its transaction has no record left.
        aborted = await store.aborted_ranges(name, partition, lso, end, limit=None)
        latest, end = await self._latest_offsets(name, partition, start, end, aborted)
        if latest is None:
            return None  # lease lost
        kept = removed = 0
        kept_bytes = 0
        oldest_tomb = -1
        doomed: list[int] = []
        markers = Markers(aborted, horizon)
        pos = lso
        last = hw - 1
        while pos < end:
            entries = await store.read_entries(name, partition, pos, CHUNK)
            if not entries:
                break
            for entry_id, f in entries:
                offset = int(entry_id[2:]) - 1
                if offset >= end:
                    pos = end
                    break
                pos = offset + 1
                flags = int(f[9])
                pid = transactional_producer_of_entry(f)
                if flags & FLAG_CONTROL:
                    if offset != last and markers.goes(pid, offset, int(f[1])):
                        removed += 1
                        continue
                    kept += 1
                    kept_bytes += record_bytes(f[3], f[5], f[7])
                    continue
                markers.data(pid)
                if aborted and record_in_aborted(offset, f, aborted):
                    doomed.append(offset)
                    removed += 1
                    continue
                key = f[3]
                tombstone = bool(flags & FLAG_VALUE_NULL)
                if offset != last and (
                    flags & FLAG_KEY_NULL
                    or latest.get(key, offset) > offset
                    or (tombstone and int(f[1]) < horizon)
                ):
                    doomed.append(offset)
                    removed += 1
                    continue
                kept += 1
                kept_bytes += record_bytes(key, f[5], f[7])
                # Kept tombstones that a later pass will remove (not the last record,
                # which stays whatever its age: it must not trigger passes forever).
                if tombstone and offset != last and (oldest_tomb < 0 or int(f[1]) < oldest_tomb):
                    oldest_tomb = int(f[1])
            if len(entries) < CHUNK:
                pos = max(pos, end)
            while len(doomed) >= DELETE_BATCH:
                await store.delete_entries(name, partition, doomed[:DELETE_BATCH])
                del doomed[:DELETE_BATCH]
            if self._stopping or not await store.cleaner_lease(
                name, partition, "renew", self.token, LEASE_MS
            ):
                return None
        if doomed:
            await store.delete_entries(name, partition, doomed)
        # The index entries first: a marker without one is ignored by readers, an entry
        # without its marker would hide the producer's later records.
        await store.forget_aborted(name, partition, markers.index_entries)
        for i in range(0, len(markers.offsets), DELETE_BATCH):
            await store.delete_entries(name, partition, markers.offsets[i : i + DELETE_BATCH])

        fields: list[Any] = ["ckept", kept, "ctombts", oldest_tomb]
        # Bytes compaction removed from the live log (DescribeLogDirs, retention.bytes):
        # what was appended from the batch holding lso to `end`, less the kept records.
        first_score, end_score = await store.byte_scores(name, partition, end)
        appended_to_end = total if end == hw else end_score
        if appended_to_end is not None:
            fields += ["cbytes", max(appended_to_end - first_score - kept_bytes, 0)]
        await store.cleaner_lease(name, partition, "done", self.token, LEASE_MS, end, *fields)
        return _finished(name, partition, end, removed, kept)

    async def _latest_offsets(
        self, name: str, partition: int, start: int, end: int, aborted: list[tuple[int, int, int]]
    ) -> tuple[dict[bytes, int] | None, int]:
        """key -> latest offset over the dirty part [start, end), and the end actually
        covered (earlier when the map is full); markers and aborted records left out."""
        latest: dict[bytes, int] = {}
        pos = start
        while pos < end:
            entries = await self.store.read_entries(name, partition, pos, CHUNK)
            if not entries:
                break
            for entry_id, f in entries:
                offset = int(entry_id[2:]) - 1
                if offset >= end:
                    return latest, end
                flags = int(f[9])
                if not flags & (FLAG_KEY_NULL | FLAG_CONTROL) and not (
                    aborted and record_in_aborted(offset, f, aborted)
                ):
                    if len(latest) >= MAX_KEYS and f[3] not in latest:
                        return latest, offset
                    latest[f[3]] = offset
                pos = offset + 1
            if not await self.store.cleaner_lease(name, partition, "renew", self.token, LEASE_MS):
                return None, end
        return latest, end

    # -- `batch` topics ------------------------------------------------------------------

    async def _batch_pass(self, info: TopicInfo, partition: int, plan: Plan) -> PassResult | None:
        """A pass over a `batch` topic: stream IDs only grow, so a cleaned batch cannot
        replace its entry in place. The cleaned log [lso, end) goes into a new stream
        (lua/cleaner.lua `write`), each batch rebuilt with the records it keeps and its
        base and last offset (as Kafka's cleaner), a batch keeping nothing left out;
        batches appended meanwhile are copied after it, and one script copies the last
        few and renames it over the log (`swap`), so readers never see a half-cleaned
        log and the Fetch path is unchanged. Queue groups keep their cursor (the swap
        makes the log's consumer groups again) and their in-flight records (their own
        keys): a leased record removed here can still be settled, and is finished
        instead of handed out again (queues/core.py finds no body for it)."""
        store, name, config = self.store, info.name, info.config
        # Aborted transactions' batches are dropped and never shadow a key's committed
        # record, as in Kafka's cleaner (all of the log below `end` is decided).
        aborted = await store.aborted_ranges(name, partition, plan.lso, plan.end, limit=None)
        latest, end = await self._batch_latest(name, partition, plan.start, plan.end, aborted)
        if latest is None:
            return None
        last = plan.hw - 1
        kept = removed = kept_bytes = 0
        oldest_tomb = -1
        markers = Markers(aborted, plan.horizon)
        pending: list[bytes] = []
        pending_bytes = 0
        started = False

        async def flush() -> bool:
            nonlocal pending, pending_bytes, started
            if not pending and started:
                return await store.cleaner_lease(name, partition, "renew", self.token, LEASE_MS)
            head = [] if started else [""]
            started = True
            ok = await store.clean_write(name, partition, self.token, LEASE_MS, *head, *pending)
            pending, pending_bytes = [], 0
            return ok

        pos = plan.lso
        copied = b"0-0"
        while pos < end:
            entries = await store.read_entries(name, partition, pos, BATCH_CHUNK)
            if not entries:
                break
            for entry_id, f in entries:
                stop = stored_batch.last_offset(entry_id) + 1
                if stop > end:
                    pos = end
                    break
                pos = stop
                copied = entry_id
                data = f[1]
                pid = stored_batch.transactional_producer(data)
                if stored_batch.is_control(data):
                    # A marker stays while its transaction has records in the log:
                    # read_committed readers need it to end what the aborted index lists.
                    offset = stored_batch.base_offset(entry_id, data)
                    ts = stored_batch.first_timestamp(entry_id, data)
                    if offset != last and markers.goes(pid, offset, ts):
                        removed += 1
                        continue
                    kept += 1
                    kept_bytes += len(data)
                    pending += (entry_id, data)
                    pending_bytes += len(data)
                    continue
                markers.data(pid)
                if aborted and stored_batch.in_aborted(entry_id, data, aborted):
                    removed += stored_batch.record_count(data)
                    continue
                batch = list(stored_batch.records(entry_id, data))
                keep = []
                for record in batch:
                    offset, ts = record.offset, record.timestamp
                    tombstone = record.value is None
                    if offset != last and (
                        record.key is None
                        or latest.get(record.key, offset) > offset
                        or (tombstone and ts < plan.horizon)
                    ):
                        removed += 1
                        continue
                    keep.append(record)
                    if tombstone and offset != last and (oldest_tomb < 0 or ts < oldest_tomb):
                        oldest_tomb = ts
                kept += len(keep)
                if not keep:
                    continue
                if len(keep) < len(batch):
                    data = stored_batch.rebuild(entry_id, data, keep, config)
                kept_bytes += len(data)
                pending += (entry_id, data)
                pending_bytes += len(data)
                if len(pending) >= 2 * WRITE_ENTRIES or pending_bytes >= WRITE_BYTES:
                    if not await flush():
                        return None
            if len(entries) < BATCH_CHUNK:
                pos = max(pos, end)
            if self._stopping or not await flush():
                return None
        if not started and not await flush():
            return None

        # Before the swap drops their markers (see the `record` pass).
        await store.forget_aborted(name, partition, markers.index_entries)
        fields: list[Any] = ["ckept", kept, "ctombts", oldest_tomb]
        first_score, end_score = await store.byte_scores(name, partition, end)
        appended_to_end = plan.total if end == plan.hw else end_score
        if appended_to_end is not None:
            fields += ["cbytes", max(appended_to_end - first_score - kept_bytes, 0)]
        # What was appended since the pass began follows the cleaned part, copied in
        # bounded steps until the swap can take the rest in one script.
        for _ in range(CATCH_UP_ROUNDS):
            swapped = await store.clean_swap(
                name, partition, self.token, LEASE_MS, copied, SWAP_COPY, end, *fields
            )
            if swapped == 1:
                break
            if swapped == -2:
                log.warning(
                    "%s-%d not compacted: a Redis consumer group has pending entries on its"
                    " log (XREADGROUP by a plain Redis client), which the swap would lose",
                    name,
                    partition,
                )
                return None
            if swapped != -1 or self._stopping:
                return None
            tail = await store.redis.xrange(
                keys.partition_keys(name, partition)[0], b"(" + copied, "+", count=BATCH_CHUNK
            )
            pairs = [x for entry_id, f in tail for x in (entry_id, f[1])]
            if tail and not await store.clean_write(name, partition, self.token, LEASE_MS, *pairs):
                return None
            if tail:
                copied = tail[-1][0]
        else:
            return None  # appends outran the copy: the next round tries again
        return _finished(name, partition, end, removed, kept)

    async def _batch_latest(
        self, name: str, partition: int, start: int, end: int, aborted: list[tuple[int, int, int]]
    ) -> tuple[dict[bytes, int] | None, int]:
        """_latest_offsets of a `batch` topic, aborted transactions' records left out; a
        full map ends the part at a batch."""
        latest: dict[bytes, int] = {}
        pos = start
        while pos < end:
            entries = await self.store.read_entries(name, partition, pos, BATCH_CHUNK)
            if not entries:
                break
            for entry_id, f in entries:
                base = stored_batch.base_offset(entry_id, f[1])
                if base >= end:
                    return latest, end
                if stored_batch.is_control(f[1]) or (
                    aborted and stored_batch.in_aborted(entry_id, f[1], aborted)
                ):
                    records = []  # a marker's key is no record key; aborted ones count not
                else:
                    records = [r for r in stored_batch.records(entry_id, f[1]) if r.key is not None]
                if len(latest) + len(records) > MAX_KEYS and base > start:
                    return latest, base
                for r in records:
                    latest[r.key] = r.offset
                pos = stored_batch.last_offset(entry_id) + 1
            if not await self.store.cleaner_lease(name, partition, "renew", self.token, LEASE_MS):
                return None, end
        return latest, end


class Markers:
    """Which transaction markers a pass removes, as Kafka's cleaner does: a marker whose
    transaction has no record left in the log (none was seen since the producer's
    previous marker: compacted away or aborted and removed by an earlier pass), once
    older than delete.retention.ms (Kafka counts from the pass that first finds it
    removable). An ABORT marker takes its aborted-index entry along."""

    def __init__(self, aborted: list[tuple[int, int, int]], horizon: int) -> None:
        self.horizon = horizon
        self._abort_entries = {marker: f"{pid} {first}" for pid, first, marker in aborted}
        self._with_records: set[int] = set()  # producers whose open transaction has some
        self.offsets: list[int] = []  # the removed markers
        self.index_entries: list[str] = []  # their aborted-index members

    def data(self, pid: int | None) -> None:
        """A transactional record of producer `pid` (None: not transactional)."""
        if pid is not None:
            self._with_records.add(pid)

    def goes(self, pid: int | None, offset: int, timestamp: int) -> bool:
        """Whether the marker at `offset` is removed (its transaction ends here)."""
        had_records = pid in self._with_records
        if pid is not None:
            self._with_records.discard(pid)
        if had_records or timestamp >= self.horizon:
            return False
        self.offsets.append(offset)
        if offset in self._abort_entries:
            self.index_entries.append(self._abort_entries[offset])
        return True


def _finished(name: str, partition: int, end: int, removed: int, kept: int) -> PassResult:
    """A pass's result, logged when it removed anything."""
    if removed:
        log.info(
            "compacted %s-%d up to offset %d: removed %d, kept %d records",
            name,
            partition,
            end,
            removed,
            kept,
        )
    return PassResult(end, removed, kept)
