"""Kafka share groups (KIP-932) on the queue core (sidecar/queues/): membership
(membership.py), share sessions (sessions.py) and acquisition/acknowledgement
(records.py). The API modules are sidecar/apis/share_*.py and *_share_group_offsets.py.

One ShareState per Broker, made on first use (`state(broker)`), so the shared start-up
code only needs `stop_all()` at shutdown."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sidecar import connection_context
from sidecar.share.membership import ShareCoordinator
from sidecar.share.sessions import ShareSession, ShareSessions
from sidecar.storage import resilience

log = logging.getLogger("skiff.share")


class ShareState:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.sessions = ShareSessions()
        self.coordinator = ShareCoordinator(broker, self._member_gone)
        self._tasks: set[asyncio.Task[None]] = set()
        connection_context.on_close(self.connection_closed)

    def connection_closed(self, connection: int) -> None:
        """Kafka forgets a client's share sessions when its connection closes and
        releases what they acquired: a crashed consumer's records go to others at once."""
        for session in self.sessions.drop_connection(connection):
            task = asyncio.get_running_loop().create_task(self.close_session(session))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def close_session(self, session: ShareSession) -> None:
        """Release the member's records on the session's partitions."""
        from sidecar.share import records

        try:
            with resilience.request_deadline(None):
                parts = []
                for tid, p in session.partitions:
                    info = await self.broker.store.topic_by_id(tid)
                    if info is not None:
                        parts.append((info.name, p))
                await records.release_partitions(
                    self.broker, session.group_id, session.member_id, parts
                )
        except Exception as exc:  # the locks expire anyway
            log.warning(
                "share group %r: releasing member %s's session failed: %s",
                session.group_id,
                session.member_id,
                exc,
            )

    async def _member_gone(self, group_id: str, member_id: str) -> None:
        """A member left or its session expired: its records become available now."""
        from sidecar.share import records

        self.sessions.drop_member(group_id, member_id)
        await records.release_member(self.broker, group_id, member_id)


_STATES: dict[int, ShareState] = {}


def state(broker: Any) -> ShareState:
    found = _STATES.get(id(broker))
    if found is None or found.broker is not broker:
        found = _STATES[id(broker)] = ShareState(broker)
    return found


async def stop_all() -> None:
    for s in list(_STATES.values()):
        await s.coordinator.stop()
    _STATES.clear()
