"""ListTransactions (key 66), v0-v2: every transactional id with its producer id and
state (`kafka-transactions list`), filtered by state, producer id, duration (v1+,
transactions running longer than it) and an id pattern (v2+, matched whole with RE2 in
linear time, so a client's pattern cannot stall the sidecar; Kafka uses Java's regex).
Unknown state names come back in unknown_state_filters. Authorization as Kafka's: ids
one may not DESCRIBE are left out."""

from __future__ import annotations

import time
from typing import Any

from sidecar.broker import Broker
from sidecar.groups.topic_regex import regex_error, regex_matches
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 2

STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    states_wanted = set(body.state_filters)
    pids_wanted = set(body.producer_id_filters)
    duration = getattr(body, "duration_filter", -1)
    pattern_text = getattr(body, "transactional_id_pattern", None)
    if pattern_text and regex_error(pattern_text) is not None:
        data: dict[str, Any] = {
            "throttle_time": 0,
            "error_code": errors.INVALID_REQUEST,
            "unknown_state_filters": [],
            "transaction_states": [],
        }
        return encode_response(API_KEY, version, data)
    now = int(time.time() * 1000)
    listed = []
    for state in await broker.transactions.txns.all_states():
        if states_wanted and state.state not in states_wanted:
            continue
        if pids_wanted and state.producer_id not in pids_wanted:
            continue
        running = state.state in ("Ongoing", "PrepareCommit", "PrepareAbort")
        if duration >= 0 and (not running or now - state.start_ms <= duration):
            continue
        if pattern_text and not regex_matches(pattern_text, state.transactional_id):
            continue
        if not checks.allowed(
            broker, request, Operation.DESCRIBE, checks.TRANSACTIONAL_ID, state.transactional_id
        ):
            continue
        listed.append(
            {
                "transactional_id": state.transactional_id,
                "producer_id": state.producer_id,
                "transaction_state": state.state,
            }
        )
    data = {
        "throttle_time": 0,
        "error_code": errors.NONE,
        "unknown_state_filters": sorted(states_wanted - set(STATES)),
        "transaction_states": listed,
    }
    return encode_response(API_KEY, version, data)
