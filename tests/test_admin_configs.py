"""Topic and broker configs through DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs, against Skiff and, for the same calls, a real Apache Kafka 4.4.0
broker: Kafka's `kafka-configs` tool (ConfigCommand, the Java AdminClient) and
confluent-kafka's AdminClient. Also: an altered config is enforced at once on the
sidecar that changed it and within the topic cache's second on the others, and two
sidecars altering one topic at once lose no update.
"""

from __future__ import annotations

import json
import struct
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from conftest import RedisServer, Skiff, start_skiff, stop_process
from kafka_tools import ToolsUnavailable, kafka_configs, kafka_topics, reference_kafka
from rawkafka import RawKafka, build_batch, produce_request

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
MESSAGE_TOO_LARGE = 10
KAFKA4 = "4.4.0"  # the broker Skiff's configs follow


@pytest.fixture(scope="module")
def kafka() -> Iterator[str]:
    try:
        with reference_kafka(version=KAFKA4) as bootstrap:
            yield bootstrap
    except ToolsUnavailable as exc:
        pytest.skip(f"no reference Kafka: {exc}")


def name(label: str) -> str:
    return f"cfg-{label}-{uuid.uuid4().hex[:8]}"


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})


def _create(bootstrap: str, topic: str, config: dict[str, str] | None = None) -> None:
    admin = _admin(bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1, config=config or {})])[topic].result(timeout=30)


# -- kafka-configs ---------------------------------------------------------------------------


def _tool_answer(result: Any) -> tuple[int, list[str]]:
    """Exit code and what the tool says: its output lines, or the exception's cause."""
    if result.returncode != 0:
        causes = [line for line in result.stderr.splitlines() if line.startswith("Caused by:")]
        return result.returncode, causes[-1:]
    return 0, [line.rstrip() for line in result.stdout.splitlines()]


def test_kafka_configs_alter_and_describe_topic_like_kafka(kafka: str, skiff: Skiff) -> None:
    topic = name("kc")
    entity = ("--entity-type", "topics", "--entity-name", topic)
    steps = [
        ("--alter", *entity, "--add-config", "cleanup.policy=[compact,delete],retention.ms=1000"),
        ("--alter", *entity, "--add-config", "max.message.bytes=5000"),
        ("--describe", *entity),
        ("--alter", *entity, "--delete-config", "retention.ms"),
        ("--alter", *entity, "--add-config", "no.such.config=1"),
        ("--alter", *entity, "--add-config", "retention.ms=abc"),
        ("--alter", *entity, "--add-config", "min.insync.replicas=0"),
        ("--describe", *entity, "--all"),
        ("--describe", "--entity-type", "brokers", "--entity-default"),
        (
            "--alter",
            "--entity-type",
            "brokers",
            "--entity-default",
            "--add-config",
            "num.partitions=3",
        ),
    ]
    answers = {}
    for side, bootstrap in (("kafka", kafka), ("skiff", skiff.bootstrap)):
        _create(bootstrap, topic)
        answers[side] = [_tool_answer(kafka_configs(bootstrap, *args)) for args in steps]
    # Skiff's own topic config skiff.storage.format (listed by --all) is no Kafka config:
    # compared without it, checked below and in test_kafka_tools_storage_format.
    format_line = (
        "  skiff.storage.format=batch sensitive=false synonyms="
        "{DEFAULT_CONFIG:skiff.storage.format=batch}"
    )
    assert format_line in answers["skiff"][7][1]
    answers["skiff"][7][1].remove(format_line)
    assert answers["skiff"] == answers["kafka"]
    got = answers["skiff"]
    assert got[0] == (0, [f"Completed updating config for topic {topic}."])
    assert got[2] == (
        0,
        [
            f"Dynamic configs for topic {topic} are:",
            "  cleanup.policy=compact,delete sensitive=false synonyms="
            "{DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
            "DEFAULT_CONFIG:log.cleanup.policy=delete}",
            "  max.message.bytes=5000 sensitive=false synonyms="
            "{DYNAMIC_TOPIC_CONFIG:max.message.bytes=5000, "
            "DEFAULT_CONFIG:message.max.bytes=1048588}",
            "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}",
        ],
    )
    assert got[4] == (
        1,
        [
            "Caused by: org.apache.kafka.common.errors.InvalidConfigurationException: "
            "Unknown topic config name: no.such.config"
        ],
    )
    assert got[5][0] == 1 and "Not a number of type LONG" in got[5][1][0]
    assert len(got[7][1]) == 38  # the heading and all 37 topic configs
    assert got[9] == (
        1,
        [
            "Caused by: org.apache.kafka.common.errors.InvalidRequestException: "
            "Cannot update these configs dynamically: [num.partitions]"
        ],
    )


