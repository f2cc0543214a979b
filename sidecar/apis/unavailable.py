"""Answers for requests that could not be served because Redis is unavailable
(resilience.RedisUnavailable): the request's own shape with retriable error codes, so
clients back off and retry by themselves instead of failing or hanging.

- Produce: REQUEST_TIMED_OUT per partition (the outcome may be unknown, as when Kafka's
  replication times out; an idempotent producer's retry is deduplicated); for a Redis
  that refuses writes (OOM, MISCONF, NOREPLICAS) the code resilience.produce_error
  names (KAFKA_STORAGE_ERROR, NOT_ENOUGH_REPLICAS), as store.append answers per
  partition.
- Fetch, ListOffsets: NOT_LEADER_OR_FOLLOWER per partition (every client refreshes
  metadata and retries; Metadata keeps answering from memory).
- Metadata: LEADER_NOT_AVAILABLE per topic not known from memory.
- CreateTopics, DeleteTopics, CreatePartitions: REQUEST_TIMED_OUT per topic, and
  AlterConfigs, IncrementalAlterConfigs: per resource (what a Kafka broker answers when
  its request forwarded to the controller times out).
- DeleteRecords: REQUEST_TIMED_OUT per partition (Kafka's answer when the deletion
  times out; the Java AdminClient retries it, and trimming again is harmless).
- DescribeConfigs: REQUEST_TIMED_OUT per topic resource; broker resources and invalid
  topic names are answered as usual (they need no Redis).
- DescribeLogDirs: the log dir with KAFKA_STORAGE_ERROR and no topics (Kafka's answer
  for an offline log dir).
- Group APIs, FindCoordinator, InitProducerId, the transaction APIs:
  COORDINATOR_NOT_AVAILABLE (per partition or transactional id where the answer has
  them); DescribeProducers and WriteTxnMarkers: NOT_LEADER_OR_FOLLOWER per partition.
- AlterClientQuotas: REQUEST_TIMED_OUT per entity (nothing stored).
- CreateAcls, DeleteAcls: REQUEST_TIMED_OUT per creation or filter (DescribeAcls answers
  from memory).
- ElectLeaders, AlterPartitionReassignments: REQUEST_TIMED_OUT, and per partition named;
  UpdateFeatures: REQUEST_TIMED_OUT (nothing changed).
- UnregisterBroker, UnregisterController: REQUEST_TIMED_OUT (nothing dropped).
- Create/Renew/Expire/DescribeDelegationToken: REQUEST_TIMED_OUT, after the checks that
  need no Redis (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, DELEGATION_TOKEN_AUTH_DISABLED).

APIs in NEEDS_NO_REDIS never get here. Any other API without an entry here gets its
connection closed (the client reconnects and retries), with a log line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sidecar.apis import (
    alter_partition_reassignments,
    alter_replica_log_dirs,
    api_versions,
    create_delegation_token,
    delete_groups,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_log_dirs,
    describe_transactions,
    fetch,
    produce,
    sasl_handshake,
    streams_group_heartbeat,
    unregister_broker,
    unregister_controller,
)
from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.framing import CloseConnection
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.security.delegation_tokens import requests_allowed
from sidecar.share import unavailable as share_unavailable
from sidecar.storage import resilience

REQUEST_TIMED_OUT = errors.code("REQUEST_TIMED_OUT")
NOT_LEADER = errors.code("NOT_LEADER_OR_FOLLOWER")
LEADER_NOT_AVAILABLE = errors.code("LEADER_NOT_AVAILABLE")
COORDINATOR_NOT_AVAILABLE = errors.code("COORDINATOR_NOT_AVAILABLE")
KAFKA_STORAGE_ERROR = errors.code("KAFKA_STORAGE_ERROR")
UNAVAILABLE = "Redis is unavailable"

# APIs answered from memory alone, so never with the errors here.
NEEDS_NO_REDIS = frozenset(
    {
        api_versions.API_KEY,
        describe_cluster.API_KEY,
        sasl_handshake.API_KEY,
        describe_client_quotas.API_KEY,
        describe_acls.API_KEY,
        46,  # ListPartitionReassignments: nothing ever moves
        55,  # DescribeQuorum: the live sidecars as last read
        80,  # AddRaftVoter, RemoveRaftVoter: refused alike
        81,
        71,  # GetTelemetrySubscriptions
        72,  # PushTelemetry
        93,  # StreamsGroupTopologyDescriptionUpdate: no plugin, refused alike
    }
)


def _produce(broker: Broker, request: Any, reason: str = "timeout") -> bytes | None:
    body = request.body
    if body.acks == 0:
        # Nobody reads an acks=0 answer: Kafka closes the connection on a failure.
        raise CloseConnection("acks=0 produce failed: Redis is unavailable")
    version = request.header.api_version
    work = [(produce.topic_key(version, t), len(t.partition_data)) for t in body.topic_data]
    code = errors.code(resilience.produce_error(reason))
    results = [
        produce.PartitionResult(p.index, code, message=f"Redis is unavailable ({reason})")
        for t in body.topic_data
        for p in t.partition_data
    ]
    return produce._encode(version, work, results)


def _fetch(broker: Broker, request: Any) -> list[Any]:
    version = request.header.api_version
    topics = []
    for t in request.body.topics:
        tf = fetch.TopicFetch(getattr(t, "topic", "") or "", getattr(t, "topic_id", None), None)
        tf.partitions = [
            fetch.PartitionFetch(p.partition, p.fetch_offset, 0, NOT_LEADER) for p in t.partitions
        ]
        topics.append(tf)
    return fetch._encode(version, topics, read_committed=request.body.isolation_level == 1)


def _list_offsets(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    if version == 0:
        from sidecar.protocol.primitives import array_len, pack_i16, pack_i32, string

        parts = [array_len(len(request.body.topics), False)]
        for t in request.body.topics:
            parts.append(string(t.name, False) + array_len(len(t.partitions), False))
            for p in t.partitions:
                parts.append(pack_i32(p.partition_index) + pack_i16(NOT_LEADER))
                parts.append(array_len(0, False))
        return b"".join(parts)
    topics = [
        {
            "name": t.name,
            "partitions": [
                {
                    "partition_index": p.partition_index,
                    "error_code": NOT_LEADER,
                    "timestamp": -1,
                    "offset": -1,
                    "leader_epoch": -1,
                }
                for p in t.partitions
            ],
        }
        for t in request.body.topics
    ]
    return encode_response(2, version, {"throttle_time": 0, "topics": topics})


def _metadata(broker: Broker, request: Any) -> bytes:
    brokers = broker.cluster.brokers(request.security.listener)
    topics = [
        {"error_code": LEADER_NOT_AVAILABLE, "name": t.name, "topic_id": None, "partitions": []}
        for t in request.body.topics or ()
    ]
    return encode_response(
        3,
        request.header.api_version,
        {
            "throttle_time": 0,
            "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port} for b in brokers],
            "cluster_id": broker.cluster_id,
            "controller_id": brokers[0].node_id,
            "topics": topics,
            "cluster_authorized_operations": -2147483648,
        },
    )


def _topic_ref(topic: Any) -> dict[str, Any]:
    """A request topic as its answer names it: by name, or by id (OffsetCommit and
    OffsetFetch v10, TxnOffsetCommit v6); the encoder keeps the field the version has."""
    return {"name": getattr(topic, "name", None), "topic_id": getattr(topic, "topic_id", None)}


def _offset_commit(broker: Broker, request: Any) -> bytes:
    topics = [
        {
            **_topic_ref(t),
            "partitions": [
                {"partition_index": p.partition_index, "error_code": COORDINATOR_NOT_AVAILABLE}
                for p in t.partitions
            ],
        }
        for t in request.body.topics
    ]
    return encode_response(8, request.header.api_version, {"throttle_time": 0, "topics": topics})


def _offset_fetch_group(group_id: str, topics: Any) -> dict[str, Any]:
    return {
        "group_id": group_id,
        "error_code": COORDINATOR_NOT_AVAILABLE,
        "topics": [
            {
                **_topic_ref(t),
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": -1,
                        "committed_leader_epoch": -1,
                        "metadata": "",
                        "error_code": COORDINATOR_NOT_AVAILABLE,
                    }
                    for p in t.partition_indexes
                ],
            }
            for t in topics or ()
        ],
    }


def _offset_fetch(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    if version >= 8:
        groups = [_offset_fetch_group(g.group_id, g.topics) for g in body.groups]
        return encode_response(9, version, {"throttle_time": 0, "groups": groups})
    answer = _offset_fetch_group(body.group_id, body.topics)
    return encode_response(
        9,
        version,
        {"throttle_time": 0, "topics": answer["topics"], "error_code": answer["error_code"]},
    )


def _find_coordinator(broker: Broker, request: Any) -> bytes:
    entry = {
        "error_code": COORDINATOR_NOT_AVAILABLE,
        "error_message": "Redis is unavailable",
        "node_id": -1,
        "host": "",
        "port": -1,
    }
    version = request.header.api_version
    if version >= 4:
        coordinators = [{"key": k, **entry} for k in request.body.coordinator_keys]
        return encode_response(10, version, {"throttle_time": 0, "coordinators": coordinators})
    return encode_response(10, version, {"throttle_time": 0, **entry})


def _top_level(api_key: int, **extra: Any) -> Callable[[Broker, Any], bytes]:
    def build(broker: Broker, request: Any) -> bytes:
        data = {"throttle_time": 0, "error_code": COORDINATOR_NOT_AVAILABLE, **extra}
        return encode_response(api_key, request.header.api_version, data)

    return build


def _add_partitions_to_txn(broker: Broker, request: Any) -> bytes:
    def results(topics: Any) -> list[dict[str, Any]]:
        return [
            {
                "name": t.name,
                "results_by_partition": [
                    {"partition_index": p, "partition_error_code": COORDINATOR_NOT_AVAILABLE}
                    for p in t.partitions
                ],
            }
            for t in topics
        ]

    version = request.header.api_version
    body = request.body
    if version <= 3:
        data: dict[str, Any] = {
            "throttle_time": 0,
            "results_by_topic_v3_and_below": results(body.v3_and_below_topics),
        }
    else:
        data = {
            "throttle_time": 0,
            "error_code": errors.NONE,
            "results_by_transaction": [
                {"transactional_id": t.transactional_id, "topic_results": results(t.topics)}
                for t in body.transactions
            ],
        }
    return encode_response(24, version, data)


def _end_txn(broker: Broker, request: Any) -> bytes:
    extra = {"producer_id": -1, "producer_epoch": -1} if request.header.api_version >= 5 else {}
    return _top_level(26, **extra)(broker, request)


def _txn_offset_commit(broker: Broker, request: Any) -> bytes:
    topics = [
        {
            **_topic_ref(t),
            "partitions": [
                {"partition_index": p.partition_index, "error_code": COORDINATOR_NOT_AVAILABLE}
                for p in t.partitions
            ],
        }
        for t in request.body.topics
    ]
    return encode_response(28, request.header.api_version, {"throttle_time": 0, "topics": topics})


def _write_txn_markers(broker: Broker, request: Any) -> bytes:
    markers = [
        {
            "producer_id": m.producer_id,
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {"partition_index": p, "error_code": errors.NOT_LEADER_OR_FOLLOWER}
                        for p in t.partition_indexes
                    ],
                }
                for t in m.topics
            ],
        }
        for m in request.body.markers
    ]
    return encode_response(27, request.header.api_version, {"markers": markers})


def _describe_producers(broker: Broker, request: Any) -> bytes:
    topics = [
        {
            "name": t.name,
            "partitions": [
                {
                    "partition_index": p,
                    "error_code": errors.NOT_LEADER_OR_FOLLOWER,
                    "error_message": None,
                    "active_producers": [],
                }
                for p in t.partition_indexes
            ],
        }
        for t in request.body.topics
    ]
    return encode_response(61, request.header.api_version, {"throttle_time": 0, "topics": topics})


def _describe_transactions(broker: Broker, request: Any) -> bytes:
    states = [
        describe_transactions.unknown(i, COORDINATOR_NOT_AVAILABLE)
        for i in request.body.transactional_ids
    ]
    return encode_response(
        65, request.header.api_version, {"throttle_time": 0, "transaction_states": states}
    )


def _join_group(broker: Broker, request: Any) -> bytes:
    return encode_response(
        11,
        request.header.api_version,
        {
            "throttle_time": 0,
            "error_code": COORDINATOR_NOT_AVAILABLE,
            "generation_id": -1,
            "protocol_name": "",
            "leader": "",
            "member_id": request.body.member_id,
            "members": [],
        },
    )


def _describe_groups(broker: Broker, request: Any) -> bytes:
    groups = [
        {"error_code": COORDINATOR_NOT_AVAILABLE, "group_id": g, "group_state": "", "members": []}
        for g in request.body.groups
    ]
    return encode_response(15, request.header.api_version, {"throttle_time": 0, "groups": groups})


def _delete_groups(broker: Broker, request: Any) -> bytes:
    results = [
        {
            "group_id": g,
            "error_code": COORDINATOR_NOT_AVAILABLE,
            "error_message": delete_groups.refusal_message(COORDINATOR_NOT_AVAILABLE),
        }
        for g in request.body.groups_names
    ]
    return encode_response(42, request.header.api_version, {"throttle_time": 0, "results": results})


def _create_topics(broker: Broker, request: Any) -> bytes:
    topics = [
        {
            "name": t.name,
            "topic_id": None,
            "error_code": REQUEST_TIMED_OUT,
            "error_message": "Redis is unavailable",
            "num_partitions": -1,
            "replication_factor": -1,
            "configs": [],
        }
        for t in request.body.topics
    ]
    return encode_response(19, request.header.api_version, {"throttle_time": 0, "topics": topics})


def _delete_topics(broker: Broker, request: Any) -> bytes:
    body = request.body
    if request.header.api_version >= 6:
        named = [(t.name, t.topic_id) for t in body.topics]
    else:
        named = [(name, None) for name in body.topic_names]
    responses = [
        {
            "name": name,
            "topic_id": topic_id,
            "error_code": REQUEST_TIMED_OUT,
            "error_message": "Redis is unavailable",
        }
        for name, topic_id in named
    ]
    if request.header.api_version == 0:
        return delete_topics.encode_v0(responses)  # kio has no v0 schema
    return encode_response(
        20, request.header.api_version, {"throttle_time": 0, "responses": responses}
    )


def _delete_records(broker: Broker, request: Any) -> bytes:
    topics = [
        {
            "name": t.name,
            "partitions": [
                {
                    "partition_index": p.partition_index,
                    "low_watermark": -1,
                    "error_code": REQUEST_TIMED_OUT,
                }
                for p in t.partitions
            ],
        }
        for t in request.body.topics
    ]
    return encode_response(21, request.header.api_version, {"throttle_time": 0, "topics": topics})


def _describe_configs(broker: Broker, request: Any) -> bytes:
    body = request.body
    docs = getattr(body, "include_documentation", False)  # v3+
    results = []
    for r in body.resources:
        # Broker resources need no Redis, but still DESCRIBE_CONFIGS (describe_configs.py).
        denied = checks.config_resource_denied(
            broker, request, Operation.DESCRIBE_CONFIGS, r.resource_type, r.resource_name
        )
        results.append(
            describe_configs._result(r, *denied)
            if denied
            else describe_configs.answer_without_redis(broker, r, body.include_synonyms, docs)
            or describe_configs._result(r, REQUEST_TIMED_OUT, UNAVAILABLE)
        )
    return describe_configs.encode(request.header.api_version, results)


def _alter_configs(api_key: int) -> Callable[[Broker, Any], bytes]:
    """AlterConfigs and IncrementalAlterConfigs answer alike."""

    def build(broker: Broker, request: Any) -> bytes:
        responses = [
            {
                "error_code": REQUEST_TIMED_OUT,
                "error_message": UNAVAILABLE,
                "resource_type": r.resource_type,
                "resource_name": r.resource_name,
            }
            for r in request.body.resources
        ]
        return encode_response(
            api_key, request.header.api_version, {"throttle_time": 0, "responses": responses}
        )

    return build


def _describe_log_dirs(broker: Broker, request: Any) -> bytes:
    result = {
        "error_code": KAFKA_STORAGE_ERROR,
        "log_dir": describe_log_dirs.log_dir_name(broker.store.description),
        "topics": [],
        "total_bytes": -1,
        "usable_bytes": -1,
    }
    body = {"throttle_time": 0, "error_code": errors.NONE, "results": [result]}
    # v0 is v1 on the wire; kio has no v0 schema.
    return encode_response(35, max(request.header.api_version, 1), body)


def _create_partitions(broker: Broker, request: Any) -> bytes:
    names = [t.name for t in request.body.topics]
    results = []
    for name in dict.fromkeys(names):
        # A duplicated name is refused before any Redis call, as the handler does.
        if names.count(name) > 1:
            code, message = errors.INVALID_REQUEST, "Duplicate topic name."
        else:
            code, message = REQUEST_TIMED_OUT, UNAVAILABLE
        results.append({"name": name, "error_code": code, "error_message": message})
    return encode_response(37, request.header.api_version, {"throttle_time": 0, "results": results})


def _each(api_key: int, results: str, items: str, **extra: Any) -> Callable[[Broker, Any], bytes]:
    """CreateAcls, DeleteAcls: REQUEST_TIMED_OUT for each creation or filter (Kafka's
    answer when the controller does not answer in time)."""

    def build(broker: Broker, request: Any) -> bytes:
        count = len(getattr(request.body, items))
        result = {"error_code": REQUEST_TIMED_OUT, "error_message": UNAVAILABLE, **extra}
        out = {"throttle_time": 0, results: [dict(result) for _ in range(count)]}
        return encode_response(api_key, request.header.api_version, out)

    return build


def _sasl_authenticate(broker: Broker, request: Any) -> bytes:
    # A refusal would tell the client its credentials are wrong; a close during
    # authentication is what clients reconnect and retry after.
    raise CloseConnection(f"{UNAVAILABLE}: SASL credentials cannot be checked")


def _describe_user_scram_credentials(broker: Broker, request: Any) -> bytes:
    users = [u.name for u in request.body.users or ()]
    body = {
        "throttle_time": 0,
        "error_code": REQUEST_TIMED_OUT,
        "error_message": UNAVAILABLE,
        "results": [
            {"user": u, "error_code": REQUEST_TIMED_OUT, "error_message": UNAVAILABLE}
            for u in dict.fromkeys(users)
        ],
    }
    return encode_response(50, request.header.api_version, body)


def _alter_user_scram_credentials(broker: Broker, request: Any) -> bytes:
    body = request.body
    names = dict.fromkeys(e.name for e in (*body.deletions, *body.upsertions))
    results = [
        {"user": n, "error_code": REQUEST_TIMED_OUT, "error_message": UNAVAILABLE} for n in names
    ]
    return encode_response(51, request.header.api_version, {"throttle_time": 0, "results": results})


def _delegation_token(api_key: int) -> Callable[[Broker, Any], bytes]:
    """Create/Renew/Expire/DescribeDelegationToken: Kafka's checks that need no Redis
    first (a SASL session, a secret key), then REQUEST_TIMED_OUT (the controller's
    answer did not come); timestamps -1 and no token, as Kafka's refusals."""

    def build(broker: Broker, request: Any) -> bytes:
        if not requests_allowed(request.security):
            code = errors.code("DELEGATION_TOKEN_REQUEST_NOT_ALLOWED")
        elif not broker.settings.delegation_token_secret_key:
            code = errors.code("DELEGATION_TOKEN_AUTH_DISABLED")
        else:
            code = REQUEST_TIMED_OUT
        data: dict[str, Any] = {"throttle_time": 0, "error_code": code, "tokens": []}
        if api_key == create_delegation_token.API_KEY:
            principal = request.security.principal
            data.update(
                principal_type=principal.type,
                principal_name=principal.name,
                token_requester_principal_type=principal.type,
                token_requester_principal_name=principal.name,
                issue_timestamp=-1,
                expiry_timestamp=-1,
                max_timestamp=-1,
            )
        else:
            data["expiry_timestamp"] = -1
        return encode_response(api_key, request.header.api_version, data)

    return build


