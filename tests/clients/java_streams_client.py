"""Kafka transactions from Java and a Kafka Streams exactly_once_v2 application, against
Skiff: ``tests/java-streams`` (``skiff.StreamsTool``, kafka-clients and kafka-streams
4.2.0), built with Maven into ``tests/java-streams/target/skiff-streams-tool.jar``.

    lines = run_txn("127.0.0.1:9092", "t", "txn-id")   # the tool's output lines
    argv = wordcount_cmd(bootstrap, "app", "in", "out", state_dir)  # a process to start
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from clients.cli_tool import JVM_QUICK_START, CliTool, CliToolError, java_binary

JAVA_DIR = Path(__file__).resolve().parents[1] / "java-streams"
POM = JAVA_DIR / "pom.xml"
JAR = JAVA_DIR / "target" / "skiff-streams-tool.jar"
MVN_TIMEOUT_S = 900.0
JVM_SLACK_S = 60.0
QUIET = "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"


class JavaStreamsError(CliToolError):
    """The streams tool (or its build) failed."""


def _inputs() -> list[Path]:
    return [POM, *(p for p in (JAVA_DIR / "src").rglob("*") if p.is_file())]


def build_tool() -> Path:
    """Build the fat jar if missing or older than its sources (serialised by a lock file)."""
    return _TOOL.build(
        JAR,
        _inputs,
        "mvn",
        lambda _out: ["-q", "-B", "-f", str(POM), "package", "-DskipTests"],
        cwd=JAVA_DIR,
        timeout_s=MVN_TIMEOUT_S,
    )


def _java() -> list[str]:
    return [java_binary(JavaStreamsError), *JVM_QUICK_START, QUIET, "-jar", str(build_tool())]


_TOOL = CliTool("java-streams", _java, JavaStreamsError, JVM_SLACK_S)


def run_txn(bootstrap: str, topic: str, transactional_id: str, timeout_s: float = 120) -> list[str]:
    done = subprocess.run(
        [*_java(), "txn", bootstrap, topic, transactional_id],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if done.returncode != 0:
        raise JavaStreamsError(f"txn exited {done.returncode}", done.stderr)
    return done.stdout.splitlines()


def wordcount_cmd(
    bootstrap: str,
    app: str,
    source: str,
    sink: str,
    state_dir: Path,
    protocol: str = "classic",
    guarantee: str = "exactly_once_v2",
) -> list[str]:
    """The word count's command line; protocol "streams" joins a KIP-1071 streams group."""
    return [
        *_java(),
        "wordcount",
        bootstrap,
        app,
        source,
        sink,
        str(state_dir),
        protocol,
        guarantee,
    ]
