"""One module per Kafka API. Each declares API_KEY, MIN_VERSION, MAX_VERSION and
`async def handle(broker, request) -> bytes | None` (the response body, or None for
no response), and delegates storage to sidecar.storage. A module serving versions kio
has no schema for also declares DECODERS: {version: decode(frame, offset) -> body}."""

from __future__ import annotations

from types import ModuleType

from sidecar.apis import (
    alter_configs,
    alter_share_group_offsets,
    alter_user_scram_credentials,
    api_versions,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_share_group_offsets,
    describe_user_scram_credentials,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    sync_group,
)

HANDLERS: dict[int, ModuleType] = {
    module.API_KEY: module
    for module in (
        produce,
        fetch,
        list_offsets,
        metadata,
        api_versions,
        create_topics,
        delete_topics,
        init_producer_id,
        find_coordinator,
        join_group,
        sync_group,
        heartbeat,
        leave_group,
        offset_commit,
        offset_fetch,
        describe_groups,
        list_groups,
        delete_groups,
        offset_delete,
        describe_configs,
        alter_configs,
        incremental_alter_configs,
        create_partitions,
        describe_cluster,
        delete_records,
        describe_log_dirs,
        share_group_heartbeat,
        share_group_describe,
        share_fetch,
        share_acknowledge,
        describe_share_group_offsets,
        alter_share_group_offsets,
        sasl_handshake,
        sasl_authenticate,
        describe_user_scram_credentials,
        alter_user_scram_credentials,
    )
}
