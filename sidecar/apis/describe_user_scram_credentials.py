"""DescribeUserScramCredentials (key 50), v0: each user's SCRAM mechanisms and
iterations (never a key or salt), from Redis (storage/scram_store.py). As Kafka:
DESCRIBE on the cluster or CLUSTER_AUTHORIZATION_FAILED; no users (null or empty):
every user with a credential; a user named twice: DUPLICATE_RESOURCE; a user without
one: RESOURCE_NOT_FOUND. Users in Kafka's (HashMap) order; a user's mechanisms by type
code (Kafka's order of them changes from one broker start to the next)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.java_order import hash_map_order
from sidecar.protocol.kio_codec import encode_response
from sidecar.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from sidecar.storage.scram_store import MECHANISMS, ScramCredential, ScramStore

API_KEY = 50
MIN_VERSION = 0
MAX_VERSION = 0

CLUSTER_AUTHORIZATION_FAILED = errors.code("CLUSTER_AUTHORIZATION_FAILED")


def _result(user: str, error: int = 0, message: str = "", **creds: Any) -> dict[str, Any]:
    return {"user": user, "error_code": error, "error_message": message, **creds}


def _infos(credentials: dict[str, ScramCredential]) -> list[dict[str, int]]:
    return [
        {"mechanism": MECHANISMS[m][1], "iterations": c.iterations}
        for m, c in sorted(credentials.items(), key=lambda mc: MECHANISMS[mc[0]][1])
    ]


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    users = [u.name for u in request.body.users or ()]
    # Kafka's answer says "" where nothing went wrong (ScramImage.describe)
    out: dict[str, Any] = {"throttle_time": 0, "error_code": 0, "error_message": ""}
    if not broker.authorizer.authorize(
        request.security, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        message = "Cluster authorization failed."
        out.update(error_code=CLUSTER_AUTHORIZATION_FAILED, error_message=message)
        out["results"] = [_result(u, CLUSTER_AUTHORIZATION_FAILED, message) for u in users]
        return encode_response(API_KEY, version, out)
    store = ScramStore(broker.store.redis)
    results: list[dict[str, Any]] = []
    # Kafka's ScramImage.describe answers in its HashMap's order of the user names
    if not users:
        everyone = await store.all()
        for user in hash_map_order(sorted(everyone)):
            results.append(_result(user, credential_infos=_infos(everyone[user])))
    else:
        counts = Counter(users)
        for user in hash_map_order(dict.fromkeys(users)):  # once each
            if counts[user] > 1:
                results.append(
                    _result(
                        user,
                        errors.code("DUPLICATE_RESOURCE"),
                        "Cannot describe SCRAM credentials for the same user twice in a single "
                        f"request: {user}",
                    )
                )
                continue
            credentials = await store.user(user)
            if not credentials:
                results.append(
                    _result(
                        user,
                        errors.code("RESOURCE_NOT_FOUND"),
                        f"Attempt to describe a user credential that does not exist: {user}",
                    )
                )
                continue
            results.append(_result(user, credential_infos=_infos(credentials)))
    out["results"] = results
    return encode_response(API_KEY, version, out)
