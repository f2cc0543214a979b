"""Dynamic broker configs (KIP-226) as a Kafka 4.4 broker takes them, for the configs
Skiff can apply: which names may change, how an AlterConfigs / IncrementalAlterConfigs
on a BROKER resource ("" the cluster default, "<node id>" one sidecar) is checked, and
what the stored values make of the server defaults of topic configs.

Skiff's dynamic configs are the broker synonyms of topic configs (log.retention.ms,
message.max.bytes, log.cleanup.policy, min.insync.replicas, ...) and
producer.id.expiration.ms. Kafka 4.4's other dynamic configs (listeners, ssl.*, sasl.*,
thread pools, connection limits, ...) are refused with "Cannot update these configs
dynamically" where Kafka would take them: a sidecar cannot change them at run time.

Checks, messages and their order are Kafka 4.4.0's (ConfigAdminManager.preprocess,
DynamicBrokerConfig.validate, the controller's min.insync.replicas rule; checked with
tools/kafka_reference and the probes in tests/test_broker_configs.py): duplicate names,
null values, the node id, the operation, APPEND/SUBTRACT on a list, then the whole new
set of the resource: Kafka's static configs, security configs without a listener
prefix, each value's type and range (in Kafka's definition order), per-broker configs
at the cluster default, Skiff's refusals, KafkaConfig's requirements (log.roll.ms ...),
the local-retention and copy-lag bounds, and last min.insync.replicas (KIP-966: the
cluster default cannot be removed, a broker's cannot be set). Names Kafka does not know
are stored and listed (value hidden, read-only), as Kafka does."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sidecar.config import topic as topic_config
from sidecar.config.admin import APPEND, DELETE, SET, SUBTRACT, AdminError
from sidecar.config.kafka_broker_names import KAFKA_BROKER_CONFIGS
from sidecar.config.topic import KEYS, ConfigError, ConfigKey
from sidecar.protocol import errors
from sidecar.protocol.java_order import hash_map_order

CLUSTER_DEFAULT = ""
MIN_INSYNC = "min.insync.replicas"
PRODUCER_ID_EXPIRATION = "producer.id.expiration.ms"

# Kafka 4.4's dynamic broker configs (read_only=false in a 4.4.0 broker's DescribeConfigs).
KAFKA_DYNAMIC = frozenset(
    """
    background.threads compression.gzip.level compression.lz4.level compression.type
    compression.zstd.level config.providers cordoned.log.dirs
    errors.deadletterqueue.auto.create.topics.enable errors.deadletterqueue.topic.name.prefix
    follower.fetch.last.tiered.offset.enable group.consumer.assignment.interval.ms
    group.coordinator.cached.buffer.max.bytes group.share.assignment.interval.ms
    group.streams.assignment.interval.ms listener.security.protocol.map listeners
    log.cleaner.backoff.ms log.cleaner.dedupe.buffer.size log.cleaner.delete.retention.ms
    log.cleaner.io.buffer.load.factor log.cleaner.io.buffer.size
    log.cleaner.io.max.bytes.per.second log.cleaner.max.compaction.lag.ms
    log.cleaner.min.cleanable.ratio log.cleaner.min.compaction.lag.ms log.cleaner.threads
    log.cleanup.policy log.flush.interval.messages log.flush.interval.ms
    log.index.interval.bytes log.index.size.max.bytes log.local.retention.bytes
    log.local.retention.ms log.message.timestamp.after.max.ms
    log.message.timestamp.before.max.ms log.message.timestamp.type log.preallocate
    log.remote.copy.lag.bytes log.remote.copy.lag.ms log.retention.bytes log.retention.ms
    log.roll.jitter.ms log.roll.ms log.segment.bytes log.segment.delete.delay.ms
    max.connection.creation.rate max.connections max.connections.per.ip
    max.connections.per.ip.overrides max.decompressed.message.bytes message.max.bytes
    metric.reporters min.insync.replicas num.io.threads num.network.threads
    num.recovery.threads.per.data.dir num.replica.fetchers principal.builder.class
    producer.id.expiration.ms remote.fetch.max.wait.ms remote.list.offsets.request.timeout.ms
    remote.log.index.file.cache.total.size.bytes remote.log.manager.copier.thread.pool.size
    remote.log.manager.copy.max.bytes.per.second
    remote.log.manager.expiration.thread.pool.size
    remote.log.manager.fetch.max.bytes.per.second remote.log.manager.follower.thread.pool.size
    remote.log.reader.threads sasl.enabled.mechanisms sasl.jaas.config sasl.kerberos.kinit.cmd
    sasl.kerberos.min.time.before.relogin sasl.kerberos.principal.to.local.rules
    sasl.kerberos.service.name sasl.kerberos.ticket.renew.jitter
    sasl.kerberos.ticket.renew.window.factor sasl.login.refresh.buffer.seconds
    sasl.login.refresh.min.period.seconds sasl.login.refresh.window.factor
    sasl.login.refresh.window.jitter sasl.mechanism.inter.broker.protocol
    share.coordinator.cached.buffer.max.bytes ssl.cipher.suites ssl.client.auth
    ssl.enabled.protocols ssl.endpoint.identification.algorithm ssl.engine.factory.class
    ssl.key.password ssl.keymanager.algorithm ssl.keystore.certificate.chain ssl.keystore.key
    ssl.keystore.location ssl.keystore.password ssl.keystore.type ssl.protocol ssl.provider
    ssl.secure.random.implementation ssl.trustmanager.algorithm ssl.truststore.certificates
    ssl.truststore.location ssl.truststore.password ssl.truststore.type
    transaction.partition.verification.enable unclean.leader.election.enable
    """.split()
)
# Kafka 3.9.1 broker configs that 4.4 no longer knows: unknown names there (accepted).
_GONE_IN_KAFKA_4 = frozenset(
    """
    allow.everyone.if.no.acl.found auto.include.jmx.reporter broker.id.generation.enable
    control.plane.listener.name controlled.shutdown.max.retries
    controlled.shutdown.retry.backoff.ms delegation.token.master.key
    eligible.leader.replicas.enable group.coordinator.new.enable group.share.enable
    group.share.max.groups inter.broker.protocol.version
    leader.imbalance.per.broker.percentage log.message.downconversion.enable
    log.message.format.version log.message.timestamp.difference.max.ms
    metadata.log.segment.min.bytes offsets.commit.required.acks reserved.broker.max.id
    super.users
    """.split()
)
# Kafka 4.4's static broker configs: "Cannot update these configs dynamically".
KAFKA_STATIC = frozenset(
    name
    for name in KAFKA_BROKER_CONFIGS - KAFKA_DYNAMIC - _GONE_IN_KAFKA_4
    if not name.startswith(("zookeeper.", "password.encoder."))
)
# Kafka's LIST broker configs (APPEND and SUBTRACT take only these).
_KAFKA_LISTS = frozenset(
    """
    advertised.listeners config.providers controller.listener.names
    controller.quorum.bootstrap.servers controller.quorum.voters cordoned.log.dirs
    early.start.listeners group.consumer.assignors group.coordinator.rebalance.protocols
    group.share.assignors group.streams.assignors group.streams.rack.aware.assignment.tags
    kafka.metrics.reporters listeners log.cleanup.policy log.dir log.dirs metric.reporters
    process.roles sasl.enabled.mechanisms sasl.kerberos.principal.to.local.rules
    sasl.oauthbearer.expected.audience ssl.cipher.suites ssl.enabled.protocols
    """.split()
)
# SslConfigs.RECONFIGURABLE_CONFIGS, in the order Kafka 4.4 lists them: dynamic only
# under a listener prefix (listener.name.<listener>.ssl...).
_SECURITY = (
    "ssl.keystore.type",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.location",
    "ssl.keystore.key",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.truststore.type",
)
# Dynamic only per broker: its listeners and their security.
_PER_BROKER = frozenset(
    n
    for n in KAFKA_DYNAMIC
    if n.startswith(("ssl.", "sasl."))
    or n in ("listeners", "listener.security.protocol.map", "principal.builder.class")
)
_LISTENER_PREFIXED = re.compile(r"listener\.name\.[^.]*\.(.*)")
_CLUSTER_LEVEL_LISTENER = frozenset(
    {"max.connections", "max.connection.creation.rate", "num.network.threads"}
)

# Kafka's dynamic-only broker configs of replication (DynamicConfig.Broker): there is no
# replication to throttle. Deleting one changes nothing (`kafka-reassign-partitions
# --verify` deletes them on every broker); setting one is refused.
REPLICATION_THROTTLES = frozenset(
    {
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)

# ConfigSource ids (DescribeConfigsResponse)
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3


# -- Skiff's dynamic configs -------------------------------------------------------------------


def _valid_list(*choices: str) -> topic_config.Validator:
    """Kafka 4.4's ValidList: no repeated item, no empty item, each one of `choices`."""
    one_of = topic_config.one_of(*choices)

    def check(name: str, value: Any) -> None:
        if len(set(value)) != len(value):
            raise ConfigError(f"Configuration '{name}' values must not be duplicated.")
        if "" in value:
            raise ConfigError(f"Configuration '{name}' values must not be empty.")
        one_of(name, value)

    return check


