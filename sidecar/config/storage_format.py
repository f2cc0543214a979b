"""`skiff.storage.format`: how a topic's partitions are kept in Redis, fixed when the
topic is created (docs/architecture.md, "Storage formats").

- `record`: one stream entry per record (fields t, k, v, h, f), readable by plain Redis
  clients with XRANGE; every topic made before this setting existed is `record`.
- `batch`: one stream entry per produced batch, its bytes as the producer sent them
  (protocol/stored_batch.py).

A topic's format is kept in its registry entry (`format`); a topic without one is
`record`, so nothing already stored changes. CreateTopics may name the format as a topic
config; its server default is `--storage-format` (`skiff.storage.format` in
server.properties). Altering it later is refused (config/admin.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CONFIG = "skiff.storage.format"
BATCH = "batch"
RECORD = "record"
FORMATS = (BATCH, RECORD)
DEFAULT = BATCH  # the server default for new topics (`--storage-format`)
LEGACY = RECORD  # a registry entry without a format


class FormatError(ValueError):
    """An invalid format; str() is the message for INVALID_CONFIG."""


def parse(value: str | None) -> str:
    text = (value or "").strip().lower()
    if text not in FORMATS:
        raise FormatError(
            f"Invalid value {value} for configuration {CONFIG}: String must be one of: "
            + ", ".join(FORMATS)
        )
    return text


def chosen(overrides: Mapping[str, str], server_default: str) -> str:
    """The format a topic is created with: its CreateTopics config, else the server's."""
    raw = overrides.get(CONFIG)
    return parse(raw) if raw is not None else server_default


ALTER_REFUSED = (
    f"{CONFIG} is fixed when a topic is created and cannot be altered: create a new topic "
    "with the format you want and copy the records into it"
)

DOCUMENTATION = (
    "How the topic's partitions are kept in Redis: batch (one stream entry per produced "
    "batch, stored as sent) or record (one entry per record, readable with XRANGE). Fixed "
    "when the topic is created."
)
SOURCE_TOPIC, SOURCE_DEFAULT = 1, 5  # DescribeConfigs' ConfigSource ids
STRING_TYPE = 2  # DescribeConfigs' ConfigType id


def config_entry(fmt: str, explicit: bool, synonyms: bool, docs: bool) -> dict[str, Any]:
    """The DescribeConfigs entry of a topic's format: a topic config when CreateTopics
    named it, else a default (the server's when the topic was created). Read-only: it
    cannot be altered."""
    source = SOURCE_TOPIC if explicit else SOURCE_DEFAULT
    return {
        "name": CONFIG,
        "value": fmt,
        "read_only": True,
        "config_source": source,
        "is_sensitive": False,
        "synonyms": [{"name": CONFIG, "value": fmt, "source": source}] if synonyms else [],
        "config_type": STRING_TYPE,
        "documentation": DOCUMENTATION if docs else None,
    }
