"""The broker configs a sidecar reports in DescribeConfigs (resource type BROKER): its
`skiff serve` flags under Kafka's names, plus the server defaults of topic configs
under their broker names (log.retention.ms, message.max.bytes, ...), with the dynamic
broker configs (KIP-226, config/dynamic_broker.py, stored in Redis by
storage/broker_configs.py) over them, as a Kafka 4.4 broker answers.

Each entry's synonyms follow Kafka's order: this sidecar's dynamic value
(DYNAMIC_BROKER_CONFIG), the cluster default's (DYNAMIC_DEFAULT_BROKER_CONFIG), the flag
where it differs from Kafka's default (STATIC_BROKER_CONFIG), Kafka's default
(DEFAULT_CONFIG), then Kafka's other names of the config with their defaults
(log.retention.hours after log.retention.ms, ...), all dropped when the config's own name
has no value anywhere. The entry's source is its first synonym's. Dynamic configs
(dynamic_broker.DYNAMIC: the topic configs' broker synonyms and
producer.id.expiration.ms) are read_only=false; every other entry is read_only=true,
also listeners, ssl.* and sasl.enabled.mechanisms, which Kafka changes at run time but
a sidecar cannot. min.insync.replicas is a cluster default from the start (KIP-966: Kafka
4 writes it when the cluster is formatted): until altered, the sidecar's
--min-insync-replicas. The cluster default resource ("") lists the cluster's dynamic
defaults; names Kafka does not know are listed with no value, read-only and sensitive,
as Kafka lists them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sidecar.config import dynamic_broker
from sidecar.config.admin import (
    CONFIG_TYPES,
    DEFAULT_CONFIG,
    NO_BROKER_DEFAULT,
    STATIC_BROKER_CONFIG,
)
from sidecar.config.docs import BROKER_DOCS
from sidecar.config.dynamic_broker import (
    DYNAMIC,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
)
from sidecar.config.listeners import resolve
from sidecar.config.settings import Settings
from sidecar.config.topic import KEYS, LONG_MAX, ConfigError, ConfigKey
from sidecar.protocol.java_order import hash_map_order
from sidecar.telemetry.redact import is_sensitive

UNKNOWN_TYPE = 0  # ConfigType of a name the broker does not know


@dataclass(frozen=True, slots=True)
class BrokerKey:
    name: str
    kind: str
    kafka_default: str | None  # as Kafka prints it; None: Kafka has no value
    value: Callable[[Settings, int, dict[str, Any]], str | None]


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _setting(attr: str) -> Callable[[Settings, int, dict[str, Any]], str | None]:
    def get(settings: Settings, node_id: int, topic_defaults: dict[str, Any]) -> str | None:
        value = getattr(settings, attr)
        if isinstance(value, bool):
            return "true" if value else "false"
        return _num(value) if isinstance(value, int | float) else str(value)

    return get


def _topic_default(name: str) -> Callable[[Settings, int, dict[str, Any]], str | None]:
    key = KEYS[name]

    def get(settings: Settings, node_id: int, topic_defaults: dict[str, Any]) -> str | None:
        value = topic_defaults.get(name, key.default)
        if name in _NO_KAFKA_DEFAULT and value == key.default:
            return None  # Kafka shows no value: the *.hours / *.minutes form applies
        return key.format(value)

    return get


_NO_KAFKA_DEFAULT = {"retention.ms", "segment.ms", "segment.jitter.ms", "flush.ms"}


def _node_id(settings: Settings, node_id: int, topic_defaults: dict[str, Any]) -> str:
    return str(node_id)


def _listeners(settings: Settings, node_id: int, topic_defaults: dict[str, Any]) -> str:
    return ",".join(f"{li.name}://{li.bind}" for li in resolve(settings))


def _advertised(settings: Settings, node_id: int, topic_defaults: dict[str, Any]) -> str:
    return ",".join(f"{li.name}://{li.advertised}" for li in resolve(settings))


def _optional(attr: str) -> Callable[[Settings, int, dict[str, Any]], str | None]:
    """A setting that may be unset (None: Kafka prints no value)."""

    def get(settings: Settings, node_id: int, topic_defaults: dict[str, Any]) -> str | None:
        value = getattr(settings, attr)
        return None if value is None else str(value)

    return get


def _mechanisms(settings: Settings, node_id: int, topic_defaults: dict[str, Any]) -> str:
    return ",".join(settings.sasl_enabled_mechanisms)


def _fixed(text: str) -> Callable[[Settings, int, dict[str, Any]], str]:
    return lambda settings, node_id, topic_defaults: text


_OWN: tuple[BrokerKey, ...] = (
    BrokerKey("advertised.listeners", "string", None, _advertised),
    BrokerKey("auto.create.topics.enable", "boolean", "true", _setting("auto_create_topics")),
    BrokerKey(
        "broker.heartbeat.interval.ms", "int", "2000", _setting("broker_heartbeat_interval_ms")
    ),
    BrokerKey("broker.id", "int", "-1", _node_id),
    BrokerKey("broker.session.timeout.ms", "int", "9000", _setting("broker_session_timeout_ms")),
    BrokerKey("connections.max.reauth.ms", "long", "0", _setting("connections_max_reauth_ms")),
    BrokerKey(
        "delegation.token.expiry.time.ms",
        "long",
        "86400000",
        _setting("delegation_token_expiry_time_ms"),
    ),
    BrokerKey(
        "delegation.token.max.lifetime.ms",
        "long",
        "604800000",
        _setting("delegation_token_max_lifetime_ms"),
    ),
    BrokerKey(
        "delegation.token.secret.key", "password", None, _optional("delegation_token_secret_key")
    ),
    BrokerKey("default.replication.factor", "int", "1", _fixed("1")),
    BrokerKey(
        "group.initial.rebalance.delay.ms",
        "int",
        "3000",
        _setting("group_initial_rebalance_delay_ms"),
    ),
    BrokerKey(
        "group.max.session.timeout.ms", "int", "1800000", _setting("group_max_session_timeout_ms")
    ),
    BrokerKey(
        "group.min.session.timeout.ms", "int", "6000", _setting("group_min_session_timeout_ms")
    ),
    BrokerKey("listeners", "string", "PLAINTEXT://:9092", _listeners),
    BrokerKey("node.id", "int", "-1", _node_id),
    BrokerKey("num.partitions", "int", "1", _setting("num_partitions")),
    BrokerKey("offset.metadata.max.bytes", "int", "4096", _setting("offset_metadata_max_bytes")),
    BrokerKey(
        "offsets.retention.check.interval.ms",
        "long",
        "600000",
        _setting("offsets_retention_check_interval_ms"),
    ),
    BrokerKey("offsets.retention.minutes", "int", "10080", _setting("offsets_retention_minutes")),
    BrokerKey(
        "producer.id.expiration.ms", "int", "86400000", _setting("producer_id_expiration_ms")
    ),
    BrokerKey("sasl.enabled.mechanisms", "list", "GSSAPI", _mechanisms),
    BrokerKey("socket.request.max.bytes", "int", "104857600", _setting("max_request_bytes")),
    # Security settings (docs/security.md); ssl.key.password is listed as Kafka lists a
    # PASSWORD config: no value, is_sensitive=true.
    BrokerKey("ssl.client.auth", "string", "none", _setting("ssl_client_auth")),
    BrokerKey(
        "ssl.enabled.protocols", "list", "TLSv1.2,TLSv1.3", _setting("ssl_enabled_protocols")
    ),
    BrokerKey("ssl.key.password", "password", None, _optional("ssl_key_password")),
    BrokerKey("ssl.keystore.location", "string", None, _optional("ssl_keystore_location")),
    BrokerKey("ssl.keystore.type", "string", "JKS", _setting("ssl_keystore_type")),
    BrokerKey("ssl.truststore.location", "string", None, _optional("ssl_truststore_location")),
    BrokerKey(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "int",
        "10000",
        _setting("transaction_abort_timed_out_transaction_cleanup_interval_ms"),
    ),
    BrokerKey(
        "transaction.max.timeout.ms", "int", "900000", _setting("transaction_max_timeout_ms")
    ),
    BrokerKey(
        "transactional.id.expiration.ms",
        "int",
        "604800000",
        _setting("transactional_id_expiration_ms"),
    ),
)


def _catalogue() -> dict[str, BrokerKey]:
    out = {k.name: k for k in _OWN}
    for key in KEYS.values():
        if key.synonym is None or key.synonym in out:
            continue
        default = None if key.name in _NO_KAFKA_DEFAULT else key.format(key.default)
        out[key.synonym] = BrokerKey(key.synonym, key.kind, default, _topic_default(key.name))
    return dict(sorted(out.items()))


CATALOGUE = _catalogue()


@dataclass(frozen=True, slots=True)
class Dynamic:
    """The dynamic broker configs a sidecar describes with, as stored: the cluster
    default's (with min.insync.replicas) and its own node's."""

    default: Mapping[str, str] = field(default_factory=dict)
    node: Mapping[str, str] = field(default_factory=dict)


NO_DYNAMIC = Dynamic()

# Kafka's other names of a config (DynamicBrokerConfig.brokerConfigSynonyms) with their
# defaults: listed after the config's own name.
_ALTERNATES: dict[str, tuple[tuple[str, str], ...]] = {
    "log.retention.ms": (("log.retention.hours", "168"),),
    "log.roll.ms": (("log.roll.hours", "168"),),
    "log.roll.jitter.ms": (("log.roll.jitter.hours", "0"),),
    "log.flush.interval.ms": (("log.flush.scheduler.interval.ms", str(LONG_MAX)),),
}


def _synonym(name: str, value: str | None, source: int) -> dict[str, Any]:
    return {"name": name, "value": value, "source": source}


def synonyms(
    name: str,
    static_value: str | None,
    kafka_default: str | None,
    dynamic: Dynamic,
) -> list[dict[str, Any]]:
    """A broker config's synonyms in Kafka's order (ConfigHelper.configSynonyms): the
    node's dynamic value, the cluster default's, the flag (when it differs from Kafka's
    default), Kafka's default, Kafka's other names; none when the config's own name has
    no value in any of them."""
    out = []
    if name in dynamic.node:
        out.append(_synonym(name, dynamic.node[name], DYNAMIC_BROKER_CONFIG))
    if name in dynamic.default:
        out.append(_synonym(name, dynamic.default[name], DYNAMIC_DEFAULT_BROKER_CONFIG))
    if static_value is not None and static_value != kafka_default:
        out.append(_synonym(name, static_value, STATIC_BROKER_CONFIG))
    if kafka_default is not None:
        out.append(_synonym(name, kafka_default, DEFAULT_CONFIG))
    if not out:
        return []  # Kafka drops the synonyms ahead of the config's own name
    out += [_synonym(n, v, DEFAULT_CONFIG) for n, v in _ALTERNATES.get(name, ())]
    return out


def topic_synonyms(
    key: ConfigKey, static_defaults: Mapping[str, Any], dynamic: Dynamic
) -> list[dict[str, Any]]:
    """The broker synonyms of a topic config, as a topic's DescribeConfigs entry lists
    them after its own override (ConfigHelper.createTopicConfigEntry)."""
    if key.synonym is None:
        return []
    server = static_defaults.get(key.name, key.default)
    static = key.format(server) if server != key.default else None
    kafka = None if key.name in NO_BROKER_DEFAULT else key.format(key.default)
    return synonyms(key.synonym, static, kafka, dynamic)


def _shown(name: str, raw: str) -> str:
    """A dynamic value as a broker's own entry shows it: parsed and printed again."""
    try:
        return DYNAMIC[name].format(DYNAMIC[name].parse(raw))
    except ConfigError:
        return raw  # written by hand into Redis: as it is


