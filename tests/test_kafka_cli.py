"""scripts/kafka-cli: Apache Kafka's own command-line tools, fetched from Maven Central,
against a real Skiff, with no SLF4J noise on stderr.

The first run fetches the jars (tools/kafka_jars.py, cached in ~/.cache/skiff); without
java or mvn the tests are skipped, as the other Kafka-tools tests are.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path
from types import ModuleType

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import ROOT, Skiff

KAFKA_CLI = ROOT / "scripts" / "kafka-cli"
TOOL_TIMEOUT_S = 240.0  # a JVM start on a loaded machine, plus the first fetch from Maven


def kafka_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KAFKA_CLI), *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_S,
    )


def tools_module() -> ModuleType:
    """tools/kafka_cli.py, the script's code."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import kafka_cli
    finally:
        sys.path.remove(str(ROOT / "tools"))
    return kafka_cli


@pytest.fixture(scope="module", autouse=True)
def kafka_tools_fetched() -> None:
    """The jars in the cache before the tests run, so that a first fetch's progress lines
    (stderr) are not in the tests' output."""
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup.sh --test installs it)")
    tool = tools_module()
    tool.tools_jars(tool.KAFKA_VERSION)


def slf4j_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "SLF4J" in line]


def create_topic(skiff: Skiff, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": skiff.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def test_kafka_topics_lists_a_topic_without_slf4j_noise(skiff: Skiff, topic: str) -> None:
    create_topic(skiff, topic, partitions=3)
    result = kafka_cli("kafka-topics", "--bootstrap-server", skiff.bootstrap, "--list")
    assert result.returncode == 0, result.stderr
    assert topic in result.stdout.splitlines()
    assert result.stderr == ""  # no SLF4J lines, no log lines, no progress

    described = kafka_cli(
        "kafka-topics", "--bootstrap-server", skiff.bootstrap, "--describe", "--topic", topic
    )
    assert described.returncode == 0, described.stderr
    assert "PartitionCount: 3" in described.stdout, described.stdout
    assert slf4j_lines(described.stderr) == [], described.stderr


def test_console_producer_then_consumer_round_trip(skiff: Skiff, topic: str) -> None:
    """stdin reaches the tool (the script hands the process over to java) and what the
    console producer writes comes back, in order, from the console consumer."""
    create_topic(skiff, topic)
    lines = [f"line-{i}-{uuid.uuid4().hex[:6]}" for i in range(3)]
    produced = kafka_cli(
        "kafka-console-producer",
        "--bootstrap-server",
        skiff.bootstrap,
        "--topic",
        topic,
        stdin="\n".join(lines) + "\n",
    )
    assert produced.returncode == 0, produced.stderr
    assert slf4j_lines(produced.stderr) == [], produced.stderr

    consumed = kafka_cli(
        "kafka-console-consumer",
        "--bootstrap-server",
        skiff.bootstrap,
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "3",
        "--timeout-ms",
        "60000",
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == lines
    assert slf4j_lines(consumed.stderr) == [], consumed.stderr


def test_unknown_tool_is_one_line_and_status_2() -> None:
    result = kafka_cli("kafka-nonsense", "--list")
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("kafka-cli: unknown tool 'kafka-nonsense'; one of: kafka-acls,")


def test_every_listed_tool_class_is_in_the_fetched_jars() -> None:
    """The name -> class table matches the Kafka version fetched (classes move between
    Kafka releases: ConsoleConsumer left kafka_2.13 for kafka-tools in 3.7)."""
    listed = kafka_cli("--list")
    assert listed.returncode == 0
    names = listed.stdout.split()
    assert {"kafka-topics", "kafka-console-producer", "kafka-consumer-groups"} <= set(names)

    tool = tools_module()
    lib = tool.tools_jars(tool.KAFKA_VERSION)
    classes: set[str] = set()
    for jar in Path(lib).glob("*.jar"):
        with zipfile.ZipFile(jar) as z:
            classes.update(n for n in z.namelist() if n.endswith(".class"))
    missing = [n for n in names if tool.TOOLS[n].replace(".", "/") + ".class" not in classes]
    assert missing == []


@pytest.mark.parametrize("version", ["4.2.0", "4.4.0"])
def test_every_tool_class_of_kafka_4_is_in_its_jars(version: str) -> None:
    """Kafka 4 moved tools from kafka_2.13 to kafka-tools (ConfigCommand only in 4.4)."""
    tool = tools_module()
    lib = tool.tools_jars(version)
    classes: set[str] = set()
    for jar in Path(lib).glob("*.jar"):
        with zipfile.ZipFile(jar) as z:
            classes.update(n for n in z.namelist() if n.endswith(".class"))
    missing = [
        n
        for n in tool.TOOLS
        if tool.tool_class(n, version).replace(".", "/") + ".class" not in classes
    ]
    assert missing == []
