"""UpdateFeatures (key 57), v0-v2: `kafka-features upgrade | downgrade` and
AdminClient.updateFeatures change finalized feature levels (storage/features.py), with
Kafka's controller checks (FeatureControlManager.updateFeature) and messages: a feature
Skiff does not support, a level outside its range or below 0, a downgrade without a
downgrade type or an upgrade with one, an unknown upgrade type are INVALID_UPDATE_VERSION
and nothing changes (the first failure fails the request). As on Kafka 4.x, v0's
allow_downgrade is ignored (v0 only upgrades). validate_only checks without changing.
Needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED). v0-v1 answer a result
per feature on success; v2 only the top-level error."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage.features import SUPPORTED

API_KEY = 57
MIN_VERSION = 0
MAX_VERSION = 2

INVALID_UPDATE_VERSION = errors.code("INVALID_UPDATE_VERSION")
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def _reason(name: str, level: int, upgrade_type: int, current: int) -> str | None:
    """Why Kafka's controller would refuse the update, or None."""
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return "The controller does not support the given upgrade type."
    if level < 0:
        return "A feature version cannot be less than 0."
    lo, hi = SUPPORTED.get(name, (0, 0))
    if not lo <= level <= hi:
        if hi == 0:
            return "Local controller 0 does not support this feature."
        return f"Local controller 0 only supports versions [{lo}-{hi}]"
    if level < current and upgrade_type == UPGRADE:
        return (
            "Can't downgrade the version of this feature without setting the upgrade type "
            "to either safe or unsafe downgrade."
        )
    if level > current and upgrade_type != UPGRADE:
        return "Can't downgrade to a newer version."
    return None


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    updates = body.feature_updates
    code, message = errors.NONE, None
    if not checks.cluster_allowed(broker, request, Operation.ALTER):
        code = checks.CLUSTER_AUTHORIZATION_FAILED
    else:
        current, _ = await broker.features.finalized()
        wanted: dict[str, int] = {}
        for update in updates:
            # Kafka's controller reads the upgrade type field, whose default v0 keeps:
            # v0's allow_downgrade never reaches it, so v0 can only upgrade.
            upgrade_type = getattr(update, "upgrade_type", UPGRADE)
            level = update.max_version_level
            why = _reason(update.feature, level, upgrade_type, current.get(update.feature, 0))
            if why is not None:
                code = INVALID_UPDATE_VERSION
                message = (
                    "The update failed for all features since the following feature had an "
                    f"error: Invalid update version {level} for feature {update.feature}. {why}"
                )
                break
            wanted[update.feature] = level
        if code == errors.NONE and wanted and not getattr(body, "validate_only", False):
            await broker.features.update(wanted)
    data: dict[str, Any] = {"throttle_time": 0, "error_code": code, "error_message": message}
    if version < 2:
        data["results"] = (
            [{"feature": u.feature, "error_code": 0, "error_message": "NONE"} for u in updates]
            if code == errors.NONE
            else []
        )
    return encode_response(API_KEY, version, data)
