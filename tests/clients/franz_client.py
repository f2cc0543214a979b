"""Drive the franz-go client (github.com/twmb/franz-go/pkg/kgo) against Skiff.

Wraps the small Go program in ``tests/go`` (``franzclient``; the same subcommands, flags
and JSON-lines files as the Java tool, driven by clients/cli_tool.py), built with
``go build`` into ``tests/go/bin/franzclient``. The first build downloads franz-go (pinned
in tests/go/go.mod and go.sum) from the Go module proxy into the Go module cache.

    records = [{"key": b"k", "value": b"v", "headers": [("h", b"x")]}, {"value": b"v2"}]
    meta = produce("127.0.0.1:9092", "t", records, compression="zstd")
    got = consume("127.0.0.1:9092", "t", 0, meta[0]["offset"], len(records))
    list_offsets("127.0.0.1:9092", "t", 0, "latest")  # {"offset": ..., "timestamp": ...}

Produce uses kgo's defaults (idempotent where acks allow it, acks=all, 10 ms linger) with
the codec asked for; a record naming a partition goes there. ``properties`` are the few
Java-style configs franzclient maps to kgo options (see ``franzclient help``). Consume
reads one partition from an exact offset (kgo.ConsumePartitions, no group; an
out-of-range offset is an error, not a reset). list_offsets sends one raw ListOffsets
request (kmsg, retried on retriable errors) and returns the broker's answer as it is:
offset and timestamp are -1 when no record has a timestamp >= the one asked for.
"""

from __future__ import annotations

from pathlib import Path

from clients.cli_tool import Bytesish as Bytesish
from clients.cli_tool import CliTool, CliToolError

NAME = "franz"
GO_DIR = Path(__file__).resolve().parents[1] / "go"
BINARY = GO_DIR / "bin" / "franzclient"

GO_BUILD_TIMEOUT_S = 900.0
# Added to the client-side timeout for process start-up and shutdown.
SLACK_S = 30.0


class FranzClientError(CliToolError):
    """The Go tool (or its build) failed. ``stderr`` holds its error output.

    For ``consume`` timeouts, ``records`` holds whatever was read before giving up.
    """


def _inputs() -> list[Path]:
    return [p for p in (GO_DIR / "go.mod", GO_DIR / "go.sum", *GO_DIR.glob("*.go")) if p.exists()]


def build_tool() -> Path:
    """Build the binary if it is missing or older than go.mod, go.sum or a source; return
    its path.

    Safe to call from several processes at once (pytest-xdist): builds are serialised by a
    lock file in ``tests/go/bin``. Uses the environment's Go settings (GOPATH, GOMODCACHE,
    GOPROXY, GOFLAGS) as they are.
    """
    return _TOOL.build(
        BINARY,
        _inputs,
        "go",
        lambda out: ["build", "-trimpath", "-buildvcs=false", "-o", str(out), "."],
        cwd=GO_DIR,
        timeout_s=GO_BUILD_TIMEOUT_S,
        via_temp=True,
        note=" (the first build downloads franz-go into the Go module cache)",
    )


_TOOL = CliTool(NAME, lambda: [str(build_tool())], FranzClientError, SLACK_S)

produce = _TOOL.produce
consume = _TOOL.consume
list_offsets = _TOOL.list_offsets
seek_commit = _TOOL.seek_commit
