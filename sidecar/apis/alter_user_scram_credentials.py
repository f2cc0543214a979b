"""AlterUserScramCredentials (key 51), v0: add, replace or delete users' SCRAM
credentials in Redis (storage/scram_store.py), where every sidecar's next
authentication reads them. The client salts the password (SaltedPassword); Skiff keeps
RFC 5802's stored and server keys, never the password. Kafka's checks
(ScramControlManager): ALTER on the cluster or CLUSTER_AUTHORIZATION_FAILED for every
user; a user altered twice in one request (even for two mechanisms):
DUPLICATE_RESOURCE; an unknown mechanism:
UNSUPPORTED_SASL_MECHANISM; an empty user name or iterations outside 4096..16384:
UNACCEPTABLE_CREDENTIAL; deleting a credential that does not exist:
RESOURCE_NOT_FOUND. The accepted changes are written together."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.java_order import hash_map_order
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


DUPLICATE = (
    errors.code("DUPLICATE_RESOURCE"),
    "A user credential cannot be altered twice in the same request",
)


def _check(name: str, mechanism_code: int) -> tuple[int, str | None] | None:
    # ScramControlManager.validateScramUsernameAndMechanism
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
    # Kafka's ScramControlManager.alterCredentials: at most one change per *user* in a
    # request (two mechanisms of one user are DUPLICATE_RESOURCE too); one result per
    # user: the deletions, the upsertions, then the refusals, each in its HashMap's order.
    store = ScramStore(broker.store.redis)
    refused: dict[str, tuple[int, str | None]] = {}
    deletes: dict[str, str] = {}  # user -> mechanism
    upserts: dict[str, tuple[str, ScramCredential]] = {}
    for deletion in body.deletions:
        name = deletion.name
        if name in refused:
            continue
        if deletes.pop(name, None) is not None:
            refused[name] = DUPLICATE
            continue
        failure = _check(name, deletion.mechanism)
        if failure is None and await store.get(BY_CODE[deletion.mechanism], name) is None:
            failure = (
                errors.code("RESOURCE_NOT_FOUND"),
                "Attempt to delete a user credential that does not exist",
            )
        if failure is None:
            deletes[name] = BY_CODE[deletion.mechanism]
        else:
            refused[name] = failure
    for upsertion in body.upsertions:
        name = upsertion.name
        if name in refused:
            continue
        if deletes.pop(name, None) is not None or upserts.pop(name, None) is not None:
            refused[name] = DUPLICATE
            continue
        failure = _check(name, upsertion.mechanism)
        if failure is None:
            if upsertion.iterations < MIN_ITERATIONS:
                failure = UNACCEPTABLE_CREDENTIAL, "Too few iterations"
            elif upsertion.iterations > MAX_ITERATIONS:
                failure = UNACCEPTABLE_CREDENTIAL, "Too many iterations"
            elif not upsertion.salted_password:
                # Kafka's HMAC refuses an empty key: an unexpected error, no message
                failure = errors.code("UNKNOWN_SERVER_ERROR"), None
        if failure is not None:
            refused[name] = failure
            continue
        mechanism = BY_CODE[upsertion.mechanism]
        credential = ScramCredential.from_salted_password(
            mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
        )
        upserts[name] = (mechanism, credential)
    if deletes or upserts:
        await store.alter(
            [(m, user, c) for user, (m, c) in upserts.items()],
            [(m, user) for user, m in deletes.items()],
        )
    results += [_result(user, None) for user in hash_map_order(deletes)]
    results += [_result(user, None) for user in hash_map_order(upserts)]
    results += [_result(user, refused[user]) for user in hash_map_order(refused)]
    return encode_response(API_KEY, version, {"throttle_time": 0, "results": results})


def _result(user: str, failure: tuple[int, str | None] | None) -> dict[str, Any]:
    code, message = failure if failure is not None else (errors.NONE, None)
    return {"user": user, "error_code": code, "error_message": message}
