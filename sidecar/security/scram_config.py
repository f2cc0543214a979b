"""Kafka's SCRAM credential syntax, as `kafka-storage format --add-scram` and
`kafka-configs --add-config` spell it: MECHANISM=[name=alice,password=secret] with an
optional iterations=N (a value may be double-quoted to hold ',' or ']')."""

from __future__ import annotations

import asyncio
import re
import secrets

from sidecar.config.settings import ScramBootstrap
from sidecar.storage.scram_store import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramStore,
)

_ENTRY = re.compile(r"\s*([A-Z0-9-]+)\s*=\s*\[(.*)\]\s*", re.DOTALL)
_PAIR = re.compile(r'\s*([a-z]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^,]*)\s*(?:,|$)')


def parse_add_scram(text: str) -> ScramBootstrap:
    """One MECHANISM=[name=...,password=...] entry; ValueError naming what is wrong
    (never the password)."""
    match = _ENTRY.fullmatch(text)
    if match is None:
        raise ValueError(
            "expected MECHANISM=[name=USER,password=PASSWORD], e.g. "
            "SCRAM-SHA-512=[name=admin,password=...]"
        )
    mechanism, body = match.groups()
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}: use {' or '.join(MECHANISMS)}")
    values: dict[str, str] = {}
    pos = 0
    while pos < len(body):
        pair = _PAIR.match(body, pos)
        if pair is None or pair.end() == pos:
            raise ValueError(f"{mechanism}: expected key=value pairs separated by ','")
        key, value = pair.groups()
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        values[key] = value
        pos = pair.end()
    unknown = set(values) - {"name", "password", "iterations"}
    if unknown:
        raise ValueError(f"{mechanism}: unknown key(s) {', '.join(sorted(unknown))}")
    if not values.get("name"):
        raise ValueError(f"{mechanism}: name= is missing")
    if not values.get("password"):
        raise ValueError(f"{mechanism}: password= is missing for {values['name']}")
    iterations = MIN_ITERATIONS
    if "iterations" in values:
        try:
            iterations = int(values["iterations"])
        except ValueError:
            raise ValueError(f"{mechanism}: iterations must be an integer") from None
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ValueError(
                f"{mechanism}: iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}, "
                f"got {iterations}"
            )
    return ScramBootstrap(mechanism, values["name"], values["password"], iterations)


async def bootstrap(store: ScramStore, entries: tuple[ScramBootstrap, ...]) -> list[str]:
    """Create each --add-scram credential where the user has none for its mechanism
    (an existing one, perhaps changed since with kafka-configs, is kept). Returns one
    log line per entry, naming no password."""
    lines = []
    for entry in entries:
        credential = await asyncio.to_thread(
            ScramCredential.from_password,
            entry.mechanism,
            entry.password,
            secrets.token_bytes(32),
            entry.iterations,
        )
        created = await store.add_if_absent(entry.mechanism, entry.name, credential)
        state = "created" if created else "already exists, kept"
        lines.append(f"--add-scram: {entry.mechanism} credential of user {entry.name} {state}")
    return lines
