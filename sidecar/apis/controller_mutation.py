"""The controller mutation quota (KIP-599) of CreateTopics, DeleteTopics and
CreatePartitions: each counts the partitions it would create or delete against the
client's `controller_mutation_rate` (quotas.MutationQuota) after its other checks, as
Kafka's ReplicationControlManager does per topic. From the versions Kafka makes strict,
a topic asked for while the client is over quota gets THROTTLING_QUOTA_EXCEEDED (the
Java AdminClient retries it after the throttle time); older versions are always served
and only throttled. The answer carries the throttle time and the connection is muted
for it, as Kafka's ControllerApis does."""

from __future__ import annotations

from typing import Any

from sidecar import connection_context
from sidecar.broker import Broker
from sidecar.config.admin import AdminError
from sidecar.protocol import errors
from sidecar.quotas import MutationQuota

THROTTLING_QUOTA_EXCEEDED = errors.code("THROTTLING_QUOTA_EXCEEDED")
# The first version each API's quota is strict in (ControllerApis' strictSinceVersion).
STRICT_SINCE = {19: 6, 20: 5, 37: 3}


def quota_for(broker: Broker, request: Any, api_key: int) -> MutationQuota | None:
    """This request's quota; None: the client has none."""
    strict = request.header.api_version >= STRICT_SINCE[api_key]
    principal = request.security.principal.name
    return broker.quotas.mutation_quota(principal, request.header.client_id or "", strict)


def record(quota: MutationQuota | None, partitions: int) -> None:
    """Count a topic's `partitions`; AdminError THROTTLING_QUOTA_EXCEEDED if refused
    (without a message: Kafka's ApiError.fromThrowable drops the error's default one)."""
    if quota is not None and not quota.record(partitions):
        raise AdminError(THROTTLING_QUOTA_EXCEEDED, None)


def throttle_ms(quota: MutationQuota | None) -> int:
    """The answer's throttle time; the connection reads nothing more until it passes."""
    if quota is None:
        return 0
    ms = quota.throttle_time_ms()
    connection_context.mute(ms)
    return ms
