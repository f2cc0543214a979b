"""The broker registry in Redis: which sidecars are alive, under which node ids and
addresses (lua/brokers.lua). Each registration carries an incarnation token and
expires unless renewed, like Kafka's ephemeral broker nodes."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from redis.asyncio import Redis

from sidecar.storage import keys, scripts


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    incarnation: str
    # Advertised address per listener name; (): a registration from before listeners,
    # whose one address serves every listener.
    listeners: tuple[tuple[str, str, int], ...] = ()
    # When the registration was last made or renewed (ms, Redis's clock); -1: unknown.
    renewed_ms: int = -1

    @property
    def token(self) -> str:
        """What a group lease held by this registration contains."""
        return f"{self.node_id}:{self.incarnation}"

    def on(self, listener: str | None) -> BrokerInfo:
        """This sidecar as a client of `listener` must reach it: that listener's
        advertised address. A sidecar without a listener of that name is given at its
        inter-broker address (Kafka would leave it out, and its partitions leaderless)."""
        for name, host, port in self.listeners:
            if name == listener:
                if (host, port) == (self.host, self.port):
                    return self
                return dataclasses.replace(self, host=host, port=port)
        return self


class Registry:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def _call(self, *args: object) -> list[object]:
        return await scripts.BROKERS(self.redis, [keys.BROKERS], [str(a) for a in args])

    async def register(
        self,
        node_id: int,
        incarnation: str,
        host: str,
        port: int,
        ttl_ms: int,
        force: bool,
        listeners: tuple[tuple[str, str, int], ...] = (),
    ) -> tuple[int, int]:
        """(node id, 0), or (-1, ms until a live holder of the requested id expires).
        `host`/`port`: the inter-broker listener's advertised address; `listeners`: every
        listener's (name, host, port)."""
        advertised = json.dumps({name: [h, p] for name, h, p in listeners})
        got, extra = await self._call(
            "register", node_id, incarnation, host, port, ttl_ms, int(force), advertised
        )
        return int(got), (0 if int(got) >= 0 else int(extra))

    async def renew(self, node_id: int, incarnation: str, ttl_ms: int) -> bool:
        ok, _ = await self._call("renew", node_id, incarnation, "", 0, ttl_ms, 0)
        return bool(ok)

    async def leave(self, node_id: int, incarnation: str) -> None:
        await self._call("leave", node_id, incarnation, "", 0, 0, 0)

    async def unregister(self, node_id: int) -> bool:
        """Drop node `node_id`'s live registration, whoever holds it (UnregisterBroker);
        False if there is none. A live sidecar finds out at its next renewal and
        registers again."""
        dropped, _ = await self._call("unregister", node_id, "", "", 0, 0, 0)
        return bool(dropped)

    async def live(self) -> list[BrokerInfo]:
        reply = await self._call("list", -1, "", "", 0, 0, 0)
        out = []
        for i in range(1, len(reply), 2):
            doc = json.loads(reply[i + 1])  # type: ignore[arg-type]
            listeners = tuple(
                (str(name), str(hp[0]), int(hp[1]))
                for name, hp in json.loads(doc.get("ls") or "{}").items()
            )
            out.append(
                BrokerInfo(
                    int(reply[i]),
                    doc["host"],
                    int(doc["port"]),
                    doc["inc"],
                    listeners,
                    int(doc.get("at", -1)),
                )
            )
        return sorted(out, key=lambda b: b.node_id)
