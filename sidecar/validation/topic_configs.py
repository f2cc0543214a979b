"""Topic configs as Kafka's ConfigDef checks them. The table of Kafka 3.9's topic
configs (names, types, ranges, defaults) lives with the rest of the config code in
sidecar/config/topic.py; this is where callers that refuse configs (CreateTopics,
AlterConfigs, the CLIs) take the check from."""

from __future__ import annotations

import argparse

from sidecar.config.topic import KEYS, ConfigError, parse_overrides, validate

__all__ = ["ConfigError", "argument", "check_value", "parse_overrides", "validate"]


def check_value(name: str, value: str) -> None:
    """One NAME=VALUE on its own (an alteration: the topic's other configs are the
    broker's to combine); raises ConfigError with Kafka's message."""
    if name not in KEYS:
        raise ConfigError(f"Unknown topic config name: {name}")
    KEYS[name].parse(value)


def argument(text: str) -> tuple[str, str]:
    """argparse `type=` for a topic config NAME=VALUE, checked before any network call."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        check_value(name, value)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return name, value
