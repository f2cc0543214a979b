"""RemoveRaftVoter (key 81), v0: refused as by a Kafka quorum of static voters
(raft_voters.py)."""

from __future__ import annotations

from typing import Any

from sidecar.apis import raft_voters
from sidecar.broker import Broker

API_KEY = 81
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(broker: Broker, request: Any) -> bytes:
    return raft_voters.answer(API_KEY, request, *raft_voters.refusal(broker, request, "remove"))
