"""Topic administration: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs,
CreatePartitions, DescribeCluster, CreateTopics' bad input and DeleteTopics v0; and
UpdateFeatures."""

from __future__ import annotations

import re
import struct
import time
import uuid
from collections.abc import Callable
from typing import Any

from rawkafka import (
    list_offsets_request,
    metadata_request,
)

from sidecar.protocol import kio_extra

from .compare import Masked, _strip_run
from .constants import CREATE_TOPICS, DELETE_TOPICS, LIST_OFFSETS, METADATA
from .legacy import ask_raw
from .talk import (
    SetupError,
    Side,
    add,
    ask,
    create_topics_body,
    make_topic,
    metadata_topic,
    produce_ok,
    records,
    topic,
    wait_gone,
    wait_topic,
)

# -- topic administration: configs, partitions, cluster (issue 5) ---------------------------

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
CREATE_PARTITIONS, DESCRIBE_CLUSTER = 37, 60
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SKIFF_DOC_NOTE = " (Skiff:"  # Skiff's note on configs it accepts but does not apply


def node_of(side: Side) -> int:
    """The broker's node id (Kafka 1, Skiff 0): requests naming a broker use it."""

    def make(side: Side) -> int:
        answer = ask(side, METADATA, 12, metadata_request([]))
        if not isinstance(answer, dict):
            raise SetupError(f"Metadata: {answer}")
        return int(answer["brokers"][0]["node_id"])

    return int(side.fixture("node_id", make))


def unmask(side: Side, text: Any) -> Any:
    """An error message compared in full, with the broker's own node id shown as <node>
    where a message names it ("expected 1")."""
    if not isinstance(text, str):
        return text
    node = node_of(side)
    text = _strip_run(text).replace(f"expected {node}", "expected <node>")
    return text.replace(f"the broker {node} ", "the broker <node> ")


def errors_of(side: Side, answer: Any, items: str) -> Any:
    """[(name, error, message)] of a per-resource answer; messages compared in full."""
    if not isinstance(answer, dict):
        return answer
    out = []
    for r in answer[items]:
        name = r.get("resource_name", r.get("name"))
        if isinstance(name, str) and name.isdigit():
            name = "<node>" if int(name) == node_of(side) else name
        out.append([name, r["error_code"], unmask(side, r["error_message"])])
    return out


def describe_body(
    resources: list[tuple[int, str, list[str] | None]], synonyms: bool = True, docs: bool = True
) -> dict[str, Any]:
    return {
        "resources": [
            {"resource_type": t, "resource_name": n, "configuration_keys": k}
            for t, n, k in resources
        ],
        "include_synonyms": synonyms,
        "include_documentation": docs,
    }


def described(side: Side, answer: Any) -> Any:
    """A DescribeConfigs answer with Skiff's documentation note cut off and error
    messages compared in full."""
    if not isinstance(answer, dict):
        return answer
    for r in answer["results"]:
        r["message"] = unmask(side, r.pop("error_message"))
        for c in r["configs"]:
            doc = c.get("documentation")
            if isinstance(doc, str) and SKIFF_DOC_NOTE in doc:
                c["documentation"] = doc[: doc.index(SKIFF_DOC_NOTE)]
    return answer


def overrides(side: Side, name: str) -> Any:
    """A topic's configs whose source is the topic (DescribeConfigs v4)."""
    answer = ask(side, DESCRIBE_CONFIGS, 4, describe_body([(TOPIC_RESOURCE, name, None)]))
    if not isinstance(answer, dict):
        return answer
    [result] = answer["results"]
    return {c["name"]: c["value"] for c in result["configs"] if c["config_source"] == 1}


def topic_with_configs(side: Side, name: str, configs: dict[str, str], partitions: int = 1) -> None:
    body = create_topics_body(name, partitions)
    body["topics"][0]["configs"] = [{"name": k, "value": v} for k, v in configs.items()]
    answer = ask(side, CREATE_TOPICS, 7, body)
    if not isinstance(answer, dict) or answer["topics"][0]["error_code"] != 0:
        raise SetupError(f"CreateTopics {name}: {answer}")
    wait_topic(side, name, partitions)


