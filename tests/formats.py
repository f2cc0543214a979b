"""Running a suite on both storage formats (skiff.storage.format, issue 16): a `batch`
topic is created explicitly before a client first uses it; a `record` topic is left to
the client (auto-created with the server default, `record`), as the suites always did."""

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
    """Create `topic` as a `batch` topic when the format asks for it."""
    if storage_format == "record" and not configs:
        return
    host, port = bootstrap.rsplit(":", 1)
    with RawKafka(host, int(port)) as kafka:
        create(
            kafka,
            topic,
            {**(configs or {}), "skiff.storage.format": storage_format},
            partitions=partitions,
        )
