"""Drive confluent-kafka (librdkafka) against Skiff with the adapters' common API.

    meta = produce("127.0.0.1:9092", "t", records, compression="zstd")
    got = consume("127.0.0.1:9092", "t", 0, meta[0]["offset"], len(records))
    list_offsets("127.0.0.1:9092", "t", 0, "latest")  # {"offset": ..., "timestamp": ...}

A record is ``{"partition": int | None, "key": bytes | None, "value": bytes | None,
"headers": [(str, bytes | None)], "timestamp": int | None}`` (tests/records.py).

Quirks: librdkafka's produce() takes timestamp 0 to mean "now", so a record cannot be
produced with timestamp 0; Consumer() insists on a group.id even for assign() (one is
set; nothing is joined or committed).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

NAME = "confluent"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")  # all built into librdkafka


class ConfluentClientError(RuntimeError):
    pass


def _config(bootstrap: str, opts: Mapping[str, Any]) -> dict[str, Any]:
    # Dotted librdkafka property names; python-style names are accepted for the few the
    # tests use (linger_ms -> linger.ms).
    config: dict[str, Any] = {"bootstrap.servers": bootstrap}
    for key, value in opts.items():
        if value is not None:
            config[key.replace("_", ".")] = value
    return config


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[Mapping[str, Any]],
    compression: str = "none",
    timeout_s: float = 120.0,
    **opts: Any,
) -> list[dict[str, Any]]:
    """Produce records in order (acks=all, idempotence at librdkafka's default: off) and
    return ``[{"partition", "offset", "timestamp"}]`` in input order from the delivery
    reports. ``opts`` are librdkafka properties (``linger_ms=1000`` -> ``linger.ms``)."""
    config = _config(bootstrap, opts)
    config.setdefault("acks", "all")
    config["compression.type"] = compression
    producer = Producer(config)
    # Learn the topic's partitions (auto-creating it) before the first produce(): records
    # produced while they are unknown wait unassigned and, once metadata arrives, may leave
    # in several small batches whatever linger.ms says.
    producer.list_topics(topic, timeout=timeout_s)
    results: list[dict[str, Any] | None] = [None] * len(records)
    failures: list[str] = []

    def report(index: int):
        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                failures.append(f"record #{index}: {err}")
                return
            ts_type, ts = msg.timestamp()
            results[index] = {
                "partition": msg.partition(),
                "offset": msg.offset(),
                "timestamp": ts,
                "timestamp_type": ts_type,
            }

        return on_delivery

    for i, rec in enumerate(records):
        kwargs: dict[str, Any] = {"key": rec.get("key"), "value": rec.get("value")}
        if rec.get("partition") is not None:
            kwargs["partition"] = rec["partition"]
        if rec.get("timestamp") is not None:
            kwargs["timestamp"] = rec["timestamp"]
        if rec.get("headers"):
            kwargs["headers"] = list(rec["headers"])
        while True:
            try:
                producer.produce(topic, on_delivery=report(i), **kwargs)
                break
            except BufferError:  # local queue full: serve delivery reports, retry
                producer.poll(0.1)
        producer.poll(0)
    deadline = time.monotonic() + timeout_s
    while producer.flush(1.0) > 0:
        if time.monotonic() > deadline:
            raise ConfluentClientError(
                f"produce: {len(producer)} records undelivered after {timeout_s}s"
            )
    if failures:
        raise ConfluentClientError(
            f"{len(failures)} of {len(records)} records failed: " + "; ".join(failures[:10])
        )
    out = []
    for r in results:
        assert r is not None
        # Like Java's RecordMetadata.timestamp(): the record's own timestamp unless the
        # broker set LogAppendTime.
        ts_type = r.pop("timestamp_type")
        if ts_type != TIMESTAMP_LOG_APPEND_TIME and r["timestamp"] is None:
            r["timestamp"] = -1
        out.append(r)
    return out


def _record(msg: Any) -> dict[str, Any]:
    ts_type, ts = msg.timestamp()
    return {
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": ts,
        "timestamp_type": 1 if ts_type == TIMESTAMP_LOG_APPEND_TIME else 0,
        "key": msg.key(),
        "value": msg.value(),
        "headers": [(name, value) for name, value in msg.headers() or []],
    }


def consume(
    bootstrap: str,
    topic: str,
    partition: int,
    offset: int,
    count: int,
    timeout_ms: int = 60000,
    **opts: Any,
) -> list[dict[str, Any]]:
    """Read exactly ``count`` records from ``offset`` with assign (no group, no commits).
    Raises ConfluentClientError on a consumer error or a timeout."""
    config = _config(bootstrap, opts)
    # librdkafka wants a group.id even for assign(); nothing is joined or committed.
    config.setdefault("group.id", f"skiff-tests-{topic}")
    config.setdefault("enable.auto.commit", False)
    config.setdefault("enable.auto.offset.store", False)
    config.setdefault("auto.offset.reset", "error")
    config.setdefault("check.crcs", True)
    consumer = Consumer(config)
    got: list[dict[str, Any]] = []
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + timeout_ms / 1000
        while len(got) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ConfluentClientError(
                    f"timed out after {timeout_ms} ms: got {len(got)} of {count} records "
                    f"from {topic}-{partition} at offset {offset}"
                )
            for msg in consumer.consume(min(count - len(got), 10000), min(left, 1.0)):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise ConfluentClientError(f"after {len(got)} records: {msg.error()}")
                got.append(_record(msg))
    finally:
        consumer.close()
    return got[:count]


def list_offsets(
    bootstrap: str, topic: str, partition: int, spec: str | int, timeout_s: float = 30.0
) -> dict[str, Any]:
    """AdminClient.list_offsets: spec "earliest", "latest" or a timestamp (ms). Returns
    ``{"offset", "timestamp"}`` as the broker answered (offset -1 when no record has a
    timestamp >= the one asked for; timestamp -1 for earliest/latest)."""
    if spec == "earliest":
        offset_spec = OffsetSpec.earliest()
    elif spec == "latest":
        offset_spec = OffsetSpec.latest()
    else:
        offset_spec = OffsetSpec.for_timestamp(int(spec))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, partition)
    try:
        futures = admin.list_offsets({tp: offset_spec}, request_timeout=timeout_s)
        info = next(iter(futures.values())).result(timeout=timeout_s + 5)
    except KafkaException as exc:
        raise ConfluentClientError(f"list_offsets({topic}-{partition}, {spec}): {exc}") from exc
    return {"offset": info.offset, "timestamp": info.timestamp}
