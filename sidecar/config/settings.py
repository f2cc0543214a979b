"""Settings for `skiff serve`: each flag can also come from a SKIFF_* environment variable."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class HostPort:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> HostPort:
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"expected HOST:PORT, got {text!r}")
        if int(port) > 65535:
            raise ValueError(f"port {int(port)} in {text!r} is above 65535")
        return cls(host.strip("[]") or "0.0.0.0", int(port))

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


# The SASL mechanisms Skiff serves (sasl.enabled.mechanisms may name these).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


@dataclass(frozen=True, slots=True)
class ScramBootstrap:
    """One --add-scram: a SCRAM credential to create at start (sidecar/security/scram_config.py)."""

    mechanism: str
    name: str
    password: str = field(repr=False)
    iterations: int = 4096


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One entry of Kafka's `listeners` / `advertised.listeners`: NAME://HOST:PORT."""

    name: str
    address: HostPort

    def __str__(self) -> str:
        return f"{self.name}://{self.address}"


# Kafka's default listener.security.protocol.map: each protocol's name is a listener name.
DEFAULT_PROTOCOL_MAP = (
    ("PLAINTEXT", "PLAINTEXT"),
    ("SSL", "SSL"),
    ("SASL_PLAINTEXT", "SASL_PLAINTEXT"),
    ("SASL_SSL", "SASL_SSL"),
)


