"""The `skiff` command."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import re
import socket
import sys
from pathlib import Path
from typing import Any

from sidecar.cli import groups as groups_cli
from sidecar.cli import preflight
from sidecar.cli import queues as queues_cli
from sidecar.cli import storage as storage_cli
from sidecar.cli import topics as topics_cli
from sidecar.cli import users as users_cli
from sidecar.cli.arg_types import at_least, positive
from sidecar.config import listeners as listener_config
from sidecar.config import server_properties, storage_format
from sidecar.config.settings import (
    DEFAULT_PROTOCOL_MAP,
    Endpoint,
    HostPort,
    ScramBootstrap,
    Settings,
)
from sidecar.security import sasl_config, tls
from sidecar.security.sasl import oauthbearer
from sidecar.security.scram_config import parse_add_scram
from sidecar.telemetry import logs
from sidecar.telemetry.redact import MASK, is_sensitive, redact_text
from sidecar.validation import topic_names

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# Exit statuses: 2 a mistake in the command line or configuration (one line says what
# to fix), 1 a failure at run time (e.g. Redis unreachable), 130 interrupted (Ctrl-C).
EXIT_MISTAKE, EXIT_INTERRUPTED = 2, 130


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def _raw_values(flag: str) -> list[str]:
    """What the command line, $SKIFF_* and the config file gave --flag, line by line."""
    found = [
        os.environ.get("SKIFF_" + flag.upper().replace("-", "_"), ""),
        _FILE_VALUES.get(flag, ""),
    ]
    argv = sys.argv
    for i, arg in enumerate(argv):
        if arg == f"--{flag}" and i + 1 < len(argv):
            found.append(argv[i + 1])
        elif arg.startswith(f"--{flag}="):
            found.append(arg.partition("=")[2])
    lines = [line.strip() for value in found for line in value.splitlines()]
    return sorted({v for v in found + lines if v}, key=len, reverse=True)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a mistake is one line on stderr (with where to get help), not the
    usage text, which for `serve` is 60 lines that hide the error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        flag = re.match(r"argument --([\w-]+)", message)
        if flag and is_sensitive(flag[1]):  # a secret's value is not echoed
            message = _QUOTED.sub(MASK, redact_text(message, _raw_values(flag[1])))
        env = "SKIFF_" + flag[1].upper().replace("-", "_") if flag else ""
        if flag and env in os.environ:  # the value may have come from the environment
            message += f" (set by --{flag[1]} or ${env})"
        self.exit(EXIT_MISTAKE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _version() -> str:
    try:
        return importlib.metadata.version("skiff")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return "unknown"


def _log_level(text: str) -> str:
    level = text.strip().upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(LOG_LEVELS)}, got {text!r}")
    return level


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _hostport(text: str) -> HostPort:
    try:
        return HostPort.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _endpoints(text: str) -> tuple[Endpoint, ...]:
    try:
        return listener_config.parse_endpoints(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _protocol_map(text: str) -> tuple[tuple[str, str], ...]:
    try:
        return listener_config.parse_protocol_map(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _listener_name(text: str) -> str | None:
    return text.strip().upper() or None


def _optional_hostport(text: str) -> HostPort | None:
    if text.strip().lower() in ("", "none", "off"):
        return None
    return _hostport(text)


def _per_ip_overrides(text: str) -> tuple[tuple[str, int], ...]:
    """max.connections.per.ip.overrides: `HOST:N,HOST:N`; a host name is resolved once,
    at start-up, to the addresses it has (as Kafka does)."""
    pairs: list[tuple[str, int]] = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host or not count.strip().isdigit():
            raise argparse.ArgumentTypeError(f"expected HOST:N[,HOST:N...], got {entry!r}")
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot resolve {host!r}: {exc}") from None
        for address in sorted({str(info[4][0]) for info in infos}):
            pairs.append((address, int(count)))
    return tuple(pairs)


def _authorizer(text: str) -> str:
    """authorizer.class.name: empty, Kafka's StandardAuthorizer or `standard`."""
    from sidecar.security.acls.authorizer import parse_class_name

    try:
        return parse_class_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _super_users(text: str) -> tuple[str, ...]:
    """super.users: principals separated by semicolons, e.g. User:admin;User:ops."""
    from sidecar.security.principal import KafkaPrincipal

    users = []
    for item in (u.strip() for u in text.split(";")):
        if item:
            try:
                users.append(str(KafkaPrincipal.parse(item)))
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
    return tuple(users)


def _http_auth(text: str) -> tuple[str, ...]:
    """--http-auth: none, or basic and/or bearer, comma-separated."""
    schemes = tuple(dict.fromkeys(s.strip().lower() for s in text.split(",") if s.strip()))
    if schemes in ((), ("none",)):
        return ()
    if not set(schemes) <= {"basic", "bearer"}:
        raise argparse.ArgumentTypeError(
            f"expected none, basic, bearer or basic,bearer, got {text!r}"
        )
    return schemes


def _name_list(text: str) -> tuple[str, ...]:
    """--client-metrics: comma-separated, blanks dropped."""
    return tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))


def _http_paths(text: str) -> tuple[str, ...]:
    """--http-open-paths: exact paths, comma-separated."""
    paths = tuple(p.strip() for p in text.split(",") if p.strip())
    for path in paths:
        if not path.startswith("/"):
            raise argparse.ArgumentTypeError(f"paths start with '/', got {path!r}")
    return paths


