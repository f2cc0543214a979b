"""The two ways the `skiff` data source reads a partition: straight from its Redis
stream (XRANGE), or through the Kafka protocol (confluent-kafka). Both answer the same
questions (partition counts, watermarks, records of an offset range as Arrow batches);
docs/spark.md has the measurements behind the default."""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterator
from typing import Any, Protocol

import pyarrow as pa

from .arrow_rows import decode_headers, record_batch

CHUNK = 10_000  # records per XRANGE / per Arrow batch
BATCH_ENTRIES = 20  # stored batches per XRANGE of a `batch` topic
_PREFIX = struct.Struct(">qi")  # a v2 batch's base offset and length
_LAST_DELTA = struct.Struct(">i")  # its lastOffsetDelta, at byte 23
# Transaction markers hold no record for a reader (docs/transactions.md): a `batch`
# topic's are control batches (attributes bit 5, at byte 22), a `record` topic's entries
# flagged 0x80 (sidecar.protocol.record_batch.FLAG_CONTROL).
_CONTROL_ATTRIBUTE = 0x20
_CONTROL_FLAG = 0x80


class PartitionLog(Protocol):
    def partition_count(self, topic: str) -> int: ...

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, high watermark)."""
        ...

    def read(self, topic: str, partition: int, start: int, end: int) -> Iterator[pa.RecordBatch]:
        """Records with start <= offset < end."""
        ...

    def close(self) -> None: ...


def _cluster(url: str) -> Any:
    """redis+cluster://[[user:]password@]h1:p1[,h2:p2...] as a redis-py RedisCluster."""
    from urllib.parse import unquote

    import redis
    from redis.cluster import ClusterNode

    scheme, _, rest = url.partition("://")
    netloc = rest.split("/", 1)[0]
    auth, _, hosts = netloc.rpartition("@")
    user, _, password = auth.partition(":") if ":" in auth else ("", "", auth)
    nodes = []
    for part in hosts.split(","):
        host, _, port = part.rpartition(":")
        nodes.append(ClusterNode(host.strip("[]"), int(port or 6379)))
    cluster = redis.RedisCluster(
        startup_nodes=nodes,
        username=unquote(user) or None,
        password=unquote(password) or None,
        ssl=scheme.startswith("rediss"),
    )
    # The cluster applies its callbacks after each node's: keep the nodes' replies raw.
    for node in cluster.get_nodes():
        node.redis_connection.set_response_callback("XRANGE", _raw_entries)
    return cluster


def _raw_entries(response: Any, **_: Any) -> Any:
    """XRANGE entries as [id, [field, value, ...]], also from a node (one a failover
    added) whose callback built (id, dict) pairs."""
    if response and isinstance(response[0][1], dict):
        return [[i, [x for kv in d.items() for x in kv]] for i, d in response]
    return response


