"""JSON forms of record bytes for the HTTP API: a key, value or header value is a
UTF-8 string when its bytes are valid UTF-8, else base64, and an explicit marker says
which ("key_encoding" / "value_encoding": "utf8" or "base64"). null stays null."""

from __future__ import annotations

import base64
import binascii
import reprlib
from typing import Any

UTF8 = "utf8"
BASE64 = "base64"


class BadInput(Exception):
    """A request body the API refuses (HTTP 400 with this message)."""

    def __init__(self, message: str, code: str = "INVALID_REQUEST") -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def encode(raw: bytes | None) -> tuple[str | None, str]:
    if raw is None:
        return None, UTF8
    try:
        return raw.decode("utf-8"), UTF8
    except UnicodeDecodeError:
        return base64.b64encode(raw).decode("ascii"), BASE64


def decode(text: Any, encoding: Any, what: str) -> bytes | None:
    if encoding not in (UTF8, BASE64):  # a missing marker is UTF8 (the caller's default)
        raise BadInput(f"{what}_encoding must be 'utf8' or 'base64', got {reprlib.repr(encoding)}")
    if text is None:
        return None
    if not isinstance(text, str):
        raise BadInput(f"{what} must be a string or null")
    if encoding == UTF8:
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate escape such as "\ud800"
            raise BadInput(f"{what} is not valid Unicode text; send it as base64") from None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadInput(f"{what} is not valid base64: {text[:40]!r}", "INVALID_BASE64") from None


def record_json(rec: Any) -> dict[str, Any]:
    """An Acquired record as JSON."""
    key, key_enc = encode(rec.key)
    value, value_enc = encode(rec.value)
    headers = []
    for name, hvalue in rec.headers:
        text, enc = encode(hvalue)
        headers.append({"key": name, "value": text, "value_encoding": enc})
    return {
        "topic": rec.topic,
        "partition": rec.partition,
        "offset": rec.offset,
        "delivery_count": rec.delivery_count,
        "lease_deadline_ms": rec.lease_deadline_ms,
        "timestamp": rec.timestamp,
        "key": key,
        "key_encoding": key_enc,
        "value": value,
        "value_encoding": value_enc,
        "headers": headers,
    }