def _oauthbearer(key: str) -> Any:
    """The flag type of the Kafka setting `key` (sasl.oauthbearer.*)."""

    def convert(text: str) -> Any:
        try:
            return oauthbearer.convert(key, text)
        except oauthbearer.OAuthBearerConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


# Defaults from `serve --config FILE` (server_properties), below SKIFF_* variables.
_FILE_VALUES: dict[str, str] = {}


def _cleanup_policy(text: str) -> str:
    """log.cleanup.policy: a comma-separated list of delete and compact."""
    items = [p.strip() for p in text.split(",") if p.strip()]
    if not items or any(p not in ("delete", "compact") for p in items):
        raise argparse.ArgumentTypeError(f"expected delete, compact or both, got {text!r}")
    return ",".join(items)


def _flag(
    parser: argparse.ArgumentParser, name: str, default: str | None, help: str, **kwargs: Any
) -> None:
    """--name, defaulting to $SKIFF_NAME, then to `default` (argparse converts string
    defaults with `type`, as if given on the command line)."""
    env = "SKIFF_" + name.upper().replace("-", "_")
    parser.add_argument(
        f"--{name}",
        default=os.environ.get(env, _FILE_VALUES.get(name, default)),
        help=f"{help} (${env}; default {default})",
        **kwargs,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="skiff", description="Kafka protocol on Redis Streams")
    parser.add_argument("--version", action="version", version=f"skiff {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the Kafka listener (every flag also reads SKIFF_*)")
    serve.add_argument(
        "--config",
        metavar="FILE",
        default=os.environ.get(server_properties.ENV),
        help="defaults in Kafka's server.properties syntax: Kafka broker configs "
        "(num.partitions, listeners, ...) or these flags' names; flags and SKIFF_* "
        f"variables override it (${server_properties.ENV})",
    )
    _flag(serve, "listen", "127.0.0.1:9092", "HOST:PORT to listen on", type=_hostport)
    _flag(
        serve,
        "advertise",
        None,
        "HOST:PORT Metadata gives clients (none: the listen address)",
        type=_hostport,
    )
    _flag(
        serve,
        "listeners",
        None,
        "listeners: NAME://HOST:PORT,... each served with the security protocol "
        "--listener-security-protocol-map gives its name (port 0: a free port); "
        "none: one PLAINTEXT listener on --listen",
        type=_endpoints,
    )
    _flag(
        serve,
        "advertised-listeners",
        None,
        "advertised.listeners: NAME://HOST:PORT,... what Metadata gives a client that came "
        "in on listener NAME (none: the listener's own address)",
        type=_endpoints,
    )
    _flag(
        serve,
        "listener-security-protocol-map",
        ",".join(f"{n}:{p}" for n, p in DEFAULT_PROTOCOL_MAP),
        "listener.security.protocol.map: NAME:PROTOCOL,... (PLAINTEXT, SSL, "
        "SASL_PLAINTEXT or SASL_SSL)",
        type=_protocol_map,
    )
    _flag(
        serve,
        "inter-broker-listener-name",
        None,
        "inter.broker.listener.name: the listener whose address sidecars register for "
        "one another (none: PLAINTEXT if listed, else the first)",
        type=_listener_name,
    )
    _flag(
        serve,
        "ssl-keystore-location",
        None,
        "ssl.keystore.location: PEM file with the private key and the certificate chain "
        "of SSL and SASL_SSL listeners (reloaded when it changes)",
        type=Path,
    )
    _flag(
        serve,
        "ssl-keystore-type",
        "PEM",
        "ssl.keystore.type: PEM only (Skiff reads no JKS or PKCS12)",
        choices=["PEM"],
        type=str.upper,
    )
    _flag(
        serve,
        "ssl-keystore-certificate-location",
        None,
        "the certificate chain (PEM) when the key is in a file of its own, e.g. "
        "cert-manager's tls.crt; goes with --ssl-keystore-key-location",
        type=Path,
    )
    _flag(
        serve,
        "ssl-keystore-key-location",
        None,
        "the private key (PEM), e.g. cert-manager's tls.key",
        type=Path,
    )
    _flag(
        serve,
        "ssl-key-password",
        None,
        "ssl.key.password: the password of an encrypted private key",
    )
    _flag(
        serve,
        "ssl-truststore-location",
        None,
        "ssl.truststore.location: PEM CA bundle that client certificates are verified "
        "against (none: the system's CAs)",
        type=Path,
    )
    _flag(
        serve,
        "ssl-client-auth",
        "none",
        "ssl.client.auth: whether SSL clients must present a certificate",
        choices=["none", "requested", "required"],
        type=str.lower,
    )
    _flag(
        serve,
        "ssl-enabled-protocols",
        "TLSv1.2,TLSv1.3",
        "ssl.enabled.protocols: TLSv1.2 and/or TLSv1.3",
    )
    _flag(
        serve,
        "ssl-principal-mapping-rules",
        "DEFAULT",
        "ssl.principal.mapping.rules: RULE:pattern/replacement/[LU],...,DEFAULT: a client "
        "certificate's subject DN to the principal name",
    )
    _flag(
        serve,
        "redis-url",
        None,
        "Redis to use, e.g. redis://host:6379/0; none: a private "
        "redis-server with AOF in --data-dir",
    )
    _flag(
        serve, "data-dir", "skiff-data", "where the embedded redis-server keeps its data", type=Path
    )
    _flag(
        serve,
        "redis-connect-timeout",
        "30",
        "seconds to wait for Redis at start-up",
        type=positive,
    )
    _flag(serve, "auto-create-topics", "true", "auto.create.topics.enable", type=_bool)
    _flag(
        serve,
        "auto-create-topics-per-minute",
        "100",
        "topics this sidecar auto-creates per minute at most; beyond it an unknown topic "
        "gets UNKNOWN_TOPIC_OR_PARTITION (-1: no limit)",
        type=at_least(-1),
    )
    _flag(serve, "num-partitions", "1", "partitions of auto-created topics", type=at_least(1))
    _flag(
        serve,
        "max-request-bytes",
        str(100 * 1024 * 1024),
        "largest request frame accepted",
        type=at_least(1),
    )
    _flag(
        serve,
        "max-connections",
        "2147483647",
        "max.connections: open Kafka connections at most; more are closed at once",
        type=at_least(0),
    )
    _flag(
        serve,
        "max-connections-per-ip",
        "2147483647",
        "max.connections.per.ip: open Kafka connections from one client IP at most",
        type=at_least(0),
    )
    _flag(
        serve,
        "max-connections-per-ip-overrides",
        "",
        "max.connections.per.ip.overrides: HOST:N,HOST:N per-IP limits of their own",
        type=_per_ip_overrides,
    )
    _flag(
        serve,
        "queued-max-request-bytes",
        str(256 * 1024 * 1024),
        "queued.max.request.bytes: bytes of requests read and not yet answered, over all "
        "connections; above it reading pauses (-1: unbounded, Kafka's default)",
        type=at_least(-1),
    )
    _flag(
        serve,
        "connections-max-idle-ms",
        "600000",
        "connections.max.idle.ms: close a connection idle this long (-1: never)",
        type=at_least(-1),
    )
    _flag(
        serve,
        "partial-frame-timeout-ms",
        "30000",
        "close a connection that started a request frame and did not finish it this long "
        "after (-1: never)",
        type=at_least(-1),
    )
    _flag(
        serve,
        "message-timestamp-type",
        "CreateTime",
        "log.message.timestamp.type: default of the topic config message.timestamp.type",
        choices=["CreateTime", "LogAppendTime"],
    )
    _flag(
        serve,
        "compression-type",
        "producer",
        "compression.type: default of the topic config compression.type (how Fetch "
        "compresses batches)",
        choices=["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"],
    )
    _flag(
        serve,
        "storage-format",
        storage_format.DEFAULT,
        "skiff.storage.format of new topics: batch (one stream entry per produced batch, "
        "as sent) or record (one entry per record, readable with XRANGE); fixed per topic",
        choices=list(storage_format.FORMATS),
    )
    _flag(
        serve,
        "message-max-bytes",
        "1048588",
        "message.max.bytes: default of the topic config max.message.bytes (largest batch)",
        type=at_least(0),
    )
    _flag(
        serve,
        "log-message-timestamp-before-max-ms",
        str(2**63 - 1),
        "log.message.timestamp.before.max.ms: how far in the past a CreateTime timestamp may be",
        type=at_least(0),
    )
    _flag(
        serve,
        "log-message-timestamp-after-max-ms",
        "3600000",
        "log.message.timestamp.after.max.ms: how far in the future a CreateTime timestamp may be",
        type=at_least(0),
    )
    _flag(serve, "node-id", "-1", "broker node id; -1 picks the lowest free one", type=at_least(-1))
    _flag(
        serve,
        "broker-session-timeout-ms",
        "9000",
        "how long a sidecar stays registered (and keeps its groups) without renewing",
        type=at_least(1),
    )
    _flag(
        serve,
        "broker-heartbeat-interval-ms",
        "2000",
        "how often a sidecar renews its registration",
        type=at_least(1),
    )
    _flag(
        serve,
        "group-initial-rebalance-delay-ms",
        "3000",
        "group.initial.rebalance.delay.ms",
        type=at_least(0),
    )
    _flag(
        serve,
        "group-min-session-timeout-ms",
        "6000",
        "group.min.session.timeout.ms",
        type=at_least(0),
    )
    _flag(
        serve,
        "group-max-session-timeout-ms",
        "1800000",
        "group.max.session.timeout.ms",
        type=at_least(0),
    )
    _flag(
        serve,
        "offsets-retention-minutes",
        "10080",
        "offsets.retention.minutes (fractions allowed)",
        type=positive,
    )
    _flag(
        serve,
        "offsets-retention-check-interval-ms",
        "600000",
        "offsets.retention.check.interval.ms",
        type=at_least(1),
    )
    _flag(serve, "offset-metadata-max-bytes", "4096", "offset.metadata.max.bytes", type=at_least(0))
    _flag(
        serve,
        "min-insync-replicas",
        "1",
        "min.insync.replicas: acks=-1 waits (Redis WAIT) for this many - 1 Redis replicas",
        type=at_least(1),
    )
    _flag(
        serve,
        "producer-id-expiration-ms",
        "86400000",
        "producer.id.expiration.ms",
        type=at_least(1),
    )
    _flag(
        serve,
        "transactional-id-expiration-ms",
        "604800000",
        "transactional.id.expiration.ms",
        type=at_least(1),
    )
    _flag(
        serve,
        "transaction-version",
        "2",
        "the transaction.version feature level ApiVersions finalizes until UpdateFeatures "
        "(kafka-features) sets one: 2 lets Kafka 4.x clients use transaction protocol "
        "version 2 (KIP-890), 0 or 1 keeps them on the first",
        type=int,
        choices=(0, 1, 2),
    )
    _flag(
        serve,
        "transaction-max-timeout-ms",
        "900000",
        "transaction.max.timeout.ms: the longest transaction.timeout.ms a producer may ask for",
        type=at_least(1),
    )
    _flag(
        serve,
        "transaction-abort-timed-out-transaction-cleanup-interval-ms",
        "10000",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        type=at_least(1),
    )
    _flag(
        serve,
        "log-retention-ms",
        "604800000",
        "log.retention.ms: default of the topic config retention.ms (-1: keep forever)",
        type=at_least(-1),
    )
    _flag(
        serve,
        "log-retention-bytes",
        "-1",
        "log.retention.bytes: default of the topic config retention.bytes, per partition "
        "(-1: no size limit)",
        type=at_least(-1),
    )
    _flag(
        serve,
        "log-cleanup-policy",
        "delete",
        "log.cleanup.policy: default of the topic config cleanup.policy (delete, compact or "
        "compact,delete)",
        type=_cleanup_policy,
    )
    _flag(
        serve,
        "log-retention-check-interval-ms",
        "300000",
        "log.retention.check.interval.ms: how often time retention runs",
        type=at_least(1),
    )
    _flag(
        serve,
        "remote-storage",
        None,
        "tiered storage's object store, for topics with remote.storage.enable=true: "
        "s3://bucket/prefix (endpoint and credentials from AWS_ENDPOINT_URL, "
        "AWS_ACCESS_KEY_ID, ...) or file:///dir; none: <data-dir>/remote with the "
        "embedded Redis, else tiered storage is off",
    )
    _flag(
        serve,
        "log-local-retention-ms",
        "-2",
        "log.local.retention.ms: default of the topic config local.retention.ms, how long "
        "a tiered topic's batches stay in Redis (-2: retention.ms)",
        type=at_least(-2),
    )
    _flag(
        serve,
        "log-local-retention-bytes",
        "-2",
        "log.local.retention.bytes: default of the topic config local.retention.bytes, how "
        "many bytes of a tiered topic's partition stay in Redis (-2: retention.bytes)",
        type=at_least(-2),
    )
    _flag(
        serve,
        "remote-parquet",
        "false",
        "tiered storage: also write each archived segment as a Parquet file beside it "
        "(the Kafka source's columns), for any engine to query; needs pyarrow (the spark "
        "extra)",
        type=_bool,
    )
    _flag(
        serve,
        "remote-log-manager-task-interval-ms",
        "30000",
        "remote.log.manager.task.interval.ms: how often the archiver moves batches past "
        "local retention to the object store",
        type=at_least(1),
    )
    _flag(
        serve,
        "log-cleaner-backoff-ms",
        "15000",
        "log.cleaner.backoff.ms: how long the compactor sleeps when it has nothing to clean",
        type=at_least(0),
    )
    _flag(
        serve,
        "redis-timeout-ms",
        "2000",
        "socket timeout of one Redis command (and of connecting)",
        type=at_least(1),
    )
    _flag(
        serve,
        "redis-retry-ms",
        "8000",
        "how long one Kafka request retries Redis (connection loss, timeouts, LOADING, "
        "BUSY, READONLY) before answering a retriable error; Produce: at most half its "
        "timeout_ms",
        type=at_least(0),
    )
    _flag(
        serve,
        "redis-max-connections",
        "128",
        "Redis commands one sidecar process runs at once (its connection pool holds a "
        "few more); more concurrent requests wait for a free connection",
        type=at_least(1),
    )
    _flag(
        serve,
        "shutdown-timeout-ms",
        "10000",
        "SIGTERM: how long in-flight requests may take before everything is closed",
        type=at_least(0),
    )
    _flag(serve, "log-level", "INFO", ", ".join(LOG_LEVELS), type=_log_level)
    _flag(
        serve,
        "udp-listen",
        None,
        "HOST:PORT to receive UDP datagrams on, each one a record of --udp-topic (docs/udp.md)",
        type=_hostport,
    )
    _flag(
        serve,
        "udp-topic",
        None,
        "the topic UDP datagrams are appended to",
        type=topic_names.argument,
    )
    _flag(
        serve,
        "udp-stats-interval-ms",
        "60000",
        "how often the UDP ingest counters are logged while they change",
        type=at_least(1),
    )
    _flag(
        serve,
        "client-metrics",
        "",
        "metric name prefixes Kafka clients are asked to push (KIP-714), comma-separated, "
        "'*' for all; empty: the telemetry APIs are not offered",
        type=_name_list,
    )
    _flag(
        serve,
        "client-metrics-push-interval-ms",
        "300000",
        "how often clients push the metrics of --client-metrics",
        type=at_least(100),
    )
    _flag(
        serve,
        "http-listen",
        "127.0.0.1:8080",
        "HOST:PORT of the HTTP endpoint (/healthz, /readyz, /metrics); none: no endpoint",
        type=_optional_hostport,
    )
    _flag(
        serve,
        "console",
        "true",
        "serve the web console under /console on the HTTP endpoint (docs/console.md)",
        type=_bool,
    )
    _flag(
        serve,
        "http-auth",
        "none",
        "what the HTTP queue API accepts as credentials: basic (SCRAM/PLAIN users), "
        "bearer (an OAUTHBEARER JWT), both comma-separated, or none (open, all callers "
        "User:ANONYMOUS)",
        type=_http_auth,
    )
    _flag(
        serve,
        "http-open-paths",
        "/healthz,/readyz,/metrics,/v1/openapi.json",
        "HTTP paths served without credentials when --http-auth is on (probes, "
        "Prometheus); empty: none",
        type=_http_paths,
    )
    _flag(
        serve,
        "http-auth-allow-plaintext",
        "false",
        "accept HTTP credentials without TLS (--http-ssl-*): only behind a TLS proxy",
        type=_bool,
    )
    _flag(
        serve,
        "http-ssl-keystore-location",
        None,
        "PEM file with the HTTP endpoint's key and certificate chain: HTTPS",
        type=Path,
    )
    _flag(
        serve,
        "http-ssl-keystore-certificate-location",
        None,
        "PEM certificate chain of the HTTP endpoint (with --http-ssl-keystore-key-location)",
        type=Path,
    )
    _flag(
        serve,
        "http-ssl-keystore-key-location",
        None,
        "PEM private key of the HTTP endpoint",
        type=Path,
    )
    _flag(serve, "http-ssl-key-password", None, "password of an encrypted HTTP endpoint key")
    _flag(
        serve,
        "log-format",
        "text",
        "text or json (one JSON object a line)",
        choices=["text", "json"],
    )
    _flag(
        serve,
        "workers",
        "1",
        "sidecar processes on this host (one per core); worker i listens on the --listen, "
        "--advertise and --http-listen ports + i with a node id of its own",
        type=at_least(1),
    )
    _flag(
        serve,
        "group-share-session-timeout-ms",
        "45000",
        "group.share.session.timeout.ms",
        type=at_least(1),
    )
    _flag(
        serve,
        "group-share-heartbeat-interval-ms",
        "5000",
        "group.share.heartbeat.interval.ms",
        type=at_least(1),
    )
    _flag(
        serve,
        "group-share-record-lock-duration-ms",
        "30000",
        "group.share.record.lock.duration.ms: the share.record.lock.duration.ms of share "
        "and queue groups that do not set it",
        type=at_least(1000, 3_600_000),
    )
    _flag(
        serve,
        "group-share-delivery-count-limit",
        "5",
        "group.share.delivery.count.limit: the share.delivery.count.limit of share and "
        "queue groups that do not set it",
        type=at_least(1, 1000),
    )
    _flag(
        serve,
        "group-share-partition-max-record-locks",
        "2000",
        "group.share.partition.max.record.locks: records of one partition a share or "
        "queue group holds in flight (acquired, or released and not yet acquired again) "
        "at most; a fetch acquires no new ones past it",
        type=at_least(1, 100_000),
    )
    _flag(
        serve,
        "group-consumer-session-timeout-ms",
        "45000",
        "group.consumer.session.timeout.ms",
        type=at_least(1),
    )
    _flag(
        serve,
        "group-consumer-heartbeat-interval-ms",
        "5000",
        "group.consumer.heartbeat.interval.ms",
        type=at_least(1),
    )
    _flag(
        serve,
        "group-consumer-migration-policy",
        "bidirectional",
        "group.consumer.migration.policy: classic <-> consumer group conversions allowed "
        "(bidirectional, upgrade, downgrade, disabled)",
        choices=["bidirectional", "upgrade", "downgrade", "disabled"],
    )
    _flag(
        serve,
        "group-streams-num-standby-replicas",
        "0",
        "group.streams.num.standby.replicas: standby tasks of each active task in a streams "
        "group (KIP-1071), on members of other processes (at most Kafka's "
        "group.streams.max.standby.replicas, 2)",
        type=at_least(0, 2),
    )
    _flag(
        serve,
        "authorizer-class-name",
        "",
        "authorizer.class.name: empty for none (every request allowed), or "
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer (or standard) for ACLs",
        type=_authorizer,
    )
    _flag(
        serve,
        "super-users",
        "",
        "super.users: principals allowed everything, separated by ';' (User:admin;User:ops)",
        type=_super_users,
    )
    _flag(
        serve,
        "allow-everyone-if-no-acl-found",
        "false",
        "allow.everyone.if.no.acl.found: allow a request on a resource no ACL is on",
        type=_bool,
    )
    _flag(
        serve,
        "sasl-oauthbearer-jwks-endpoint-url",
        None,
        "sasl.oauthbearer.jwks.endpoint.url: the JWKS OAUTHBEARER tokens are verified "
        "with (https://, http:// or file:)",
        type=_oauthbearer("sasl.oauthbearer.jwks.endpoint.url"),
    )
    _flag(
        serve,
        "sasl-oauthbearer-jwks-endpoint-refresh-ms",
        "3600000",
        "sasl.oauthbearer.jwks.endpoint.refresh.ms: how often the JWKS is fetched again "
        "(and at once on an unknown key id)",
        type=_oauthbearer("sasl.oauthbearer.jwks.endpoint.refresh.ms"),
    )
    _flag(
        serve,
        "sasl-oauthbearer-expected-issuer",
        None,
        "sasl.oauthbearer.expected.issuer: the iss a token must have (none: any)",
        type=_oauthbearer("sasl.oauthbearer.expected.issuer"),
    )
    _flag(
        serve,
        "sasl-oauthbearer-expected-audience",
        "",
        "sasl.oauthbearer.expected.audience: comma-separated; a token's aud must hold one "
        "(empty: any)",
        type=_oauthbearer("sasl.oauthbearer.expected.audience"),
    )
    _flag(
        serve,
        "sasl-oauthbearer-sub-claim-name",
        "sub",
        "sasl.oauthbearer.sub.claim.name: the claim naming the principal (User:<claim>)",
        type=_oauthbearer("sasl.oauthbearer.sub.claim.name"),
    )
    _flag(
        serve,
        "sasl-oauthbearer-clock-skew-seconds",
        "30",
        "sasl.oauthbearer.clock.skew.seconds: tolerance of exp, nbf and iat",
        type=_oauthbearer("sasl.oauthbearer.clock.skew.seconds"),
    )
    _flag(
        serve,
        "sasl-oauthbearer-scope-claim-name",
        "scope",
        "sasl.oauthbearer.scope.claim.name: the claim holding the token's scopes",
        type=_oauthbearer("sasl.oauthbearer.scope.claim.name"),
    )
    _flag(
        serve,
        "sasl-oauthbearer-jwks-endpoint-retry-backoff-ms",
        "100",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms: the first wait before a failed "
        "JWKS fetch is tried again (doubling each time)",
        type=_oauthbearer("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"),
    )
    _flag(
        serve,
        "sasl-oauthbearer-jwks-endpoint-retry-backoff-max-ms",
        "10000",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms: the longest wait between "
        "JWKS fetch attempts",
        type=_oauthbearer("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"),
    )
    _sasl_flags(serve)
    groups_cli.add_parser(sub)
    topics_cli.add_parser(sub)
    queues_cli.add_parser(sub)
    storage_cli.add_parser(sub)
    users_cli.add_parser(sub)
    return parser


