"""Apache Kafka's own command-line tools, run from Maven artifacts, and a reference Kafka
broker to run them against as well.

`kafka-topics` is `org.apache.kafka.tools.TopicCommand` (artifact kafka-tools) and
`kafka-configs` is `kafka.admin.ConfigCommand` (artifact kafka_2.13); both drive the
Java AdminClient. Their jars and dependencies are fetched once with
`mvn dependency:copy-dependencies` into ~/.cache/skiff/kafka-tools-<version>/lib (as
tools/kafka_reference.py fetches the broker's).

    out = kafka_topics(bootstrap, "--create", "--topic", "t", "--partitions", "3")
    out.returncode, out.stdout, out.stderr

`reference_kafka()` starts a single-node KRaft broker (tools/kafka_reference.py) and
yields its bootstrap address, so a test can make the same call against Kafka and Skiff.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

KAFKA_VERSION = "3.9.1"
CACHE = Path.home() / ".cache" / "skiff" / f"kafka-tools-{KAFKA_VERSION}"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
TOOL_TIMEOUT_S = 120.0

POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>skiff.tools</groupId>
  <artifactId>kafka-admin-tools</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId>
      <version>{version}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{version}</version>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId>
      <version>1.7.36</version>
    </dependency>
  </dependencies>
</project>
"""


class ToolsUnavailable(RuntimeError):
    """java or mvn is missing, or Maven could not fetch the jars."""


def tools_lib() -> Path:
    """The folder of kafka-tools' and kafka_2.13's jars, fetched once (serialised by a
    lock file, so parallel test processes fetch only once)."""
    lib = CACHE / "lib"
    done = lib / ".complete"
    if done.exists():
        return lib
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return lib
        mvn = shutil.which("mvn")
        if mvn is None:
            raise ToolsUnavailable("mvn is not installed (apt-get install maven)")
        (CACHE / "pom.xml").write_text(POM.format(version=KAFKA_VERSION))
        result = subprocess.run(
            [
                mvn,
                "-q",
                "-B",
                "-f",
                str(CACHE / "pom.xml"),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={lib}",
                "-DincludeScope=runtime",
            ],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=900,
        )
        (CACHE / "mvn.log").write_text(result.stdout + result.stderr)
        if result.returncode != 0 or not (lib / f"kafka-tools-{KAFKA_VERSION}.jar").exists():
            raise ToolsUnavailable(f"mvn failed, see {CACHE / 'mvn.log'}")
        done.write_text("ok\n")
    return lib


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise ToolsUnavailable("java is not installed (apt-get install openjdk-17-jre-headless)")
    return java


def run_tool(main_class: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        _java(),
        "-Xms64m",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",  # short-lived: start fast
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=error",
        "-cp",
        str(tools_lib() / "*"),
        main_class,
        *args,
    ]
    return subprocess.run(
        cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=TOOL_TIMEOUT_S
    )


def kafka_topics(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_tool(TOPIC_COMMAND, "--bootstrap-server", bootstrap, *args)


def kafka_configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_tool(CONFIG_COMMAND, "--bootstrap-server", bootstrap, *args)


@contextmanager
def reference_kafka() -> Iterator[str]:
    """A real Apache Kafka broker (single KRaft node, tools/kafka_reference.py's
    settings) for the duration; yields its bootstrap address."""
    tools = Path(__file__).resolve().parents[1] / "tools"
    if str(tools) not in sys.path:
        sys.path.insert(0, str(tools))
    import kafka_reference

    procs = kafka_reference.Processes()
    with tempfile.TemporaryDirectory(prefix="skiff-kafka-ref-") as work:
        try:
            try:
                port = kafka_reference.start_kafka(procs, KAFKA_VERSION, Path(work), 120.0)
            except RuntimeError as exc:
                raise ToolsUnavailable(str(exc)) from None
            yield f"127.0.0.1:{port}"
        finally:
            procs.stop_all()
