"""DeleteTopics (key 20), v0-v6: by name, or by topic id from v6; every key of every
partition is removed. kio has no v0 schema (Kafka 4 dropped v0, KIP-896; 3.9 still
serves it), so v0 is decoded and encoded here.
Authorization as Kafka's: DELETE on the topic, else TOPIC_AUTHORIZATION_FAILED (asked
before whether it exists); a topic named by id the principal may not DESCRIBE is
answered without its name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidecar.apis import controller_mutation
from sidecar.broker import Broker
from sidecar.config.admin import AdminError
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.protocol.primitives import Reader, array_len, pack_i16, string
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 20
MIN_VERSION = 0
MAX_VERSION = 6


@dataclass(frozen=True, slots=True)
class DeleteTopicsV0Request:
    topic_names: tuple[str, ...]
    timeout_ms: int


def decode_v0(buf: bytes, pos: int) -> DeleteTopicsV0Request:
    r = Reader(buf, pos)
    return DeleteTopicsV0Request(r.array(r.string), r.i32())


DECODERS = {0: decode_v0}


def encode_v0(results: list[dict[str, Any]]) -> bytes:
    """v0 answers [name, error_code] per topic, without throttle time or messages."""
    parts = [array_len(len(results), False)]
    for r in results:
        parts.append(string(r["name"], False) + pack_i16(r["error_code"]))
    return b"".join(parts)


def _denied(name: str | None, topic_id: Any) -> dict[str, Any]:
    return {
        "name": name,
        "topic_id": topic_id,
        "error_code": checks.TOPIC_AUTHORIZATION_FAILED,
        "error_message": "Authorization failed.",
    }


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    store = broker.store
    wanted: list[tuple[str | None, Any]] = []
    if version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    results = []
    quota = controller_mutation.quota_for(broker, request, API_KEY)
    for name, topic_id in wanted:
        if name is None and topic_id is not None:
            info = await store.topic_by_id(topic_id)
            if info is None:
                results.append(
                    {
                        "name": None,
                        "topic_id": topic_id,
                        "error_code": errors.UNKNOWN_TOPIC_ID,
                        "error_message": "This server does not host this topic ID.",
                    }
                )
                continue
            name = info.name
            if not checks.topic_allowed(broker, request, Operation.DESCRIBE, name):
                results.append(_denied(None, topic_id))
                continue
        if name is not None and not checks.topic_allowed(broker, request, Operation.DELETE, name):
            results.append(_denied(name, topic_id))
            continue
        info = await store.get_topic(name, fresh=True) if name else None
        if info is not None:
            try:
                controller_mutation.record(quota, info.partitions)
            except AdminError as exc:
                results.append(
                    {
                        "name": name,
                        "topic_id": info.topic_id,
                        "error_code": exc.code,
                        "error_message": exc.message,
                    }
                )
                continue
        archived: list[str] = []
        if info is not None and broker.remote is not None:
            archived = await broker.remote.topic_objects(info.name, info.partitions)
        ok = info is not None and await store.delete_topic(info.name)
        if ok and broker.remote is not None:
            broker.remote.delete_later(archived)
        results.append(
            {
                "name": name,
                "topic_id": info.topic_id if info else topic_id,
                "error_code": errors.NONE if ok else errors.UNKNOWN_TOPIC_OR_PARTITION,
                "error_message": None
                if ok
                else "This server does not host this topic-partition.",  # Kafka's words
            }
        )
    throttle = controller_mutation.throttle_ms(quota)
    if version == 0:
        return encode_v0(results)
    return encode_response(API_KEY, version, {"throttle_time": throttle, "responses": results})
