"""What java_client and franz_client share: driving a compiled client tool through one CLI.

The Java tool (``tests/java``, ``skiff.ClientTool``) and the Go tool (``tests/go``,
``franzclient``) take the same subcommands (``produce``, ``consume``, ``offsets``) and
flags. Records travel through temporary JSON-lines files; bytes are base64 on the wire and
plain ``bytes`` in the values returned here. Each adapter module makes one ``CliTool``,
naming its tool, how to start it and its error class, and exposes that tool's
``produce``, ``consume`` and ``list_offsets``; ``CliTool.build`` rebuilds the tool when a
source is newer than it.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

Bytesish = bytes | bytearray | memoryview | str | None


class CliToolError(RuntimeError):
    """The tool (or its build) failed. ``stderr`` holds its error output.

    For ``consume`` timeouts, ``records`` holds whatever was read before giving up.
    """

    def __init__(self, message: str, stderr: str = "", records: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.stderr = stderr
        self.records = records or []


class CliTool:
    """One client tool: ``name`` ("java", "franz") labels its messages and temporary
    directories; ``command()`` builds the tool if needed and returns the argv prefix that
    runs it; ``error`` is the CliToolError subclass raised on failure; ``slack_s`` is added
    to a client-side timeout for the tool's start-up and shutdown."""

    def __init__(
        self,
        name: str,
        command: Callable[[], list[str]],
        error: type[CliToolError],
        slack_s: float,
    ) -> None:
        self.name = name
        self.command = command
        self.error = error
        self.slack_s = slack_s

    # ----------------------------------------------------------------------- build

    def build(
        self,
        target: Path,
        inputs: Callable[[], Iterable[Path]],
        builder: str,
        args: Callable[[Path], list[str]],
        *,
        cwd: Path,
        timeout_s: float,
        via_temp: bool = False,
        note: str = "",
    ) -> Path:
        """Run ``builder`` (looked up on PATH) with ``args(out)`` in ``cwd`` if ``target``
        is missing or older than any of ``inputs()``; return ``target``.

        ``out`` is ``target`` itself, or with ``via_temp`` a temporary file beside it that
        replaces ``target`` once the build succeeds (never a half-written target). Safe to
        call from several processes at once (pytest-xdist): builds are serialised by a lock
        file in ``target``'s directory. ``note`` is added to the "building" message.
        """

        def is_stale() -> bool:
            if not target.exists():
                return True
            built = target.stat().st_mtime
            return any(p.stat().st_mtime > built for p in inputs())

        if not is_stale():
            return target
        exe = shutil.which(builder)
        if exe is None:
            raise self.error(f"{builder} not found on PATH; cannot build {target}")
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.parent / ".build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not is_stale():  # another process built it while we waited
                return target
            out = target.with_name(f".{target.name}.{os.getpid()}.tmp") if via_temp else target
            cmd = [exe, *args(out)]
            log = f"{self.name}_client"
            print(
                f"{log}: building {target.name}{note}: {' '.join(cmd)}", file=sys.stderr, flush=True
            )
            started = time.monotonic()
            try:
                proc = subprocess.run(
                    cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout_s
                )
            except subprocess.TimeoutExpired as e:
                if via_temp:
                    out.unlink(missing_ok=True)
                raise self.error(f"{builder} build timed out after {timeout_s:.0f}s") from e
            output = (proc.stdout + proc.stderr).strip()
            if proc.returncode != 0 or not out.exists():
                if via_temp:
                    out.unlink(missing_ok=True)
                raise self.error(
                    f"{builder} build failed (exit {proc.returncode}):\n{output}", stderr=output
                )
            if via_temp:
                out.replace(target)
            print(
                f"{log}: built {target} in {time.monotonic() - started:.1f}s",
                file=sys.stderr,
                flush=True,
            )
        return target

    # ----------------------------------------------------------------------- running

    def run(self, args: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        """Run the tool; raise ``self.error`` on a non-zero exit or timeout."""
        cmd = [*self.command(), *args]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as e:
            err = (
                e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr or ""
            )
            raise self.error(
                f"{self.name} client {args[0]} did not finish in {timeout_s:.0f}s\n{_tail(err)}",
                stderr=err,
            ) from e
        if proc.stderr:
            # The client's WARN logs; pytest captures this and shows it only for failing tests.
            sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            raise self.error(
                f"{self.name} client {args[0]} failed (exit {proc.returncode}):\n"
                f"{_tail(proc.stderr)}",
                stderr=proc.stderr,
            )
        return proc

    # ----------------------------------------------------------------------- API

    def produce(
        self,
        bootstrap: str,
        topic: str,
        records: Iterable[Mapping[str, Any] | Bytesish],
        compression: str = "none",
        *,
        acks: str | int | None = None,
        idempotence: bool | None = None,
        linger_ms: int | None = None,
        properties: Mapping[str, Any] | None = None,
        timeout_s: float = 180.0,
    ) -> list[dict[str, Any]]:
        """Produce ``records`` in order; return one metadata dict per record.

        A record is a mapping with optional keys ``partition`` (int), ``key``/``value``
        (bytes, str -> UTF-8, or None), ``headers`` (iterable of ``(str, bytes|str|None)``)
        and ``timestamp`` (ms, or None for the client's clock); a bare bytes/str is just a
        value. ``acks`` defaults to "all" and ``idempotence`` to the client's default.
        ``properties`` are extra producer configs (Java names). Returns ``[{"partition",
        "offset", "timestamp"}, ...]`` (offset -1 with acks=0).
        """
        encoded = [_encode_record(r) for r in records]
        with tempfile.TemporaryDirectory(prefix=f"skiff-{self.name}-") as tmp:
            inp, outp = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
            inp.write_text("".join(json.dumps(r) + "\n" for r in encoded))
            args = ["produce", *_common_args(bootstrap, topic, properties)]
            args += ["--input", str(inp), "--output", str(outp), "--compression", compression]
            if acks is not None:
                args += ["--acks", str(acks)]
            if idempotence is not None:
                args += ["--idempotence", _str(idempotence)]
            if linger_ms is not None:
                args += ["--linger-ms", str(linger_ms)]
            self.run(args, timeout_s)
            result = _read_jsonl(outp)
        if len(result) != len(encoded):
            raise self.error(f"produce wrote {len(result)} results for {len(encoded)} records")
        return result

    def consume(
        self,
        bootstrap: str,
        topic: str,
        partition: int,
        offset: int | str,
        count: int,
        timeout_ms: int = 60000,
        *,
        isolation: str = "read_uncommitted",
        properties: Mapping[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Read exactly ``count`` records from ``topic``/``partition`` starting at ``offset``
        (a number, "earliest" or "latest"; no consumer group).

        Returns dicts with ``partition``, ``offset``, ``timestamp``, ``timestamp_type``
        (0 CreateTime, 1 LogAppendTime), ``key``/``value`` (bytes or None) and ``headers``
        (list of ``(str, bytes | None)``). Raises the tool's error if fewer than ``count``
        arrive within ``timeout_ms`` (the partial list is on ``err.records``).
        """
        with tempfile.TemporaryDirectory(prefix=f"skiff-{self.name}-") as tmp:
            outp = Path(tmp) / "out.jsonl"
            args = ["consume", *_common_args(bootstrap, topic, properties)]
            args += ["--partition", str(partition), "--offset", str(offset), "--count", str(count)]
            args += ["--output", str(outp), "--timeout-ms", str(timeout_ms)]
            args += ["--isolation", isolation]
            try:
                self.run(args, timeout_ms / 1000 + self.slack_s)
            except self.error as e:
                e.records = [_decode_record(d) for d in _read_jsonl(outp)]
                raise
            return [_decode_record(d) for d in _read_jsonl(outp)]

    def seek_commit(
        self,
        bootstrap: str,
        topic: str,
        partition: int,
        group: str,
        offset: int,
        count: int,
        timeout_ms: int = 60000,
    ) -> tuple[list[dict[str, Any]], dict[str, int]]:
        """A member of consumer group ``group`` reads ``count`` records of the partition
        from ``offset``, commits its position and leaves; a second member resumes at the
        group's commit. Returns (the records, as ``consume`` returns them, and
        ``{"position", "committed", "resumed_at"}``)."""
        with tempfile.TemporaryDirectory(prefix=f"skiff-{self.name}-") as tmp:
            outp = Path(tmp) / "out.jsonl"
            args = ["seek-commit", *_common_args(bootstrap, topic, None)]
            args += ["--partition", str(partition), "--group", group, "--offset", str(offset)]
            args += ["--count", str(count), "--output", str(outp), "--timeout-ms", str(timeout_ms)]
            try:
                proc = self.run(args, timeout_ms / 1000 + self.slack_s)
            except self.error as e:
                e.records = [_decode_record(d) for d in _read_jsonl(outp)]
                raise
            records = [_decode_record(d) for d in _read_jsonl(outp)]
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        if not lines:
            raise self.error("seek-commit printed nothing", stderr=proc.stderr)
        return records, json.loads(lines[-1])

    def list_offsets(
        self,
        bootstrap: str,
        topic: str,
        partition: int,
        spec: str | int,
        *,
        isolation: str = "read_uncommitted",
        timeout_ms: int = 60000,
        properties: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """ListOffsets for one partition.

        ``spec`` is "earliest", "latest", "max-timestamp" or a timestamp in ms (int or str).
        Returns ``{"offset": int, "timestamp": int, "leader_epoch": int | None}``; offset is
        -1 when no record has a timestamp >= the one asked for.
        """
        args = ["offsets", *_common_args(bootstrap, topic, properties)]
        args += ["--partition", str(partition), "--spec", str(spec)]
        args += ["--isolation", isolation, "--timeout-ms", str(timeout_ms)]
        proc = self.run(args, timeout_ms / 1000 + self.slack_s)
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        if not lines:
            raise self.error("offsets printed nothing", stderr=proc.stderr)
        result: dict[str, Any] = json.loads(lines[-1])
        return result


# --------------------------------------------------------------------------- helpers


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _common_args(bootstrap: str, topic: str, properties: Mapping[str, Any] | None) -> list[str]:
    args = ["--bootstrap", bootstrap, "--topic", topic]
    for k, v in (properties or {}).items():
        args += ["--property", f"{k}={_str(v)}"]
    return args


def _str(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _b64(v: Bytesish) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        v = v.encode()
    return base64.b64encode(bytes(v)).decode("ascii")


def _unb64(v: str | None) -> bytes | None:
    return None if v is None else base64.b64decode(v)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _encode_record(rec: Mapping[str, Any] | Bytesish) -> dict[str, Any]:
    if rec is None or isinstance(rec, bytes | bytearray | memoryview | str):
        rec = {"value": rec}
    out: dict[str, Any] = {
        "key": _b64(rec.get("key")),
        "value": _b64(rec.get("value")),
        "headers": [[name, _b64(val)] for name, val in rec.get("headers") or []],
        "timestamp": rec.get("timestamp"),
    }
    if rec.get("partition") is not None:
        out["partition"] = int(rec["partition"])
    return out


def _decode_record(d: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "partition": d["partition"],
        "offset": d["offset"],
        "timestamp": d["timestamp"],
        "timestamp_type": d["timestamp_type"],
        "key": _unb64(d["key"]),
        "value": _unb64(d["value"]),
        "headers": [(name, _unb64(val)) for name, val in d["headers"]],
    }


# The Java test tools are JVMs that live for a few seconds: with the C1 compiler only, no
# C2 compiler threads compete with the sidecar for the CPU while they start (about a
# quarter less CPU per start, measured on the share tool's admin); clients behave the same.
JVM_QUICK_START = ["-XX:TieredStopAtLevel=1"]


def java_binary(error: type[Exception]) -> str:
    """$JAVA_HOME/bin/java, else java on PATH; raises `error` when there is none."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise error("java not found (set JAVA_HOME or put java on PATH)")
    return java