def test_kafka_tools_storage_format(skiff: Skiff) -> None:
    """skiff.storage.format through Kafka's own tools: kafka-topics --create --config
    sets it, kafka-configs --describe shows it (a topic config when named at creation,
    else a default), and altering it is refused with one clear message."""
    record, plain = name("fmt-r"), name("fmt-d")
    # Kafka 3.9's kafka-topics checks config names against Kafka's own before sending
    # (LogConfig.validate): it cannot name Skiff's; an AdminClient (or `skiff topics
    # create --format`) can.
    local = kafka_topics(
        skiff.bootstrap,
        *("--create", "--topic", record, "--partitions", "1"),
        *("--config", "skiff.storage.format=record"),
    )
    assert local.returncode == 1
    assert "Unknown topic config name: skiff.storage.format" in local.stdout
    _create(skiff.bootstrap, record, {"skiff.storage.format": "record"})
    _create(skiff.bootstrap, plain)
    entity = ("--entity-type", "topics", "--entity-name", record)
    assert _tool_answer(kafka_configs(skiff.bootstrap, "--describe", *entity)) == (
        0,
        [
            f"Dynamic configs for topic {record} are:",
            "  skiff.storage.format=record sensitive=false synonyms="
            "{DYNAMIC_TOPIC_CONFIG:skiff.storage.format=record}",
        ],
    )
    plain_entity = ("--entity-type", "topics", "--entity-name", plain)
    described = kafka_configs(skiff.bootstrap, "--describe", *plain_entity, "--all")
    assert (
        "  skiff.storage.format=batch sensitive=false synonyms="
        "{DEFAULT_CONFIG:skiff.storage.format=batch}"
    ) in described.stdout.splitlines()
    refusal = (
        1,
        [
            "Caused by: org.apache.kafka.common.errors.InvalidConfigurationException: "
            "skiff.storage.format is fixed when a topic is created and cannot be altered: "
            "create a new topic with the format you want and copy the records into it"
        ],
    )
    for change in (
        ("--add-config", "skiff.storage.format=batch"),
        ("--delete-config", "skiff.storage.format"),
    ):
        assert _tool_answer(kafka_configs(skiff.bootstrap, "--alter", *entity, *change)) == (
            refusal
        )
    admin = _admin(skiff.bootstrap)
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in (record, plain)]
    entries = {
        r.name: c["skiff.storage.format"]
        for r, f in admin.describe_configs(resources).items()
        for c in [f.result(timeout=30)]
    }
    assert (entries[record].value, entries[record].source, entries[record].is_read_only) == (
        "record",
        1,  # DYNAMIC_TOPIC_CONFIG
        True,
    )
    assert (entries[plain].value, entries[plain].source) == ("batch", 5)  # DEFAULT_CONFIG


