"""Talking to one broker (a `Side`): requests on fresh connections, topic and record
helpers the scenarios share, and the scenario registry (`add`, `SCENARIOS`)."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from typing import Any

from rawkafka import (
    ConnectionClosed,
    ProtocolError,
    RawKafka,
    Rec,
    build_batch,
    fetch_request,
    metadata_request,
    produce_request,
)

from .compare import to_plain
from .constants import BASE_TS, CREATE_TOPICS, FETCH, METADATA, PRODUCE, REQUEST_TIMEOUT, RUN

# -- talking to a broker ----------------------------------------------------------------------


@dataclasses.dataclass
class Side:
    """One broker under test, with the fixtures (shared topics) made on it so far."""

    name: str
    port: int
    fixtures: dict[str, Any] = dataclasses.field(default_factory=dict)

    def connect(self) -> RawKafka:
        return RawKafka("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT, client_id="kafka-ref")

    def fixture(self, key: str, make: Callable[[Side], Any]) -> Any:
        if key not in self.fixtures:
            self.fixtures[key] = make(self)
        return self.fixtures[key]


def receive(client: RawKafka, api_key: int, version: int, correlation_id: int) -> Any:
    """The next answer as plain data, or a string saying that none came."""
    try:
        frame = client.recv_raw()
    except ConnectionClosed:
        return "connection closed, no answer"
    except TimeoutError:
        return f"no answer within {REQUEST_TIMEOUT:.0f}s"
    try:
        decoded = client.decode_response(api_key, version, frame)
    except ProtocolError as exc:
        return f"undecodable answer: {str(exc)[:300]}"
    if client.last_correlation_id != correlation_id:
        return f"answer with correlation id {client.last_correlation_id}, sent {correlation_id}"
    return to_plain(decoded)


def ask(side: Side, api_key: int, version: int, body: Any, decode_as: int | None = None) -> Any:
    """One request on a fresh connection; its answer as plain data (or why there is none)."""
    with side.connect() as client:
        cid = client.send(api_key, version, body)
        return receive(client, api_key, version if decode_as is None else decode_as, cid)


def ask_and_watch(
    side: Side, api_key: int, version: int, body: Any, decode_as: int | None = None
) -> dict[str, Any]:
    """The answer, and whether the broker keeps the connection open afterwards."""
    with side.connect() as client:
        cid = client.send(api_key, version, body)
        answer = receive(client, api_key, version if decode_as is None else decode_as, cid)
        state = "closed" if client._eof or client.closed(timeout=0.5) else "open"
        return {"answer": answer, "connection_after": state}


def topic(label: str) -> str:
    return f"{RUN}-{label}"


def error_of(answer: Any) -> int | None:
    return answer.get("error_code") if isinstance(answer, dict) else None


class SetupError(Exception):
    """A scenario could not prepare its topic or data."""


def api_versions_body(name: str = "kafka-reference", version: str = "1.0") -> dict[str, Any]:
    return {"client_software_name": name, "client_software_version": version}


def create_topics_body(
    name: str, partitions: int = 1, replication: int = 1, validate_only: bool = False
) -> dict[str, Any]:
    return {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": replication,
                "assignments": [],
                "configs": [],
            }
        ],
        "timeout": 30_000,
        "validate_only": validate_only,
    }


def metadata_topic(side: Side, name: str) -> dict[str, Any]:
    answer = ask(side, METADATA, 12, metadata_request([name], allow_auto_topic_creation=False))
    if not isinstance(answer, dict):
        raise SetupError(f"Metadata for {name}: {answer}")
    [entry] = answer["topics"]
    return dict(entry)


def wait_topic(side: Side, name: str, partitions: int, timeout: float = 20.0) -> dict[str, Any]:
    """Until Metadata shows `name` with all its partitions led; its Metadata v12 entry."""
    deadline = time.monotonic() + timeout
    while True:
        entry = metadata_topic(side, name)
        parts = entry["partitions"]
        if (
            entry["error_code"] == 0
            and len(parts) == partitions
            and all(p["error_code"] == 0 and p["leader_id"] >= 0 for p in parts)
        ):
            return entry
        if time.monotonic() > deadline:
            raise SetupError(f"topic {name} not ready after {timeout:.0f}s: {entry}")
        time.sleep(0.1)


def wait_gone(side: Side, name: str, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if metadata_topic(side, name)["error_code"] == 3:  # UNKNOWN_TOPIC_OR_PARTITION
            return True
        time.sleep(0.1)
    return False


def make_topic(side: Side, name: str, partitions: int = 1) -> uuid.UUID:
    """Create a topic and wait until it is usable; its id."""
    answer = ask(side, CREATE_TOPICS, 7, create_topics_body(name, partitions))
    if not isinstance(answer, dict) or answer["topics"][0]["error_code"] not in (0, 36):
        raise SetupError(f"CreateTopics {name}: {answer}")
    return uuid.UUID(wait_topic(side, name, partitions)["topic_id"])


def produce_ok(side: Side, name: str, batch: bytes, partition: int = 0) -> int:
    """Produce one batch (retrying leadership hiccups for a few seconds); its base offset."""
    deadline = time.monotonic() + 10
    while True:
        answer = ask(side, PRODUCE, 9, produce_request(name, {partition: batch}))
        if not isinstance(answer, dict):
            raise SetupError(f"Produce to {name}: {answer}")
        part = answer["responses"][0]["partition_responses"][0]
        if part["error_code"] == 0:
            return int(part["base_offset"])
        if part["error_code"] not in (3, 5, 6) or time.monotonic() > deadline:
            raise SetupError(f"Produce to {name}: {part}")
        time.sleep(0.2)


def stored(side: Side, name: str) -> Any:
    """What partition 0 of `name` holds, read back with Fetch v11."""
    answer = ask(side, FETCH, 11, fetch_request(name, {0: 0}))
    if not isinstance(answer, dict):
        return answer
    part = answer["responses"][0]["partitions"][0]
    return {k: part[k] for k in ("error_code", "high_watermark", "log_start_offset", "records")}


def records(n: int, first_ts: int = BASE_TS, prefix: str = "r") -> bytes:
    return build_batch([f"{prefix}{i}".encode() for i in range(n)], base_timestamp=first_ts)


def small_batch() -> bytes:
    return build_batch(
        [Rec(b"hello", key=b"k1", headers=(("h", b"1"),)), Rec(b"world"), Rec(None, key=b"k3")],
        base_timestamp=BASE_TS,
    )


@dataclasses.dataclass(frozen=True)
class DataTopic:
    name: str
    topic_id: uuid.UUID


def data_topic(side: Side) -> DataTopic:
    """Shared by the Fetch and ListOffsets scenarios: a 5-record batch (offsets 0-4,
    timestamps BASE_TS+0..4) then a 3-record batch (offsets 5-7, BASE_TS+5..7)."""
    name = topic("data")
    topic_id = make_topic(side, name)
    produce_ok(side, name, records(5, BASE_TS, "a"))
    produce_ok(side, name, records(3, BASE_TS + 5, "b"))
    return DataTopic(name, topic_id)


# -- scenarios ------------------------------------------------------------------------------


@dataclasses.dataclass
class Scenario:
    name: str
    run: Callable[[Side], Any]
    note: str = ""


SCENARIOS: list[Scenario] = []


def add(name: str, run: Callable[[Side], Any], note: str = "") -> None:
    SCENARIOS.append(Scenario(name, run, note))
