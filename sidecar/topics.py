"""Kafka topic name rules (as kafka.common.internals.Topic enforces them)."""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def invalid_name_reason(name: str | None) -> str | None:
    """Why a topic name is illegal, or None when it is fine."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL.fullmatch(name):
        return f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_', '-'"
    return None