def _unknown(name: str, sources: list[int], include_synonyms: bool) -> dict[str, Any]:
    """A stored name Kafka does not know: no value, read-only, sensitive (its type is
    unknown), as Kafka lists it."""
    return {
        "name": name,
        "value": None,
        "read_only": True,
        "config_source": sources[0],
        "is_sensitive": True,
        "synonyms": [_synonym(name, None, s) for s in sources] if include_synonyms else [],
        "config_type": UNKNOWN_TYPE,
        "documentation": None,
    }


def describe_broker(
    settings: Settings,
    node_id: int,
    topic_defaults: dict[str, Any],
    names: Iterable[str] | None,
    include_synonyms: bool,
    include_documentation: bool,
    dynamic: Dynamic = NO_DYNAMIC,
) -> list[dict[str, Any]]:
    """This sidecar's broker configs as DescribeConfigs entries (Kafka's
    createBrokerConfigEntry): `topic_defaults` the static server defaults of topic
    configs (flags over Kafka's defaults), `dynamic` the dynamic configs over them."""
    wanted = set(names) if names else None
    out = []
    for key in CATALOGUE.values():
        if wanted is not None and key.name not in wanted:
            continue
        value = key.value(settings, node_id, topic_defaults)
        synonyms_ = synonyms(key.name, value, key.kafka_default, dynamic)
        raw = dynamic.node.get(key.name, dynamic.default.get(key.name))
        if raw is not None and key.name in DYNAMIC:
            value = _shown(key.name, raw)
        # Kafka's ConfigHelper: a PASSWORD config (or one that may hold a secret) is
        # listed with a null value, in its synonyms too, and is_sensitive=true.
        sensitive = key.kind == "password" or is_sensitive(key.name)
        if sensitive:
            value = None
            synonyms_ = [{**synonym, "value": None} for synonym in synonyms_]
        out.append(
            {
                "name": key.name,
                "value": value,
                "read_only": key.name not in DYNAMIC,
                "config_source": synonyms_[0]["source"] if synonyms_ else DEFAULT_CONFIG,
                "is_sensitive": sensitive,
                "synonyms": synonyms_ if include_synonyms else [],
                "config_type": CONFIG_TYPES[key.kind],
                "documentation": BROKER_DOCS.get(key.name) if include_documentation else None,
            }
        )
    unknown = dict.fromkeys(dynamic_broker.listed_names(dynamic.node))
    unknown.update(dict.fromkeys(dynamic_broker.listed_names(dynamic.default)))
    for name in unknown:
        if wanted is None or name in wanted:
            sources = [DYNAMIC_BROKER_CONFIG] if name in dynamic.node else []
            sources += [DYNAMIC_DEFAULT_BROKER_CONFIG] if name in dynamic.default else []
            out.append(_unknown(name, sources, include_synonyms))
    return out