# Broker configs whose ConfigDef entry has no validator (KafkaConfig checks a few of them
# as a whole, see _requirements).
_UNCHECKED = {"log.retention.ms", "log.retention.bytes", "log.flush.interval.ms"}
_UNCHECKED |= {"log.roll.ms", "log.roll.jitter.ms"}


@dataclass(frozen=True, slots=True)
class DynamicKey:
    """A broker config Skiff changes at run time: how Kafka parses it under its broker
    name, and the topic config whose server default it sets (None: not a topic's)."""

    key: ConfigKey
    topic: str | None

    @property
    def name(self) -> str:
        return self.key.name

    def parse(self, raw: str) -> Any:
        return self.key.parse(raw)

    def format(self, value: Any) -> str:
        return self.key.format(value)


def _dynamic_keys() -> dict[str, DynamicKey]:
    out = {}
    for key in KEYS.values():
        if key.synonym is None:
            continue
        validator = None if key.synonym in _UNCHECKED else key.validator
        if key.kind == "list":
            validator = _valid_list("compact", "delete")  # log.cleanup.policy
        broker = ConfigKey(key.synonym, key.kind, key.default, validator, None, None, True)
        out[key.synonym] = DynamicKey(broker, key.name)
    pid = ConfigKey(
        PRODUCER_ID_EXPIRATION, "int", 86_400_000, topic_config.at_least(1), None, None, True
    )
    out[PRODUCER_ID_EXPIRATION] = DynamicKey(pid, None)
    return out


