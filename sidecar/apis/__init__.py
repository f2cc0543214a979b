"""One module per Kafka API. Each declares API_KEY, MIN_VERSION, MAX_VERSION and
`async def handle(broker, request) -> bytes | None` (the response body, or None for
no response), and delegates storage to sidecar.storage."""

from __future__ import annotations

from types import ModuleType

from . import (
    api_versions,
    create_topics,
    delete_topics,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    produce,
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
    )
}
