"""CreateTopics (key 19), v2-v7: names, partition counts, manual assignments and topic
configs, checked in Kafka 3.9's order with its codes and messages (checked with
tools/kafka_reference/): too many partitions in the request, duplicate names, illegal
names, names colliding with an existing topic ('.' versus '_'), existing topics, configs,
then assignments, replication factor and partition count. v5+ answers list every
config of the new topic. Replication factor -1 or 1: Redis holds the one copy.
Authorization as Kafka's controller: CREATE on the cluster or on the topic (else
TOPIC_AUTHORIZATION_FAILED, after the duplicate-name check); the new topic's configs
only with DESCRIBE_CONFIGS on it (else topic_config_error_code says why)."""

from __future__ import annotations

import uuid
from typing import Any

from sidecar.apis import controller_mutation
from sidecar.apis.replica_assignment import (
    INVALID_REPLICA_ASSIGNMENT,
    check_replicas,
    one_copy_message,
)
from sidecar.broker import Broker
from sidecar.config import storage_format
from sidecar.config.admin import AdminError
from sidecar.config.topic import KEYS, SOURCE_DEFAULT, SOURCE_TOPIC, describe
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.quotas import MutationQuota
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage.topic_admin import topic_names
from sidecar.validation.topic_configs import ConfigError, validate
from sidecar.validation.topic_names import collision_key, invalid_name_reason

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7

MAX_PARTITIONS_PER_REQUEST = 10_000  # Kafka's controller: MAX_PARTITIONS_PER_BATCH
POLICY_VIOLATION = errors.code("POLICY_VIOLATION")


def _check_assignments(broker: Broker, topic: Any) -> int:
    """Manual assignments as Kafka's ReplicationControlManager checks them; the number
    of partitions they create."""
    if topic.replication_factor != -1:
        raise AdminError(
            errors.INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor was not "
            "set to -1.",
        )
    if topic.num_partitions != -1:
        raise AdminError(
            errors.INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        )
    live = {b.node_id for b in broker.cluster.brokers()}
    seen: set[int] = set()
    for a in topic.assignments:
        if a.partition_index in seen:
            raise AdminError(
                INVALID_REPLICA_ASSIGNMENT,
                f"Found multiple manual partition assignments for partition {a.partition_index}",
            )
        seen.add(a.partition_index)
        ids = list(a.broker_ids)
        check_replicas(ids, live)
        if len(ids) > 1:
            raise AdminError(errors.INVALID_REPLICATION_FACTOR, one_copy_message(len(ids)))
    if seen != set(range(len(seen))):
        raise AdminError(
            INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        )
    return len(seen)


