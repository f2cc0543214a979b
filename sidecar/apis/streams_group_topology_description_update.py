"""StreamsGroupTopologyDescriptionUpdate (key 93), v0 (KIP-1331): a streams group member
pushes its topology description. Kafka 4.4 hands descriptions to a
StreamsGroupTopologyDescriptionPlugin (group.streams.topology.description.plugin.class)
and ships none: without one, which is its default, every authorized request is
UNSUPPORTED_VERSION "The broker has no streams group topology description plugin
configured.", heartbeats never set TopologyDescriptionRequired and describe v1 stores
nothing. Skiff has no such plugin and answers as that default does, so nothing a client
sends here is kept. Needs READ on the group (else GROUP_AUTHORIZATION_FAILED), checked
first, as in Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 93
MIN_VERSION = 0
MAX_VERSION = 0

NO_PLUGIN = "The broker has no streams group topology description plugin configured."


async def handle(broker: Broker, request: Any) -> bytes:
    if not checks.group_allowed(broker, request, Operation.READ, request.body.group_id):
        # Kafka sends Errors.GROUP_AUTHORIZATION_FAILED.exception(): its generic
        # message, which ApiError drops.
        code, message = "GROUP_AUTHORIZATION_FAILED", None
    else:
        code, message = "UNSUPPORTED_VERSION", NO_PLUGIN
    data = {"throttle_time": 0, "error_code": errors.code(code), "error_message": message}
    return encode_response(API_KEY, request.header.api_version, data)