DYNAMIC: dict[str, DynamicKey] = _dynamic_keys()

# The order Kafka 4.4 checks values in (its ConfigDef's definition order): the first bad
# value it meets is the one reported.
_TYPE_ORDER = (
    "log.local.retention.ms log.local.retention.bytes log.remote.copy.lag.ms "
    "log.remote.copy.lag.bytes message.max.bytes max.decompressed.message.bytes "
    "compression.type compression.gzip.level compression.lz4.level compression.zstd.level "
    "unclean.leader.election.enable log.cleaner.min.cleanable.ratio "
    "log.cleaner.delete.retention.ms log.cleaner.min.compaction.lag.ms "
    "log.cleaner.max.compaction.lag.ms log.segment.bytes log.roll.ms log.roll.jitter.ms "
    "log.retention.ms log.retention.bytes log.cleanup.policy log.index.size.max.bytes "
    "log.index.interval.bytes log.flush.interval.messages log.segment.delete.delay.ms "
    "log.flush.interval.ms log.preallocate min.insync.replicas log.message.timestamp.type "
    "log.message.timestamp.before.max.ms log.message.timestamp.after.max.ms "
    "producer.id.expiration.ms"
).split()
assert sorted(_TYPE_ORDER) == sorted(DYNAMIC), "every dynamic config has its place"


def kafka_knows(name: str) -> bool:
    """A name Kafka 4.4 knows as a broker config (else it stores it as it is)."""
    return name in KAFKA_STATIC or name in KAFKA_DYNAMIC or name in REPLICATION_THROTTLES


def listed_names(stored: Mapping[str, str]) -> list[str]:
    """The stored names DescribeConfigs lists as unknown configs (names Kafka does not
    know: Skiff stores no other kind but its dynamic configs)."""
    return [n for n in stored if n not in DYNAMIC and not kafka_knows(n)]


# -- what the stored values make of the server defaults ---------------------------------------


def parsed(layer: Mapping[str, str]) -> dict[str, Any]:
    """A stored set's values of Skiff's dynamic configs, parsed (a value that no longer
    parses, written by hand into Redis, is left out)."""
    return topic_config.parse_known(layer, DYNAMIC)


def _topic_value(broker_name: str, value: Any) -> Any:
    """A broker config's value as the topic config it defaults (KafkaConfig: a negative
    log.retention.ms is no time limit, -1)."""
    if broker_name == "log.retention.ms" and value < 0:
        return -1
    return value


