"""The Broker: what every API handler shares (settings, the Redis store, wake-ups,
the live sidecars, the group coordinator and the authorizer)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from sidecar.cluster import Cluster
from sidecar.config.settings import Settings
from sidecar.groups.coordinator import GroupCoordinator
from sidecar.longpoll import Wakeups
from sidecar.quotas import QuotaManager
from sidecar.security.authorizer import AllowAll, Authorizer
from sidecar.storage.broker_configs import DynamicBrokerConfigs
from sidecar.storage.features import Features
from sidecar.storage.store import RedisStore, TopicInfo
from sidecar.telemetry import metrics
from sidecar.telemetry.logs import RateLimitedLog
from sidecar.tiered.remote_log import RemoteLog
from sidecar.transactions.coordinator import TransactionCoordinator
from sidecar.validation.topic_names import invalid_name_reason

log = logging.getLogger(__name__)


class AutoCreateBudget:
    """--auto-create-topics-per-minute, per sidecar: a token bucket holding up to a
    minute's worth of creations, refilled continuously (a burst of N, then N a minute).
    A typo'd or hostile client cannot fill Redis with topics."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self.tokens = float(max(per_minute, 0))
        self.updated = time.monotonic()
        self._log = RateLimitedLog(log)

    def take(self, topic: str) -> bool:
        if self.per_minute < 0:
            return True
        now = time.monotonic()
        self.tokens = min(
            float(self.per_minute), self.tokens + (now - self.updated) * self.per_minute / 60
        )
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        metrics.TOPICS_AUTO_CREATE_REFUSED.inc()
        self._log.warning(
            "not auto-creating topic %r: --auto-create-topics-per-minute=%d reached; "
            "answering UNKNOWN_TOPIC_OR_PARTITION",
            topic,
            self.per_minute,
        )
        return False


@dataclass(slots=True)
class Broker:
    settings: Settings
    store: RedisStore
    wakeups: Wakeups
    cluster_id: str
    cluster: Cluster
    groups: GroupCoordinator
    # Every API handler asks it before acting (sidecar/security/authorizer.py).
    authorizer: Authorizer = field(default_factory=AllowAll)
    auto_create: AutoCreateBudget = field(init=False)
    # What a SASL mechanism shares between connections, by mechanism name (OAUTHBEARER:
    # a JWT validator and its JWKS per listener).
    sasl_state: dict[str, Any] = field(default_factory=dict)
    # Client quotas this sidecar enforces (sidecar/quotas.py).
    quotas: QuotaManager = field(default_factory=QuotaManager)
    # Kafka transactions, their state in Redis (sidecar/transactions/).
    transactions: TransactionCoordinator = field(init=False)
    # Finalized feature levels (ApiVersions, UpdateFeatures), in Redis.
    features: Features = field(init=False)
    # Tiered storage's remote tier (sidecar/tiered/); None: tiered storage is off.
    remote: RemoteLog | None = None
    # Dynamic broker configs (KIP-226) in Redis; made here unless given (started by
    # process/app.py before the sidecar serves).
    dynamic: DynamicBrokerConfigs = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.dynamic is None:
            self.dynamic = DynamicBrokerConfigs(
                self.settings, self.store, lambda: self.cluster.node_id
            )
        self.auto_create = AutoCreateBudget(self.settings.auto_create_topics_per_minute)
        self.transactions = TransactionCoordinator(self.settings, self.store)
        self.features = Features(self.store.redis, self.settings.transaction_version)
        self.quotas.attach(self.store.redis)

    async def topic_for_produce_or_metadata(self, name: str) -> TopicInfo | None:
        """The topic, auto-created with num.partitions when the broker allows it, the
        auto-creation budget has room, and never under a name Kafka refuses (callers
        answer INVALID_TOPIC_EXCEPTION for those)."""
        info = await self.store.get_topic(name)
        if (
            info is None
            and self.settings.auto_create_topics
            and not invalid_name_reason(name)
            and self.auto_create.take(name)
        ):
            info = await self.store.create_topic(name, self.settings.num_partitions)
            if info is None:  # another sidecar created it first
                info = await self.store.get_topic(name, fresh=True)
        return info