def _elect_leaders(broker: Broker, request: Any) -> bytes:
    results = [
        {
            "topic": t.topic,
            "partition_result": [
                {"partition_id": p, "error_code": REQUEST_TIMED_OUT, "error_message": UNAVAILABLE}
                for p in t.partitions
            ],
        }
        for t in request.body.topic_partitions or ()
    ]
    data = {"error_code": REQUEST_TIMED_OUT, "replica_election_results": results}
    return encode_response(43, request.header.api_version, {"throttle_time": 0, **data})


def _update_features(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    data: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": REQUEST_TIMED_OUT,
        "error_message": UNAVAILABLE,
    }
    if version < 2:
        data["results"] = []
    return encode_response(57, version, data)


def _unregister(module: Any) -> Callable[[Broker, Any], bytes]:
    return lambda broker, request: module.response(request, REQUEST_TIMED_OUT, UNAVAILABLE)


def _alter_replica_log_dirs(broker: Broker, request: Any) -> bytes:
    # Kafka's answer for a log dir it cannot use: KAFKA_STORAGE_ERROR (retriable).
    storage_error = errors.code("KAFKA_STORAGE_ERROR")
    return alter_replica_log_dirs.response(request, storage_error)


def _alter_partition_reassignments(broker: Broker, request: Any) -> bytes:
    return alter_partition_reassignments.response(
        request, REQUEST_TIMED_OUT, UNAVAILABLE, lambda t, p: (REQUEST_TIMED_OUT, UNAVAILABLE)
    )