def topic_defaults(
    static: Mapping[str, Any], default: Mapping[str, str], node: Mapping[str, str]
) -> dict[str, Any]:
    """The server defaults of topic configs: `static` (Kafka's defaults under the
    sidecar's flags), then the dynamic cluster default, then this sidecar's own."""
    out = dict(static)
    for layer in (default, node):
        for name, value in parsed(layer).items():
            topic = DYNAMIC[name].topic
            if topic is not None:
                out[topic] = _topic_value(name, value)
    return out


def layered_value(
    name: str, static_value: Any, default: Mapping[str, str], node: Mapping[str, str]
) -> Any:
    """One dynamic config's value: this sidecar's, else the cluster default, else
    `static_value` (producer.id.expiration.ms)."""
    value = static_value
    for layer in (default, node):
        value = parsed({name: layer[name]}).get(name, value) if name in layer else value
    return value


# -- alterations -----------------------------------------------------------------------------


def _java_split(text: str) -> list[str]:
    """Java's String.split(","): trailing empty strings dropped; "" is [""]."""
    if text == "":
        return [""]
    parts = text.split(",")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _java_set(names: Iterable[str]) -> str:
    """A Java HashSet of names as toString prints it."""
    return "[" + ", ".join(hash_map_order(dict.fromkeys(names))) + "]"


_JAVA_INT = re.compile(r"([+-]?)0*([0-9]{1,10})")  # at most 10 digits: no huge int()


def node_id_of(name: str, expected: int, describing: bool = False) -> None:
    """Kafka's check that a BROKER resource names this broker (Integer.parseInt)."""
    match = _JAVA_INT.fullmatch(name)
    value = int(match.group(1) + match.group(2)) if match else None
    if value is None or not -(2**31) <= value < 2**31:
        what = "Broker" if describing else "Node"
        raise AdminError(errors.INVALID_REQUEST, f"{what} id must be an integer, but it is: {name}")
    if value != expected:
        also = " or empty string" if describing else ""
        raise AdminError(
            errors.INVALID_REQUEST,
            f"Unexpected broker id, expected {expected}{also}, but received {name}",
        )


def apply_ops(current: Mapping[str, str], ops: list[tuple[str, int, str | None]]) -> dict[str, str]:
    """IncrementalAlterConfigs' operations on a resource's stored set (Kafka's
    ConfigAdminManager.prepareIncrementalConfigs): APPEND and SUBTRACT start from the
    stored value, else from Kafka's default, and take only LIST configs."""
    for _name, op, _ in ops:
        if op not in (SET, DELETE, APPEND, SUBTRACT):
            raise AdminError(errors.INVALID_REQUEST, f"Unknown operations type {op}")
    new = dict(current)
    for name, op, value in ops:
        if op == SET:
            new[name] = value or ""
        elif op == DELETE:
            new.pop(name, None)
        else:
            verb = "append" if op == APPEND else "subtract"
            if not kafka_knows(name):
                raise AdminError(errors.INVALID_CONFIG, f"Unknown config name: {name}")
            if name not in _KAFKA_LISTS:
                raise AdminError(
                    errors.INVALID_CONFIG,
                    f"Config value {verb} is not allowed for config key: {name}",
                )
            key = DYNAMIC.get(name)
            old = new.get(name)
            if old is None:
                old = key.format(key.key.default) if key is not None else ""
            items = _java_split(value or "")
            if op == APPEND:
                kept = [] if old == "" else _java_split(old)
                new[name] = ",".join(kept + [i for i in items if i not in kept])
            else:
                kept = _java_split(old)
                for item in items:
                    if item in kept:
                        kept.remove(item)
                new[name] = ",".join(kept)
    return new


def _refuse(names: list[str], why: str) -> None:
    if names:
        raise AdminError(errors.INVALID_REQUEST, f"{why}: {_java_set(names)}")


def _listener_prefixed(name: str) -> str | None:
    match = _LISTENER_PREFIXED.search(name)
    return match.group(1) if match else None


def _per_broker_only(name: str) -> bool:
    """Kafka takes it for one broker only (its listeners and their security)."""
    base = _listener_prefixed(name)
    return name in _PER_BROKER or (base is not None and base not in _CLUSTER_LEVEL_LISTENER)


