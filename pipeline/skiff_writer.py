"""Writes of the `skiff` data source: rows go to Skiff through the Kafka protocol with
confluent-kafka's idempotent producer (acks=all), so Skiff's append script assigns the
offsets and drops the producer's retried batches; Redis is never written directly.

Rows are as for Spark's Kafka sink: `value` (string or binary), optional `key`, `topic`
(else the option `topic`), `partition` and `headers` (array<struct<key, value>>).
Delivery is at least once, as with the Kafka sink: a Spark task retried after a failure
writes its rows again."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage


@dataclass
class Written(WriterCommitMessage):
    records: int


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return str(value).encode()


def produce_rows(options: dict[str, str], rows: Iterator[Any]) -> Written:
    from confluent_kafka import Producer

    from .skiff_logs import kafka_config

    bootstrap = options.get("kafka.bootstrap.servers")
    if not bootstrap:
        raise ValueError("writing to Skiff needs the option kafka.bootstrap.servers")
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,  # implies acks=all
            "linger.ms": 5,
            **{k: v for k, v in kafka_config(options).items() if k != "topic"},
        }
    )
    default_topic = options.get("topic")
    failures: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    count = 0
    for row in rows:
        fields = row.asDict() if hasattr(row, "asDict") else dict(row)
        topic = fields.get("topic") or default_topic
        if not topic:
            raise ValueError("a row has no topic: add a topic column or the option topic")
        headers = fields.get("headers")
        extra: dict[str, Any] = {}
        if fields.get("partition") is not None:
            extra["partition"] = int(fields["partition"])
        if headers:
            extra["headers"] = [(h["key"], _bytes(h["value"])) for h in headers]
        while True:
            try:
                producer.produce(
                    topic,
                    value=_bytes(fields.get("value")),
                    key=_bytes(fields.get("key")),
                    on_delivery=delivered,
                    **extra,
                )
                break
            except BufferError:  # local queue full: let deliveries drain it
                producer.poll(0.1)
        producer.poll(0)
        count += 1
    remaining = producer.flush(120)
    if remaining or failures:
        raise RuntimeError(f"{remaining} records undelivered, errors: {failures[:5]}")
    return Written(count)


class SkiffWriter(DataSourceWriter):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> Written:
        return produce_rows(self.options, iterator)


class SkiffStreamWriter(DataSourceStreamWriter):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> Written:
        return produce_rows(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # records are in Skiff once write() returned

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass
