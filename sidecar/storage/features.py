"""Feature flags (KIP-584) as ApiVersions reports them and UpdateFeatures changes them:
Skiff's one feature is transaction.version (docs/transactions.md). Its finalized level
lives in Redis, so every sidecar reports the same one; until an UpdateFeatures sets it,
it is --transaction-version. The finalized-features epoch grows with each change, as
clients take the features of the highest epoch they have seen."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from redis.asyncio import Redis

from sidecar.storage import keys

log = logging.getLogger(__name__)

TRANSACTION_VERSION = "transaction.version"
# name -> (min, max) level this broker supports.
SUPPORTED = {TRANSACTION_VERSION: (0, 2)}
# The epoch before any UpdateFeatures (Kafka's is a metadata offset).
INITIAL_EPOCH = 1
REFRESH_SECONDS = 1.0  # how stale a sidecar's view of another's update may be
FIRST_READ_SECONDS = 0.5  # the first ApiVersions waits this long for Redis at most


class Features:
    def __init__(self, redis: Redis, default_transaction_version: int) -> None:
        self.redis = redis
        self._levels = {TRANSACTION_VERSION: default_transaction_version}
        self._epoch = INITIAL_EPOCH
        self._read_at = float("-inf")
        self._refresh: asyncio.Task[None] | None = None

    async def finalized(self) -> tuple[dict[str, int], int]:
        """(feature -> finalized level, epoch). ApiVersions must answer whatever Redis
        does: this never waits on Redis but for the first read, which waits at most
        FIRST_READ_SECONDS; later reads run in the background, at most once a second,
        and meanwhile the last answer stands."""
        first = self._read_at == float("-inf")
        if time.monotonic() - self._read_at >= REFRESH_SECONDS and (
            self._refresh is None or self._refresh.done()
        ):
            self._read_at = time.monotonic()
            self._refresh = asyncio.create_task(self._read())
        if first and self._refresh is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._refresh), FIRST_READ_SECONDS)
        return dict(self._levels), self._epoch

    async def _read(self) -> None:
        try:
            stored = await self.redis.hgetall(keys.FEATURES)
        except Exception as exc:  # noqa: BLE001 - any Redis failure: keep the last answer
            log.debug("reading finalized features: %s", exc)
        else:
            self._load(stored)

    def _load(self, stored: dict[bytes, bytes]) -> None:
        for raw_name, raw_level in stored.items():
            name = raw_name.decode()
            if name == "epoch":
                self._epoch = int(raw_level)
            elif name in SUPPORTED:
                self._levels[name] = int(raw_level)

    async def update(self, levels: dict[str, int]) -> None:
        """Finalize the levels (validated by the caller) and move the epoch on."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hsetnx(keys.FEATURES, "epoch", INITIAL_EPOCH)
            pipe.hincrby(keys.FEATURES, "epoch", 1)
            pipe.hset(keys.FEATURES, mapping=levels)  # type: ignore[arg-type]
            pipe.hgetall(keys.FEATURES)
            *_, stored = await pipe.execute()
        self._load(stored)
        self._read_at = time.monotonic()