def skiff_refuses(name: str) -> bool:
    """A dynamic config of Kafka that a sidecar cannot change while it runs: listeners,
    security, thread pools, connection limits, per-listener settings, and the replication
    throttles (there is no replication)."""
    return (
        (name in KAFKA_DYNAMIC and name not in DYNAMIC)
        or name in REPLICATION_THROTTLES
        or _listener_prefixed(name) is not None
    )


def validate(
    props: Mapping[str, str],
    per_broker: bool,
    static: Mapping[str, Any],
    default: Mapping[str, str],
    node: Mapping[str, str],
) -> None:
    """Kafka's DynamicBrokerConfig.validate of a resource's new set `props` (the cluster
    default's when not `per_broker`), against the sidecar's `static` topic defaults and
    its dynamic `default` and `node` sets. Raises AdminError."""
    _refuse([n for n in props if n in KAFKA_STATIC], "Cannot update these configs dynamically")
    security = [n for n in _SECURITY if n in props]
    if security:
        raise AdminError(
            errors.INVALID_REQUEST,
            "These security configs can be dynamically updated only per-listener using the "
            "listener prefix: [" + ", ".join(security) + "]",
        )
    for name in _TYPE_ORDER:
        if name in props:
            try:
                DYNAMIC[name].parse(props[name])
            except ConfigError as exc:
                raise AdminError(errors.INVALID_REQUEST, str(exc)) from None
    if not per_broker:
        _refuse(
            [n for n in props if _per_broker_only(n)],
            "Cannot update these configs at default cluster level, broker id must be specified",
        )
    # Kafka would take these; a sidecar cannot change them while it runs.
    _refuse([n for n in props if skiff_refuses(n)], "Cannot update these configs dynamically")
    layers = (default, props) if per_broker else (props, node)
    config = topic_defaults(static, *layers)
    _requirements(config)
    _bounds(config)


def _requirements(config: Mapping[str, Any]) -> None:
    """KafkaConfig's checks of the new configuration as a whole."""
    checks = (
        (config["segment.ms"] >= 1, "log.roll.ms must be greater than or equal to 1"),
        (config["segment.jitter.ms"] >= 0, "log.roll.jitter.ms must be greater than or equal to 0"),
        (
            config["retention.ms"] >= 1 or config["retention.ms"] == -1,
            "log.retention.ms must be unlimited (-1) or, greater than or equal to 1",
        ),
    )
    for ok, why in checks:
        if not ok:
            raise AdminError(errors.INVALID_REQUEST, f"requirement failed: {why}")


def _bounds(config: Mapping[str, Any]) -> None:
    """DynamicLogConfig.validateReconfiguration: local retention within retention, copy
    lag within local retention."""

    def refuse(name: str, value: Any, why: str) -> None:
        raise AdminError(
            errors.INVALID_REQUEST,
            "Invalid value org.apache.kafka.common.config.ConfigException: Invalid value "
            f"{value} for configuration {name}: {why} for configuration Invalid dynamic "
            "configuration",
        )

    local = {}
    for kind, unlimited in (("ms", lambda v: v == -1), ("bytes", lambda v: v <= -1)):
        whole, mine = config[f"retention.{kind}"], config[f"local.retention.{kind}"]
        name = f"log.local.retention.{kind}"
        if not unlimited(whole) and mine != -2:
            if mine == -1:
                refuse(
                    name,
                    mine,
                    f"Value must not be -1 as log.retention.{kind} value is set as {whole}.",
                )
            if mine > whole:
                refuse(
                    name,
                    mine,
                    f"Value must not be more than log.retention.{kind} property value: {whole}",
                )
        local[kind] = whole if mine == -2 else mine
    for kind in ("ms", "bytes"):
        lag = config[f"remote.copy.lag.{kind}"]
        if lag > 0 and local[kind] != -1 and lag > local[kind]:
            refuse(
                f"log.remote.copy.lag.{kind}",
                lag,
                f"Value must not exceed log.local.retention.{kind} (effective value: "
                f"{local[kind]})",
            )


def min_insync_rule(per_broker: bool, touched: Iterable[str], new: Mapping[str, str]) -> None:
    """KIP-966 with ELR on (Kafka 4.4's default): the cluster-level min.insync.replicas
    stays, and no broker has its own."""
    if per_broker and MIN_INSYNC in touched:
        raise AdminError(
            errors.INVALID_CONFIG,
            "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
        )
    if not per_broker and MIN_INSYNC not in new:
        raise AdminError(
            errors.INVALID_CONFIG,
            "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
        )
