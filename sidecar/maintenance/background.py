"""A sidecar's background loops (the retention sweeper, the compactor): started once,
stopped by setting a flag and cancelling. The loop checks the flag too, because a
cancellation that lands inside redis-py can come out as a connection error, which
the loop catches and would otherwise carry on after."""

from __future__ import annotations

import asyncio


class BackgroundLoop:
    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        self._stopping = True
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        """Loop `while not self._stopping`."""
        raise NotImplementedError
