"""The SASL settings a listener sees: Kafka's broker-wide value, or its
listener.name.<listener>.<setting> override from --config (config/listeners.py)."""

from __future__ import annotations

from sidecar.config.listeners import setting_for
from sidecar.config.settings import SASL_MECHANISMS, Settings

# Kafka's sasl.server.max.receive.size default: the largest frame a SASL listener reads
# before the client has authenticated.
SASL_SERVER_MAX_RECEIVE_SIZE = 524_288


def parse_mechanisms(text: str) -> tuple[str, ...]:
    """sasl.enabled.mechanisms: a comma-separated list; ValueError for one Skiff lacks."""
    mechanisms = tuple(dict.fromkeys(m.strip().upper() for m in text.split(",") if m.strip()))
    for mechanism in mechanisms:
        if mechanism == "GSSAPI":
            raise ValueError("Skiff does not serve GSSAPI (Kerberos); use SCRAM-SHA-512 or PLAIN")
        if mechanism not in SASL_MECHANISMS:
            raise ValueError(
                f"unknown SASL mechanism {mechanism!r}; Skiff serves {', '.join(SASL_MECHANISMS)}"
            )
    return mechanisms


def enabled_mechanisms(settings: Settings, listener: str) -> tuple[str, ...]:
    override = setting_for(settings, listener, "sasl.enabled.mechanisms", None)
    return settings.sasl_enabled_mechanisms if override is None else parse_mechanisms(override)


def reauth_ms(settings: Settings, listener: str, mechanism: str | None = None) -> int:
    """connections.max.reauth.ms of the listener (0: sessions never expire): as Kafka's
    SaslChannelBuilder, listener.name.<l>.<mechanism lowercased>.connections.max.reauth.ms
    first, then listener.name.<l>.connections.max.reauth.ms, then the broker's."""
    override = setting_for(settings, listener, "connections.max.reauth.ms", None)
    if mechanism is not None:
        key = f"{mechanism.lower()}.connections.max.reauth.ms"
        override = setting_for(settings, listener, key, override)
    return settings.connections_max_reauth_ms if override is None else int(override)


def plain_jaas(settings: Settings, listener: str) -> str | None:
    """listener.name.<listener>.plain.sasl.jaas.config, if given."""
    return setting_for(settings, listener, "plain.sasl.jaas.config", None)


def check(settings: Settings, listeners: list[str]) -> None:
    """Raise ValueError naming the first per-listener SASL setting Skiff cannot use."""
    for listener in listeners:
        try:
            enabled_mechanisms(settings, listener)
        except ValueError as exc:
            raise ValueError(
                f"listener.name.{listener.lower()}.sasl.enabled.mechanisms: {exc}"
            ) from None
        for mechanism in (None, *SASL_MECHANISMS):
            try:
                if reauth_ms(settings, listener, mechanism) < 0:
                    raise ValueError
            except ValueError:
                prefix = "" if mechanism is None else f"{mechanism.lower()}."
                raise ValueError(
                    f"listener.name.{listener.lower()}.{prefix}connections.max.reauth.ms: "
                    "expected a number of milliseconds >= 0"
                ) from None
