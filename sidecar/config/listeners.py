"""Kafka's listener settings: `listeners`, `advertised.listeners`,
`listener.security.protocol.map` and `inter.broker.listener.name`, parsed as Kafka parses
them and resolved into the listeners a sidecar serves (sidecar/server.py runs one
KafkaServer per listener).

Without `listeners`, `--listen` / `--advertise` are one PLAINTEXT listener, as before."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from sidecar.config.settings import Endpoint, HostPort, Settings
from sidecar.security.session import SECURITY_PROTOCOLS

# Kafka's own pattern (CoreUtils.listenerListToEndPoints): NAME://HOST:PORT, HOST may be
# empty (every interface) or a bracketed IPv6 address.
_ENDPOINT = re.compile(r"^([A-Za-z0-9_.-]+)://\[?([0-9a-zA-Z\-%._:]*)\]?:([0-9]+)$")
_WILDCARDS = ("0.0.0.0", "::", "")
# Kafka's security.inter.broker.protocol default: the listener of that name, if any.
DEFAULT_INTER_BROKER = "PLAINTEXT"


class ListenerError(ValueError):
    """A listener setting that cannot work; the message says what to change."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str  # upper-case, as Kafka normalises listener names
    protocol: str  # one of SECURITY_PROTOCOLS
    bind: HostPort  # where the sidecar listens (port 0: a free port)
    advertised: HostPort  # what Metadata gives clients that came in on this listener

    @property
    def tls(self) -> bool:
        """SSL and SASL_SSL listeners encrypt (sidecar/security/tls.py)."""
        return self.protocol in ("SSL", "SASL_SSL")

    def bound_to(self, port: int) -> Listener:
        """The listener once bound: port 0 becomes the port the OS picked, also in what
        is advertised when the advertised port is 0 too."""
        bind = replace(self.bind, port=port)
        advertised = self.advertised
        if advertised.port == 0:
            advertised = replace(advertised, port=port)
        return replace(self, bind=bind, advertised=advertised)

    def __str__(self) -> str:
        notes = [self.protocol] if self.protocol != self.name else []
        if self.advertised != self.bind:
            notes.append(f"advertised as {self.advertised}")
        return f"{self.name}://{self.bind}" + (f" ({', '.join(notes)})" if notes else "")


def parse_endpoints(text: str) -> tuple[Endpoint, ...]:
    """`NAME://HOST:PORT,NAME://HOST:PORT` (an empty HOST: every interface)."""
    out: list[Endpoint] = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        match = _ENDPOINT.match(entry)
        if match is None:
            raise ListenerError(f"expected NAME://HOST:PORT, got {entry!r}")
        name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
        if port > 65535:
            raise ListenerError(f"port {port} in {entry!r} is above 65535")
        if any(e.name == name for e in out):
            raise ListenerError(f"listener name {name} appears twice in {text!r}")
        out.append(Endpoint(name, HostPort(host or "0.0.0.0", port)))
    return tuple(out)


def parse_protocol_map(text: str) -> tuple[tuple[str, str], ...]:
    """`NAME:PROTOCOL,...` (Kafka's listener.security.protocol.map; it replaces the
    default map as a whole)."""
    out: list[tuple[str, str]] = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, sep, protocol = entry.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ListenerError(f"expected NAME:PROTOCOL, got {entry!r}")
        if protocol not in SECURITY_PROTOCOLS:
            raise ListenerError(
                f"{entry!r}: unknown security protocol {protocol!r} "
                f"(expected one of {', '.join(SECURITY_PROTOCOLS)})"
            )
        out.append((name, protocol))
    if not out:
        raise ListenerError("listener.security.protocol.map is empty")
    return tuple(out)


def _advertisable(bind: HostPort) -> HostPort:
    """What a listener without an advertised address advertises: its own address, with
    a wildcard host replaced by 127.0.0.1 (as --listen 0.0.0.0 always did)."""
    if bind.host in _WILDCARDS:
        return HostPort("127.0.0.1", bind.port)
    return bind


def resolve(settings: Settings) -> tuple[Listener, ...]:
    """The listeners this sidecar serves, inter-broker listener first (its address is
    the one every other consumer of the broker registry uses). Raises ListenerError."""
    endpoints = settings.listeners or (Endpoint("PLAINTEXT", settings.listen),)
    names = [e.name for e in endpoints]
    protocols = dict(settings.listener_security_protocol_map)
    if not settings.listeners:
        protocols = {"PLAINTEXT": "PLAINTEXT"}  # --listen is PLAINTEXT whatever the map says
    advertised: dict[str, HostPort] = {}
    if not settings.listeners and not settings.advertised_listeners:
        advertised["PLAINTEXT"] = settings.advertised
    for entry in settings.advertised_listeners:
        if entry.name not in names:
            raise ListenerError(
                f"advertised listener {entry} has no listener of that name in listeners "
                f"({', '.join(names)})"
            )
        if entry.address.host in _WILDCARDS:
            raise ListenerError(
                f"advertised listener {entry}: advertise a host clients can reach, not "
                f"{entry.address.host or 'an empty host'}"
            )
        advertised[entry.name] = entry.address
    ports: dict[int, str] = {}
    out: list[Listener] = []
    for entry in endpoints:
        protocol = protocols.get(entry.name)
        if protocol is None:
            raise ListenerError(
                f"listener {entry.name} has no security protocol: add {entry.name}:PLAINTEXT "
                "(or SSL, SASL_PLAINTEXT, SASL_SSL) to listener.security.protocol.map"
            )
        port = entry.address.port
        if port and port in ports:
            raise ListenerError(
                f"listeners {ports[port]} and {entry.name} both use port {port}: give each "
                "its own port (or 0 for a free one)"
            )
        ports[port] = entry.name
        address = advertised.get(entry.name) or _advertisable(entry.address)
        out.append(Listener(entry.name, protocol, entry.address, address))
    inter = settings.inter_broker_listener_name
    if inter is not None:
        inter = inter.upper()
        if inter not in names:
            raise ListenerError(
                f"inter.broker.listener.name {inter} is not one of the listeners "
                f"({', '.join(names)})"
            )
    elif DEFAULT_INTER_BROKER in names:
        inter = DEFAULT_INTER_BROKER
    else:
        inter = names[0]
    out.sort(key=lambda listener: listener.name != inter)
    return tuple(out)


def configured(settings: Settings) -> bool:
    """Whether any listener setting differs from the single --listen listener."""
    return bool(settings.listeners or settings.advertised_listeners)


def secured(listeners: tuple[Listener, ...]) -> bool:
    """Whether any listener encrypts or authenticates."""
    return any(listener.protocol != "PLAINTEXT" for listener in listeners)


def setting_for(settings: Settings, listener: str, setting: str, default: str | None) -> str | None:
    """A setting as `listener` sees it: `listener.name.<listener>.<setting>` from the
    config file when given (Kafka's per-listener override), else `default` (the
    broker-wide value)."""
    found = default
    for name, key, value in settings.listener_overrides:
        if name == listener.upper() and key == setting:
            found = value
    return found
