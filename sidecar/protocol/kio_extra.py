"""Schemas of the versions Kafka 4.4 added after kio 0.6.5, written as kio writes its
generated ones (frozen dataclasses with kio's field metadata), so kio's Rust readers,
writers and Skiff's bounds check serve them like any other version. Each follows
Kafka's JSON message definition of that version; drop one once kio ships it.

- ApiVersions v5 (KIP-1242): the request names the cluster and node the client means
  to reach; the response is v4's.
- DeleteGroups v3: each group's result carries an ErrorMessage.
- TxnOffsetCommit v6 (KIP-1319): topics by id instead of name.
- UnregisterController v0 (`kafka-cluster unregister-controller`): a controller id
  to drop; the response is UnregisterBroker's, with an error code kio does not know.
- StreamsGroupHeartbeat v1 (KIP-1331): the request is v0's; the response drops the
  int32 AcceptableRecoveryLagLegacy for an int64 AcceptableRecoveryLag after
  TaskOffsetIntervalMs and adds TopologyDescriptionRequired.
- StreamsGroupDescribe v1 (KIP-1331, KIP-1357): the request asks for the topology
  description; each group carries it (nullable), its status and the assignor's name.
- StreamsGroupTopologyDescriptionUpdate v0 (KIP-1331): a member pushes its group's
  topology description for a topology epoch.

No `from __future__ import annotations`: kio reads the fields' types at run time."""