def describe_configs_scenarios() -> None:
    def topic_case(version: int, label: str) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            name = topic(f"dc-v{version}-{label}")
            given = {"retention.ms": "1000", "cleanup.policy": "compact, delete"}
            topic_with_configs(side, name, given if label == "overrides" else {})
            keys = ["retention.ms", "max.message.bytes", "nope"] if label == "keys" else None
            body = describe_body([(TOPIC_RESOURCE, name, keys)], docs=version >= 3)
            return described(side, ask(side, DESCRIBE_CONFIGS, version, body))

        return run

    for v in (1, 2, 3, 4):
        for label in ("defaults", "overrides", "keys"):
            add(
                f"describe_configs.v{v}.topic_{label}",
                topic_case(v, label),
                "include_synonyms; include_documentation from v3 (Skiff's note on configs it "
                "does not apply is cut off)",
            )

    def resources(label: str) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            node = str(node_of(side))
            cases = {
                "unknown_topic": [(TOPIC_RESOURCE, topic("dc-missing"), None)],
                "invalid_topic_name": [(TOPIC_RESOURCE, "bad name!", None)],
                "empty_topic_name": [(TOPIC_RESOURCE, "", None)],
                "broker_cluster_default": [(BROKER_RESOURCE, "", None)],
                "broker_other_id": [(BROKER_RESOURCE, "77", None)],
                "broker_not_a_number": [(BROKER_RESOURCE, "abc", None)],
                "unknown_resource_type": [(99, "x", None), (BROKER_RESOURCE, "", None)],
                "broker_keys": [
                    (
                        BROKER_RESOURCE,
                        node,
                        [
                            "message.max.bytes",
                            "log.retention.ms",
                            "log.retention.bytes",
                            "log.cleanup.policy",
                            "compression.type",
                            "min.insync.replicas",
                            "offsets.retention.minutes",
                            "group.max.session.timeout.ms",
                            "socket.request.max.bytes",
                        ],
                    )
                ],
            }
            answer = described(side, ask(side, DESCRIBE_CONFIGS, 4, describe_body(cases[label])))
            if isinstance(answer, dict):
                for r in answer["results"]:
                    if r["resource_name"] == node:
                        r["resource_name"] = "<node>"
            return answer

        return run

    for label in (
        "unknown_topic",
        "invalid_topic_name",
        "empty_topic_name",
        "broker_cluster_default",
        "broker_other_id",
        "broker_not_a_number",
        "unknown_resource_type",
        "broker_keys",
    ):
        add(f"describe_configs.v4.{label}", resources(label))


def describe_configs_v0_scenarios() -> None:
    """DescribeConfigs v0 (kio has no schema): raw request and answer."""

    def body(resources: list[tuple[int, str, list[str] | None]]) -> bytes:
        out = struct.pack(">i", len(resources))
        for kind, name, keys in resources:
            out += struct.pack(">bh", kind, len(name.encode())) + name.encode()
            if keys is None:
                out += struct.pack(">i", -1)
            else:
                out += struct.pack(">i", len(keys))
                for k in keys:
                    out += struct.pack(">h", len(k.encode())) + k.encode()
        return out

    def read(frame: bytes) -> Any:
        pos = 8  # correlation id, throttle time

        def take(fmt: str) -> Any:
            nonlocal pos
            (value,) = struct.unpack_from(fmt, frame, pos)
            pos += struct.calcsize(fmt)
            return value

        def text() -> str | None:
            nonlocal pos
            n = take(">h")
            if n < 0:
                return None
            value = frame[pos : pos + n].decode()
            pos += n
            return value

        results = []
        for _ in range(take(">i")):
            code, message, kind, name = take(">h"), text(), take(">b"), text()
            configs = {}
            for _ in range(take(">i")):
                cname, value = text(), text()
                configs[cname] = [value, take(">?"), take(">?"), take(">?")]
            results.append([code, message, kind, _strip_run(name or ""), configs])
        return {"results": results, "trailing_bytes": len(frame) - pos}

    def run(side: Side) -> Any:
        name = topic("dc-v0")
        topic_with_configs(side, name, {"retention.ms": "1000"})
        resources = [
            (TOPIC_RESOURCE, name, None),
            (TOPIC_RESOURCE, name, ["retention.ms", "cleanup.policy"]),
            (TOPIC_RESOURCE, topic("dc-v0-missing"), None),
        ]
        return ask_raw(side, DESCRIBE_CONFIGS, 0, body(resources), read)

    add(
        "describe_configs.v0.topic",
        run,
        "[value, read_only, is_default, is_sensitive] per config; hand-encoded v0",
    )


