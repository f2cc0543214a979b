"""Logging set-up: `--log-format text` (one human line) or `json` (one JSON object a
line: ts, level, logger, msg, and the record's extra fields, e.g. peer and
client_id on connection lines).

Messages carry strings clients choose (client ids, topic and group names, HTTP paths);
the text format escapes their control characters (a newline becomes \\n), so one record
is one line and no client can forge a log line. JSON escapes them by itself."""

from __future__ import annotations

import datetime
import json
import logging
import re
import sys
import time
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Attributes every LogRecord has; anything else on a record came in through `extra`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


# C0 and C1 controls, DEL, and the Unicode line and paragraph separators (str.splitlines
# and some log viewers break lines at them).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


# What json.dumps leaves raw although str.splitlines breaks lines there.
_JSON_RAW = re.compile("[\x7f-\x9f\u2028\u2029]")


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def escape(text: str) -> str:
    """`text` on one line: control characters as backslash escapes."""
    return _CONTROL.sub(_escape_char, text)


class TextFormatter(logging.Formatter):
    """One line per record: the message (with the client strings in its args) escaped;
    a traceback, which only Skiff's own code produces, follows on lines of its own."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = escape(record.message)
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                doc[key] = value
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        line = json.dumps(doc, default=str, ensure_ascii=False)
        return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", line)


def configure(level: str, fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    elif fmt == "text":
        handler.setFormatter(TextFormatter(TEXT_FORMAT))
    else:
        raise ValueError(f"unknown log format {fmt!r}: expected text or json")
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, str(level).upper(), logging.INFO))


class RateLimitedLog:
    """A warning at most once per `interval` seconds; the lines held back are counted in
    the next one, so the log still tells how many breaches there were."""

    def __init__(self, logger: logging.Logger, interval: float = 1.0) -> None:
        self.logger = logger
        self.interval = interval
        self.last = float("-inf")
        self.held_back = 0

    def warning(self, msg: str, *args: object) -> None:
        now = time.monotonic()
        if now - self.last < self.interval:
            self.held_back += 1
            return
        self.last = now
        if self.held_back:
            msg += f" ({self.held_back} more since the last such line)"
            self.held_back = 0
        self.logger.warning(msg, *args)
