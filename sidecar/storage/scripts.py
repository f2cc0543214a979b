"""Lua scripts from lua/: SCRIPT LOAD once, EVALSHA after; reload once on NOSCRIPT
(Redis restarted or failed over and lost its script cache)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

LUA_DIR = Path(__file__).resolve().parents[2] / "lua"


class Script:
    def __init__(self, name: str) -> None:
        self.name = name
        self.source = (LUA_DIR / f"{name}.lua").read_text()
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()

    async def load(self, redis: Redis) -> None:
        sha = await redis.script_load(self.source)
        if sha != self.sha:
            raise RuntimeError(f"Redis returned SHA {sha} for {self.name}.lua, expected {self.sha}")

    async def __call__(self, redis: Redis, keys: list[str], args: list[Any]) -> Any:
        try:
            return await redis.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            await self.load(redis)
            return await redis.evalsha(self.sha, len(keys), *keys, *args)


APPEND = Script("append")
ALL = (APPEND,)
