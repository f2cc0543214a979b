"""Request order for pipelined Produce requests on one connection.

A connection's consecutive Produce requests run concurrently, so request N+1 is
decoded and packed while request N's append runs in Redis; but appends to one
partition must still happen in request order. Each Produce takes a ticket when it
is read (in order); its appends wait for the previous ticket to claim its
partitions, then for the previous append to each partition they share.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

PartitionKey = tuple[str, int]


class AppendOrder:
    def __init__(self) -> None:
        self._last: asyncio.Future[None] | None = None
        self._tails: dict[PartitionKey, asyncio.Future[None]] = {}

    def ticket(self) -> Ticket:
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ticket = Ticket(self, self._last, mine)
        self._last = mine
        return ticket


class Ticket:
    def __init__(
        self, order: AppendOrder, previous: asyncio.Future[None] | None, mine: asyncio.Future[None]
    ) -> None:
        self._order = order
        self._previous = previous
        self._mine = mine
        self._claims: dict[PartitionKey, tuple[asyncio.Future[None] | None, asyncio.Future[None]]]
        self._claims = {}

    def ready(self) -> bool:
        """Whether claim_now may run: the previous request took its places."""
        return self._previous is None or self._previous.done()

    async def claim(self, partitions: Iterable[PartitionKey]) -> None:
        """Take this request's place in each partition's queue, after the previous
        request took its places."""
        if self._previous is not None:
            await asyncio.shield(self._previous)
        self.claim_now(partitions)

    def claim_now(self, partitions: Iterable[PartitionKey]) -> None:
        """claim, when ready(): without a coroutine (the usual case, on every Produce)."""
        loop = self._mine.get_loop()
        tails = self._order._tails
        for key in partitions:
            done: asyncio.Future[None] = loop.create_future()
            self._claims[key] = (tails.get(key), done)
            tails[key] = done
        if not self._mine.done():
            self._mine.set_result(None)

    def waits(self, key: PartitionKey) -> bool:
        """Whether turn(key) has to wait (an earlier append to it is still running)."""
        before = self._claims[key][0]
        return before is not None and not before.done()

    async def turn(self, key: PartitionKey) -> None:
        """Wait until the earlier requests' appends to this partition finished."""
        before = self._claims[key][0]
        if before is not None:
            await asyncio.shield(before)

    def done(self, key: PartitionKey) -> None:
        _, mine = self._claims[key]
        if not mine.done():
            mine.set_result(None)
        if self._order._tails.get(key) is mine:
            del self._order._tails[key]

    def release(self) -> None:
        """Always called when the request ends, so no later request waits forever."""
        if not self._mine.done():
            self._mine.set_result(None)
        for key in self._claims:
            self.done(key)