class RedisLog:
    """Skiff's Redis data model (docs/architecture.md): `skiff:topics` holds each topic's
    partition count and storage format, `skiff:{t/p}:meta` its watermarks,
    `skiff:{t/p}:log` one stream entry per record with fields t k v h f in that order and
    ID 0-<offset+1> (`record` topics) or one per stored batch, field b, ID
    0-<last offset+1> (`batch` topics). Every call names one key, so on a Redis Cluster
    (`redis+cluster://h1:p1,h2:p2`) each goes to its slot's node."""

    def __init__(
        self,
        url: str,
        remote_storage: str | None = None,
        remote_config: dict[str, str] | None = None,
    ) -> None:
        import redis

        self.remote_storage = remote_storage
        # obstore settings from the source's `remote.storage.<key>` options (e.g.
        # aws_endpoint, aws_access_key_id, allow_http), over the AWS_* variables.
        self.remote_config = remote_config or {}
        self._remote: Any = None

        self.redis = (
            _cluster(url)
            if url.startswith(("redis+cluster://", "rediss+cluster://"))
            else redis.Redis.from_url(url)
        )
        # Raw replies: redis-py would build a dict per entry, which costs more than the rest.
        self.redis.set_response_callback("XRANGE", _raw_entries)

    def partition_count(self, topic: str) -> int:
        raw = self.redis.hget("skiff:topics", topic)
        if raw is None:
            raise ValueError(f"topic {topic!r} does not exist in Skiff's Redis")
        return int(json.loads(raw)["partitions"])

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        lso, hw = self.redis.hmget(f"skiff:{{{topic}/{partition}}}:meta", "lso", "hw")
        return int(lso or 0), int(hw or 0)

    def _batch_format(self, topic: str) -> bool:
        """skiff.storage.format of the topic (its registry entry's `format`)."""
        raw = self.redis.hget("skiff:topics", topic)
        return raw is not None and json.loads(raw).get("format") == "batch"

    def read(self, topic: str, partition: int, start: int, end: int) -> Iterator[pa.RecordBatch]:
        key = f"skiff:{{{topic}/{partition}}}:log"
        if self._batch_format(topic):
            local_start = self.redis.hget(f"skiff:{{{topic}/{partition}}}:meta", "llso")
            if local_start is not None and start < int(local_start):
                yield from self._read_archived(topic, partition, start, min(end, int(local_start)))
                start = int(local_start)
            yield from self._read_batches(key, topic, partition, start, end)
            return
        pos = start
        while pos < end:
            count = min(CHUNK, end - pos)
            entries = self.redis.execute_command(
                "XRANGE", key, f"0-{pos + 1}", f"0-{end}", "COUNT", count
            )
            if not entries:
                return  # trimmed below `end` (retention): nothing more to read
            yield _entries_to_batch(topic, partition, entries)
            pos = int(entries[-1][0][2:])  # last offset + 1

    def _read_batches(
        self, key: str, topic: str, partition: int, start: int, end: int
    ) -> Iterator[pa.RecordBatch]:
        """A `batch` topic: one entry per stored batch, ID 0-<its last offset + 1>, so
        the range starts at the batch holding `start` and runs to the one holding
        `end - 1`; records outside [start, end) are left out (a range may start or end
        inside a batch)."""
        pos = start
        while pos < end:
            entries = self.redis.execute_command(
                "XRANGE", key, f"0-{pos + 1}", "+", "COUNT", BATCH_ENTRIES
            )
            if not entries:
                return
            batch = _stored_batches_to_batch(topic, partition, entries, pos, end)
            if batch.num_rows:
                yield batch
            pos = int(entries[-1][0][2:])

    def segment_ends(self, topic: str, partition: int) -> list[int]:
        """The end offsets of the partition's archived segments (tiered storage), where
        the reader starts a new input partition: one Spark task per segment."""
        members = self.redis.zrange(f"skiff:{{{topic}/{partition}}}:remote", 0, -1)
        return [int(m.split(b" ", 1)[0]) for m in members]

    def _read_archived(
        self, topic: str, partition: int, start: int, end: int
    ) -> Iterator[pa.RecordBatch]:
        """Records in [start, end) from the archived segment objects (sidecar/tiered/:
        Kafka batches with their base offsets, back to back), read straight from the object
        store. A segment deleted meanwhile (retention) is skipped, as trimmed records are."""
        if self.remote_storage is None:
            raise ValueError(
                f"offsets {start}-{end - 1} of {topic}-{partition} are in tiered storage: give "
                "the skiff source the option remote.storage (the sidecars' --remote-storage "
                "URL; AWS_* variables for S3)"
            )
        import obstore
        from obstore.store import from_url

        if self._remote is None:
            config = dict(self.remote_config)
            client = {}
            if "allow_http" in config:
                client["allow_http"] = config.pop("allow_http").lower() == "true"
            self._remote = from_url(
                self.remote_storage, config=config or None, client_options=client or None
            )
        listed = self.redis.zrangebyscore(
            f"skiff:{{{topic}/{partition}}}:remote", "-inf", end - 1, withscores=True
        )
        for member, _ in listed:
            seg_end, _, _, _, path = member.decode().split(" ", 4)
            if int(seg_end) <= start:
                continue
            try:
                data = bytes(obstore.get(self._remote, path).bytes())
            except FileNotFoundError:
                continue
            try:
                yield from segment_record_batches(topic, partition, data, start, end)
            except ValueError as exc:
                raise ValueError(f"segment {path}: {exc}") from None

    def close(self) -> None:
        self.redis.close()


