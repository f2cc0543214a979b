"""Drive the franz-go client (github.com/twmb/franz-go/pkg/kgo) against Skiff.

Wraps the small Go program in ``tests/go`` (``franzclient``; the same subcommands, flags
and JSON-lines files as the Java tool), built with ``go build`` into
``tests/go/bin/franzclient``. The first build downloads franz-go (pinned in
tests/go/go.mod and go.sum) from the Go module proxy into the Go module cache.

    records = [{"key": b"k", "value": b"v", "headers": [("h", b"x")]}, {"value": b"v2"}]
    meta = produce("127.0.0.1:9092", "t", records, compression="zstd")
    got = consume("127.0.0.1:9092", "t", 0, meta[0]["offset"], len(records))
    list_offsets("127.0.0.1:9092", "t", 0, "latest")  # {"offset": ..., "timestamp": ...}

Produce uses kgo's defaults (idempotent, acks=all, 10 ms linger) with the codec asked
for; a record naming a partition goes there. Consume reads one partition from an exact
offset (kgo.ConsumePartitions, no group; an out-of-range offset is an error, not a
reset). list_offsets sends one raw ListOffsets request (kmsg) and returns the broker's
answer as it is.
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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

NAME = "franz"
GO_DIR = Path(__file__).resolve().parents[1] / "go"
BINARY = GO_DIR / "bin" / "franzclient"

GO_BUILD_TIMEOUT_S = 900.0
# Added to the client-side timeout for process start-up and shutdown.
SLACK_S = 30.0

Bytesish = bytes | bytearray | memoryview | str | None


class FranzClientError(RuntimeError):
    """The Go tool (or its build) failed. ``stderr`` holds its error output.

    For ``consume`` timeouts, ``records`` holds whatever was read before giving up.
    """

    def __init__(self, message: str, stderr: str = "", records: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.stderr = stderr
        self.records = records or []


# --------------------------------------------------------------------------- build


def _inputs() -> list[Path]:
    return [GO_DIR / "go.mod", GO_DIR / "go.sum", *GO_DIR.glob("*.go")]


def _is_stale() -> bool:
    if not BINARY.exists():
        return True
    built = BINARY.stat().st_mtime
    return any(p.stat().st_mtime > built for p in _inputs() if p.exists())


def build_tool() -> Path:
    """Build the binary if it is missing or older than go.mod, go.sum or a source; return
    its path.

    Safe to call from several processes at once (pytest-xdist): builds are serialised by a
    lock file in ``tests/go/bin``. Uses the environment's Go settings (GOPATH, GOMODCACHE,
    GOPROXY, GOFLAGS) as they are.
    """
    if not _is_stale():
        return BINARY
    go = shutil.which("go")
    if go is None:
        raise FranzClientError("go not found on PATH; cannot build " + str(BINARY))
    BINARY.parent.mkdir(parents=True, exist_ok=True)
    with open(BINARY.parent / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _is_stale():  # another process built it while we waited
            return BINARY
        tmp = BINARY.with_name(f".{BINARY.name}.{os.getpid()}.tmp")
        cmd = [go, "build", "-trimpath", "-buildvcs=false", "-o", str(tmp), "."]
        print(
            f"franz_client: building {BINARY.name} (the first build downloads franz-go into "
            f"the Go module cache): {' '.join(cmd)}",
            file=sys.stderr,
            flush=True,
        )
        started = time.monotonic()
        try:
            proc = subprocess.run(
                cmd, cwd=GO_DIR, capture_output=True, text=True, timeout=GO_BUILD_TIMEOUT_S
            )
        except subprocess.TimeoutExpired as e:
            tmp.unlink(missing_ok=True)
            raise FranzClientError(f"go build timed out after {GO_BUILD_TIMEOUT_S:.0f}s") from e
        output = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0 or not tmp.exists():
            tmp.unlink(missing_ok=True)
            raise FranzClientError(
                f"go build failed (exit {proc.returncode}):\n{output}", stderr=output
            )
        tmp.replace(BINARY)  # whole, or not there: never a half-written binary
        print(
            f"franz_client: built {BINARY} in {time.monotonic() - started:.1f}s",
            file=sys.stderr,
            flush=True,
        )
    return BINARY


# --------------------------------------------------------------------------- running


def _run(args: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run the tool; raise FranzClientError on a non-zero exit or timeout."""
    cmd = [str(build_tool()), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr or ""
        raise FranzClientError(
            f"franz client {args[0]} did not finish in {timeout_s:.0f}s\n{_tail(err)}", stderr=err
        ) from e
    if proc.stderr:
        # kgo's WARN logs; pytest captures this and shows it only for failing tests.
        sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        raise FranzClientError(
            f"franz client {args[0]} failed (exit {proc.returncode}):\n{_tail(proc.stderr)}",
            stderr=proc.stderr,
        )
    return proc


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


# --------------------------------------------------------------------------- API


def produce(
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
    """Produce ``records`` in order with a kgo.Client; return one metadata dict per record.

    A record is a mapping with optional keys ``partition`` (int), ``key``/``value``
    (bytes, str -> UTF-8, or None), ``headers`` (iterable of ``(str, bytes|str|None)``) and
    ``timestamp`` (ms, or None for the client's clock); a bare bytes/str is just a value.
    ``acks`` defaults to "all" and ``idempotence`` to the client's default (enabled where
    acks allow it). ``properties`` are the few Java-style configs franzclient maps to kgo
    options (see ``franzclient help``). Returns ``[{"partition", "offset", "timestamp"},
    ...]`` from the produce promises (offset -1 with acks=0).
    """
    encoded = [_encode_record(r) for r in records]
    with tempfile.TemporaryDirectory(prefix="skiff-franz-") as tmp:
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
        _run(args, timeout_s)
        result = _read_jsonl(outp)
    if len(result) != len(encoded):
        raise FranzClientError(f"produce wrote {len(result)} results for {len(encoded)} records")
    return result


def consume(
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
    """Read exactly ``count`` records from ``topic``/``partition`` starting at ``offset``.

    Direct partition consumption (kgo.ConsumePartitions at ``offset``, which may also be
    "earliest" or "latest"; no group). Returns dicts with ``partition``, ``offset``,
    ``timestamp``, ``timestamp_type`` (0 CreateTime, 1 LogAppendTime), ``key``/``value``
    (bytes or None) and ``headers`` (list of ``(str, bytes | None)``). Raises
    FranzClientError if fewer than ``count`` arrive within ``timeout_ms`` (the partial list
    is on ``err.records``).
    """
    with tempfile.TemporaryDirectory(prefix="skiff-franz-") as tmp:
        outp = Path(tmp) / "out.jsonl"
        args = ["consume", *_common_args(bootstrap, topic, properties)]
        args += ["--partition", str(partition), "--offset", str(offset), "--count", str(count)]
        args += ["--output", str(outp), "--timeout-ms", str(timeout_ms)]
        args += ["--isolation", isolation]
        try:
            _run(args, timeout_ms / 1000 + SLACK_S)
        except FranzClientError as e:
            e.records = [_decode_record(d) for d in _read_jsonl(outp)]
            raise
        return [_decode_record(d) for d in _read_jsonl(outp)]


def list_offsets(
    bootstrap: str,
    topic: str,
    partition: int,
    spec: str | int,
    *,
    isolation: str = "read_uncommitted",
    timeout_ms: int = 60000,
    properties: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One ListOffsets request for one partition (retried on retriable errors).

    ``spec`` is "earliest", "latest", "max-timestamp" or a timestamp in ms (int or str).
    Returns ``{"offset": int, "timestamp": int, "leader_epoch": int | None}``; offset and
    timestamp are -1 when no record has a timestamp >= the one asked for.
    """
    args = ["offsets", *_common_args(bootstrap, topic, properties)]
    args += ["--partition", str(partition), "--spec", str(spec)]
    args += ["--isolation", isolation, "--timeout-ms", str(timeout_ms)]
    proc = _run(args, timeout_ms / 1000 + SLACK_S)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if not lines:
        raise FranzClientError("offsets printed nothing", stderr=proc.stderr)
    result: dict[str, Any] = json.loads(lines[-1])
    return result
