"""Records fetched per topic, summed over all sidecars. Each sidecar counts its own
(skiff_topic_records_out); every FLUSH_SECONDS it adds what it counted since its last
flush into one Redis hash (keys.TOPIC_FETCHED), so the console of any sidecar charts
the fetch rate through all of them. A flush is one MULTI of an HINCRBY per topic
fetched from since the last one (nothing when none was): one key, so one slot on a
Redis Cluster, and a flush lands whole or not at all (a failed one is retried with the
next, nothing counted twice)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from sidecar.storage import keys
from sidecar.telemetry import metrics

FLUSH_SECONDS = 2.0

log = logging.getLogger(__name__)


def fetched_here() -> dict[str, int]:
    """This sidecar's records fetched per topic since it started."""
    out: dict[str, int] = {}
    for family in metrics.RECORDS_OUT.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                out[sample.labels["topic"]] = int(sample.value)
    return out


class FetchedFlusher:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self._sent: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    async def flush(self) -> None:
        counts = fetched_here()
        changed = {t: n - self._sent.get(t, 0) for t, n in counts.items()}
        changed = {t: d for t, d in changed.items() if d > 0}
        if not changed:
            return
        async with self.broker.store.redis.pipeline(transaction=True) as pipe:
            for topic, delta in changed.items():
                pipe.hincrby(keys.TOPIC_FETCHED, topic, delta)
            await pipe.execute()
        for topic in changed:
            self._sent[topic] = counts[topic]

    async def _run(self) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), FLUSH_SECONDS)
            try:  # and once more when stopping: the last counts
                await self.flush()
            except Exception as exc:  # Redis away: the counts wait for the next flush
                log.debug("fetched counts not flushed: %s", exc)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="console-fetched")

    async def stop(self) -> None:
        """Flushes the last counts, unless Redis takes longer than a flush period."""
        self._stopping.set()
        if self._task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._task, FLUSH_SECONDS)
            self._task = None


async def fetched(redis: Any, topic: str) -> int:
    """Records fetched from `topic` through all sidecars (up to FLUSH_SECONDS behind)."""
    return int(await redis.hget(keys.TOPIC_FETCHED, topic) or 0)