@dataclass(frozen=True, slots=True)
class Settings:
    listen: HostPort = HostPort("127.0.0.1", 9092)
    advertise: HostPort | None = None
    # Kafka's listeners (sidecar/config/listeners.py resolves them): empty, one PLAINTEXT
    # listener on `listen` advertised as `advertised`.
    listeners: tuple[Endpoint, ...] = ()
    advertised_listeners: tuple[Endpoint, ...] = ()  # empty: as `listeners`
    listener_security_protocol_map: tuple[tuple[str, str], ...] = DEFAULT_PROTOCOL_MAP
    inter_broker_listener_name: str | None = None  # None: PLAINTEXT if listed, else the first
    # listener.name.<LISTENER>.<setting>=value from --config (server_properties.py):
    # (LISTENER, setting, value); see listeners.setting_for.
    listener_overrides: tuple[tuple[str, str, str], ...] = field(default=(), repr=False)
    # TLS of SSL and SASL_SSL listeners (sidecar/security/tls.py), Kafka's ssl.* names;
    # PEM files only. ssl.keystore.certificate.location + .key.location are Skiff's, for
    # cert-manager's separate tls.crt and tls.key.
    ssl_keystore_location: Path | None = None
    ssl_keystore_type: str = "PEM"
    ssl_keystore_certificate_location: Path | None = None
    ssl_keystore_key_location: Path | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_truststore_location: Path | None = None
    ssl_client_auth: str = "none"
    ssl_enabled_protocols: str = "TLSv1.2,TLSv1.3"
    ssl_principal_mapping_rules: str = "DEFAULT"
    redis_url: str | None = field(default=None, repr=False)  # may hold a password
    redis_connect_timeout: float = 30.0
    data_dir: Path = Path("skiff-data")
    auto_create_topics: bool = True
    num_partitions: int = 1
    max_request_bytes: int = 100 * 1024 * 1024
    node_id: int = -1  # -1: the lowest id no live sidecar holds
    # Server defaults of topic configs (sidecar/config/topic.py), with Kafka 3.9's names
    # and defaults: log.message.timestamp.type, compression.type, message.max.bytes,
    # log.message.timestamp.before.max.ms / after.max.ms (2**63 - 1: unbounded).
    message_timestamp_type: str = "CreateTime"
    compression_type: str = "producer"
    # skiff.storage.format of new topics (sidecar/config/storage_format.py).
    storage_format: str = "batch"  # storage_format.DEFAULT
    message_max_bytes: int = 1_048_588
    log_message_timestamp_before_max_ms: int = 2**63 - 1
    log_message_timestamp_after_max_ms: int = 3_600_000
    # Sidecars sharing one Redis (Kafka's broker.session.timeout.ms / heartbeat).
    broker_session_timeout_ms: int = 9000
    broker_heartbeat_interval_ms: int = 2000
    # Consumer groups, with Kafka's names and defaults.
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    offsets_retention_minutes: float = 10080.0
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    # acks=-1: the Redis primary plus this many - 1 Redis replicas must have a write.
    min_insync_replicas: int = 1
    # Idempotent and transactional producer state, with Kafka's names and defaults.
    producer_id_expiration_ms: int = 86_400_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_max_timeout_ms: int = 900_000
    # The transaction.version feature finalized in ApiVersions (2: KIP-890 part 2).
    transaction_version: int = 2
    # How often each sidecar aborts transactions past their timeout (transactions/).
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    # UDP ingest (sidecar/udp_ingest.py): datagrams on udp_listen become records of udp_topic.
    udp_listen: HostPort | None = None
    udp_topic: str | None = None
    udp_stats_interval_ms: int = 60_000
    # KIP-714 client metrics (sidecar/telemetry/client_metrics.py): the metric name prefixes
    # clients are asked to push ("*": all; empty: telemetry APIs not offered) and how often.
    client_metrics: tuple[str, ...] = ()
    client_metrics_push_interval_ms: int = 300_000
    # Retention and compaction (sidecar/maintenance/), with Kafka's
    # names and defaults: log.retention.ms, log.retention.bytes, log.cleanup.policy
    # (comma-separated), log.retention.check.interval.ms, log.cleaner.backoff.ms.
    log_retention_ms: int = 604_800_000
    log_retention_bytes: int = -1
    log_cleanup_policy: str = "delete"
    log_retention_check_interval_ms: int = 300_000
    log_cleaner_backoff_ms: int = 15_000
    # Tiered storage (sidecar/tiered/): the object store's URL (s3://bucket/prefix or
    # file:///dir; None: the embedded Redis's data dir, else tiered storage is off) and
    # how often the archiver runs (Kafka's remote.log.manager.task.interval.ms).
    remote_storage: str | None = None
    # Server defaults of local.retention.ms / .bytes (-2: retention.ms / .bytes).
    log_local_retention_ms: int = -2
    log_local_retention_bytes: int = -2
    remote_log_manager_task_interval_ms: int = 30_000
    # Each archived segment also as a Parquet file beside it (sidecar/tiered/parquet.py).
    remote_parquet: bool = False
    # /healthz, /readyz and /metrics (sidecar/telemetry/http.py); None: no HTTP endpoint.
    http_listen: HostPort | None = HostPort("127.0.0.1", 8080)
    console: bool = True  # the web console under /console (sidecar/console/)
    # Its security (sidecar/security/http_auth.py): the schemes the queue API accepts
    # (empty: open, every caller User:ANONYMOUS), the paths served without credentials,
    # whether credentials may come over plain HTTP, and its TLS (PEM files).
    http_auth: tuple[str, ...] = ()
    http_open_paths: tuple[str, ...] = ("/healthz", "/readyz", "/metrics", "/v1/openapi.json")
    http_auth_allow_plaintext: bool = False
    http_ssl_keystore_location: Path | None = None  # key + certificate chain
    http_ssl_keystore_certificate_location: Path | None = None  # or the two separately
    http_ssl_keystore_key_location: Path | None = None
    http_ssl_key_password: str | None = field(default=None, repr=False)
    # Redis faults (storage/resilience.py): one command's socket timeout, the retry
    # time of one Kafka request (Produce: at most half its timeout_ms), and how long
    # SIGTERM waits for in-flight requests before closing everything.
    redis_timeout_ms: int = 2000
    redis_retry_ms: int = 8000
    # Redis commands one process runs at once; its connection pool (per node on a Redis
    # Cluster) holds a few more. More concurrent requests wait for a free connection.
    redis_max_connections: int = 128
    shutdown_timeout_ms: int = 10_000
    # Share groups (sidecar/share/): Kafka's group.share.session.timeout.ms and
    # group.share.heartbeat.interval.ms.
    group_share_session_timeout_ms: int = 45_000
    group_share_heartbeat_interval_ms: int = 5_000
    # Server defaults of the share/queue group configs a group does not set
    # (sidecar/queues/core.py QueueStore): Kafka's group.share.record.lock.duration.ms
    # and group.share.delivery.count.limit.
    group_share_record_lock_duration_ms: int = 30_000
    group_share_delivery_count_limit: int = 5
    # Kafka's group.share.partition.max.record.locks: records of a partition a group
    # holds in flight at most (QueueStore.max_record_locks).
    group_share_partition_max_record_locks: int = 2000
    # KIP-848 consumer groups (sidecar/groups/consumer_group.py): Kafka's
    # group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms.
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    # group.consumer.migration.policy (sidecar/groups/mixed.py): which online
    # conversions between classic and consumer groups are allowed.
    group_consumer_migration_policy: str = "bidirectional"
    # KIP-1071 streams groups (sidecar/groups/streams_group.py): Kafka's
    # group.streams.num.standby.replicas (standby tasks per active task).
    group_streams_num_standby_replicas: int = 0
    # Kafka listener bounds (sidecar/server_limits.py), with Kafka's names and defaults:
    # max.connections, max.connections.per.ip (+ .overrides as (host, limit) pairs),
    # connections.max.idle.ms. queued.max.request.bytes is unbounded (-1) in Kafka; Skiff
    # bounds it (docs/operations.md, Limits). Skiff's own: the deadline of a partial
    # request frame and the topics auto-created per minute by this sidecar (-1: no limit).
    max_connections: int = 2_147_483_647
    max_connections_per_ip: int = 2_147_483_647
    max_connections_per_ip_overrides: tuple[tuple[str, int], ...] = ()
    queued_max_request_bytes: int = 256 * 1024 * 1024
    connections_max_idle_ms: int = 600_000
    partial_frame_timeout_ms: int = 30_000
    auto_create_topics_per_minute: int = 100
    # ACLs (sidecar/security/acls/), with Kafka's names: authorizer.class.name ("": none,
    # every request allowed; "standard": Kafka's StandardAuthorizer), super.users (the
    # principals, e.g. "User:admin", that bypass ACLs), allow.everyone.if.no.acl.found.
    authorizer_class_name: str = ""
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False
    # SASL/OAUTHBEARER (sidecar/security/sasl/oauthbearer.py), Kafka's sasl.oauthbearer.*
    # names and defaults; per listener from listener_overrides
    # (listener.name.<l>.[oauthbearer.]sasl.oauthbearer.*).
    sasl_oauthbearer_jwks_endpoint_url: str | None = None
    sasl_oauthbearer_expected_issuer: str | None = None
    sasl_oauthbearer_expected_audience: tuple[str, ...] = ()
    sasl_oauthbearer_sub_claim_name: str = "sub"
    sasl_oauthbearer_clock_skew_seconds: int = 30
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int = 3_600_000
    sasl_oauthbearer_scope_claim_name: str = "scope"
    sasl_oauthbearer_jwks_endpoint_retry_backoff_ms: int = 100
    sasl_oauthbearer_jwks_endpoint_retry_backoff_max_ms: int = 10_000
    # SASL (sidecar/security/sasl/), with Kafka's names: sasl.enabled.mechanisms (Kafka's
    # default is GSSAPI, which Skiff does not serve; listener.name.<l>.sasl.enabled.mechanisms
    # in --config overrides it per listener), connections.max.reauth.ms (KIP-368; 0:
    # sessions never expire). PLAIN users from a `user:password` file (and, per listener,
    # from listener.name.<l>.plain.sasl.jaas.config in --config). SCRAM credentials
    # created at start where the user has none (Kafka's `kafka-storage format --add-scram`).
    sasl_enabled_mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    connections_max_reauth_ms: int = 0
    sasl_plain_users_file: Path | None = None
    add_scram: tuple[ScramBootstrap, ...] = field(default=(), repr=False)
    # Delegation tokens (sidecar/security/delegation_tokens.py), Kafka's
    # delegation.token.*: no secret key, no tokens (DELEGATION_TOKEN_AUTH_DISABLED).
    delegation_token_secret_key: str | None = field(default=None, repr=False)
    delegation_token_max_lifetime_ms: int = 7 * 24 * 3600 * 1000
    delegation_token_expiry_time_ms: int = 24 * 3600 * 1000

    @property
    def advertised(self) -> HostPort:
        if self.advertise is not None:
            return self.advertise
        if self.listen.host in ("0.0.0.0", "::", ""):
            return HostPort("127.0.0.1", self.listen.port)
        return self.listen