def describe_cluster_default(
    default: Mapping[str, str],
    names: Iterable[str] | None,
    include_synonyms: bool,
    include_documentation: bool,
) -> list[dict[str, Any]]:
    """The cluster default resource (""): its dynamic configs as stored (with
    min.insync.replicas), each with its one DYNAMIC_DEFAULT_BROKER_CONFIG synonym, in
    Kafka's order (a HashMap's)."""
    wanted = set(names) if names else None
    out = []
    for name in hash_map_order(default):
        if wanted is not None and name not in wanted:
            continue
        key = CATALOGUE.get(name)
        if name not in DYNAMIC or key is None:
            if not dynamic_broker.kafka_knows(name):
                out.append(_unknown(name, [DYNAMIC_DEFAULT_BROKER_CONFIG], include_synonyms))
            continue
        synonym = _synonym(name, default[name], DYNAMIC_DEFAULT_BROKER_CONFIG)
        out.append(
            {
                "name": name,
                "value": default[name],
                "read_only": False,
                "config_source": DYNAMIC_DEFAULT_BROKER_CONFIG,
                "is_sensitive": False,
                "synonyms": [synonym] if include_synonyms else [],
                "config_type": CONFIG_TYPES[key.kind],
                "documentation": BROKER_DOCS.get(name) if include_documentation else None,
            }
        )
    return out
