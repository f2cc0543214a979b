"""What AddRaftVoter and RemoveRaftVoter share (`kafka-metadata-quorum add-controller`
/ `remove-controller`, KIP-853). Skiff's quorum is its live sidecars and changes as
they come and go, never by request: it answers as a Kafka quorum of static voters
(kraft.version 0, which Skiff's ApiVersions implies by not listing the feature). In
Kafka 4.4's order: CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster;
INCONSISTENT_CLUSTER_ID for another cluster's id; INVALID_REQUEST for a voter without a
directory id; else UNSUPPORTED_VERSION, saying why."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

INCONSISTENT_CLUSTER_ID = errors.code("INCONSISTENT_CLUSTER_ID")


def refusal(broker: Broker, request: Any, verb: str) -> tuple[int, str]:
    """(error code, message) for a request to `verb` ("add" or "remove") a voter."""
    body = request.body
    if not checks.cluster_allowed(broker, request, Operation.ALTER):
        return checks.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    if body.cluster_id is not None and body.cluster_id != broker.cluster_id:
        return (
            INCONSISTENT_CLUSTER_ID,
            f'The given id "{body.cluster_id}" doesn\'t match the cluster id "{broker.cluster_id}"',
        )
    if body.voter_id < 0 or body.voter_directory_id is None:  # kio: the zero uuid is None
        return (
            errors.INVALID_REQUEST,
            f"{verb.capitalize()} voter request didn't include a valid voter",
        )
    return (
        errors.UNSUPPORTED_VERSION,
        f"Cluster doesn't support {verb.removesuffix('e')}ing voter because the kraft.version "
        "feature is 0",
    )


def answer(api_key: int, request: Any, code: int, message: str) -> bytes:
    data = {"throttle_time": 0, "error_code": code, "error_message": message}
    return encode_response(api_key, request.header.api_version, data)
