"""`request_percentage` quotas (KIP-124): a client id whose requests use more of the
sidecar's event loop than its quota allows gets throttle_time_ms in its responses (at
most one quota window, 1 s, as Kafka's ClientRequestQuotaManager) and its connection
is muted for that long, while a client id without a quota is never throttled. Checked
on a response with throttle_time_ms first (Metadata, Fetch) and last (Produce)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import RedisServer, Skiff, start_redis, start_skiff, stop_process
from log_helpers import create, produce
from rawkafka import RawKafka, Rec, build_batch, fetch_request, fetched_records, produce_request

PRODUCE, FETCH, METADATA, ALTER_CLIENT_QUOTAS = 0, 1, 3, 49
WINDOW_MS = 1000


@pytest.fixture(scope="module")
def skiff_own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Skiff]:
    """A Skiff on its own Redis: quotas set here reach no other test."""
    tmp: Path = tmp_path_factory.mktemp("request-quota")
    redis: RedisServer = start_redis(tmp / "redis")
    server = start_skiff(tmp / "skiff.log", "--redis-url", redis.url)
    yield server
    stop_process(server.proc)
    stop_process(redis.proc)


def _set_quota(kafka: RawKafka, client_id: str, percent: float) -> None:
    body = {
        "entries": [
            {
                "entity": [{"entity_type": "client-id", "entity_name": client_id}],
                "ops": [{"key": "request_percentage", "value": percent, "remove": False}],
            }
        ],
        "validate_only": False,
    }
    r = kafka.request(ALTER_CLIENT_QUOTAS, 1, body)
    assert [(e.error_code, e.error_message) for e in r.entries] == [(0, None)]


def _metadata_throttles(kafka: RawKafka, topic: str, n: int) -> list[int]:
    body = {
        "topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    return [_ms(kafka.request(METADATA, 12, body).throttle_time) for _ in range(n)]


def _ms(throttle: timedelta) -> int:
    return int(throttle.total_seconds() * 1000)


def test_a_client_over_its_request_quota_is_throttled(skiff_own: Skiff) -> None:
    tag = uuid.uuid4().hex[:8]
    slow_id, fast_id, topic = f"slow-{tag}", f"fast-{tag}", f"rq-{tag}"
    with RawKafka("127.0.0.1", skiff_own.port, client_id=slow_id) as slow:
        create(slow, topic)
        # 0.0001% of a second per second: 1 us of event-loop time, which any request
        # exceeds many times over, so every answer carries the cap, one quota window.
        _set_quota(slow, slow_id, 0.0001)
        throttles = _metadata_throttles(slow, topic, 3)
        assert throttles[-1] == WINDOW_MS, throttles
        assert max(throttles) == WINDOW_MS, throttles
        # Muted: the next request is not read until the throttle time has passed.
        started = time.monotonic()
        assert _metadata_throttles(slow, topic, 1) == [WINDOW_MS]
        assert time.monotonic() - started >= WINDOW_MS / 1000 * 0.9
        # Produce carries throttle_time_ms last, Fetch first; the data is unaffected.
        p = produce(slow, topic, build_batch([Rec(value=b"v", key=b"k")]))
        assert p.error_code == 0 and p.base_offset == 0
        batch = build_batch([Rec(value=b"w", key=b"k")])
        answer = slow.request(PRODUCE, 9, produce_request(topic, {0: batch}))
        assert answer.responses[0].partition_responses[0].base_offset == 1
        assert _ms(answer.throttle_time) == WINDOW_MS
        answer = slow.request(FETCH, 12, fetch_request(topic, {0: 0}))
        assert _ms(answer.throttle_time) == WINDOW_MS
        assert [r.value for r in fetched_records(answer.responses[0].partitions[0].records)] == [
            b"v",
            b"w",
        ]
    with RawKafka("127.0.0.1", skiff_own.port, client_id=fast_id) as fast:
        assert _metadata_throttles(fast, topic, 6) == [0] * 6
