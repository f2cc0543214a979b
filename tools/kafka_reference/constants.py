"""API keys and the values every scenario shares (this run's topic prefix, record timestamps)."""

from __future__ import annotations

import uuid
from pathlib import Path

from kio.schema.errors import ErrorCode

ROOT = Path(__file__).resolve().parents[2]  # the repository

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS, INIT_PRODUCER_ID = 18, 19, 20, 22
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT = 8, 9, 10, 11, 12
LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 13, 14, 15, 16
DELETE_GROUPS, OFFSET_DELETE = 42, 47

REQUEST_TIMEOUT = 15.0
BASE_TS = 1_600_000_000_000  # record timestamps are fixed so that both brokers store the same
ZERO_UUID = uuid.UUID(int=0)
RUN = f"kr{uuid.uuid4().hex[:6]}"  # every topic of this run is named RUN-label, shown as ~label
RETRIABLE_COORDINATOR = (14, 15, 16)  # COORDINATOR_LOAD_IN_PROGRESS, ..._NOT_AVAILABLE, NOT_...

ERROR_NAMES = {int(e.value): e.name.upper() for e in ErrorCode}
