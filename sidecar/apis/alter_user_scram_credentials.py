"""AlterUserScramCredentials (key 51), v0: add, replace or delete users' SCRAM
credentials in Redis (storage/scram_store.py), where every sidecar's next
authentication reads them. The client salts the password (SaltedPassword); Skiff keeps
RFC 5802's stored and server keys, never the password. Kafka's checks
(ScramControlManager): ALTER on the cluster or CLUSTER_AUTHORIZATION_FAILED for every
user; a user's credential of one mechanism altered twice in one request:
DUPLICATE_RESOURCE; an unknown mechanism:
UNSUPPORTED_SASL_MECHANISM; an empty user name or iterations outside 4096..16384:
UNACCEPTABLE_CREDENTIAL; deleting a credential that does not exist:
RESOURCE_NOT_FOUND. The accepted changes are written together."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from sidecar.storage.scram_store import (
    BY_CODE,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramStore,
)

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0

UNACCEPTABLE_CREDENTIAL = errors.code("UNACCEPTABLE_CREDENTIAL")


def _check(entry: Any, counts: Counter[tuple[str, int]]) -> tuple[int, str] | None:
    name, mechanism_code = entry.name, entry.mechanism
    if counts[name, mechanism_code] > 1:
        return (
            errors.code("DUPLICATE_RESOURCE"),
            "A user credential cannot be altered twice in the same request",
        )
    if not name:
        return UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism_code not in BY_CODE:
        return errors.code("UNSUPPORTED_SASL_MECHANISM"), "Unknown SCRAM mechanism"
    return None


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    entries = [*body.deletions, *body.upsertions]
    results: list[dict[str, Any]] = []
    if not broker.authorizer.authorize(
        request.security, Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        code = errors.code("CLUSTER_AUTHORIZATION_FAILED")
        for name in dict.fromkeys(e.name for e in entries):
            results.append({"user": name, "error_code": code, "error_message": None})
        return encode_response(API_KEY, version, {"throttle_time": 0, "results": results})
    counts = Counter((e.name, e.mechanism) for e in entries)
    store = ScramStore(broker.store.redis)
    deletes: list[tuple[str, str]] = []
    upserts: list[tuple[str, str, ScramCredential]] = []
    for deletion in body.deletions:
        failure = _check(deletion, counts)
        if failure is None:
            mechanism = BY_CODE[deletion.mechanism]
            if await store.get(mechanism, deletion.name) is None:
                failure = (
                    errors.code("RESOURCE_NOT_FOUND"),
                    "Attempt to delete a user credential that does not exist",
                )
            else:
                deletes.append((mechanism, deletion.name))
        results.append(_result(deletion.name, failure))
    for upsertion in body.upsertions:
        failure = _check(upsertion, counts)
        if failure is None:
            if upsertion.iterations < MIN_ITERATIONS:
                failure = UNACCEPTABLE_CREDENTIAL, "Too few iterations"
            elif upsertion.iterations > MAX_ITERATIONS:
                failure = UNACCEPTABLE_CREDENTIAL, "Too many iterations"
            elif not upsertion.salt or not upsertion.salted_password:
                failure = UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
            else:
                mechanism = BY_CODE[upsertion.mechanism]
                credential = ScramCredential.from_salted_password(
                    mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
                )
                upserts.append((mechanism, upsertion.name, credential))
        results.append(_result(upsertion.name, failure))
    if deletes or upserts:
        await store.alter(upserts, deletes)
    return encode_response(API_KEY, version, {"throttle_time": 0, "results": results})


def _result(user: str, failure: tuple[int, str] | None) -> dict[str, Any]:
    code, message = failure if failure is not None else (errors.NONE, None)
    return {"user": user, "error_code": code, "error_message": message}
