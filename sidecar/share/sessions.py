"""Share sessions (KIP-932), kept per sidecar in memory as Kafka's broker keeps them
(ShareSessionCache): one session per (group, member) on the sidecar the member fetches
from, holding the partitions it fetches and the next expected session epoch.

Epoch 0 opens a session (replacing one the member had here), -1 closes it, any other
epoch must be the session's next one: a session missing here answers
SHARE_SESSION_NOT_FOUND, a wrong epoch INVALID_SHARE_SESSION_EPOCH, as from Kafka. The
client then opens a new session with epoch 0. Sessions hold no records: acquisitions
live in Redis, so a member may move between sidecars. A session whose client connection
closes is forgotten and the member's records on its partitions are released, as Kafka
does (ShareState.connection_closed)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from sidecar.connection_context import CONNECTION

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_SESSIONS = 10_000  # Kafka's share-group max share sessions per broker (default 2000)
IDLE_EVICT_S = 120.0  # sessions not used that long may be evicted when the cache is full

TopicPartition = tuple[uuid.UUID, int]


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the next epoch expected
    partitions: dict[TopicPartition, None] = field(default_factory=dict)  # ordered set
    used: float = field(default_factory=time.monotonic)
    connection: int = 0  # the client connection last used (connection_context)


class SessionError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class ShareSessions:
    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def open(self, group_id: str, member_id: str) -> ShareSession:
        key = (group_id, member_id)
        self._sessions.pop(key, None)
        if len(self._sessions) >= MAX_SESSIONS:
            self._evict()
        if len(self._sessions) >= MAX_SESSIONS:
            raise SessionError("SHARE_SESSION_LIMIT_REACHED", "The share session cache is full.")
        session = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH))
        session.connection = CONNECTION.get()
        self._sessions[key] = session
        return session

    def advance(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The member's session after checking a non-initial, non-final epoch."""
        session = self._sessions.get((group_id, member_id))
        if session is None:
            raise SessionError(
                "SHARE_SESSION_NOT_FOUND", f"Share session for member {member_id} not found."
            )
        if epoch != session.epoch:
            raise SessionError(
                "INVALID_SHARE_SESSION_EPOCH",
                f"Share session epoch {epoch} is not the expected {session.epoch}.",
            )
        session.epoch = next_epoch(session.epoch)
        session.used = time.monotonic()
        session.connection = CONNECTION.get()
        return session

    def check(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """For ShareAcknowledge: the same checks and epoch step as a fetch."""
        return self.advance(group_id, member_id, epoch)

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)

    def drop_member(self, group_id: str, member_id: str) -> None:
        self._sessions.pop((group_id, member_id), None)

    def drop_connection(self, connection: int) -> list[ShareSession]:
        """Forget the sessions last used on a closed connection (as Kafka's broker
        does); the caller releases their records."""
        gone = [k for k, s in self._sessions.items() if s.connection == connection]
        return [self._sessions.pop(k) for k in gone]

    def _evict(self) -> None:
        now = time.monotonic()
        for key, s in list(self._sessions.items()):
            if now - s.used > IDLE_EVICT_S:
                del self._sessions[key]