def _partitions(broker: Broker, topic: Any) -> int:
    """The partition count of a topic without assignments (Kafka's checks and order)."""
    rf, partitions = topic.replication_factor, topic.num_partitions
    if rf < -1 or rf == 0:
        raise AdminError(
            errors.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if partitions < -1 or partitions == 0:
        raise AdminError(
            errors.INVALID_PARTITIONS,
            "Number of partitions was set to an invalid non-positive value.",
        )
    if rf > 1:
        live = len(broker.cluster.brokers())
        if rf > live:
            raise AdminError(
                errors.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {rf} time(s): The target replication "
                f"factor of {rf} cannot be reached because only {live} broker(s) are "
                "registered or some brokers have all their log directories cordoned.",
            )
        raise AdminError(errors.INVALID_REPLICATION_FACTOR, one_copy_message(rf))
    return broker.settings.num_partitions if partitions == -1 else partitions


async def _create(
    broker: Broker,
    topic: Any,
    validate_only: bool,
    existing: dict[str, set[str]],
    quota: MutationQuota | None,
) -> dict[str, Any]:
    name = topic.name
    result: dict[str, Any] = {
        "name": name,
        "topic_id": None,
        "error_message": None,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": [],
    }
    try:
        reason = invalid_name_reason(name)
        if reason:
            raise AdminError(errors.INVALID_TOPIC_EXCEPTION, reason)
        others = sorted(existing.get(collision_key(name), set()) - {name})
        if others:
            raise AdminError(
                errors.INVALID_TOPIC_EXCEPTION,
                f"Topic '{name}' collides with existing topic: {others[0]}",
            )
        if name in existing.get(collision_key(name), set()):
            raise AdminError(errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        try:
            configs = validate(
                ((c.name, c.value) for c in topic.configs),
                broker.store.topic_defaults,
                broker.remote is not None,
            )
        except ConfigError as exc:
            raise AdminError(errors.INVALID_CONFIG, str(exc)) from None
        if configs.get("remote.storage.enable", "").lower() == "true" and (
            storage_format.chosen(configs, broker.store.storage_format_default)
            != storage_format.BATCH
        ):
            raise AdminError(
                errors.INVALID_CONFIG,
                "remote.storage.enable=true needs skiff.storage.format=batch: tiered storage "
                "archives stored batches",
            )
        if topic.assignments:
            partitions = _check_assignments(broker, topic)
        else:
            partitions = _partitions(broker, topic)
        controller_mutation.record(quota, partitions)  # validate_only too, as Kafka
        if validate_only:
            info = None
            if await broker.store.get_topic(name, fresh=True):
                raise AdminError(errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        else:
            info = await broker.store.create_topic(name, partitions, configs)
            if info is None:  # created meanwhile by another client
                raise AdminError(errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    except AdminError as exc:
        return {**result, "error_code": exc.code, "error_message": exc.message}
    return {
        **result,
        "error_code": errors.NONE,
        # validate_only: Kafka answers with a fresh id it does not keep.
        "topic_id": info.topic_id if info else uuid.uuid4(),
        "num_partitions": partitions,
        "replication_factor": 1,
        "configs": _configs(broker, configs, info),
    }


def _source(broker: Broker, entry: Any) -> int:
    """A config's source: the topic's, else its first broker synonym's (the dynamic broker
    configs, the flag, Kafka's default), as a topic's DescribeConfigs entry has it."""
    key = KEYS.get(entry.name)
    if entry.source == SOURCE_TOPIC or key is None:
        return int(entry.source)
    chain = broker.dynamic.topic_synonyms(key)
    return int(chain[0]["source"]) if chain else SOURCE_DEFAULT


def _configs(broker: Broker, configs: dict[str, str], info: Any) -> list[dict[str, Any]]:
    """The new topic's configs sorted by name, skiff.storage.format among them."""
    out = [
        {
            "name": e.name,
            "value": e.value,
            "read_only": e.read_only,
            "config_source": _source(broker, e),
            "is_sensitive": e.sensitive,
        }
        for e in describe(configs, broker.store.topic_defaults)
    ]
    explicit = storage_format.CONFIG in configs
    if info is not None:
        fmt = info.storage_format
    else:  # validate_only: the format it would have
        fmt = storage_format.chosen(configs, broker.store.storage_format_default)
    entry = storage_format.config_entry(fmt, explicit, False, False)
    out.append(
        {k: entry[k] for k in ("name", "value", "read_only", "config_source", "is_sensitive")}
    )
    return sorted(out, key=lambda e: e["name"])


def _refused(topic: Any, code: int, message: str) -> dict[str, Any]:
    return {
        "name": topic.name,
        "topic_id": None,
        "error_code": code,
        "error_message": message,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": [],
    }


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    topics = body.topics
    asked = sum(len(t.assignments) or max(t.num_partitions, 0) for t in topics)
    results = []
    quota = None
    if asked > MAX_PARTITIONS_PER_REQUEST:
        message = "Excessively large number of partitions per request."
        results = [_refused(t, POLICY_VIOLATION, message) for t in topics]
    else:
        existing: dict[str, set[str]] = {}
        for name in await topic_names(broker.store):
            existing.setdefault(collision_key(name), set()).add(name)
        names = [t.name for t in topics]
        may_create = checks.cluster_allowed(broker, request, Operation.CREATE)
        creatable = (
            set(names)
            if may_create
            else checks.allowed_topics(broker, request, Operation.CREATE, names)
        )
        done: set[str] = set()
        quota = controller_mutation.quota_for(broker, request, API_KEY)
        for t in topics:
            if t.name in done:
                continue  # Kafka answers a duplicated name once
            done.add(t.name)
            if names.count(t.name) > 1:
                results.append(_refused(t, errors.INVALID_REQUEST, "Duplicate topic name."))
            elif t.name not in creatable:
                denied = checks.TOPIC_AUTHORIZATION_FAILED
                results.append(_refused(t, denied, "Authorization failed."))
            else:
                result = await _create(broker, t, body.validate_only, existing, quota)
                if result["error_code"] == errors.NONE and not checks.topic_allowed(
                    broker, request, Operation.DESCRIBE_CONFIGS, t.name
                ):
                    result["configs"] = []
                    result["topic_config_error_code"] = checks.TOPIC_AUTHORIZATION_FAILED
                results.append(result)
    throttle = controller_mutation.throttle_ms(quota)
    return encode_response(
        API_KEY, request.header.api_version, {"throttle_time": throttle, "topics": results}
    )