def _sasl_mechanisms(text: str) -> tuple[str, ...]:
    try:
        return sasl_config.parse_mechanisms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_scram(text: str) -> tuple[ScramBootstrap, ...]:
    """--add-scram entries, one per line (SKIFF_ADD_SCRAM holds several)."""
    try:
        return tuple(parse_add_scram(line) for line in text.splitlines() if line.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _AppendScram(argparse.Action):
    """--add-scram is repeatable; the first one given replaces $SKIFF_ADD_SCRAM's."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        given = getattr(namespace, "_add_scram_given", False)
        previous = getattr(namespace, self.dest) if given else ()
        setattr(namespace, self.dest, (*previous, *values))
        namespace._add_scram_given = True


def _sasl_flags(serve: argparse.ArgumentParser) -> None:
    _flag(
        serve,
        "sasl-enabled-mechanisms",
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.enabled.mechanisms: SASL mechanisms of SASL listeners (Kafka's default is "
        "GSSAPI, which Skiff does not serve)",
        type=_sasl_mechanisms,
    )
    _flag(
        serve,
        "connections-max-reauth-ms",
        "0",
        "connections.max.reauth.ms: a SASL session lasts this long, then the client must "
        "re-authenticate (KIP-368; 0: forever)",
        type=at_least(0),
    )
    _flag(
        serve,
        "sasl-plain-users-file",
        None,
        "file of user:password lines PLAIN logins are checked against (re-read on change)",
        type=Path,
    )
    _flag(
        serve,
        "add-scram",
        "",
        "MECHANISM=[name=USER,password=PASSWORD]: create this SCRAM credential at start if the "
        "user has none for the mechanism (Kafka's kafka-storage --add-scram; repeatable, "
        "newline-separated in the variable)",
        type=_add_scram,
        action=_AppendScram,
    )
    _flag(
        serve,
        "delegation-token-secret-key",
        None,
        "delegation.token.secret.key: the key delegation tokens' HMACs are made with, the "
        "same on every sidecar (unset: no delegation tokens)",
    )
    _flag(
        serve,
        "delegation-token-max-lifetime-ms",
        "604800000",
        "delegation.token.max.lifetime.ms: a delegation token's longest life",
        type=at_least(1),
    )
    _flag(
        serve,
        "delegation-token-expiry-time-ms",
        "86400000",
        "delegation.token.expiry.time.ms: a delegation token expires this long after its "
        "creation or last renewal unless renewed",
        type=at_least(1),
    )


def _serve_actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """`skiff serve`'s flags by name (without the dashes)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        opt[2:]: action
        for action in sub.choices["serve"]._actions
        for opt in action.option_strings
        if opt.startswith("--") and opt != "--help"
    }


