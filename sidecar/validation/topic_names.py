"""Kafka topic name rules (as kafka.common.internals.Topic enforces them)."""

from __future__ import annotations

import argparse
import re
import reprlib

MAX_NAME_LENGTH = 249
LEGAL_CHARS = "[a-zA-Z0-9._-]"
_LEGAL = re.compile(LEGAL_CHARS + "+")
# The same rules as a JSON Schema (the HTTP API's OpenAPI document).
JSON_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_NAME_LENGTH,
    "pattern": f"^{LEGAL_CHARS}+$",
    "not": {"enum": [".", ".."]},
    "description": f"1-{MAX_NAME_LENGTH} characters of A-Z a-z 0-9 . _ - (not '.' or '..')",
}


class InvalidTopicName(ValueError):
    """A topic name Kafka refuses (INVALID_TOPIC_EXCEPTION); str() is Kafka's message."""


def invalid_name_reason(name: str | None) -> str | None:
    """Why a topic name is illegal (Kafka's InvalidTopicException message), or None."""
    if not name:
        return "Topic name is invalid: the empty string is not allowed"
    if name in (".", ".."):
        return f"Topic name is invalid: '{name}' is not allowed"
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"Topic name is invalid: the length of '{name}' is longer than the max allowed "
            f"length {MAX_NAME_LENGTH}"
        )
    if not _LEGAL.fullmatch(name):
        return (
            f"Topic name is invalid: '{name}' contains one or more characters other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def check(name: object) -> str:
    """`name` if it is a legal topic name; raises InvalidTopicName otherwise."""
    if not isinstance(name, str):
        shown = reprlib.repr(name)
        raise InvalidTopicName(f"Topic name is invalid: topic names are strings, got {shown}")
    reason = invalid_name_reason(name)
    if reason:
        raise InvalidTopicName(reason)
    return name


def argument(text: str) -> str:
    """argparse `type=` for a topic name: a bad one is a usage error before anything runs."""
    try:
        return check(text)
    except InvalidTopicName as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def collision_key(name: str) -> str:
    """Names that differ only in '.' versus '_' collide in Kafka's metrics, so Kafka
    refuses to create one while the other exists."""
    return name.replace(".", "_")
