"""CreateTopics and DeleteTopics."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from .constants import CREATE_TOPICS, DELETE_TOPICS, ZERO_UUID
from .talk import (
    SetupError,
    Side,
    add,
    ask,
    create_topics_body,
    make_topic,
    metadata_topic,
    topic,
    wait_gone,
    wait_topic,
)


def create_topics_scenarios() -> None:
    cases: dict[str, tuple[int, int, bool, bool]] = {
        # label: (partitions, replication factor, validate_only, create it first)
        "new": (2, 1, False, False),
        "existing": (1, 1, False, True),
        "zero_partitions": (0, 1, False, False),
        "replication_factor_3": (1, 3, False, False),
        "invalid_name": (1, 1, False, False),
        "validate_only": (1, 1, True, False),
        "defaults": (-1, -1, False, False),
    }

    def case(version: int, label: str) -> Callable[[Side], Any]:
        partitions, replication, validate_only, first = cases[label]

        def run(side: Side) -> Any:
            name = "bad name!" if label == "invalid_name" else topic(f"create-v{version}-{label}")
            if first:
                make_topic(side, name)
            body = create_topics_body(name, partitions, replication, validate_only)
            out: dict[str, Any] = {"create": ask(side, CREATE_TOPICS, version, body)}
            if label in ("new", "defaults"):
                try:
                    entry = wait_topic(side, name, max(partitions, 1), timeout=10)
                    out["partitions_after"] = len(entry["partitions"])
                except SetupError as exc:
                    out["partitions_after"] = str(exc)
            elif label != "invalid_name":
                time.sleep(0.3)
                out["topic_exists_after"] = metadata_topic(side, name)["error_code"] != 3
            return out

        return run

    for v in (2, 5, 7):
        for label in cases:
            if label == "defaults" and v < 4:
                continue
            add(
                f"create_topics.v{v}.{label}",
                case(v, label),
                "num_partitions=-1, replication_factor=-1" if label == "defaults" else "",
            )


def delete_topics_scenarios() -> None:
    def body(names: list[str | None], ids: list[uuid.UUID] | None = None) -> dict[str, Any]:
        ids = ids or [ZERO_UUID] * len(names)
        return {
            "topic_names": names,
            "topics": [{"name": n, "topic_id": i} for n, i in zip(names, ids, strict=True)],
            "timeout": 30_000,
        }

    def existing(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            name = topic(f"delete-v{version}")
            make_topic(side, name)
            answer = ask(side, DELETE_TOPICS, version, body([name]))
            return {"delete": answer, "gone_after": wait_gone(side, name)}

        return run

    def missing(version: int) -> Callable[[Side], Any]:
        return lambda side: ask(
            side, DELETE_TOPICS, version, body([topic(f"delete-missing-v{version}")])
        )

    def by_id(side: Side) -> Any:
        name = topic("delete-by-id")
        topic_id = make_topic(side, name)
        answer = ask(side, DELETE_TOPICS, 6, body([None], [topic_id]))
        return {"delete": answer, "gone_after": wait_gone(side, name)}

    for v in (1, 6):
        add(f"delete_topics.v{v}.existing", existing(v))
        add(f"delete_topics.v{v}.missing", missing(v))
    add("delete_topics.v6.by_id", by_id, "topics=[{name: null, topic_id: id}]")
    add(
        "delete_topics.v6.unknown_id",
        lambda side: ask(side, DELETE_TOPICS, 6, body([None], [uuid.uuid4()])),
    )
