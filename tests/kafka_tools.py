"""Apache Kafka's own command-line tools, run from Maven artifacts, and a reference Kafka
broker to run them against as well.

`kafka-topics` is `org.apache.kafka.tools.TopicCommand` (artifact kafka-tools) and
`kafka-configs` is `kafka.admin.ConfigCommand` (artifact kafka_2.13); both drive the
Java AdminClient. Their jars and dependencies are fetched once into
~/.cache/skiff/kafka-tools-<version>/lib and run the way scripts/kafka-cli runs them
(tools/kafka_jars.py, tools/kafka_cli.py), logging only errors.

    out = kafka_topics(bootstrap, "--create", "--topic", "t", "--partitions", "3")
    out.returncode, out.stdout, out.stderr

`reference_kafka()` starts a single-node KRaft broker (tools/kafka_reference) and
yields its bootstrap address, so a test can make the same call against Kafka and Skiff;
`admin_kafka()` one of Kafka 4.x with an authorizer and a SCRAM listener (the session
fixture conftest.kafka4_admin). `run_batch(version, tool, runs)` runs a tool several
times in one JVM (tools/ToolBatch.java): a JVM start costs seconds.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

TOOLS_DIR = Path(__file__).resolve().parents[1] / "tools"
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

import kafka_cli  # noqa: E402  (tools/kafka_cli.py)
from conftest import free_port  # noqa: E402
from kafka_jars import JarsUnavailable  # noqa: E402

KAFKA_VERSION = kafka_cli.KAFKA_VERSION
TOPIC_COMMAND = kafka_cli.TOOLS["kafka-topics"]
CONFIG_COMMAND = kafka_cli.TOOLS["kafka-configs"]
ACL_COMMAND = kafka_cli.TOOLS["kafka-acls"]
TOOL_TIMEOUT_S = 120.0

ToolsUnavailable = JarsUnavailable  # java or mvn is missing, or Maven could not fetch the jars


def tools_lib() -> Path:
    """The folder of kafka-tools' and kafka_2.13's jars, fetched once (serialised by a
    lock file, so parallel test processes fetch only once)."""
    return kafka_cli.tools_jars(KAFKA_VERSION)


def run_tool(main_class: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = kafka_cli.command(main_class, list(args), log_level="ERROR")
    return subprocess.run(
        cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=TOOL_TIMEOUT_S
    )


def run_batch(
    version: str, tool: str, runs: list[list[str]]
) -> list[subprocess.CompletedProcess[str]]:
    """Kafka `version`'s `tool` (e.g. "kafka-configs") once per argument list of `runs`,
    all in one JVM (tools/ToolBatch.java): each run's exit status, stdout and stderr."""
    for args in runs:
        assert not any("\t" in a or "\n" in a for a in args), args  # the file's separators
    main_class = kafka_cli.tool_class(tool, version)
    if shutil.which("javac") is None:  # Java's source-file mode compiles with the JDK's javac
        pytest.skip("tools/ToolBatch.java needs a JDK (apt-get install openjdk-17-jdk-headless)")
    with tempfile.TemporaryDirectory(prefix="skiff-tool-batch-") as work:
        lines = Path(work) / "runs.txt"
        lines.write_text("".join("\t".join(args) + "\n" for args in runs))
        batch = str(TOOLS_DIR / "ToolBatch.java")
        try:
            cmd = kafka_cli.command(batch, [main_class, str(lines), work], "ERROR", version)
        except JarsUnavailable as exc:
            pytest.skip(f"no Kafka {version} tools: {exc}")
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=TOOL_TIMEOUT_S * max(1, len(runs) // 4),
        )
        results = []
        for n, args in enumerate(runs):
            rc = Path(work) / f"{n}.rc"
            assert rc.exists(), f"run {n} {args} did not finish:\n{done.stdout}{done.stderr}"
            out, err = (Path(work) / f"{n}.{kind}" for kind in ("out", "err"))
            results.append(
                subprocess.CompletedProcess(
                    args, int(rc.read_text()), out.read_text(), err.read_text()
                )
            )
        return results


def kafka_topics(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_tool(TOPIC_COMMAND, "--bootstrap-server", bootstrap, *args)


def kafka_configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_tool(CONFIG_COMMAND, "--bootstrap-server", bootstrap, *args)


def kafka_acls(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_tool(ACL_COMMAND, "--bootstrap-server", bootstrap, *args)


@contextmanager
def reference_kafka(
    extra: dict[str, str] | None = None, version: str = KAFKA_VERSION
) -> Iterator[str]:
    """A real Apache Kafka broker (single KRaft node, tools/kafka_reference's
    settings, plus `extra` server.properties) for the duration; yields its bootstrap
    address."""
    import kafka_reference  # tools/kafka_reference

    with tempfile.TemporaryDirectory(prefix="skiff-kafka-ref-") as work, ExitStack() as stack:
        try:
            port, _ = stack.enter_context(
                kafka_reference.running_kafka(version, Path(work), 120.0, extra)
            )
        except RuntimeError as exc:
            raise ToolsUnavailable(str(exc)) from None
        yield f"127.0.0.1:{port}"


# A Kafka 4.x broker to compare Kafka's admin tools on: the StandardAuthorizer with every
# PLAINTEXT client (User:ANONYMOUS) a super user, so the tools may do anything, and a
# SASL_PLAINTEXT listener, SECURE, where users log in with SCRAM credentials the tools made.
ADMIN_KAFKA_VERSION = "4.2.0"
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}
SCRAM_MECHANISMS = "SCRAM-SHA-256,SCRAM-SHA-512"


@dataclass(frozen=True)
class AdminKafka:
    bootstrap: str  # PLAINTEXT: User:ANONYMOUS, a super user
    sasl_bootstrap: str  # SASL_PLAINTEXT, SCRAM-SHA-256 and -512


@contextmanager
def admin_kafka() -> Iterator[AdminKafka]:
    """The ADMIN_KAFKA_VERSION broker described above; raises ToolsUnavailable."""
    sasl_port = free_port()
    login = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    extra = {
        **AUTHORIZER,
        "listeners": (
            "PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port},"
            f"SECURE://127.0.0.1:{sasl_port}"
        ),
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{{port}},SECURE://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SECURE:SASL_PLAINTEXT"
        ),
        "sasl.enabled.mechanisms": SCRAM_MECHANISMS,
        **{
            f"listener.name.secure.{m.lower()}.sasl.jaas.config": login
            for m in SCRAM_MECHANISMS.split(",")
        },
    }
    with reference_kafka(extra, ADMIN_KAFKA_VERSION) as bootstrap:
        yield AdminKafka(bootstrap, f"127.0.0.1:{sasl_port}")
