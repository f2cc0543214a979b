"""Redis key names. A partition's keys share the hash tag {topic/partition}: '/' and
braces cannot appear in Kafka topic names, so the tag is unambiguous and all of a
partition's keys land in one Redis Cluster slot."""

from __future__ import annotations

PREFIX = "skiff:"
TOPICS = "skiff:topics"  # hash: topic name -> JSON {id, partitions, created_ms}
TOPIC_IDS = "skiff:topic_ids"  # hash: topic id (hex) -> topic name
CLUSTER_ID = "skiff:cluster_id"  # string: the cluster id Metadata reports
# string (JSON): the storage identity, {cluster_id, created_ms, previous, lost}
# (storage/identity.py); CLUSTER_ID mirrors its cluster_id for older readers.
IDENTITY = "skiff:identity"
PRODUCER_ID_SEQ = "skiff:producer_id_seq"  # counter: the last producer id handed out
# hash: feature name -> finalized level, and `epoch` (storage/features.py)
FEATURES = "skiff:features"
# ACLs (storage/acl_store.py): a hash of bindings and its version counter, one slot.
ACLS = "skiff:{acls}"
ACLS_VERSION = "skiff:{acls}:version"
ACLS_CHANNEL = "skiff:acls:changed"  # pub/sub: the new version after each change
# hash: topic name -> records fetched from it through all sidecars (each adds its own
# count every few seconds, console/traffic.py)
TOPIC_FETCHED = "skiff:topic_fetched"


def partition_tag(topic: str, partition: int) -> str:
    return f"skiff:{{{topic}/{partition}}}"


def partition_keys(topic: str, partition: int) -> tuple[str, str, str, str]:
    """(log, meta, time, producers) of one partition."""
    tag = partition_tag(topic, partition)
    return f"{tag}:log", f"{tag}:meta", f"{tag}:time", f"{tag}:producers"


def tokens_key(topic: str, partition: int) -> str:
    """Sorted set of the last append tokens (score: base offset), see lua/append.lua."""
    return f"{partition_tag(topic, partition)}:tokens"


def bytes_key(topic: str, partition: int) -> str:
    """Sorted set, the byte index: one member per appended batch, score = bytes appended
    before the batch (cumulative), member = its base offset (lua/append.lua, lua/trim.lua)."""
    return f"{partition_tag(topic, partition)}:bytes"


def cleaner_key(topic: str, partition: int) -> str:
    """String with a PX expiry: the token of the sidecar compacting the partition."""
    return f"{partition_tag(topic, partition)}:cleaner"


def cleaned_log_key(topic: str, partition: int) -> str:
    """Stream the compactor of a `batch` topic writes the cleaned log into before it
    replaces the log (lua/cleaner.lua `swap`)."""
    return f"{partition_tag(topic, partition)}:log.clean"


def append_keys(topic: str, partition: int) -> list[str]:
    """KEYS of lua/append.lua: the partition's keys, its tokens and its byte index."""
    return [
        *partition_keys(topic, partition),
        tokens_key(topic, partition),
        bytes_key(topic, partition),
    ]


def trim_keys(topic: str, partition: int) -> list[str]:
    """KEYS of lua/trim.lua: log, meta, time index, byte index, aborted index."""
    log, meta, time, _ = partition_keys(topic, partition)
    return [log, meta, time, bytes_key(topic, partition), aborted_key(topic, partition)]


def open_txns_key(topic: str, partition: int) -> str:
    """Hash: producer id -> first offset of its open transaction on the partition; the
    partition's last stable offset is the least of them (lua/append.lua,
    lua/txn_marker.lua, docs/transactions.md)."""
    return f"{partition_tag(topic, partition)}:txns"


def aborted_key(topic: str, partition: int) -> str:
    """Sorted set, the aborted-transaction index: score = offset of the ABORT marker,
    member = "<producer id> <first offset>" (lua/txn_marker.lua)."""
    return f"{partition_tag(topic, partition)}:aborted"


def remote_key(topic: str, partition: int) -> str:
    """Sorted set, the archived segments of a topic with remote.storage.enable: score =
    base offset, member = "<end> <bytes> <max timestamp> <bytes before> <object path>"
    (lua/archive.lua, sidecar/tiered/)."""
    return f"{partition_tag(topic, partition)}:remote"