def alter_configs_scenarios() -> None:
    """AlterConfigs (whole-set replace) and IncrementalAlterConfigs: the answer, then the
    topic's overrides as DescribeConfigs shows them."""

    def legacy_body(resources: list[tuple[int, str, list[tuple[str, str | None]]]], vo: bool):
        return {
            "resources": [
                {
                    "resource_type": t,
                    "resource_name": n,
                    "configs": [{"name": a, "value": b} for a, b in configs],
                }
                for t, n, configs in resources
            ],
            "validate_only": vo,
        }

    def inc_body(resources: list[tuple[int, str, list[tuple[str, int, str | None]]]], vo: bool):
        return {
            "resources": [
                {
                    "resource_type": t,
                    "resource_name": n,
                    "configs": [
                        {"name": a, "config_operation": op, "value": b} for a, op, b in configs
                    ],
                }
                for t, n, configs in resources
            ],
            "validate_only": vo,
        }

    start = {"retention.ms": "1000", "segment.bytes": "2000000"}  # Kafka 4 refuses < 1 MiB
    legacy: dict[str, tuple[list[tuple[str, str | None]], bool]] = {
        "replace": ([("max.message.bytes", "2000"), ("cleanup.policy", "compact")], False),
        "empty": ([], False),
        "validate_only": ([("max.message.bytes", "2000")], True),
        "bad_value": ([("max.message.bytes", "x")], False),
        "unknown_name": ([("x.y", "1")], False),
        "null_value": ([("retention.ms", None)], False),
        "duplicate": ([("retention.ms", "5"), ("retention.ms", "6")], False),
        "compaction_lags": (
            [("min.compaction.lag.ms", "10"), ("max.compaction.lag.ms", "5")],
            False,
        ),
    }

    def legacy_case(version: int, label: str) -> Callable[[Side], Any]:
        configs, vo = legacy[label]

        def run(side: Side) -> Any:
            name = topic(f"ac-v{version}-{label}")
            topic_with_configs(side, name, start)
            body = legacy_body([(TOPIC_RESOURCE, name, configs)], vo)
            answer = ask(side, ALTER_CONFIGS, version, body)
            return {"alter": errors_of(side, answer, "responses"), "after": overrides(side, name)}

        return run

    for v in (0, 2):
        for label in legacy:
            add(f"alter_configs.v{v}.{label}", legacy_case(v, label), f"topic had {start}")

    SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
    incremental: dict[str, tuple[list[tuple[str, int, str | None]], bool]] = {
        "set": ([("max.message.bytes", SET, "2000")], False),
        "delete": ([("retention.ms", DELETE, None), ("x.unknown", DELETE, None)], False),
        "append_to_default": ([("cleanup.policy", APPEND, "compact")], False),
        "subtract": ([("cleanup.policy", SUBTRACT, "delete")], False),
        "validate_only": ([("max.message.bytes", SET, "2000")], True),
        "append_not_list": ([("retention.ms", APPEND, "5")], False),
        "subtract_not_list": ([("retention.ms", SUBTRACT, "5")], False),
        "append_bad_item": ([("cleanup.policy", APPEND, "bogus")], False),
        "unknown_operation": ([("retention.ms", 7, "5")], False),
        "unknown_name": ([("x.y", SET, "1")], False),
        "bad_value": ([("retention.ms", SET, "abc")], False),
        "null_set": ([("retention.ms", SET, None)], False),
        "duplicate": ([("retention.ms", SET, "5"), ("retention.ms", DELETE, None)], False),
        "remote_storage": ([("remote.storage.enable", SET, "true")], False),
    }

    def inc_case(version: int, label: str) -> Callable[[Side], Any]:
        configs, vo = incremental[label]

        def run(side: Side) -> Any:
            name = topic(f"iac-v{version}-{label}")
            topic_with_configs(side, name, start)
            answer = ask(
                side,
                INCREMENTAL_ALTER_CONFIGS,
                version,
                inc_body([(TOPIC_RESOURCE, name, configs)], vo),
            )
            return {"alter": errors_of(side, answer, "responses"), "after": overrides(side, name)}

        return run

    for v in (0, 1):
        for label in incremental:
            add(f"incremental_alter_configs.v{v}.{label}", inc_case(v, label), f"topic had {start}")

    def append_twice(side: Side) -> Any:
        name = topic("iac-append-twice")
        topic_with_configs(side, name, {})
        out = []
        for op, value in ((APPEND, "compact"), (APPEND, "compact"), (SUBTRACT, "delete,compact")):
            body = inc_body([(TOPIC_RESOURCE, name, [("cleanup.policy", op, value)])], False)
            answer = ask(side, INCREMENTAL_ALTER_CONFIGS, 1, body)
            out.append([errors_of(side, answer, "responses"), overrides(side, name)])
        return out

    add("incremental_alter_configs.v1.append_twice_then_subtract_all", append_twice)

    def other(label: str) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            node = str(node_of(side))
            missing = topic("ac-missing")
            two = topic("ac-two")
            if label == "two_resources":
                topic_with_configs(side, two, {})
            cases = {
                "missing_topic": [(TOPIC_RESOURCE, missing, [("retention.ms", SET, "5")])],
                "invalid_topic_name": [(TOPIC_RESOURCE, "bad name!", [("retention.ms", SET, "5")])],
                "broker_read_only": [(BROKER_RESOURCE, node, [("num.partitions", SET, "5")])],
                "broker_default_read_only": [(BROKER_RESOURCE, "", [("num.partitions", SET, "5")])],
                "broker_other_id": [(BROKER_RESOURCE, "77", [("num.partitions", SET, "5")])],
                "two_resources": [
                    (TOPIC_RESOURCE, two, [("retention.ms", SET, "7")]),
                    (TOPIC_RESOURCE, missing, [("retention.ms", SET, "abc")]),
                ],
            }
            inc = ask(side, INCREMENTAL_ALTER_CONFIGS, 1, inc_body(cases[label], False))
            legacy_cases = [(t, n, [(a, v) for a, _, v in cs]) for t, n, cs in cases[label]]
            leg = ask(side, ALTER_CONFIGS, 2, legacy_body(legacy_cases, False))
            return {
                "incremental": errors_of(side, inc, "responses"),
                "legacy": errors_of(side, leg, "responses"),
            }

        return run

    for label in (
        "missing_topic",
        "invalid_topic_name",
        "broker_read_only",
        "broker_default_read_only",
        "broker_other_id",
        "two_resources",
    ):
        add(
            f"alter_configs.both.{label}",
            other(label),
            "IncrementalAlterConfigs v1, AlterConfigs v2",
        )
    broker_config_scenarios(inc_body, legacy_body)


