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
yields its bootstrap address, so a test can make the same call against Kafka and Skiff.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

TOOLS_DIR = Path(__file__).resolve().parents[1] / "tools"
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

import kafka_cli  # noqa: E402  (tools/kafka_cli.py)
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


def kafka_topics(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_tool(TOPIC_COMMAND, "--bootstrap-server", bootstrap, *args)


def kafka_configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_tool(CONFIG_COMMAND, "--bootstrap-server", bootstrap, *args)


def kafka_acls(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_tool(ACL_COMMAND, "--bootstrap-server", bootstrap, *args)


@contextmanager
def reference_kafka(extra: dict[str, str] | None = None) -> Iterator[str]:
    """A real Apache Kafka broker (single KRaft node, tools/kafka_reference's
    settings, plus `extra` server.properties) for the duration; yields its bootstrap
    address."""
    import kafka_reference  # tools/kafka_reference

    with tempfile.TemporaryDirectory(prefix="skiff-kafka-ref-") as work, ExitStack() as stack:
        try:
            port, _ = stack.enter_context(
                kafka_reference.running_kafka(KAFKA_VERSION, Path(work), 120.0, extra)
            )
        except RuntimeError as exc:
            raise ToolsUnavailable(str(exc)) from None
        yield f"127.0.0.1:{port}"
