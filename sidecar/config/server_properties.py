"""`skiff serve --config FILE` ($SKIFF_CONFIG): server defaults from a file in Kafka's
`server.properties` syntax (java.util.Properties), so an operator can reuse a Kafka
broker's file.

A key is either a Kafka broker config (`num.partitions`, `listeners`, ...) that maps to a
`skiff serve` flag, or a flag's own name (`redis-url`, `num-partitions`). The file only
supplies defaults: a command-line flag beats its SKIFF_* variable, which beats the file,
which beats the built-in default. Kafka broker configs Skiff has no use for (`log.dirs`,
`num.network.threads`, ...) are noted once and ignored; any other key is an error naming
its line. The mapping is by flag name, so a config whose flag this build lacks is
reported, not fatal.
"""

from __future__ import annotations

import argparse
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sidecar.config.kafka_broker_names import KAFKA_BROKER_CONFIGS
from sidecar.config.settings import SASL_MECHANISMS
from sidecar.telemetry.redact import MASK, is_sensitive, redact_text

ENV = "SKIFF_CONFIG"


class ConfigFileError(ValueError):
    """A file that cannot be used; the message names the file and line."""


# -- java.util.Properties syntax -------------------------------------------------------------

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_NATURAL_LINES = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class Property:
    key: str
    value: str
    line: int  # where its logical line starts, 1-based


def _continues(line: str) -> bool:
    """An odd number of trailing backslashes joins the next natural line."""
    stripped = line.rstrip("\\")
    return (len(line) - len(stripped)) % 2 == 1


