"""Drive the real Apache Kafka Java client (``kafka-clients``) against Skiff.

Wraps the small CLI in ``tests/java`` (``skiff.ClientTool``), built with Maven into
``tests/java/target/skiff-client-tool.jar``. Records travel through temporary JSON-lines
files; bytes are base64 on the wire and plain ``bytes`` in the values returned here
(clients/cli_tool.py, shared with the franz-go tool).

    records = [{"key": b"k", "value": b"v", "headers": [("h", b"x")]}, {"value": b"v2"}]
    meta = produce("127.0.0.1:9092", "t", records, compression="zstd")
    got = consume("127.0.0.1:9092", "t", 0, meta[0]["offset"], len(records))
    list_offsets("127.0.0.1:9092", "t", 0, "latest")  # {"offset": ..., "timestamp": ...}

``group_member_cmd(...)`` is the argv of a consumer-group member (``group-consume``,
the Java twin of tests/clients/group_member.py) for tests/groups_harness.py to start.

Produce uses KafkaProducer (``idempotence`` defaults to the client's default, enabled;
``properties`` are extra producer configs) and returns its RecordMetadata. Consume uses a
group-less KafkaConsumer (assign + seek). list_offsets is AdminClient.listOffsets.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from clients.cli_tool import JVM_QUICK_START, CliTool, CliToolError, java_binary
from clients.cli_tool import Bytesish as Bytesish

JAVA_DIR = Path(__file__).resolve().parents[1] / "java"
POM = JAVA_DIR / "pom.xml"
JAR = JAVA_DIR / "target" / "skiff-client-tool.jar"

MVN_TIMEOUT_S = 900.0
# Added to the client-side timeout for JVM start-up and shutdown.
JVM_SLACK_S = 60.0

Header = tuple[str, bytes | None]


class JavaClientError(CliToolError):
    """The Java tool (or its build) failed. ``stderr`` holds its error output.

    For ``consume`` timeouts, ``records`` holds whatever was read before giving up.
    """


def _inputs() -> list[Path]:
    return [POM, *(p for p in (JAVA_DIR / "src").rglob("*") if p.is_file())]


def build_tool() -> Path:
    """Build the fat jar if it is missing or older than the pom or any source; return its path.

    Safe to call from several processes at once (pytest-xdist): builds are serialised by a
    lock file in ``tests/java/target``.
    """
    return _TOOL.build(
        JAR,
        _inputs,
        "mvn",
        lambda _out: ["-q", "-B", "-f", str(POM), "package", "-DskipTests"],
        cwd=JAVA_DIR,
        timeout_s=MVN_TIMEOUT_S,
    )


_TOOL = CliTool(
    "java",
    lambda: [java_binary(JavaClientError), *JVM_QUICK_START, "-jar", str(build_tool())],
    JavaClientError,
    JVM_SLACK_S,
)

produce = _TOOL.produce
consume = _TOOL.consume
list_offsets = _TOOL.list_offsets
seek_commit = _TOOL.seek_commit


def group_member_cmd(
    bootstrap: str,
    group: str,
    topic: str,
    *,
    instance_id: str | None = None,
    assignor: str | None = None,
    session_timeout_ms: int | None = None,
    heartbeat_interval_ms: int | None = None,
    client_id: str | None = None,
    max_records: int | None = None,
    record_delay_ms: int | None = None,
) -> list[str]:
    """The argv of a Java consumer-group member (``ClientTool group-consume``), which prints
    the JSON lines of tests/clients/group_member.py until SIGTERM. Builds the jar if needed;
    start it with subprocess.Popen (tests/groups_harness.py does)."""
    options = {
        "instance-id": instance_id,
        "assignor": assignor,
        "session-timeout-ms": session_timeout_ms,
        "heartbeat-interval-ms": heartbeat_interval_ms,
        "client-id": client_id,
        "max-records": max_records,
        "record-delay-ms": record_delay_ms,
    }
    args = ["group-consume", "--bootstrap", bootstrap, "--group", group, "--topic", topic]
    for name, value in options.items():
        if value is not None:
            args += [f"--{name}", str(value)]
    return [*_TOOL.command(), *args]


def admin(bootstrap: str, ops: list[dict[str, Any]], timeout_s: float = 300.0) -> list[Any]:
    """Run Java AdminClient operations (``ClientTool admin``, see tests/java's
    AdminOps.java) in one JVM; one result dict per operation: ``{"op", "ok": True, ...}``
    or ``{"op", "error": "<exception class>", "message": ...}``."""
    with tempfile.TemporaryDirectory(prefix="skiff-java-admin-") as tmp:
        inp, outp = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        inp.write_text("".join(json.dumps(op) + "\n" for op in ops))
        _TOOL.run(
            ["admin", "--bootstrap", bootstrap, "--input", str(inp), "--output", str(outp)],
            timeout_s,
        )
        return [json.loads(line) for line in outp.read_text().splitlines() if line.strip()]


def delete_records(bootstrap: str, topic: str, partition: int, offset: int) -> dict[str, Any]:
    """AdminClient.deleteRecords: {"low_watermark": n} or {"error": class, "message": m}."""
    args = ["delete-records", "--bootstrap", bootstrap, "--topic", topic]
    args += ["--partition", str(partition), "--offset", str(offset)]
    return _json_line(_TOOL.run(args, 60 + JVM_SLACK_S).stdout)


def log_dirs(bootstrap: str) -> dict[str, Any]:
    """AdminClient.describeLogDirs on every broker (see LogAdmin.java for the shape)."""
    return _json_line(_TOOL.run(["log-dirs", "--bootstrap", bootstrap], 60 + JVM_SLACK_S).stdout)


def _json_line(stdout: str) -> dict[str, Any]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    result: dict[str, Any] = json.loads(lines[-1])
    return result