def broker_config_scenarios(inc_body: Callable[..., Any], legacy_body: Callable[..., Any]) -> None:
    """Dynamic broker configs (KIP-226) on the cluster default ("") and the broker's own
    resource: changes that are undone again (each waits until the broker shows them, as
    Kafka applies them a moment after it answers), and refusals with validate_only."""
    SET, DELETE, APPEND = 0, 1, 2

    def inc(side: Side, resources: list[tuple[str, list[Any]]], vo: bool = False) -> Any:
        named = [(BROKER_RESOURCE, str(node_of(side)) if n == "N" else n, c) for n, c in resources]
        return errors_of(
            side, ask(side, INCREMENTAL_ALTER_CONFIGS, 1, inc_body(named, vo)), "responses"
        )

    def shown(side: Side, name: str, keys: list[str]) -> Any:
        resource = str(node_of(side)) if name == "N" else name
        body = describe_body([(BROKER_RESOURCE, resource, keys)], docs=False)
        answer = described(side, ask(side, DESCRIBE_CONFIGS, 4, body))
        if isinstance(answer, dict):
            answer["results"][0]["resource_name"] = name
        return answer

    def settled(side: Side, name: str, key: str, value: str | None) -> Any:
        """The resource's describe once `key` shows `value` (None: not listed), or the
        last one after 15 s."""
        deadline = time.monotonic() + 15
        while True:
            answer = shown(side, name, [key])
            configs = answer["results"][0]["configs"] if isinstance(answer, dict) else []
            now = next((c["value"] for c in configs if c["name"] == key), None)
            if now == value or time.monotonic() > deadline:
                return answer
            time.sleep(0.2)

    def changes(side: Side) -> Any:
        name = topic("bc-topic")
        topic_with_configs(side, name, {})
        keys = ["log.retention.bytes", "message.max.bytes", "log.cleanup.policy"]
        out: dict[str, Any] = {}
        out["set_default"] = inc(
            side,
            [
                (
                    "",
                    [
                        ("log.retention.bytes", SET, "123456789"),
                        ("log.cleanup.policy", APPEND, "compact"),
                    ],
                )
            ],
        )
        out["default"] = settled(side, "", "log.retention.bytes", "123456789")
        out["set_node"] = inc(side, [("N", [("message.max.bytes", SET, " 2000000 ")])])
        out["node"] = settled(side, "N", "message.max.bytes", "2000000")
        out["node_keys"] = shown(side, "N", [*keys, "min.insync.replicas", "log.retention.ms"])
        body = describe_body([(TOPIC_RESOURCE, name, ["retention.bytes", "max.message.bytes"])])
        out["topic"] = described(side, ask(side, DESCRIBE_CONFIGS, 4, body))
        out["delete_node"] = inc(side, [("N", [("message.max.bytes", DELETE, None)])])
        settled(side, "N", "message.max.bytes", "1048588")
        out["delete_default"] = inc(
            side,
            [("", [("log.retention.bytes", DELETE, None), ("log.cleanup.policy", DELETE, None)])],
        )
        out["after"] = settled(side, "", "log.retention.bytes", None)
        return out

    add(
        "alter_configs.broker.set_describe_delete",
        changes,
        "IncrementalAlterConfigs v1 on the cluster default and the broker, DescribeConfigs v4",
    )

    refusals: dict[str, tuple[str, list[Any]]] = {
        "bad_value": ("", [("log.retention.ms", SET, "abc")]),
        "out_of_range": ("N", [("log.segment.bytes", SET, "1000")]),
        "list_items": ("", [("log.cleanup.policy", SET, "compact,compact")]),
        "read_only": ("", [("num.partitions", SET, "3"), ("node.id", SET, "3")]),
        "security_without_prefix": ("N", [("ssl.keystore.location", SET, "/x")]),
        "per_broker_at_default": ("", [("listeners", SET, "PLAINTEXT://:1")]),
        "requirement": ("", [("log.retention.ms", SET, "0")]),
        "local_retention": ("", [("log.local.retention.ms", SET, "-1")]),
        "copy_lag": (
            "N",
            [("log.remote.copy.lag.ms", SET, "5000"), ("log.local.retention.ms", SET, "10")],
        ),
        "delete_cluster_min_insync": ("", [("min.insync.replicas", DELETE, None)]),
        "broker_min_insync": ("N", [("min.insync.replicas", SET, "1")]),
        "append_not_list": ("", [("message.max.bytes", APPEND, "1")]),
        "append_unknown": ("N", [("no.such.config", APPEND, "1")]),
        "unknown_operation": ("", [("message.max.bytes", 9, "1")]),
        "null_value": ("N", [("message.max.bytes", SET, None)]),
        "unknown_name": ("", [("no.such.config", SET, "1")]),
        "valid": (
            "N",
            [("log.retention.ms", SET, "-5"), ("producer.id.expiration.ms", SET, "1000")],
        ),
    }

    def refusal(label: str) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            name, configs = refusals[label]
            return inc(side, [(name, configs)], True)

        return run

    for label in refusals:
        add(
            f"alter_configs.broker.validate_only.{label}",
            refusal(label),
            "IncrementalAlterConfigs v1",
        )

    def legacy(side: Side) -> Any:
        node = str(node_of(side))
        cases = {
            "default_without_min_insync": [(BROKER_RESOURCE, "", [("log.retention.bytes", "5")])],
            "default_with_min_insync": [
                (BROKER_RESOURCE, "", [("min.insync.replicas", "1"), ("log.retention.bytes", "5")])
            ],
            "node_min_insync": [(BROKER_RESOURCE, node, [("min.insync.replicas", "1")])],
            "node": [(BROKER_RESOURCE, node, [("message.max.bytes", "5000")])],
        }
        return {
            label: errors_of(
                side, ask(side, ALTER_CONFIGS, 2, legacy_body(resources, True)), "responses"
            )
            for label, resources in cases.items()
        }

    add("alter_configs.broker.legacy_validate_only", legacy, "AlterConfigs v2")