def all_partition_keys(topic: str, partition: int) -> list[str]:
    """Every key a partition may have: what deleting its topic removes. A new
    per-partition key must be listed here."""
    return [
        *append_keys(topic, partition),
        cleaner_key(topic, partition),
        cleaned_log_key(topic, partition),
        open_txns_key(topic, partition),
        aborted_key(topic, partition),
        remote_key(topic, partition),
    ]


QUEUES = "skiff:queues"  # set: every queue group id (queues/core.py)


def queue_topics_key(group: str) -> str:
    """Set of the topics a queue group has read."""
    return f"skiff:{{q/{group}}}:topics"


def queue_partition_keys(group: str, topic: str, partition: int) -> list[str]:
    """A queue group's own keys on one partition: the due hint (`record` topics), the
    lease starts and the delivery counts and holders (`batch` topics), the reservations
    under the cap on records in flight (`record` topics). Deleting the
    topic removes them with the partition (docs/architecture.md, "Queue groups")."""
    tag = f"{partition_tag(topic, partition)}:q:{group}"
    return [f"{tag}:due", f"{tag}:lease", f"{tag}:rec", f"{tag}:resv"]


def wake_channel(topic: str, partition: int) -> str:
    return f"skiff:wake:{topic}/{partition}"


WAKE_PATTERN = "skiff:wake:*"
# Every write of a topic's registry entry (create, delete, AlterConfigs,
# CreatePartitions) publishes the topic's name here once done: sidecars expire what they
# cache of it (RedisStore.topic_changed). Under WAKE_PATTERN; no partition's channel
# (those end in /<partition>).
TOPICS_CHANNEL = "skiff:wake:topics"
# Dynamic broker configs (storage/broker_configs.py): hash of resource ("" the cluster
# default, else a node id) -> JSON {config name: value as given}. Every change publishes
# the resource on the channel (under WAKE_PATTERN; not a partition's channel either), so
# every sidecar reads them again.
BROKER_CONFIGS = "skiff:broker_configs"
BROKER_CONFIGS_CHANNEL = "skiff:wake:broker_configs"

BROKERS = "skiff:brokers"  # hash: node id -> JSON {host, port, inc, exp} (lua/brokers.lua)
GROUPS = "skiff:groups"  # set: every group id with state or offsets (ListGroups, sweeps)


def group_keys(group_id: str) -> tuple[str, str, str]:
    """(lease, group, offsets) of one consumer group, under the hash tag {g/<group>}.
    A group id may hold braces; the tag then ends early, but it ends at the same
    place in all three keys, so they still share a slot."""
    tag = f"skiff:{{g/{group_id}}}"
    return f"{tag}:lease", f"{tag}:group", f"{tag}:offsets"


def transactional_producer_key(transactional_id: str) -> str:
    """Hash {pid, epoch} of a transactional id (lua/init_producer.lua)."""
    return f"skiff:{{txn/{transactional_id}}}:producer"


def transaction_keys(transactional_id: str) -> list[str]:
    """KEYS of lua/txn.lua: the producer hash {pid, epoch, state, ...}, the set of
    partitions ("topic/partition") and the set of groups in its transaction."""
    tag = f"skiff:{{txn/{transactional_id}}}"
    return [f"{tag}:producer", f"{tag}:partitions", f"{tag}:groups"]


# Set: every transactional id InitProducerId has seen (ListTransactions); ids whose
# state expired (transactional.id.expiration.ms) are dropped as they are found.
TXN_IDS = "skiff:txn_ids"
# Sorted set: transactional id -> deadline (ms) of its open transaction; every sidecar
# aborts those past it (transactions/coordinator.py). A hint: lua/txn.lua decides.
TXN_DEADLINES = "skiff:txn_deadlines"


def pending_offsets_key(group_id: str, producer_id: int) -> str:
    """Hash, in the group's slot: offsets a transaction committed (TxnOffsetCommit), not
    yet visible; EndTxn moves them into the group's offsets or drops them."""
    return f"skiff:{{g/{group_id}}}:txnoffsets:{producer_id}"


def pending_producers_key(group_id: str) -> str:
    """Set, in the group's slot: producer ids with pending offsets (pending_offsets_key)."""
    return f"skiff:{{g/{group_id}}}:txnpending"


def offset_field(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"
