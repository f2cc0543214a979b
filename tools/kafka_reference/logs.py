"""The partition log: DeleteRecords, DescribeLogDirs and Produce to a compacted topic."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rawkafka import (
    Rec,
    build_batch,
    list_offsets_request,
    produce_request,
)

from .compare import Masked
from .constants import BASE_TS, CREATE_TOPICS, LIST_OFFSETS, PRODUCE
from .talk import (
    SetupError,
    Side,
    add,
    ask,
    create_topics_body,
    make_topic,
    produce_ok,
    records,
    small_batch,
    stored,
    topic,
    wait_topic,
)

DELETE_RECORDS, DESCRIBE_LOG_DIRS = 21, 35


def make_topic_with_configs(side: Side, name: str, configs: dict[str, str]) -> None:
    body = create_topics_body(name)
    body["topics"][0]["configs"] = [{"name": k, "value": v} for k, v in configs.items()]
    answer = ask(side, CREATE_TOPICS, 7, body)
    if not isinstance(answer, dict) or answer["topics"][0]["error_code"] != 0:
        raise SetupError(f"CreateTopics {name}: {answer}")
    wait_topic(side, name, 1)


def earliest(side: Side, name: str) -> Any:
    answer = ask(side, LIST_OFFSETS, 7, list_offsets_request(name, {0: -2}))
    if not isinstance(answer, dict):
        return answer
    part = answer["topics"][0]["partitions"][0]
    part.pop("leader_epoch")  # Skiff reports no leader epochs (-1), see metadata scenarios
    return part


def log_scenarios() -> None:
    """DeleteRecords, DescribeLogDirs, and Produce to a compacted topic."""

    def delete_body(name: str, offsets: dict[int, int]) -> dict[str, Any]:
        return {
            "topics": [
                {
                    "name": name,
                    "partitions": [{"partition_index": p, "offset": o} for p, o in offsets.items()],
                }
            ],
            "timeout": 30_000,
        }

    def delete_records(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            name = topic(f"delrec-v{version}")
            make_topic(side, name)
            produce_ok(side, name, records(5, BASE_TS, "a"))
            produce_ok(side, name, records(3, BASE_TS + 5, "b"))
            out: dict[str, Any] = {}
            for label, offsets in (
                ("to_5", {0: 5}),
                ("below_start", {0: 2}),
                ("past_hw", {0: 9}),
                ("minus_2", {0: -2}),
                ("missing_partition", {3: 1}),
                ("to_hw", {0: -1}),
            ):
                out[label] = ask(side, DELETE_RECORDS, version, delete_body(name, offsets))
            out["missing_topic"] = ask(
                side, DELETE_RECORDS, version, delete_body(topic("delrec-missing"), {0: 0})
            )
            out["earliest_after"] = earliest(side, name)
            out["stored_after"] = stored(side, name)
            return out

        return run

    for v in (0, 1, 2):
        add(f"delete_records.v{v}", delete_records(v), "8 records; several offsets in turn")

    def compact_only(side: Side) -> Any:
        name = topic("delrec-compact")
        make_topic_with_configs(side, name, {"cleanup.policy": "compact"})
        produce_ok(side, name, build_batch([Rec(b"v", key=b"k")], base_timestamp=BASE_TS))
        return ask(side, DELETE_RECORDS, 2, delete_body(name, {0: 1}))

    add("delete_records.compact_only", compact_only, "cleanup.policy=compact")

    def list_offsets_after(side: Side) -> Any:
        name = topic("delrec-lo")
        make_topic(side, name)
        produce_ok(side, name, records(5, BASE_TS, "a"))
        produce_ok(side, name, records(3, BASE_TS + 5, "b"))
        specs = {"earliest": -2, "latest": -1, "max": -3, "ts0": BASE_TS, "ts6": BASE_TS + 6}
        out: dict[str, Any] = {}
        for label, offset in (("to_3", 3), ("to_6", 6), ("to_hw", -1)):
            out[label] = ask(side, DELETE_RECORDS, 2, delete_body(name, {0: offset}))
            for spec, ts in specs.items():
                answer = ask(side, LIST_OFFSETS, 7, list_offsets_request(name, {0: ts}))
                if isinstance(answer, dict):
                    part = answer["topics"][0]["partitions"][0]
                    part.pop("leader_epoch")
                    answer = part
                out[f"{label}.{spec}"] = answer
        return out

    add(
        "delete_records.list_offsets_after",
        list_offsets_after,
        "offsets 0-7 (timestamps BASE_TS+0..7); ListOffsets after DeleteRecords to 3, 6, hw",
    )

    def log_dirs(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            name = topic(f"logdirs-v{version}")
            make_topic(side, name)
            produce_ok(side, name, small_batch())
            produce_ok(side, name, records(5, BASE_TS, "a"))
            body = {"topics": [{"topic": name, "partitions": [0, 7]}]}
            answer = ask(side, DESCRIBE_LOG_DIRS, version, body)
            if not isinstance(answer, dict):
                return answer
            for result in answer["results"]:
                result["log_dir"] = Masked("log dir", result["log_dir"])
                # Kafka's disk against Redis's maxmemory (-1 when Redis has none).
                for field in ("total_bytes", "usable_bytes"):
                    if field in result:
                        result[field] = Masked(field, result[field])
                # Only this scenario's topic: each broker hosts other topics of the run.
                result["topics"] = [t for t in result["topics"] if t["name"] == name]
            return answer

        return run

    for v in (1, 2, 3, 4):
        add(
            f"describe_log_dirs.v{v}",
            log_dirs(v),
            "a topic holding two uncompressed batches; partitions [0, 7] asked",
        )

    def compacted_no_key(side: Side) -> Any:
        name = topic("compact-nokey")
        make_topic_with_configs(side, name, {"cleanup.policy": "compact"})
        answer = ask(side, PRODUCE, 9, produce_request(name, {0: small_batch()}))
        out = {"produce": answer, "stored": stored(side, name)}
        if isinstance(answer, dict):
            out["message"] = answer["responses"][0]["partition_responses"][0]["error_message"]
        return out

    add("produce.compacted_no_key", compacted_no_key, "small_batch's keyless record")