def test_kafka_configs_describes_the_sidecar_broker(skiff: Skiff) -> None:
    admin = _admin(skiff.bootstrap)
    node_id = admin.describe_cluster().result(timeout=30).nodes[0].id
    result = kafka_configs(
        skiff.bootstrap,
        "--describe",
        "--entity-type",
        "brokers",
        "--entity-name",
        str(node_id),
        "--all",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"All configs for broker {node_id} are:"
    values = dict(line.strip().split(" ", 1)[0].split("=", 1) for line in lines[1:])
    assert values["num.partitions"] == "1"
    assert values["node.id"] == str(node_id)
    assert values["message.max.bytes"] == "1048588"
    assert values["advertised.listeners"] == f"PLAINTEXT://{skiff.bootstrap}"
    assert values["log.cleanup.policy"] == "delete"


# -- confluent-kafka's AdminClient -----------------------------------------------------------


def _result(future: Any) -> tuple[str, str]:
    try:
        future.result(timeout=30)
    except KafkaException as exc:
        err = exc.args[0]
        return err.name(), err.str()
    return "NO_ERROR", ""


def _overrides(admin: AdminClient, topic: str) -> dict[str, str]:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([res])[res].result(timeout=30)
    return {
        k: v.value
        for k, v in configs.items()
        if v.source == ConfigResource.Type.TOPIC.value or v.source == 1
    }


def _overrides_after(
    admin: AdminClient, topic: str, before: dict[str, str], result: tuple[str, str]
) -> dict[str, str]:
    """The overrides after an alter answered `result`. Kafka applies a change a moment
    after it answers (the broker learns it from the controller's metadata), so after a
    successful change read until the overrides differ from `before`."""
    deadline = time.monotonic() + 15
    while True:
        now = _overrides(admin, topic)
        if result[0] != "NO_ERROR" or now != before or time.monotonic() > deadline:
            return now
        time.sleep(0.1)


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_confluent_incremental_and_legacy_alter_like_kafka(kafka: str, skiff: Skiff) -> None:
    topic = name("ck")
    missing = name("missing")
    SET, DELETE, APPEND, SUBTRACT = (
        AlterConfigOpType.SET,
        AlterConfigOpType.DELETE,
        AlterConfigOpType.APPEND,
        AlterConfigOpType.SUBTRACT,
    )

    def res(n: str, *entries: tuple[str, Any, str | None]) -> ConfigResource:
        return ConfigResource(
            ConfigResource.Type.TOPIC,
            n,
            incremental_configs=[
                ConfigEntry(k, v, incremental_operation=op) for k, op, v in entries
            ],
        )

    answers = {}
    for side, bootstrap in (("kafka", kafka), ("skiff", skiff.bootstrap)):
        admin = _admin(bootstrap)
        _create(bootstrap, topic, {"retention.ms": "1000"})
        current = _overrides_after(admin, topic, {}, ("NO_ERROR", ""))
        out: list[Any] = []
        for resource in (
            res(topic, ("cleanup.policy", APPEND, "compact"), ("retention.ms", DELETE, None)),
            res(topic, ("cleanup.policy", SUBTRACT, "delete"), ("segment.ms", SET, "60000")),
            res(topic, ("retention.ms", APPEND, "5")),
            res(topic, ("max.message.bytes", SET, "-5")),
            res(missing, ("retention.ms", SET, "5")),
        ):
            [future] = admin.incremental_alter_configs([resource]).values()
            result = _result(future)
            current = _overrides_after(admin, topic, current, result)
            out += [result, current]
        validate_only = res(topic, ("segment.ms", SET, "1"))
        [future] = admin.incremental_alter_configs([validate_only], validate_only=True).values()
        out += [_result(future), _overrides(admin, topic)]  # validate_only changes nothing
        legacy = ConfigResource(
            ConfigResource.Type.TOPIC, topic, set_config={"max.message.bytes": "3000"}
        )
        [future] = admin.alter_configs([legacy]).values()
        result = _result(future)
        out += [result, _overrides_after(admin, topic, current, result)]
        answers[side] = out
    assert answers["skiff"] == answers["kafka"]
    got = answers["skiff"]
    assert got[1] == {"cleanup.policy": "delete,compact"}
    assert got[3] == {"cleanup.policy": "compact", "segment.ms": "60000"}
    assert got[4] == (
        "INVALID_CONFIG",
        "Can't APPEND to key retention.ms because its type is not LIST.",
    )
    assert got[6] == (
        "INVALID_CONFIG",
        "Invalid value -5 for configuration max.message.bytes: Value must be at least 0",
    )
    assert got[8] == ("UNKNOWN_TOPIC_OR_PART", f"The topic '{missing}' does not exist.")
    assert got[11] == {"cleanup.policy": "compact", "segment.ms": "60000"}  # validate_only
    assert got[13] == {"max.message.bytes": "3000"}  # whole-set replace


# -- enforcement and concurrency --------------------------------------------------------------


def _produce_error(port: int, topic: str, value_size: int) -> int:
    with RawKafka("127.0.0.1", port) as client:
        batch = build_batch([b"x" * value_size])
        answer = client.request(0, 9, produce_request(topic, {0: batch}))
    return int(answer.responses[0].partition_responses[0].error_code)


def test_altered_config_is_enforced_on_every_sidecar(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    sidecars = [start_skiff(tmp_path / f"e{i}.log", "--redis-url", own_redis.url) for i in (0, 1)]
    topic = name("enforce")
    try:
        _create(sidecars[0].bootstrap, topic)
        assert _produce_error(sidecars[1].port, topic, 2000) == 0  # caches the topic
        admin = _admin(sidecars[0].bootstrap)
        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry("max.message.bytes", "500", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        assert _result(admin.incremental_alter_configs([resource])[resource]) == ("NO_ERROR", "")
        # The sidecar that made the change applies it at once ...
        assert _produce_error(sidecars[0].port, topic, 2000) == MESSAGE_TOO_LARGE
        # ... the other once the change's message (skiff:wake:topics) reaches it.
        deadline = time.monotonic() + 10
        while _produce_error(sidecars[1].port, topic, 2000) != MESSAGE_TOO_LARGE:
            assert time.monotonic() < deadline, "the other sidecar never applied the change"
            time.sleep(0.2)
        assert _produce_error(sidecars[1].port, topic, 100) == 0
    finally:
        for s in sidecars:
            stop_process(s.proc)


def test_two_sidecars_altering_one_topic_lose_no_update(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """Each of 4 clients (two per sidecar) SETs 25 configs of its own, one request each,
    all at once: compare-and-set means every SET survives."""
    sidecars = [start_skiff(tmp_path / f"c{i}.log", "--redis-url", own_redis.url) for i in (0, 1)]
    topic = name("race")
    names = ["retention.ms", "segment.ms", "delete.retention.ms", "file.delete.delay.ms"]
    try:
        _create(sidecars[0].bootstrap, topic)

        def alter(i: int) -> list[int]:
            codes = []
            with RawKafka("127.0.0.1", sidecars[i % 2].port) as client:
                for n in range(1, 26):
                    body = {
                        "resources": [
                            {
                                "resource_type": 2,
                                "resource_name": topic,
                                "configs": [
                                    {"name": names[i], "config_operation": 0, "value": str(n)}
                                ],
                            }
                        ],
                        "validate_only": False,
                    }
                    answer = client.request(INCREMENTAL_ALTER_CONFIGS, 1, body)
                    codes.append(int(answer.responses[0].error_code))
            return codes

        with ThreadPoolExecutor(4) as pool:
            codes = [c for cs in pool.map(alter, range(4)) for c in cs]
        assert codes == [0] * 100
        doc = json.loads(own_redis.client().hget("skiff:topics", topic))
        assert doc["configs"] == {n: "25" for n in names}
    finally:
        for s in sidecars:
            stop_process(s.proc)


def test_describe_configs_broker_resources(skiff: Skiff) -> None:
    """Raw DescribeConfigs v4 for broker resources, as Kafka 4.4.0 answers: this
    sidecar's id (a static config read-only, a dynamic one writable, synonyms and
    documentation), the cluster default (min.insync.replicas, written when the cluster
    is formatted; tests/test_broker_configs.py has the rest), and another id (Kafka's
    INVALID_REQUEST)."""
    with RawKafka("127.0.0.1", skiff.port) as client:
        meta = client.request(3, 12, {"topics": [], "allow_auto_topic_creation": False})
        node = str(meta.brokers[0].node_id)
        body = {
            "resources": [
                {
                    "resource_type": 4,
                    "resource_name": node,
                    "configuration_keys": ["num.partitions", "log.retention.ms"],
                },
                {
                    "resource_type": 4,
                    "resource_name": "",
                    "configuration_keys": ["min.insync.replicas"],
                },
                {"resource_type": 4, "resource_name": "77", "configuration_keys": None},
            ],
            "include_synonyms": True,
            "include_documentation": True,
        }
        answer = client.request(DESCRIBE_CONFIGS, 4, body)
    own, default, other = answer.results
    assert int(own.error_code) == 0
    entries = {c.name: c for c in own.configs}
    assert sorted(entries) == ["log.retention.ms", "num.partitions"]
    partitions = entries["num.partitions"]
    assert (partitions.value, partitions.read_only, partitions.config_source) == ("1", True, 5)
    assert [(s.name, s.value, s.source) for s in partitions.synonyms] == [
        ("num.partitions", "1", 5)
    ]
    assert partitions.documentation.startswith("The default number of log partitions per topic")
    retention = entries["log.retention.ms"]
    # as Kafka: no value of its own (log.retention.hours applies), and writable
    assert (retention.value, retention.read_only, retention.synonyms) == (None, False, ())
    assert int(default.error_code) == 0
    [min_insync] = default.configs
    assert (min_insync.name, min_insync.value, min_insync.read_only) == (
        "min.insync.replicas",
        "1",
        False,
    )
    assert min_insync.config_source == 3  # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert [(s.name, s.value, s.source) for s in min_insync.synonyms] == [
        ("min.insync.replicas", "1", 3)
    ]
    assert int(other.error_code) == 42
    assert other.error_message == (
        f"Unexpected broker id, expected {node} or empty string, but received 77"
    )


def test_describe_configs_v0(skiff: Skiff) -> None:
    """v0 (hand-decoded, no kio schema): name, value, read_only, is_default (false on
    every entry, as Kafka 3.9 answers), is_sensitive."""
    topic = name("v0")
    _create(skiff.bootstrap, topic, {"retention.ms": "1000"})
    keys = [b"retention.ms", b"segment.ms"]
    body = struct.pack(">ibh", 1, 2, len(topic)) + topic.encode() + struct.pack(">i", len(keys))
    for k in keys:
        body += struct.pack(">h", len(k)) + k
    with RawKafka("127.0.0.1", skiff.port) as client:
        client.send(DESCRIBE_CONFIGS, 0, body)
        frame = client.recv_raw()
    pos = 8  # correlation id, throttle time

    def take(fmt: str) -> Any:
        nonlocal pos
        (value,) = struct.unpack_from(fmt, frame, pos)
        pos += struct.calcsize(fmt)
        return value

    def text() -> str | None:
        nonlocal pos
        n = take(">h")
        value = None if n < 0 else frame[pos : pos + n].decode()
        pos += max(n, 0)
        return value

    assert take(">i") == 1
    assert (take(">h"), text(), take(">b"), text()) == (0, "", 2, topic)
    entries = [(text(), text(), take(">?"), take(">?"), take(">?")) for _ in range(take(">i"))]
    assert pos == len(frame)
    assert entries == [  # in Kafka's order
        ("retention.ms", "1000", False, False, False),
        ("segment.ms", "604800000", False, False, False),
    ]
