"""Kafka share groups (KIP-932) on the queue core (sidecar/queues/): membership
(membership.py), share sessions (sessions.py) and acquisition/acknowledgement
(records.py). The API modules are sidecar/apis/share_*.py and *_share_group_offsets.py.

One ShareState per Broker, made on first use (`state(broker)`), so the shared start-up
code only needs `stop_all()` at shutdown."""

from __future__ import annotations

from typing import Any

from .membership import ShareCoordinator
from .sessions import ShareSessions


class ShareState:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.sessions = ShareSessions()
        self.coordinator = ShareCoordinator(broker, self._member_gone)

    async def _member_gone(self, group_id: str, member_id: str) -> None:
        """A member left or its session expired: its records become available now."""
        from . import records

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