def _unescape(text: str, where: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):  # a lone trailing backslash is dropped, as Java
            if c != "\\":
                out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigFileError(f"{where}: malformed \\uxxxx escape {text[i : i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))  # any other escaped char stands for itself
            i += 2
    return "".join(out)


def _split(logical: str) -> tuple[str, str]:
    """Key and value (still escaped): the key ends at the first unescaped '=', ':' or
    whitespace; then whitespace, at most one '=' or ':', whitespace."""
    i = 0
    while i < len(logical):
        c = logical[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WHITESPACE:
            break
        i += 1
    key = logical[:i]
    rest = logical[i:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def parse(text: str, source: str = "<text>") -> list[Property]:
    """Properties in file order, as java.util.Properties.load reads them: `#`/`!` comment
    lines, `key=value`, `key: value`, `key value`, backslash continuations (the next
    line's leading whitespace dropped), `\\uXXXX`, `\\t` `\\n` `\\r` `\\f` and `\\x` = x."""
    out: list[Property] = []
    lines = _NATURAL_LINES.split(text.removeprefix("\ufeff"))
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while _continues(line) and i < len(lines):
            parts.append(line[:-1])
            line = lines[i].lstrip(_WHITESPACE)
            i += 1
        if _continues(line):  # a continuation at the end of the file
            line = line[:-1]
        parts.append(line)
        raw_key, raw_value = _split("".join(parts))
        where = f"{source}:{start + 1}"
        key = _unescape(raw_key, where)
        try:
            value = _unescape(raw_value, where)
        except ConfigFileError:
            if not is_sensitive(key):
                raise
            # The message quotes part of the value: a secret's is not shown.
            raise ConfigFileError(f"{where}: {key}: malformed \\uxxxx escape") from None
        out.append(Property(key, value, start + 1))
    return out


# -- Kafka broker configs to skiff serve flags --------------------------------------------


def _same(value: str) -> str:
    return value.strip()


def _minutes_to_ms(value: str) -> str:
    return _scaled(value, 60_000)


def _hours_to_ms(value: str) -> str:
    return _scaled(value, 3_600_000)


def _scaled(value: str, factor: int) -> str:
    try:
        number = int(value.strip())
    except ValueError:
        raise ValueError(f"expected an integer, got {value.strip()!r}") from None
    return "-1" if number < 0 else str(number * factor)  # negative: unlimited, as Kafka


@dataclass(frozen=True, slots=True)
class FlagMapping:
    flag: str
    convert: Callable[[str], str] = _same
    rank: int = 0  # among Kafka configs for one flag, the lowest rank wins (Kafka's order)


# Kafka broker config -> skiff serve flag. `listeners` and `advertised.listeners` are
# handled by `_listener` (they need the listener list as a whole).
KAFKA_TO_FLAG: dict[str, FlagMapping] = {
    "node.id": FlagMapping("node-id"),
    "broker.id": FlagMapping("node-id", rank=1),
    "num.partitions": FlagMapping("num-partitions"),
    "auto.create.topics.enable": FlagMapping("auto-create-topics"),
    "message.max.bytes": FlagMapping("message-max-bytes"),
    "socket.request.max.bytes": FlagMapping("max-request-bytes"),
    "max.connections": FlagMapping("max-connections"),
    "max.connections.per.ip": FlagMapping("max-connections-per-ip"),
    "max.connections.per.ip.overrides": FlagMapping("max-connections-per-ip-overrides"),
    "queued.max.request.bytes": FlagMapping("queued-max-request-bytes"),
    "connections.max.idle.ms": FlagMapping("connections-max-idle-ms"),
    "log.message.timestamp.type": FlagMapping("message-timestamp-type"),
    "log.message.timestamp.before.max.ms": FlagMapping("log-message-timestamp-before-max-ms"),
    "log.message.timestamp.after.max.ms": FlagMapping("log-message-timestamp-after-max-ms"),
    "compression.type": FlagMapping("compression-type"),
    "skiff.storage.format": FlagMapping("storage-format"),
    "min.insync.replicas": FlagMapping("min-insync-replicas"),
    "log.retention.ms": FlagMapping("log-retention-ms"),
    "log.retention.minutes": FlagMapping("log-retention-ms", _minutes_to_ms, rank=1),
    "log.retention.hours": FlagMapping("log-retention-ms", _hours_to_ms, rank=2),
    "log.retention.bytes": FlagMapping("log-retention-bytes"),
    "log.cleanup.policy": FlagMapping("log-cleanup-policy"),
    "log.retention.check.interval.ms": FlagMapping("log-retention-check-interval-ms"),
    "log.cleaner.backoff.ms": FlagMapping("log-cleaner-backoff-ms"),
    "remote.log.manager.task.interval.ms": FlagMapping("remote-log-manager-task-interval-ms"),
    "log.local.retention.ms": FlagMapping("log-local-retention-ms"),
    "log.local.retention.bytes": FlagMapping("log-local-retention-bytes"),
    "offsets.retention.minutes": FlagMapping("offsets-retention-minutes"),
    "offsets.retention.check.interval.ms": FlagMapping("offsets-retention-check-interval-ms"),
    "offset.metadata.max.bytes": FlagMapping("offset-metadata-max-bytes"),
    "group.initial.rebalance.delay.ms": FlagMapping("group-initial-rebalance-delay-ms"),
    "group.min.session.timeout.ms": FlagMapping("group-min-session-timeout-ms"),
    "group.max.session.timeout.ms": FlagMapping("group-max-session-timeout-ms"),
    "producer.id.expiration.ms": FlagMapping("producer-id-expiration-ms"),
    "transactional.id.expiration.ms": FlagMapping("transactional-id-expiration-ms"),
    "transaction.max.timeout.ms": FlagMapping("transaction-max-timeout-ms"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": FlagMapping(
        "transaction-abort-timed-out-transaction-cleanup-interval-ms"
    ),
    "group.share.session.timeout.ms": FlagMapping("group-share-session-timeout-ms"),
    "group.share.heartbeat.interval.ms": FlagMapping("group-share-heartbeat-interval-ms"),
    "group.share.record.lock.duration.ms": FlagMapping("group-share-record-lock-duration-ms"),
    "group.share.delivery.count.limit": FlagMapping("group-share-delivery-count-limit"),
    "group.share.partition.max.record.locks": FlagMapping("group-share-partition-max-record-locks"),
    "group.consumer.session.timeout.ms": FlagMapping("group-consumer-session-timeout-ms"),
    "group.consumer.heartbeat.interval.ms": FlagMapping("group-consumer-heartbeat-interval-ms"),
    "group.consumer.migration.policy": FlagMapping("group-consumer-migration-policy"),
    "group.streams.num.standby.replicas": FlagMapping("group-streams-num-standby-replicas"),
    "authorizer.class.name": FlagMapping("authorizer-class-name"),
    "super.users": FlagMapping("super-users"),
    "allow.everyone.if.no.acl.found": FlagMapping("allow-everyone-if-no-acl-found"),
    **{
        f"sasl.oauthbearer.{name}": FlagMapping("sasl-oauthbearer-" + name.replace(".", "-"))
        for name in (
            "jwks.endpoint.url",
            "jwks.endpoint.refresh.ms",
            "expected.issuer",
            "expected.audience",
            "sub.claim.name",
            "clock.skew.seconds",
            "scope.claim.name",
            "jwks.endpoint.retry.backoff.ms",
            "jwks.endpoint.retry.backoff.max.ms",
        )
    },
    "sasl.enabled.mechanisms": FlagMapping("sasl-enabled-mechanisms"),
    "connections.max.reauth.ms": FlagMapping("connections-max-reauth-ms"),
    "delegation.token.secret.key": FlagMapping("delegation-token-secret-key"),
    "delegation.token.max.lifetime.ms": FlagMapping("delegation-token-max-lifetime-ms"),
    "delegation.token.expiry.time.ms": FlagMapping("delegation-token-expiry-time-ms"),
    "listener.security.protocol.map": FlagMapping("listener-security-protocol-map"),
    "inter.broker.listener.name": FlagMapping("inter-broker-listener-name"),
    "ssl.keystore.location": FlagMapping("ssl-keystore-location"),
    "ssl.keystore.type": FlagMapping("ssl-keystore-type"),
    "ssl.keystore.certificate.location": FlagMapping("ssl-keystore-certificate-location"),
    "ssl.keystore.key.location": FlagMapping("ssl-keystore-key-location"),
    "ssl.key.password": FlagMapping("ssl-key-password"),
    "ssl.truststore.location": FlagMapping("ssl-truststore-location"),
    "ssl.client.auth": FlagMapping("ssl-client-auth"),
    "ssl.enabled.protocols": FlagMapping("ssl-enabled-protocols"),
    "ssl.principal.mapping.rules": FlagMapping("ssl-principal-mapping-rules"),
}
LISTENER_KEYS = {"listeners": "listeners", "advertised.listeners": "advertised-listeners"}
# Read by the listener mapping, not settings of their own.
LISTENER_CONTEXT = ("controller.listener.names",)
# listener.name.<listener>.<setting>: Kafka's per-listener form of a setting. These are
# kept (ServerProperties.listener_overrides) for the listener's security set-up; other
# per-listener settings are noted and ignored.
_PER_LISTENER = re.compile(r"^listener\.name\.([^.]+)\.(.+)$")


def per_listener_setting(setting: str) -> bool:
    """Whether Skiff reads this setting per listener: the TLS (`ssl.*`) and SASL
    (`sasl.*`, `<mechanism>.sasl.jaas.config`, `[<mechanism>.]connections.max.reauth.ms`)
    ones."""
    mechanism, _, rest = setting.partition(".")
    return (
        setting.startswith(("ssl.", "sasl."))
        or ".sasl." in setting
        or setting == "connections.max.reauth.ms"
        or (mechanism.upper() in SASL_MECHANISMS and rest == "connections.max.reauth.ms")
    )


NOT_IN_FILE = frozenset({"config"})  # flags the file itself cannot set


@dataclass(frozen=True, slots=True)
class FlagValue:
    value: str  # as it would be typed on the command line
    where: str  # FILE:LINE key, for messages


@dataclass(slots=True)
class ServerProperties:
    path: Path
    values: dict[str, FlagValue] = field(default_factory=dict)  # flag name -> value
    ignored: list[str] = field(default_factory=list)  # Kafka configs without use here
    unsupported: list[str] = field(default_factory=list)  # mapped to flags this build lacks
    notes: list[str] = field(default_factory=list)
    # (LISTENER, setting, value) of listener.name.<listener>.<setting> keys, in file order.
    listener_overrides: list[tuple[str, str, str]] = field(default_factory=list)

    def log_lines(self) -> list[tuple[int, str]]:
        """(logging level, text) to log once at start-up."""
        lines = [(logging.WARNING, note) for note in self.notes]
        if self.ignored:
            lines.append(
                (
                    logging.INFO,
                    f"{self.path}: ignoring Kafka broker settings that do not apply to "
                    "Skiff: " + ", ".join(self.ignored),
                )
            )
        lines += [(logging.WARNING, f"{self.path}: {text}") for text in self.unsupported]
        return lines


def _listener(key: str, prop: Property, props: Mapping[str, Property], where: str) -> str:
    """`listeners` / `advertised.listeners` without the controller listeners (a KRaft
    broker's file names them in controller.listener.names; Skiff has no controller)."""
    controllers = {"CONTROLLER"}
    if "controller.listener.names" in props:
        controllers = {
            n.strip().upper() for n in props["controller.listener.names"].value.split(",")
        }
    chosen: list[str] = []
    for entry in prop.value.split(","):
        entry = entry.strip()
        if not entry:
            continue
        name, sep, address = entry.partition("://")
        if not sep:
            raise ConfigFileError(f"{where}: expected NAME://HOST:PORT, got {entry!r}")
        if name.strip().upper() not in controllers:
            chosen.append(entry)
    if not chosen:
        raise ConfigFileError(f"{where}: {key} has no listener besides controller listeners")
    return ",".join(chosen)


def resolve(
    props: Iterable[Property],
    path: Path,
    known_flags: Iterable[str],
) -> ServerProperties:
    """Map parsed properties to flag values. `known_flags` are the `skiff serve` flags of
    this build (without dashes in front)."""
    flags = set(known_flags)
    by_key: dict[str, Property] = {}
    for prop in props:  # a repeated key: the last one counts, as in java.util.Properties
        by_key[prop.key] = prop
    out = ServerProperties(path)
    own: dict[str, FlagValue] = {}  # set by flag name
    kafka: dict[str, tuple[int, FlagValue]] = {}  # set through a Kafka config, with its rank
    for key, prop in sorted(by_key.items(), key=lambda kv: kv[1].line):
        where = f"{path}:{prop.line}"
        if key in LISTENER_KEYS:  # before flag names: `listeners` is both
            value = _listener(key, prop, by_key, where)
            if LISTENER_KEYS[key] not in flags:
                out.unsupported.append(
                    f"line {prop.line}: {key} maps to --{LISTENER_KEYS[key]}, which this skiff "
                    "does not have yet: ignored"
                )
                continue
            kafka[LISTENER_KEYS[key]] = (0, FlagValue(value, f"{where} {key}"))
        elif key in flags and key not in NOT_IN_FILE:
            own[key] = FlagValue(prop.value.strip(), f"{where} {key}")
        elif key in NOT_IN_FILE:
            raise ConfigFileError(f"{where}: {key!r} cannot be set in the config file itself")
        elif key in KAFKA_TO_FLAG:
            mapping = KAFKA_TO_FLAG[key]
            try:
                value = mapping.convert(prop.value)
            except ValueError as exc:
                raise ConfigFileError(f"{where}: {key}: {exc}") from None
            if mapping.flag not in flags:
                out.unsupported.append(
                    f"line {prop.line}: {key} maps to --{mapping.flag}, which this skiff does "
                    "not have yet: ignored"
                )
                continue
            previous = kafka.get(mapping.flag)
            if previous is None or mapping.rank < previous[0]:
                kafka[mapping.flag] = (mapping.rank, FlagValue(value, f"{where} {key}"))
        elif (match := _PER_LISTENER.match(key)) and per_listener_setting(match[2]):
            out.listener_overrides.append((match[1].upper(), match[2], prop.value.strip()))
        elif key in KAFKA_BROKER_CONFIGS or key.startswith("listener.name."):
            if key not in LISTENER_CONTEXT:
                out.ignored.append(key)
        else:
            raise ConfigFileError(
                f"{where}: {key!r} is neither a Kafka broker config nor a `skiff serve` "
                "setting (see `skiff serve --help`; Kafka's names, e.g. num.partitions, "
                "or the flag names, e.g. num-partitions)"
            )
    node = [by_key[k] for k in ("node.id", "broker.id") if k in by_key]
    if len(node) == 2 and node[0].value.strip() != node[1].value.strip():
        raise ConfigFileError(
            f"{path}:{node[1].line}: broker.id {node[1].value.strip()} differs from node.id "
            f"{node[0].value.strip()} (line {node[0].line}); Kafka requires them equal"
        )
    out.values = {flag: value for flag, (_, value) in kafka.items()}
    out.values.update(own)  # a flag's own name beats its Kafka synonym
    return out


def load(path: Path, known_flags: Iterable[str]) -> ServerProperties:
    """Read and resolve a file. Kafka reads it as ISO 8859-1 (Properties.load of a stream);
    a file that is valid UTF-8 is read as UTF-8, which only differs for non-ASCII text."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigFileError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return resolve(parse(text, str(path)), path, known_flags)


def check(values: Mapping[str, FlagValue], actions: Mapping[str, argparse.Action]) -> None:
    """Convert each value as its flag would (type, choices), so a bad value is reported
    with its file and line instead of as a flag error."""
    for flag, fv in values.items():
        action = actions[flag]
        # A secret's value is not echoed (it would reach logs and terminals).
        secret = is_sensitive(flag) or is_sensitive(fv.where.rpartition(" ")[2])
        shown = MASK if secret else fv.value
        try:
            converted = action.type(fv.value) if callable(action.type) else fv.value
        except (argparse.ArgumentTypeError, ValueError) as exc:
            reason = redact_text(str(exc), [fv.value, *fv.value.splitlines()]) if secret else exc
            raise ConfigFileError(f"{fv.where}={shown}: {reason}") from None
        if action.choices is not None and converted not in action.choices:
            raise ConfigFileError(
                f"{fv.where}={shown}: expected one of {', '.join(map(str, action.choices))}"
            )


def config_path(argv: list[str], environ: Mapping[str, str]) -> Path | None:
    """--config FILE / --config=FILE from argv, else $SKIFF_CONFIG."""
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            return Path(argv[i + 1])
        if arg.startswith("--config="):
            return Path(arg.split("=", 1)[1])
    value = environ.get(ENV)
    return Path(value) if value else None
