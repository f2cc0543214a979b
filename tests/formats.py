"""Running a suite on both storage formats (skiff.storage.format, issue 16): a `record`
topic is created explicitly before a client first uses it; a `batch` topic is left to
the client (auto-created with the server default, `batch`), so auto-creation stays
tested."""

from __future__ import annotations

from log_helpers import create
from rawkafka import RawKafka

FORMATS = ("record", "batch")


def prepare_topic(
    bootstrap: str,
    topic: str,
    storage_format: str,
    partitions: int = 1,
    configs: dict[str, str] | None = None,
) -> None:
    """Create `topic` as a `record` topic when the format asks for it."""
    if storage_format == "batch" and not configs:
        return
    host, port = bootstrap.rsplit(":", 1)
    with RawKafka(host, int(port)) as kafka:
        create(
            kafka,
            topic,
            {**(configs or {}), "skiff.storage.format": storage_format},
            partitions=partitions,
        )
