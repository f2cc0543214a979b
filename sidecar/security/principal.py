"""Kafka principals ("User:alice"), as ACLs, super.users and Kafka's tools spell them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """'User:alice' (Kafka's form; the name may itself contain ':')."""
        kind, sep, name = text.strip().partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"expected a principal as TYPE:NAME (e.g. User:alice), got {text!r}")
        return cls(kind, name)


# A connection that did not authenticate (PLAINTEXT, or SSL without a client
# certificate) is Kafka's User:ANONYMOUS.
ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")
