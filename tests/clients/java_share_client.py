"""Drive Kafka 4.2's share consumer (KIP-932) against Skiff.

Wraps ``tests/java-share`` (``skiff.ShareTool``, kafka-clients 4.2.0; ``tests/java``
stays on 3.9.1), built with Maven into ``tests/java-share/target/skiff-share-tool.jar``.

    with ShareConsumer("127.0.0.1:9092", "g", ["t"]) as c:
        recs = c.poll(2000)                 # [{"topic","partition","offset","delivery_count",
        c.ack(recs[0], "release")           #   "key","value","headers"}], bytes decoded
        c.commit()                          # {"t-0": None} or {"t-0": "Exception: msg"}
    admin("127.0.0.1:9092", [{"op": "offsets", "group": "g"}])
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import queue
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from clients.cli_tool import JVM_QUICK_START, CliTool, CliToolError, java_binary

JAVA_DIR = Path(__file__).resolve().parents[1] / "java-share"
POM = JAVA_DIR / "pom.xml"
JAR = JAVA_DIR / "target" / "skiff-share-tool.jar"
MVN_TIMEOUT_S = 900.0
JVM_SLACK_S = 60.0


class JavaShareError(CliToolError):
    """The share tool (or its build) failed."""


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


_TOOL = CliTool(
    "java-share",
    lambda: [java_binary(JavaShareError), *JVM_QUICK_START, "-jar", str(build_tool())],
    JavaShareError,
    JVM_SLACK_S,
)


def _decode(rec: dict[str, Any]) -> dict[str, Any]:
    for field in ("key", "value"):
        if rec.get(field) is not None:
            rec[field] = base64.b64decode(rec[field])
    rec["headers"] = [
        (k, None if v is None else base64.b64decode(v)) for k, v in rec.get("headers", [])
    ]
    return rec


class ShareConsumer:
    """One KafkaShareConsumer (explicit acknowledgement) in its own JVM, driven by JSON
    commands; every method waits for the tool's answer and raises JavaShareError on an
    ``{"error": ...}`` answer unless ``check=False``."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topics: list[str],
        props: dict[str, str] | None = None,
        client_id: str = "skiff-share-tool",
    ) -> None:
        args = ["share", "--bootstrap", bootstrap, "--group", group, "--topic", ",".join(topics)]
        args += ["--client-id", client_id]
        for k, v in (props or {}).items():
            args += ["--prop", f"{k}={v}"]
        self.proc = subprocess.Popen(
            [*_TOOL.command(), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        ready = self._read()
        if not ready.get("ready"):
            raise JavaShareError(f"share tool did not start: {ready}")

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise JavaShareError(f"share tool exited (rc={self.proc.poll()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def call(self, op: str, check: bool = True, **fields: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.proc.stdin.flush()
        answer = self._read()
        if check and "error" in answer:
            raise JavaShareError(f"{op}: {answer['error']}: {answer.get('message')}")
        return answer

    def poll(self, timeout_ms: int = 1000) -> list[dict[str, Any]]:
        answer = self.call("poll", timeout_ms=timeout_ms)
        self.lock_timeout_ms = answer.get("lock_timeout_ms")
        return [_decode(r) for r in answer["records"]]

    def ack(self, rec: dict[str, Any], type_: str = "accept") -> None:
        self.call(
            "ack", topic=rec["topic"], partition=rec["partition"], offset=rec["offset"], type=type_
        )

    def ack_all(self, type_: str = "accept") -> None:
        self.call("ack_all", type=type_)

    def commit(self) -> dict[str, str | None]:
        results: dict[str, str | None] = self.call("commit")["results"]
        return results

    def consume(
        self, count: int, type_: str = "accept", timeout_ms: int = 60000, records: bool = True
    ) -> dict[str, Any]:
        """Poll, acknowledge each record with ``type_`` and commit, until ``count``
        records or the timeout: {"count", "records", "commit_errors"}."""
        answer = self.call(
            "consume", count=count, type=type_, timeout_ms=timeout_ms, records=records
        )
        answer["records"] = [_decode(r) for r in answer["records"]]
        return answer

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.call("close", check=False)
            except (JavaShareError, BrokenPipeError, ValueError):
                pass
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        """End the JVM without leaving the group (as a crash would)."""
        self.proc.kill()
        self.proc.wait()

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _run_lines(args: list[str], ops: list[dict[str, Any]], timeout_s: float) -> list[Any]:
    proc = subprocess.run(
        [*_TOOL.command(), *args],
        input="".join(json.dumps(op) + "\n" for op in ops),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if proc.returncode != 0:
        raise JavaShareError(f"share tool {args[0]} failed: {proc.stderr[-2000:]}", proc.stderr)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


class _AdminTool:
    """The admin tool's JVM for one bootstrap address, kept between calls: it answers each
    op line as it reads it, and a JVM start costs about 2 s of CPU (test_share_groups.py
    asks 11 times). A reader thread hands its answers over, so a call can time out."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self.proc = subprocess.Popen(
            [*_TOOL.command(), "admin", "--bootstrap", bootstrap],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            bufsize=1,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, name="share-admin-reader", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.lines.put(line)
        self.lines.put(None)  # the JVM ended

    def ask(self, ops: list[dict[str, Any]], timeout_s: float) -> list[Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write("".join(json.dumps(op) + "\n" for op in ops))
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout_s
        answers = []
        for _ in ops:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise JavaShareError(f"share tool admin: no answer within {timeout_s}s") from None
            if line is None:
                self.stderr.seek(0)
                err = self.stderr.read().decode(errors="replace")
                raise JavaShareError(f"share tool admin failed: {err[-2000:]}", err)
            answers.append(json.loads(line))
        return answers

    def close(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()  # end of input: the tool closes its Admin and exits
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


_admin_tool: _AdminTool | None = None


def _close_admin_tool() -> None:
    global _admin_tool
    if _admin_tool is not None:
        _admin_tool.close()
        _admin_tool = None


atexit.register(_close_admin_tool)


def admin(bootstrap: str, ops: list[dict[str, Any]], timeout_s: float = 120.0) -> list[Any]:
    """Share-group admin calls (ops: describe, offsets, alter_offsets, set_config, list;
    see ShareTool.java); one answer per op, with "error" on failure. The JVM stays for
    the next call to the same bootstrap address; another address replaces it."""
    global _admin_tool
    if _admin_tool is not None and (
        _admin_tool.bootstrap != bootstrap or _admin_tool.proc.poll() is not None
    ):
        _close_admin_tool()
    if _admin_tool is None:
        _admin_tool = _AdminTool(bootstrap)
    try:
        return _admin_tool.ask(ops, timeout_s)
    except JavaShareError:
        _close_admin_tool()  # the next call starts a fresh one
        raise


def produce(
    bootstrap: str, topic: str, count: int, prefix: str = "r", partition: int | None = None
) -> list[Any]:
    """Produce ``count`` records ``<prefix>-<i>`` with Kafka 4.2's producer."""
    args = ["produce", "--bootstrap", bootstrap, "--topic", topic, "--count", str(count)]
    args += ["--prefix", prefix]
    if partition is not None:
        args += ["--partition", str(partition)]
    sent: list[Any] = _run_lines(args, [], 120)[-1]["sent"]
    return sent