def _load_config(argv: list[str]) -> server_properties.ServerProperties | None:
    """The `serve --config` file's values, installed as flag defaults."""
    _FILE_VALUES.clear()
    if not argv or argv[0] != "serve":
        return None
    path = server_properties.config_path(argv[1:], os.environ)
    if path is None:
        return None
    actions = _serve_actions(build_parser())
    loaded = server_properties.load(path, actions)
    server_properties.check(loaded.values, actions)
    _FILE_VALUES.update({flag: v.value for flag, v in loaded.values.items()})
    return loaded


def _listen_beats_file_listeners(argv: list[str]) -> bool:
    """--listen given (flag or $SKIFF_LISTEN) while `listeners` comes only from the
    --config file: the more explicit source wins, as a flag beats the file."""

    def given(flag: str) -> bool:
        env = "SKIFF_" + flag.upper().replace("-", "_")
        return env in os.environ or any(
            a == f"--{flag}" or a.startswith(f"--{flag}=") for a in argv
        )

    return given("listen") and not given("listeners")


def main(argv: list[str] | None = None) -> int:
    try:
        return _run(sys.argv[1:] if argv is None else list(argv))
    except KeyboardInterrupt:
        # Ctrl-C before the sidecar is up (once it is, SIGINT is a graceful stop).
        print("skiff: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _run(argv: list[str]) -> int:
    try:
        config = _load_config(argv)
    except server_properties.ConfigFileError as exc:
        print(f"skiff: error: {exc}", file=sys.stderr)
        return EXIT_MISTAKE
    parser = build_parser()
    args = parser.parse_args(argv)
    logs.configure(str(args.log_level), getattr(args, "log_format", "text"))
    for level, line in config.log_lines() if config else ():
        logging.getLogger("skiff").log(level, "%s", line)
    if args.command == "groups":
        return groups_cli.run(args)
    if args.command in ("topics", "records"):
        return topics_cli.run(args)
    if args.command == "queues":
        return queues_cli.run(args)
    if args.command == "storage":
        return storage_cli.run(args)
    if args.command == "users":
        return users_cli.run(args)
    if args.command != "serve":
        return 2
    settings = Settings(
        listen=args.listen,
        advertise=args.advertise,
        listeners=() if _listen_beats_file_listeners(argv) else args.listeners or (),
        advertised_listeners=args.advertised_listeners or (),
        listener_security_protocol_map=args.listener_security_protocol_map,
        inter_broker_listener_name=args.inter_broker_listener_name,
        listener_overrides=tuple(config.listener_overrides) if config else (),
        ssl_keystore_location=args.ssl_keystore_location,
        ssl_keystore_type=args.ssl_keystore_type,
        ssl_keystore_certificate_location=args.ssl_keystore_certificate_location,
        ssl_keystore_key_location=args.ssl_keystore_key_location,
        ssl_key_password=args.ssl_key_password,
        ssl_truststore_location=args.ssl_truststore_location,
        ssl_client_auth=args.ssl_client_auth,
        ssl_enabled_protocols=args.ssl_enabled_protocols,
        ssl_principal_mapping_rules=args.ssl_principal_mapping_rules,
        redis_url=args.redis_url,
        redis_connect_timeout=args.redis_connect_timeout,
        data_dir=args.data_dir,
        auto_create_topics=args.auto_create_topics,
        num_partitions=args.num_partitions,
        max_request_bytes=args.max_request_bytes,
        max_connections=args.max_connections,
        max_connections_per_ip=args.max_connections_per_ip,
        max_connections_per_ip_overrides=args.max_connections_per_ip_overrides,
        queued_max_request_bytes=args.queued_max_request_bytes,
        connections_max_idle_ms=args.connections_max_idle_ms,
        partial_frame_timeout_ms=args.partial_frame_timeout_ms,
        auto_create_topics_per_minute=args.auto_create_topics_per_minute,
        message_timestamp_type=args.message_timestamp_type,
        compression_type=args.compression_type,
        storage_format=args.storage_format,
        message_max_bytes=args.message_max_bytes,
        log_message_timestamp_before_max_ms=args.log_message_timestamp_before_max_ms,
        log_message_timestamp_after_max_ms=args.log_message_timestamp_after_max_ms,
        node_id=args.node_id,
        broker_session_timeout_ms=args.broker_session_timeout_ms,
        broker_heartbeat_interval_ms=args.broker_heartbeat_interval_ms,
        group_initial_rebalance_delay_ms=args.group_initial_rebalance_delay_ms,
        group_min_session_timeout_ms=args.group_min_session_timeout_ms,
        group_max_session_timeout_ms=args.group_max_session_timeout_ms,
        offsets_retention_minutes=args.offsets_retention_minutes,
        offsets_retention_check_interval_ms=args.offsets_retention_check_interval_ms,
        offset_metadata_max_bytes=args.offset_metadata_max_bytes,
        min_insync_replicas=args.min_insync_replicas,
        producer_id_expiration_ms=args.producer_id_expiration_ms,
        transactional_id_expiration_ms=args.transactional_id_expiration_ms,
        transaction_max_timeout_ms=args.transaction_max_timeout_ms,
        transaction_version=args.transaction_version,
        transaction_abort_timed_out_transaction_cleanup_interval_ms=(
            args.transaction_abort_timed_out_transaction_cleanup_interval_ms
        ),
        udp_listen=args.udp_listen,
        udp_topic=args.udp_topic,
        udp_stats_interval_ms=args.udp_stats_interval_ms,
        client_metrics=args.client_metrics,
        client_metrics_push_interval_ms=args.client_metrics_push_interval_ms,
        log_retention_ms=args.log_retention_ms,
        log_retention_bytes=args.log_retention_bytes,
        log_cleanup_policy=args.log_cleanup_policy,
        log_retention_check_interval_ms=args.log_retention_check_interval_ms,
        log_cleaner_backoff_ms=args.log_cleaner_backoff_ms,
        remote_storage=args.remote_storage,
        log_local_retention_ms=args.log_local_retention_ms,
        log_local_retention_bytes=args.log_local_retention_bytes,
        remote_parquet=args.remote_parquet,
        remote_log_manager_task_interval_ms=args.remote_log_manager_task_interval_ms,
        http_listen=args.http_listen,
        console=args.console,
        http_auth=args.http_auth,
        http_open_paths=args.http_open_paths,
        http_auth_allow_plaintext=args.http_auth_allow_plaintext,
        http_ssl_keystore_location=args.http_ssl_keystore_location,
        http_ssl_keystore_certificate_location=args.http_ssl_keystore_certificate_location,
        http_ssl_keystore_key_location=args.http_ssl_keystore_key_location,
        http_ssl_key_password=args.http_ssl_key_password,
        redis_timeout_ms=args.redis_timeout_ms,
        redis_retry_ms=args.redis_retry_ms,
        redis_max_connections=args.redis_max_connections,
        shutdown_timeout_ms=args.shutdown_timeout_ms,
        group_share_session_timeout_ms=args.group_share_session_timeout_ms,
        group_share_heartbeat_interval_ms=args.group_share_heartbeat_interval_ms,
        group_share_record_lock_duration_ms=args.group_share_record_lock_duration_ms,
        group_share_delivery_count_limit=args.group_share_delivery_count_limit,
        group_share_partition_max_record_locks=args.group_share_partition_max_record_locks,
        group_consumer_session_timeout_ms=args.group_consumer_session_timeout_ms,
        group_consumer_heartbeat_interval_ms=args.group_consumer_heartbeat_interval_ms,
        group_consumer_migration_policy=args.group_consumer_migration_policy,
        group_streams_num_standby_replicas=args.group_streams_num_standby_replicas,
        authorizer_class_name=args.authorizer_class_name,
        super_users=args.super_users,
        allow_everyone_if_no_acl_found=args.allow_everyone_if_no_acl_found,
        sasl_oauthbearer_jwks_endpoint_url=args.sasl_oauthbearer_jwks_endpoint_url,
        sasl_oauthbearer_expected_issuer=args.sasl_oauthbearer_expected_issuer,
        sasl_oauthbearer_expected_audience=args.sasl_oauthbearer_expected_audience,
        sasl_oauthbearer_sub_claim_name=args.sasl_oauthbearer_sub_claim_name,
        sasl_oauthbearer_clock_skew_seconds=args.sasl_oauthbearer_clock_skew_seconds,
        sasl_oauthbearer_jwks_endpoint_refresh_ms=args.sasl_oauthbearer_jwks_endpoint_refresh_ms,
        sasl_oauthbearer_scope_claim_name=args.sasl_oauthbearer_scope_claim_name,
        sasl_oauthbearer_jwks_endpoint_retry_backoff_ms=(
            args.sasl_oauthbearer_jwks_endpoint_retry_backoff_ms
        ),
        sasl_oauthbearer_jwks_endpoint_retry_backoff_max_ms=(
            args.sasl_oauthbearer_jwks_endpoint_retry_backoff_max_ms
        ),
        sasl_enabled_mechanisms=args.sasl_enabled_mechanisms,
        connections_max_reauth_ms=args.connections_max_reauth_ms,
        sasl_plain_users_file=args.sasl_plain_users_file,
        add_scram=args.add_scram,
        delegation_token_secret_key=args.delegation_token_secret_key or None,
        delegation_token_max_lifetime_ms=args.delegation_token_max_lifetime_ms,
        delegation_token_expiry_time_ms=args.delegation_token_expiry_time_ms,
    )
    if (args.udp_listen is None) != (args.udp_topic is None):
        parser.error("--udp-listen and --udp-topic go together")
    if settings.listeners and args.advertise is not None:
        parser.error("--advertise goes with --listen; with --listeners use --advertised-listeners")
    if args.workers > 1 and any(e.address.port == 0 for e in settings.listeners):
        parser.error("--workers needs fixed --listeners ports (worker i listens on port + i)")
    try:
        for listener in listener_config.resolve(settings):
            if listener.protocol.endswith("SSL"):  # certificate files readable, key usable
                tls.build_context(tls.listener_tls(settings, listener))
    except (listener_config.ListenerError, tls.TlsConfigError) as exc:
        print(f"skiff serve: error: {exc}", file=sys.stderr)
        return EXIT_MISTAKE
    try:
        sasl_listeners = [
            listener.name
            for listener in listener_config.resolve(settings)
            if listener.protocol.startswith("SASL_")
        ]
        sasl_config.check(settings, sasl_listeners)
        oauthbearer.check(settings, sasl_listeners)
    except ValueError as exc:
        print(f"skiff serve: error: {exc}", file=sys.stderr)
        return EXIT_MISTAKE
    if args.workers > 1 and args.listen.port == 0:
        parser.error("--workers needs a fixed --listen port (worker i listens on port + i)")
    try:
        preflight.check(settings, args.workers)
    except preflight.Mistake as exc:
        print(f"skiff serve: error: {exc}", file=sys.stderr)
        return EXIT_MISTAKE
    if args.workers > 1:
        from sidecar.process.workers import run

        return run(settings, args.workers, str(args.log_level), args.log_format)
    from sidecar.process import event_loop
    from sidecar.process.app import serve

    try:
        event_loop.run(serve(settings), settings)
    except RuntimeError as exc:
        logging.getLogger("skiff").error("%s", exc)
        return 1
    except OSError as exc:
        # An address taken between the preflight check and the bind.
        print(
            f"skiff serve: error: {exc}; pick another address or stop what uses it", file=sys.stderr
        )
        return EXIT_MISTAKE
    return 0


if __name__ == "__main__":
    sys.exit(main())