import datetime
import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.api_versions.v4 import response as api_versions_v4
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.schema.streams_group_describe.v0 import response as sg_describe_v0
from kio.schema.streams_group_heartbeat.v0 import request as sg_heartbeat_v0
from kio.schema.streams_group_heartbeat.v0 import response as sg_heartbeat_v0_response
from kio.schema.txn_offset_commit.v5 import request as txn_offset_commit_v5
from kio.schema.txn_offset_commit.v5 import response as txn_offset_commit_v5_response
from kio.schema.types import BrokerId, GroupId, ProducerId, TransactionalId
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionsRequestV5:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(18)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    client_software_name: str = field(metadata={"kafka_type": "string"})
    client_software_version: str = field(metadata={"kafka_type": "string"})
    cluster_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    node_id: BrokerId = field(metadata={"kafka_type": "int32"}, default=BrokerId(-1))


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionsResponseV5:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(18)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    api_keys: tuple[api_versions_v4.ApiVersion, ...]
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    supported_features: tuple[api_versions_v4.SupportedFeatureKey, ...] = field(
        metadata={"tag": 0}, default=()
    )
    finalized_features_epoch: i64 = field(
        metadata={"kafka_type": "int64", "tag": 1}, default=i64(-1)
    )
    finalized_features: tuple[api_versions_v4.FinalizedFeatureKey, ...] = field(
        metadata={"tag": 2}, default=()
    )
    zk_migration_ready: bool = field(metadata={"kafka_type": "bool", "tag": 3}, default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsRequestV3:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(42)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    groups_names: tuple[GroupId, ...] = field(metadata={"kafka_type": "string"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletableGroupResultV3:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(42)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsResponseV3:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(42)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    results: tuple[DeletableGroupResultV3, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitRequestTopicV6:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(28)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    partitions: tuple[txn_offset_commit_v5.TxnOffsetCommitRequestPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitRequestV6:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(28)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    transactional_id: TransactionalId = field(metadata={"kafka_type": "string"})
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    producer_id: ProducerId = field(metadata={"kafka_type": "int64"})
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
    generation_id: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    member_id: str = field(metadata={"kafka_type": "string"}, default="")
    group_instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    topics: tuple[TxnOffsetCommitRequestTopicV6, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitResponseTopicV6:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(28)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    partitions: tuple[txn_offset_commit_v5_response.TxnOffsetCommitResponsePartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitResponseV6:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(28)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    topics: tuple[TxnOffsetCommitResponseTopicV6, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterControllerRequestV0:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(94)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    controller_id: BrokerId = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterControllerResponseV0:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(94)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    # int16, not kio's ErrorCode: CONTROLLER_ID_NOT_REGISTERED (136) is newer than kio.
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    error_message: str | None = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupHeartbeatRequestV1:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    endpoint_information_epoch: i32 = field(metadata={"kafka_type": "int32"})
    instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    rack_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    rebalance_timeout: i32Timedelta = field(
        metadata={"kafka_type": "timedelta_i32"},
        default=i32Timedelta.parse(datetime.timedelta(milliseconds=-1)),
    )
    topology: sg_heartbeat_v0.Topology | None = field(default=None)
    active_tasks: tuple[sg_heartbeat_v0.TaskIds, ...] | None
    standby_tasks: tuple[sg_heartbeat_v0.TaskIds, ...] | None
    warmup_tasks: tuple[sg_heartbeat_v0.TaskIds, ...] | None
    process_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    user_endpoint: sg_heartbeat_v0.Endpoint | None = field(default=None)
    client_tags: tuple[sg_heartbeat_v0.KeyValue, ...] | None
    task_offsets: tuple[sg_heartbeat_v0.TaskOffset, ...] | None
    task_end_offsets: tuple[sg_heartbeat_v0.TaskOffset, ...] | None
    shutdown_application: bool = field(metadata={"kafka_type": "bool"}, default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupHeartbeatResponseV1:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(88)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    # int16, not kio's ErrorCode: STREAMS_INVALID_TOPOLOGY and its kin are newer than kio.
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    heartbeat_interval: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    task_offset_interval: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    acceptable_recovery_lag: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    status: tuple[sg_heartbeat_v0_response.Status, ...] | None
    active_tasks: tuple[sg_heartbeat_v0_response.TaskIds, ...] | None
    standby_tasks: tuple[sg_heartbeat_v0_response.TaskIds, ...] | None
    warmup_tasks: tuple[sg_heartbeat_v0_response.TaskIds, ...] | None
    topology_description_required: bool = field(metadata={"kafka_type": "bool"}, default=False)
    endpoint_information_epoch: i32 = field(metadata={"kafka_type": "int32"})
    partitions_by_user_endpoint: tuple[sg_heartbeat_v0_response.EndpointToPartitions, ...] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupDescribeRequestV1:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_ids: tuple[GroupId, ...] = field(metadata={"kafka_type": "string"}, default=())
    include_authorized_operations: bool = field(metadata={"kafka_type": "bool"})
    include_topology_description: bool = field(metadata={"kafka_type": "bool"}, default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionNodeV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    name: str = field(metadata={"kafka_type": "string"})
    node_type: i8 = field(metadata={"kafka_type": "int8"})
    source_topics: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    sink_topic: str | None = field(metadata={"kafka_type": "string"}, default=None)
    stores: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    successors: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionSubtopologyV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    nodes: tuple[TopologyDescriptionNodeV1, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionGlobalStoreV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    source: TopologyDescriptionNodeV1
    processor: TopologyDescriptionNodeV1


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    subtopologies: tuple[TopologyDescriptionSubtopologyV1, ...]
    global_stores: tuple[TopologyDescriptionGlobalStoreV1, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsDescribedGroupV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    group_state: str = field(metadata={"kafka_type": "string"})
    group_epoch: i32 = field(metadata={"kafka_type": "int32"})
    assignment_epoch: i32 = field(metadata={"kafka_type": "int32"})
    topology: sg_describe_v0.Topology | None = field(default=None)
    members: tuple[sg_describe_v0.Member, ...]
    authorized_operations: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-2147483648))
    topology_description: TopologyDescriptionV1 | None = field(default=None)
    topology_description_status: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    assignor_name: str | None = field(metadata={"kafka_type": "string"}, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupDescribeResponseV1:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(89)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    groups: tuple[StreamsDescribedGroupV1, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionNodeV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: str = field(metadata={"kafka_type": "string"})
    node_type: i8 = field(metadata={"kafka_type": "int8"})
    source_topics: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    sink_topic: str | None = field(metadata={"kafka_type": "string"}, default=None)
    stores: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    successors: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionSubtopologyV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    nodes: tuple[TopologyDescriptionNodeV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionGlobalStoreV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    source: TopologyDescriptionNodeV0
    processor: TopologyDescriptionNodeV0


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    subtopologies: tuple[TopologyDescriptionSubtopologyV0, ...]
    global_stores: tuple[TopologyDescriptionGlobalStoreV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupTopologyDescriptionUpdateRequestV0:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})
    topology_epoch: i32 = field(metadata={"kafka_type": "int32"})
    topology_description: TopologyDescriptionV0


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupTopologyDescriptionUpdateResponseV0:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(93)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    # int16: STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED is newer than kio.
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)


REQUESTS: dict[tuple[int, int], type] = {
    (18, 5): ApiVersionsRequestV5,
    (28, 6): TxnOffsetCommitRequestV6,
    (42, 3): DeleteGroupsRequestV3,
    (88, 1): StreamsGroupHeartbeatRequestV1,
    (89, 1): StreamsGroupDescribeRequestV1,
    (93, 0): StreamsGroupTopologyDescriptionUpdateRequestV0,
    (94, 0): UnregisterControllerRequestV0,
}
RESPONSES: dict[tuple[int, int], type] = {
    (18, 5): ApiVersionsResponseV5,
    (28, 6): TxnOffsetCommitResponseV6,
    (42, 3): DeleteGroupsResponseV3,
    (88, 1): StreamsGroupHeartbeatResponseV1,
    (89, 1): StreamsGroupDescribeResponseV1,
    (93, 0): StreamsGroupTopologyDescriptionUpdateResponseV0,
    (94, 0): UnregisterControllerResponseV0,
}