def create_partitions_scenarios() -> None:
    def case(version: int, label: str) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            node = node_of(side)
            name = topic(f"cp-v{version}-{label}")
            make_topic(side, name, 2)
            produce_ok(side, name, records(3), 0)
            cases: dict[str, tuple[list[tuple[str, int, Any]], bool]] = {
                "grow": ([(name, 4, None)], False),
                "same": ([(name, 2, None)], False),
                "shrink": ([(name, 1, None)], False),
                "validate_only": ([(name, 5, None)], True),
                "missing": ([(topic("cp-missing"), 3, None)], False),
                "invalid_name": ([("bad name!", 3, None)], False),
                "duplicate": ([(name, 3, None), (name, 4, None)], False),
                "assignment": ([(name, 3, [{"broker_ids": [node]}])], False),
                "assignment_count": ([(name, 4, [{"broker_ids": [node]}])], False),
                "assignment_empty": ([(name, 3, [{"broker_ids": []}])], False),
                "assignment_unknown_broker": ([(name, 3, [{"broker_ids": [77]}])], False),
                "assignment_broker_twice": ([(name, 3, [{"broker_ids": [node, node]}])], False),
            }
            topics, vo = cases[label]
            body = {
                "topics": [{"name": n, "count": c, "assignments": a} for n, c, a in topics],
                "timeout": 30_000,
                "validate_only": vo,
            }
            answer = ask(side, CREATE_PARTITIONS, version, body)
            out: dict[str, Any] = {"create": errors_of(side, answer, "results")}
            if isinstance(answer, dict) and answer["results"][0]["error_code"] == 0 and not vo:
                try:
                    entry = wait_topic(side, name, topics[0][1], timeout=10)
                    out["partitions_after"] = len(entry["partitions"])
                except SetupError as exc:
                    out["partitions_after"] = str(exc)
            else:
                time.sleep(0.3)
                out["partitions_after"] = len(metadata_topic(side, name)["partitions"])
            out["earliest_latest_p0"] = stored_offsets(side, name, 0)
            return out

        return run

    for v in (0, 3):
        for label in (
            "grow",
            "same",
            "shrink",
            "validate_only",
            "missing",
            "invalid_name",
            "duplicate",
            "assignment",
            "assignment_count",
            "assignment_empty",
            "assignment_unknown_broker",
            "assignment_broker_twice",
        ):
            add(
                f"create_partitions.v{v}.{label}",
                case(v, label),
                "topic of 2 partitions, 3 records in p0",
            )