def _offset_for_leader_epoch(broker: Broker, request: Any) -> bytes:
    topics = [
        {
            "topic": t.topic,
            "partitions": [
                {"partition": p.partition, "error_code": NOT_LEADER, "end_offset": -1}
                for p in t.partitions
            ],
        }
        for t in request.body.topics
    ]
    return encode_response(23, request.header.api_version, {"throttle_time": 0, "topics": topics})


def _describe_topic_partitions(broker: Broker, request: Any) -> bytes:
    """LEADER_NOT_AVAILABLE (retriable) for each named topic, as Metadata answers."""
    topics = [
        {"error_code": LEADER_NOT_AVAILABLE, "name": t.name, "topic_id": None, "partitions": []}
        for t in request.body.topics
    ]
    return encode_response(75, 0, {"throttle_time": 0, "topics": topics})


def _list_config_resources(broker: Broker, request: Any) -> bytes:
    body = {"throttle_time": 0, "error_code": REQUEST_TIMED_OUT, "config_resources": []}
    return encode_response(74, request.header.api_version, body)


def _consumer_group_heartbeat(broker: Broker, request: Any) -> bytes:
    data = {
        "throttle_time": 0,
        "error_code": COORDINATOR_NOT_AVAILABLE,
        "member_id": None,
        "member_epoch": 0,
        "heartbeat_interval": 0,
    }
    return encode_response(68, request.header.api_version, data)