def segment_record_batches(
    topic: str, partition: int, data: bytes, start: int = 0, end: int = 2**63 - 1
) -> Iterator[pa.RecordBatch]:
    """The records in [start, end) of a tiered-storage segment object (Kafka batches with
    their base offsets, back to back: sidecar/tiered/segments.py) as Arrow batches of the
    Kafka source's columns, markers left out; every length checked against the object."""
    entries = []
    pos = 0
    while pos < len(data):
        if pos + 61 > len(data):
            raise ValueError(f"a batch header at byte {pos} runs past the segment")
        base, length = _PREFIX.unpack_from(data, pos)
        size = 12 + length
        if size < 61 or pos + size > len(data):
            raise ValueError(f"the batch at byte {pos} claims {length} bytes")
        (delta,) = _LAST_DELTA.unpack_from(data, pos + 23)
        entries.append((b"0-%d" % (base + delta + 1), [b"b", data[pos : pos + size]]))
        pos += size
        if len(entries) == BATCH_ENTRIES:
            yield _stored_batches_to_batch(topic, partition, entries, start, end)
            entries = []
    if entries:
        yield _stored_batches_to_batch(topic, partition, entries, start, end)


def _stored_batches_to_batch(
    topic: str, partition: int, entries: list[Any], start: int, end: int
) -> pa.RecordBatch:
    """Stored v2 batches (field `b`: the batch with base offset 0) decoded with aiokafka's
    DefaultRecordBatch (C-accelerated where available), records in [start, end) kept.
    Cheaper than expanding them into record-format entries first
    (sidecar.protocol.stored_batch.record_entries), which re-encodes each record's
    headers only for them to be decoded again."""
    from aiokafka.record.default_records import DefaultRecordBatch

    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    offsets: list[int] = []
    timestamps: list[int] = []
    types: list[int] = []
    headers: list[Any] = []
    for entry_id, fields in entries:
        data = fields[1]
        last = int(entry_id[2:]) - 1
        if last < start or data[22] & _CONTROL_ATTRIBUTE:
            continue
        (delta,) = _LAST_DELTA.unpack_from(data, 23)
        placed = _PREFIX.pack(last - delta, len(data) - 12) + data[12:]
        batch = DefaultRecordBatch(placed)
        kind = 1 if batch.timestamp_type else 0
        for record in batch:
            offset = record.offset
            if offset < start or offset >= end:
                continue
            keys.append(record.key)
            values.append(record.value)
            offsets.append(offset)
            timestamps.append(record.timestamp)
            types.append(kind)
            headers.append(list(record.headers) if record.headers else None)
    return record_batch(topic, partition, keys, values, offsets, timestamps, types, headers)


def _entries_to_batch(topic: str, partition: int, entries: list[Any]) -> pa.RecordBatch:
    entries = [e for e in entries if not int(e[1][9]) & _CONTROL_FLAG]
    fields = [e[1] for e in entries]  # [b"t", t, b"k", k, b"v", v, b"h", h, b"f", f]
    flags = [int(f[9]) for f in fields]
    return record_batch(
        topic,
        partition,
        keys=[None if fl & 1 else f[3] for f, fl in zip(fields, flags, strict=True)],
        values=[None if fl & 2 else f[5] for f, fl in zip(fields, flags, strict=True)],
        offsets=[int(e[0][2:]) - 1 for e in entries],
        timestamps_ms=[int(f[1]) for f in fields],
        timestamp_types=[(fl >> 2) & 1 for fl in flags],  # flag 4: LogAppendTime
        headers=[decode_headers(f[7]) if f[7] else None for f in fields],
    )


