"""The transaction coordinator (Kafka's TransactionCoordinator; docs/transactions.md).

Every sidecar coordinates every transactional id: the state lives in Redis and each
step is one atomic script (storage/txn_store.py), so no lease is needed. Completing a
decided transaction (markers on its partitions, its group offsets) is idempotent, and
whoever finds one decided but unfinished (EndTxn retried, the producer's next
InitProducerId, this loop) finishes it: a sidecar killed mid-commit leaves nothing
half done for long. Transactions past their timeout are aborted by whichever sidecar's
loop finds them first, the epoch bumped so their producer is fenced."""

from __future__ import annotations

import asyncio
import logging
import time

from sidecar.config.settings import Settings
from sidecar.maintenance.background import BackgroundLoop
from sidecar.storage.store import RedisStore, StoreError
from sidecar.storage.txn_store import Decided, TxnStore

log = logging.getLogger(__name__)

INIT_ATTEMPTS = 3


class TransactionCoordinator(BackgroundLoop):
    def __init__(self, settings: Settings, store: RedisStore) -> None:
        super().__init__()
        self.settings = settings
        self.store = store
        self.txns = TxnStore(store.redis, settings.transactional_id_expiration_ms)

    async def init_producer(
        self, transactional_id: str, pid: int, epoch: int, timeout_ms: int, max_epoch: int
    ) -> tuple[int, int]:
        """InitProducerId: an open transaction of the id is aborted first (its
        producer fenced), as Kafka does for a new instance."""
        for _ in range(INIT_ATTEMPTS):
            try:
                return await self.store.init_transactional_producer(
                    transactional_id,
                    pid,
                    epoch,
                    self.settings.transactional_id_expiration_ms,
                    max_epoch,
                    timeout_ms,
                )
            except StoreError as exc:
                if exc.code != "CONCURRENT_TRANSACTIONS":
                    raise
            decided = await self.txns.expire(transactional_id, timed_out_only=False)
            if isinstance(decided, Decided):
                await self.complete(transactional_id, decided)
        raise StoreError("CONCURRENT_TRANSACTIONS", "a transaction of this id is completing")

    async def end(self, transactional_id: str, pid: int, epoch: int, commit: bool) -> None:
        decided = await self.txns.end(transactional_id, pid, epoch, commit)
        if decided is not None:
            await self.complete(transactional_id, decided)

    async def end_v2(
        self, transactional_id: str, pid: int, epoch: int, commit: bool
    ) -> tuple[int, int]:
        """EndTxn v5 (transaction version 2, KIP-890): the epoch moves on at every end;
        returns the (producer id, epoch) the producer goes on with. A producer id is
        taken only when the epoch is exhausted (the script asks for one)."""
        try:
            outcome = await self.txns.end_v2(transactional_id, pid, epoch, commit, None)
        except StoreError as exc:
            if exc.code != "SKIFF_NEED_PID":
                raise
            spare = await self.store.next_producer_id()
            outcome = await self.txns.end_v2(transactional_id, pid, epoch, commit, spare)
        if isinstance(outcome, tuple):
            return outcome
        await self.complete(transactional_id, outcome)
        return outcome.producer_after()

    async def complete(self, transactional_id: str, decided: Decided) -> None:
        """Write the markers and settle the offsets of a decided transaction, then mark
        it complete. Raises StoreError if Redis fails; it stays decided, and the next
        attempt (by anyone) completes it."""
        identity = self.store.identity.cluster_id or ""
        writes = []
        for topic, partition in decided.partitions:
            info = await self.store.get_topic(topic)
            if info is None or not 0 <= partition < info.partitions:
                continue  # deleted since
            writes.append(self._mark(topic, partition, decided, identity, info.batch_format))
        for group in decided.groups:
            writes.append(self.txns.settle_offsets(group, decided.producer_id, decided.commit))
        for result in await asyncio.gather(*writes, return_exceptions=True):
            if isinstance(result, BaseException):
                raise result
        await self.txns.done(transactional_id, decided)

    async def _mark(
        self, topic: str, partition: int, decided: Decided, identity: str, batch_format: bool
    ) -> None:
        try:
            await self.txns.write_marker(topic, partition, decided, identity, batch_format)
        except StoreError as exc:
            if exc.code != "UNKNOWN_TOPIC_OR_PARTITION":
                raise
        # The partition's next append cannot follow this sidecar's prediction any more.
        self.store.forget_next_base(topic, partition)

    async def _run(self) -> None:
        interval = self.settings.transaction_abort_timed_out_transaction_cleanup_interval_ms
        while not self._stopping:
            await asyncio.sleep(interval / 1000)
            try:
                await self.abort_timed_out()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("aborting timed-out transactions failed: %s", exc)

    async def abort_timed_out(self) -> None:
        for transactional_id, filed in await self.txns.due(int(time.time() * 1000)):
            decided = await self.txns.expire(transactional_id, timed_out_only=True)
            if isinstance(decided, int):
                await self.txns.refile(transactional_id, decided)
                continue
            if decided is None:
                # Completed, or a later transaction not yet due: that one's 'add' filed
                # its own deadline, which stays.
                await self.txns.forget_deadline(transactional_id, filed)
                continue
            log.info(
                "transactional id %r: transaction %d %s after its timeout",
                transactional_id,
                decided.seq,
                "committed" if decided.commit else "aborted",
            )
            await self.complete(transactional_id, decided)
