"""The Broker: what every API handler shares (settings, the Redis store, wake-ups,
the live sidecars and the group coordinator)."""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.cluster import Cluster
from sidecar.config.settings import Settings
from sidecar.groups.coordinator import GroupCoordinator
from sidecar.longpoll import Wakeups
from sidecar.storage.store import RedisStore, TopicInfo
from sidecar.validation.topic_names import invalid_name_reason


@dataclass(slots=True)
class Broker:
    settings: Settings
    store: RedisStore
    wakeups: Wakeups
    cluster_id: str
    cluster: Cluster
    groups: GroupCoordinator

    async def topic_for_produce_or_metadata(self, name: str) -> TopicInfo | None:
        """The topic, auto-created with num.partitions when the broker allows it (never
        under a name Kafka refuses: callers answer INVALID_TOPIC_EXCEPTION for those)."""
        info = await self.store.get_topic(name)
        if info is None and self.settings.auto_create_topics and not invalid_name_reason(name):
            info = await self.store.create_topic(name, self.settings.num_partitions)
            if info is None:  # another sidecar created it first
                info = await self.store.get_topic(name, fresh=True)
        return info