class KafkaLog:
    """Reads through any Kafka broker (Skiff's sidecars) with confluent-kafka."""

    def __init__(self, bootstrap: str, config: dict[str, str] | None = None) -> None:
        self.config = {
            "bootstrap.servers": bootstrap,
            "group.id": "skiff-spark",  # never joined or committed: partitions are assigned
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",  # a range starting below the log start (trimmed)
            "fetch.max.bytes": 16 * 1024 * 1024,
            "max.partition.fetch.bytes": 8 * 1024 * 1024,
            **(config or {}),
        }
        self._consumer: Any = None

    @property
    def consumer(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer(self.config)
        return self._consumer

    def partition_count(self, topic: str) -> int:
        meta = self.consumer.list_topics(topic, timeout=30).topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise ValueError(f"topic {topic!r}: {meta.error if meta else 'not found'}")
        return len(meta.partitions)

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        from confluent_kafka import TopicPartition

        low, high = self.consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=30, cached=False
        )
        return int(low), int(high)

    def read(
        self, topic: str, partition: int, start: int, end: int, timeout_s: float = 120.0
    ) -> Iterator[pa.RecordBatch]:
        from confluent_kafka import KafkaError, TopicPartition

        consumer = self.consumer
        consumer.assign([TopicPartition(topic, partition, start)])
        pos = start
        deadline = time.monotonic() + timeout_s
        try:
            while pos < end:
                messages = consumer.consume(num_messages=min(CHUNK, end - pos), timeout=1.0)
                if not messages:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{topic}/{partition}: no records at {pos} in time")
                    continue
                for m in messages:
                    err = m.error()
                    if err is not None and err.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(f"{topic}/{partition}: {err}")
                messages = [m for m in messages if m.error() is None and m.offset() < end]
                if not messages:
                    continue
                deadline = time.monotonic() + timeout_s
                stamps = [m.timestamp() for m in messages]
                yield record_batch(
                    topic,
                    partition,
                    keys=[m.key() for m in messages],
                    values=[m.value() for m in messages],
                    offsets=[m.offset() for m in messages],
                    timestamps_ms=[ts for _, ts in stamps],
                    # librdkafka: 1 CreateTime, 2 LogAppendTime; Spark: 0 and 1
                    timestamp_types=[1 if kind == 2 else 0 for kind, _ in stamps],
                    headers=[m.headers() for m in messages],
                )
                pos = messages[-1].offset() + 1
        finally:
            consumer.unassign()

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def open_log(options: dict[str, str], path: str | None = None) -> PartitionLog:
    """The log the options name: `readPath` (redis or kafka), else whichever of
    `redis.url` / `kafka.bootstrap.servers` is given, Redis first (docs/spark.md)."""
    redis_url = options.get("redis.url")
    bootstrap = options.get("kafka.bootstrap.servers")
    path = path or options.get("readpath") or ("redis" if redis_url else "kafka")
    if path == "redis":
        if not redis_url:
            raise ValueError("readPath=redis needs the option redis.url")
        prefix = "remote.storage."
        remote_config = {k[len(prefix) :]: v for k, v in options.items() if k.startswith(prefix)}
        return RedisLog(redis_url, options.get("remote.storage"), remote_config)
    if path == "kafka":
        if not bootstrap:
            raise ValueError("the skiff source needs kafka.bootstrap.servers or redis.url")
        return KafkaLog(bootstrap, kafka_config(options))
    raise ValueError(f"readPath must be redis or kafka, not {path!r}")


def kafka_config(options: dict[str, str]) -> dict[str, str]:
    """Options `kafka.<librdkafka property>` (bootstrap servers aside) go to the client."""
    return {
        k[len("kafka.") :]: v
        for k, v in options.items()
        if k.startswith("kafka.") and k != "kafka.bootstrap.servers"
    }
