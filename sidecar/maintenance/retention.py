"""Time (and size) retention in the background, as Kafka's log retention task: every
log.retention.check.interval.ms each sidecar moves the log start of the partitions it
leads past the batches retention.ms / retention.bytes no longer keep (lua/trim.lua,
bounded work per call). Size retention also runs on every append; this sweep catches
partitions that receive nothing (or whose retention.bytes was lowered).

Only the partition's leader (Metadata's spread over live sidecars) sweeps it, so
sidecars sharing a Redis do not repeat each other's work; the script is idempotent (the
log start only grows), so a leadership change mid-sweep is harmless."""

from __future__ import annotations

import asyncio
import logging

from sidecar.cluster import Cluster
from sidecar.maintenance.background import BackgroundLoop
from sidecar.storage.store import RedisStore, StoreError

log = logging.getLogger(__name__)


class RetentionSweeper(BackgroundLoop):
    def __init__(self, store: RedisStore, cluster: Cluster, interval_ms: int) -> None:
        super().__init__()
        self.store = store
        self.cluster = cluster
        self.interval = interval_ms / 1000

    async def _run(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.interval)
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis away: try again next interval
                log.warning("retention sweep failed: %s", exc)

    async def sweep(self) -> int:
        """One pass over the partitions this sidecar leads; returns how many log starts
        moved."""
        moved = 0
        for info in await self.store.list_topics():
            config = info.config
            if "delete" not in config["cleanup.policy"]:
                continue
            retention_ms, retention_bytes = config["retention.ms"], config["retention.bytes"]
            if retention_ms < 0 and retention_bytes < 0:
                continue
            for p in range(info.partitions):
                if self.cluster.leader(info.name, p, info.partitions) != self.cluster.node_id:
                    continue
                try:
                    before = (await self.store.meta(info.name, p, "lso"))[0]
                    lso, _ = await self.store.trim(
                        info.name, p, retention_ms=retention_ms, retention_bytes=retention_bytes
                    )
                except StoreError:
                    continue  # deleted meanwhile
                if before is not None and lso > before:
                    moved += 1
                    log.info("retention: %s-%d log start %d -> %d", info.name, p, before, lso)
        return moved