def _alter_client_quotas(broker: Broker, request: Any) -> bytes:
    """REQUEST_TIMED_OUT per entity: nothing was stored."""
    entries = [
        {
            "error_code": REQUEST_TIMED_OUT,
            "error_message": UNAVAILABLE,
            "entity": [
                {"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity
            ],
        }
        for entry in request.body.entries
    ]
    return encode_response(49, request.header.api_version, {"throttle_time": 0, "entries": entries})


def _consumer_group_describe(broker: Broker, request: Any) -> bytes:
    return share_unavailable.describe(broker, request, api_key=69)


def _streams_group_heartbeat(broker: Broker, request: Any) -> bytes:
    data = streams_group_heartbeat.answer(COORDINATOR_NOT_AVAILABLE, None, request.body.member_id)
    data["acceptable_recovery_lag"] = 0
    return encode_response(88, request.header.api_version, data)


def _streams_group_describe(broker: Broker, request: Any) -> bytes:
    groups = [
        {
            "error_code": COORDINATOR_NOT_AVAILABLE,
            "error_message": UNAVAILABLE,
            "group_id": g,
            "group_state": "",
            "group_epoch": 0,
            "assignment_epoch": 0,
            "topology": None,
            "members": [],
        }
        for g in request.body.group_ids
    ]
    return encode_response(89, request.header.api_version, {"throttle_time": 0, "groups": groups})


BUILDERS: dict[int, Callable[[Broker, Any], bytes | None]] = {
    0: _produce,  # called with the reason by response()
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    8: _offset_commit,
    9: _offset_fetch,
    10: _find_coordinator,
    11: _join_group,
    12: _top_level(12),
    13: _top_level(13, members=[]),
    14: _top_level(14, assignment=b""),
    15: _describe_groups,
    16: _top_level(16, groups=[]),
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    22: _top_level(22, producer_id=-1, producer_epoch=-1),
    24: _add_partitions_to_txn,
    25: _top_level(25),
    26: _end_txn,
    28: _txn_offset_commit,
    27: _write_txn_markers,
    61: _describe_producers,
    65: _describe_transactions,
    66: _top_level(66, unknown_state_filters=[], transaction_states=[]),
    32: _describe_configs,
    33: _alter_configs(33),
    35: _describe_log_dirs,
    37: _create_partitions,
    42: _delete_groups,
    44: _alter_configs(44),
    47: _top_level(47, topics=[]),
    30: _each(30, "results", "creations"),
    31: _each(31, "filter_results", "filters", matching_acls=[]),
    36: _sasl_authenticate,
    50: _describe_user_scram_credentials,
    51: _alter_user_scram_credentials,
    38: _delegation_token(38),
    39: _delegation_token(39),
    40: _delegation_token(40),
    41: _delegation_token(41),
    43: _elect_leaders,
    57: _update_features,
    34: _alter_replica_log_dirs,
    64: _unregister(unregister_broker),
    94: _unregister(unregister_controller),
    45: _alter_partition_reassignments,
    23: _offset_for_leader_epoch,
    74: _list_config_resources,
    75: _describe_topic_partitions,
    49: _alter_client_quotas,
    68: _consumer_group_heartbeat,
    69: _consumer_group_describe,
    88: _streams_group_heartbeat,
    89: _streams_group_describe,
    **share_unavailable.BUILDERS,  # 76-79, 90-92: sidecar/share/unavailable.py
}


def response(broker: Broker, request: Any, reason: str) -> bytes | list[Any] | None:
    """The retriable-error answer to `request`, or CloseConnection for an API that has
    none here."""
    if request.header.api_key == produce.API_KEY:
        return _produce(broker, request, reason)
    builder = BUILDERS.get(request.header.api_key)
    if builder is None:
        raise CloseConnection(f"Redis is unavailable ({reason})")
    return builder(broker, request)