def stored_offsets(side: Side, name: str, partition: int) -> Any:
    answer = ask(side, LIST_OFFSETS, 7, list_offsets_request(name, {partition: -2}))
    later = ask(side, LIST_OFFSETS, 7, list_offsets_request(name, {partition: -1}))
    if not isinstance(answer, dict) or not isinstance(later, dict):
        return [answer, later]
    first = answer["topics"][0]["partitions"][0]
    last = later["topics"][0]["partitions"][0]
    return [first["error_code"], first["offset"], last["offset"]]


def describe_cluster_scenarios() -> None:
    def case(version: int, include: bool, endpoint: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            body = {"include_cluster_authorized_operations": include, "endpoint_type": endpoint}
            answer = ask(side, DESCRIBE_CLUSTER, version, body)
            if isinstance(answer, dict):
                answer["message"] = answer.pop("error_message")
                for b in answer["brokers"]:
                    b["broker_id"] = Masked("node id", b["broker_id"])
            return answer

        return run

    add("describe_cluster.v0.plain", case(0, False, 1))
    add("describe_cluster.v0.authorized_operations", case(0, True, 1))
    add("describe_cluster.v1.broker_endpoint", case(1, True, 1))
    add("describe_cluster.v1.controller_endpoint", case(1, False, 2))
    add("describe_cluster.v1.unknown_endpoint", case(1, False, 5))


UPDATE_FEATURES = 57


def update_features_scenarios() -> None:
    """UpdateFeatures (kafka-features): Kafka's checks on transaction.version and on a
    feature Skiff lacks; what would change a level is sent with validate_only, so the
    broker's transaction.version stays 2 for the other scenarios."""

    def case(version: int, feature: str, level: int, upgrade: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            update: dict[str, Any] = {"feature": feature, "max_version_level": level}
            if version == 0:
                update["allow_downgrade"] = upgrade != 1
            else:
                update["upgrade_type"] = upgrade
            body = {"timeout": 60_000, "feature_updates": [update], "validate_only": True}
            answer = ask(side, UPDATE_FEATURES, version, body)
            if isinstance(answer, dict) and answer.get("error_message"):
                # "Local controller <node id> ...": the node ids differ
                answer["error_message"] = re.sub(
                    r"controller \d+", "controller N", answer["error_message"]
                )
            return answer

        return run

    add("update_features.v1.same_level", case(1, "transaction.version", 2, 1))
    add("update_features.v1.safe_downgrade", case(1, "transaction.version", 0, 2))
    add("update_features.v1.downgrade_as_upgrade", case(1, "transaction.version", 1, 1))
    add("update_features.v1.upgrade_as_downgrade", case(1, "transaction.version", 3, 2))
    add("update_features.v1.beyond_supported", case(1, "transaction.version", 3, 1))
    add("update_features.v1.negative", case(1, "transaction.version", -1, 3))
    add("update_features.v1.bad_upgrade_type", case(1, "transaction.version", 2, 7))
    add("update_features.v1.unknown_feature", case(1, "skiff.nothing", 1, 1))
    add("update_features.v0.allow_downgrade", case(0, "transaction.version", 1, 2))
    add("update_features.v2.downgrade_as_upgrade", case(2, "transaction.version", 1, 1))


def create_topics_bad_input_scenarios() -> None:
    """Bad CreateTopics input: each answer (messages in full) and that nothing exists after."""
    cases: dict[str, list[dict[str, Any]]] = {
        "illegal_chars": [{"name": "bad/name"}],
        "name_250_chars": [{"name": "n" * 250}],
        "name_dot": [{"name": "."}],
        "name_dotdot": [{"name": ".."}],
        "name_empty": [{"name": ""}],
        "partitions_negative": [{"partitions": -5}],
        "partitions_zero_rf_zero": [{"partitions": 0, "rf": 0}],
        "replication_factor_3": [{"rf": 3}],
        "config_wrong_type": [{"configs": [("retention.ms", "abc")]}],
        "config_unknown": [{"configs": [("no.such.config", "1")]}],
        "config_null": [{"configs": [("retention.ms", None)]}],
        "config_out_of_range": [{"configs": [("min.insync.replicas", "0")]}],
        "duplicate_names": [{}, {}],
        "too_many_partitions": [{"partitions": 10_001}],
        "assignment_with_rf": [{"partitions": -1, "rf": 1, "assign": [[0, "n"]]}],
        "assignment_with_count": [{"partitions": 2, "rf": -1, "assign": [[0, "n"]]}],
        "assignment_gap": [{"partitions": -1, "rf": -1, "assign": [[1, "n"]]}],
        "assignment_unknown_broker": [{"partitions": -1, "rf": -1, "assign": [[0, "n+7"]]}],
        "assignment_ok": [{"partitions": -1, "rf": -1, "assign": [[0, "n"], [1, "n"]]}],
    }

    def case(version: int, label: str) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            node = node_of(side)
            default_name = topic(f"ctb-v{version}-{label}")
            topics = []
            for spec in cases[label]:
                assign = [
                    {"partition_index": p, "broker_ids": [77 if b == "n+7" else node]}
                    for p, b in spec.get("assign", [])
                ]
                topics.append(
                    {
                        "name": spec.get("name", default_name),
                        "num_partitions": spec.get("partitions", 1),
                        "replication_factor": spec.get("rf", 1),
                        "assignments": assign,
                        "configs": [{"name": a, "value": b} for a, b in spec.get("configs", [])],
                    }
                )
            body = {"topics": topics, "timeout": 30_000, "validate_only": False}
            answer = ask(side, CREATE_TOPICS, version, body)
            out: dict[str, Any] = {"create": errors_of(side, answer, "topics")}
            time.sleep(0.3)
            names = sorted({t["name"] for t in topics})
            legal = [
                n for n in names if n and n not in (".", "..") and "/" not in n and len(n) < 250
            ]
            out["exists_after"] = {
                _strip_run(n): metadata_topic(side, n)["error_code"] != 3 for n in legal
            }
            return out

        return run

    for v in (2, 7):
        for label in cases:
            add(f"create_topics.v{v}.bad.{label}", case(v, label))

    def collision(side: Side) -> Any:
        first = topic("ctb_collide.x")
        make_topic(side, first)
        body = create_topics_body(topic("ctb.collide_x"))
        return errors_of(side, ask(side, CREATE_TOPICS, 7, body), "topics")

    add("create_topics.v7.bad.collides_with_existing", collision, "'.' and '_' collide")


def delete_topics_v0_scenarios() -> None:
    def body(names: list[str]) -> bytes:
        out = struct.pack(">i", len(names))
        for n in names:
            raw = n.encode()
            out += struct.pack(">h", len(raw)) + raw
        return out + struct.pack(">i", 30_000)

    def read(frame: bytes) -> Any:
        pos = 4  # correlation id
        (count,) = struct.unpack_from(">i", frame, pos)
        pos += 4
        out = []
        for _ in range(count):
            (n,) = struct.unpack_from(">h", frame, pos)
            name = frame[pos + 2 : pos + 2 + n].decode()
            pos += 2 + n
            (code,) = struct.unpack_from(">h", frame, pos)
            pos += 2
            out.append([_strip_run(name), code])
        # Kafka answers in its own (hash) order: compare sorted.
        return {"responses": sorted(out), "trailing_bytes": len(frame) - pos}

    def run(side: Side) -> Any:
        name = topic("delete-v0")
        make_topic(side, name)
        answer = ask_raw(side, DELETE_TOPICS, 0, body([name, topic("delete-v0-missing")]), read)
        return {"delete": answer, "gone_after": wait_gone(side, name)}

    add("delete_topics.v0.existing_and_missing", run, "hand-encoded v0 (kio has no schema)")


DESCRIBE_QUORUM, UNREGISTER_BROKER, ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = 55, 64, 80, 81
UNREGISTER_CONTROLLER = 94
QUORUM_PARTITION = {"partition_index": 0}


def quorum_scenarios() -> None:
    """The KRaft administration APIs (Kafka 4.4 only; UnregisterController is new in
    4.x). The quorum itself differs by design: Kafka's has a metadata log, Skiff's none
    (epoch and offsets 0), and the times are the brokers' own; the refusals compare in
    full. Nothing here unregisters a live broker: the reference Kafka would stay
    unregistered for the scenarios after it."""

    def describe(version: int, topics: list[dict[str, Any]]) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            answer = ask(side, DESCRIBE_QUORUM, version, {"topics": topics})
            if not isinstance(answer, dict):
                return answer
            for t in answer["topics"]:
                for p in t["partitions"]:
                    if p["error_code"] == 0:
                        p["leader_id"] = Masked("node id", p["leader_id"])
                        p["leader_epoch"] = Masked("no metadata log", p["leader_epoch"])
                        p["high_watermark"] = Masked("no metadata log", p["high_watermark"])
                        for v in p["current_voters"]:
                            v["replica_id"] = Masked("node id", v["replica_id"])
                            v["log_end_offset"] = Masked("no metadata log", v["log_end_offset"])
                            for key in ("last_fetch_timestamp", "last_caught_up_timestamp"):
                                if key in v:
                                    v[key] = Masked("time", v[key])
            for n in answer.get("nodes", []):  # Kafka's controller listener, Skiff's own
                n["node_id"] = Masked("node id", n["node_id"])
                n["listeners"] = Masked("listeners", n["listeners"])
            return answer

        return run

    quorum = [{"topic_name": "__cluster_metadata", "partitions": [QUORUM_PARTITION]}]
    for v in range(3):
        add(f"describe_quorum.v{v}", describe(v, quorum))
    two = [{"topic_name": "__cluster_metadata", "partitions": [QUORUM_PARTITION] * 2}]
    add("describe_quorum.v2.two_partitions", describe(2, two))
    other = [{"topic_name": "other", "partitions": [QUORUM_PARTITION]}]
    add("describe_quorum.v2.other_topic", describe(2, other))
    add("describe_quorum.v2.nothing", describe(2, []))

    def unregister_broker(side: Side) -> Any:
        return ask(side, UNREGISTER_BROKER, 0, {"broker_id": 7})

    add("unregister_broker.v0.unknown", unregister_broker)

    def unregister_controller(node: Callable[[Side], int]) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            request = kio_extra.UnregisterControllerRequestV0(controller_id=node(side))  # type: ignore[arg-type]
            return ask(side, UNREGISTER_CONTROLLER, 0, request)

        return run

    add("unregister_controller.v0.unknown", unregister_controller(lambda side: 7))
    add("unregister_controller.v0.active", unregister_controller(node_of))

    directory = uuid.UUID("a5f9f456-441b-4710-bc1e-c6ca8db5b62f")

    def voter(key: int, version: int, **changes: Any) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            body: dict[str, Any] = {
                "cluster_id": None,
                "voter_id": 2,
                "voter_directory_id": directory,
            }
            if key == ADD_RAFT_VOTER:
                body["timeout"] = 1000
                body["listeners"] = [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 1}]
                body["ack_when_committed"] = True
            body.update(changes)
            answer = ask(side, key, version, body)
            if isinstance(answer, dict) and "cluster id" in str(answer.get("error_message")):
                answer["error_message"] = re.sub(
                    r'cluster id "[^"]*"', 'cluster id "<id>"', answer["error_message"]
                )
            return answer

        return run

    for name, key, versions in (
        ("add", ADD_RAFT_VOTER, (0, 1)),
        ("remove", REMOVE_RAFT_VOTER, (0,)),
    ):
        for v in versions:
            add(f"{name}_raft_voter.v{v}.static_quorum", voter(key, v))
        add(f"{name}_raft_voter.v0.other_cluster", voter(key, 0, cluster_id="other"))
        add(
            f"{name}_raft_voter.v0.no_directory", voter(key, 0, voter_directory_id=uuid.UUID(int=0))
        )
