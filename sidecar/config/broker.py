"""The broker configs a sidecar reports in DescribeConfigs (resource type BROKER): its
`skiff serve` flags under Kafka's names, plus the server defaults of topic configs
under their broker names (log.retention.ms, message.max.bytes, ...).

Skiff has no dynamic broker configs: a sidecar's settings are its flags, fixed for its
lifetime, like a Kafka broker's static (read-only) configs. So every entry is
read_only, AlterConfigs and IncrementalAlterConfigs refuse every broker config with
Kafka's INVALID_REQUEST "Cannot update these configs dynamically: Set(...)", and the
cluster-wide default resource (name "") lists no configs, as a Kafka cluster without
dynamic defaults answers. The one exception: deleting a dynamic config a sidecar never
holds (NEVER_SET) changes nothing and is answered NONE, as on a Kafka broker where it is
not set."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sidecar.config.admin import CONFIG_TYPES, DEFAULT_CONFIG, STATIC_BROKER_CONFIG
from sidecar.config.docs import BROKER_DOCS
from sidecar.config.listeners import resolve
from sidecar.config.settings import Settings
from sidecar.config.topic import KEYS
from sidecar.telemetry.redact import is_sensitive

# Dynamic broker configs Kafka lets clients set that a sidecar never holds (there is no
# replication to throttle): IncrementalAlterConfigs may DELETE them, a no-op, as
# `kafka-reassign-partitions --verify` does on every broker; setting one is refused.
NEVER_SET = frozenset(
    {
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)


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


def describe_broker(
    settings: Settings,
    node_id: int,
    topic_defaults: dict[str, Any],
    names: Iterable[str] | None,
    include_synonyms: bool,
    include_documentation: bool,
) -> list[dict[str, Any]]:
    """This sidecar's broker configs as DescribeConfigs entries (Kafka's
    createBrokerConfigEntry): a value that differs from Kafka's default is a static
    broker config (a flag), with Kafka's default as its second synonym."""
    wanted = set(names) if names else None
    out = []
    for key in CATALOGUE.values():
        if wanted is not None and key.name not in wanted:
            continue
        value = key.value(settings, node_id, topic_defaults)
        synonyms = []
        if value is not None and value != key.kafka_default:
            synonyms.append({"name": key.name, "value": value, "source": STATIC_BROKER_CONFIG})
        if key.kafka_default is not None:
            synonyms.append(
                {"name": key.name, "value": key.kafka_default, "source": DEFAULT_CONFIG}
            )
        # Kafka's ConfigHelper: a PASSWORD config (or one that may hold a secret) is
        # listed with a null value, in its synonyms too, and is_sensitive=true.
        sensitive = key.kind == "password" or is_sensitive(key.name)
        if sensitive:
            value = None
            synonyms = [{**synonym, "value": None} for synonym in synonyms]
        out.append(
            {
                "name": key.name,
                "value": value,
                "read_only": True,
                "config_source": synonyms[0]["source"] if synonyms else DEFAULT_CONFIG,
                "is_sensitive": sensitive,
                "synonyms": synonyms if include_synonyms else [],
                "config_type": CONFIG_TYPES[key.kind],
                "documentation": BROKER_DOCS.get(key.name) if include_documentation else None,
            }
        )
    return out
