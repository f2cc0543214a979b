"""Locust users that speak the Kafka protocol to Skiff through confluent-kafka (librdkafka).

Every acknowledged produce (its delivery report) and every consumer poll is reported to
locust's statistics with `environment.events.request.fire`:

| request_type | name | response_time | response_length |
|---|---|---|---|
| `produce` | the topic | produce() call to delivery report, ms | key + value bytes |
| `consume` | the topic | poll start to records returned, ms | key + value bytes of the batch |
| `consume` | `<topic> (empty poll)` | a poll that waited --poll-timeout-ms and got nothing | 0 |

A failed delivery or a consumer error is a locust failure (`exception=KafkaException`).

Scenarios are user classes: `ProducerUser` (produce-only), `ConsumerUser` (consume-only,
with `--prefill` records written at start), both (mixed). `python -m loadtest` picks them
with `--scenario`. Parameters are the custom arguments below (`locust --help` lists them;
each also reads the SKIFF_LOAD_* variable named in its help).

librdkafka runs its own native threads; under gevent the users never block in the client:
they poll with timeout 0 and yield to the other greenlets between polls.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from pathlib import Path
from typing import Any

import gevent
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from locust import User, events, task
from locust.env import Environment
from locust.stats import CSV_STATS_INTERVAL_SEC


@events.init_command_line_parser.add_listener
def _arguments(parser: Any) -> None:
    group = parser.add_argument_group("Skiff (Kafka protocol)")

    def arg(name: str, **kwargs: Any) -> None:
        env = "SKIFF_LOAD_" + name.upper().replace("-", "_")
        kwargs["help"] = f"{kwargs['help']} (${env}; default {kwargs['default']})"
        group.add_argument(f"--{name}", env_var=env, **kwargs)

    arg("bootstrap", default="127.0.0.1:9092", help="bootstrap.servers of the Kafka listener")
    arg("topic", default="skiff-loadtest", help="topic to produce to and consume from")
    arg("partitions", type=int, default=6, help="partitions when the topic is created")
    arg("message-size", type=int, default=100, help="value bytes per record")
    arg("key-spread", type=int, default=1000, help="distinct keys (0: records without a key)")
    arg("acks", default="all", choices=["0", "1", "all", "-1"], help="producer acks")
    arg("linger-ms", type=int, default=5, help="producer linger.ms")
    arg("compression", default="none", help="producer compression.type")
    arg("produce-batch", type=int, default=100, help="records a ProducerUser task produces")
    arg("group", default="skiff-loadtest", help="consumer group of the ConsumerUsers")
    arg("consume-batch", type=int, default=500, help="most records one consumer poll returns")
    arg("poll-timeout-ms", type=int, default=1000, help="longest wait of one consumer poll")
    arg("task-wait-ms", type=int, default=0, help="pause of a user between two tasks")
    arg("prefill", type=int, default=0, help="records produced at start (consume-only runs)")
    arg(
        "record-log",
        default="",
        help="directory: write every acked and consumed record's "
        "partition, offset and id there as JSON lines (for loss checks)",
    )


def _options(environment: Environment) -> Any:
    return environment.parsed_options


def _producer_config(opts: Any) -> dict[str, Any]:
    acks = "all" if opts.acks in ("all", "-1") else opts.acks
    return {
        "bootstrap.servers": opts.bootstrap,
        "acks": acks,
        "enable.idempotence": acks == "all",
        "linger.ms": opts.linger_ms,
        "compression.type": opts.compression,
        "client.id": "skiff-locust",
    }


def _wait(future: Any, timeout: float) -> Any:
    """A confluent-kafka admin future's result, yielding to other greenlets meanwhile."""
    deadline = time.monotonic() + timeout
    while not future.done():
        if time.monotonic() > deadline:
            raise TimeoutError("admin request timed out")
        gevent.sleep(0.05)
    return future.result()


@events.test_start.add_listener
def _create_topic(environment: Environment, **_: Any) -> None:
    opts = _options(environment)
    if opts is None:
        return
    admin = AdminClient({"bootstrap.servers": opts.bootstrap})
    futures = admin.create_topics([NewTopic(opts.topic, opts.partitions, 1)])
    try:
        _wait(futures[opts.topic], 30)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    if opts.prefill > 0:
        _prefill(environment, opts)


def _prefill(environment: Environment, opts: Any) -> None:
    producer = Producer(_producer_config(opts))
    log = RecordLog(opts.record_log, "prefill")
    for i in range(opts.prefill):
        value = _padded(b"prefill:%d:" % i, opts.message_size)
        while True:
            try:
                producer.produce(
                    opts.topic, value, _key(opts.key_spread), on_delivery=log.on_prefill(i)
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    producer.flush(60)
    log.write()


@events.quitting.add_listener
def _final_csv_pass(environment: Environment, **_: Any) -> None:
    """locust rewrites its --csv files once a second and not again at exit, so requests
    completed in the last second would be missing there: let the writer run once more."""
    if getattr(environment.parsed_options, "csv_prefix", None):
        gevent.sleep(CSV_STATS_INTERVAL_SEC + 0.5)


def _acked_offset(msg: Any) -> int | None:
    """The offset a delivery report names; acks=0 reports none (None or -1)."""
    offset = msg.offset()
    return offset if offset is not None and offset >= 0 else None


def _padded(head: bytes, size: int) -> bytes:
    return head + b"x" * max(0, size - len(head))


def _key(spread: int) -> bytes | None:
    return None if spread <= 0 else b"k%d" % random.randrange(spread)


class RecordLog:
    """What one user produced (acknowledged) and consumed, for the caller's loss check."""

    def __init__(self, directory: str, uid: str) -> None:
        self.directory = Path(directory) if directory else None
        self.uid = uid
        self.produced: list[tuple[int, int, str]] = []
        self.consumed: list[tuple[int, int, str]] = []

    def on_prefill(self, seq: int) -> Any:
        def done(err: KafkaError | None, msg: Any) -> None:
            if err is None and _acked_offset(msg) is not None:
                self.produced.append((msg.partition(), msg.offset(), f"prefill:{seq}"))

        return done

    def write(self) -> None:
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        for kind, rows in (("produced", self.produced), ("consumed", self.consumed)):
            if rows:
                with open(self.directory / f"{kind}-{self.uid}.jsonl", "a") as f:
                    f.writelines(json.dumps({"p": p, "o": o, "id": i}) + "\n" for p, o, i in rows)
        self.produced.clear()
        self.consumed.clear()


class KafkaUser(User):
    abstract = True

    def wait_time(self) -> float:
        return self.opts.task_wait_ms / 1000

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        self.opts = _options(environment)
        self.uid = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.log = RecordLog(self.opts.record_log, self.uid)

    def fire(
        self, kind: str, name: str, start: float, length: int, exc: Exception | None = None
    ) -> None:
        self.environment.events.request.fire(
            request_type=kind,
            name=name,
            response_time=(time.perf_counter() - start) * 1000,
            response_length=length,
            exception=exc,
            context={},
        )


class ProducerUser(KafkaUser):
    """Produces --produce-batch records a task and waits for their delivery reports."""

    def on_start(self) -> None:
        self.producer = Producer(_producer_config(self.opts))
        self.seq = 0
        self.pending = 0

    def _delivered(self, start: float, length: int, rid: str) -> Any:
        def report(err: KafkaError | None, msg: Any) -> None:
            self.pending -= 1
            exc = KafkaException(err) if err is not None else None
            self.fire("produce", self.opts.topic, start, length, exc)
            if err is None and _acked_offset(msg) is not None:
                self.log.produced.append((msg.partition(), msg.offset(), rid))

        return report

    @task
    def produce(self) -> None:
        opts = self.opts
        for _ in range(opts.produce_batch):
            rid = f"{self.uid}:{self.seq}"
            self.seq += 1
            value = _padded(rid.encode() + b":", opts.message_size)
            key = _key(opts.key_spread)
            start = time.perf_counter()
            report = self._delivered(start, len(value) + len(key or b""), rid)
            while True:
                try:
                    self.producer.produce(opts.topic, value, key, on_delivery=report)
                    self.pending += 1
                    break
                except BufferError:  # local queue full: let deliveries drain
                    self.producer.poll(0)
                    gevent.sleep(0.005)
        self._drain(timeout=60)

    def _drain(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.pending > 0 and time.monotonic() < deadline:
            self.producer.poll(0)
            if self.pending > 0:
                gevent.sleep(0.002)

    def on_stop(self) -> None:
        self._drain(timeout=30)
        self.log.write()


class ConsumerUser(KafkaUser):
    """A member of --group, subscribed to --topic; each task is one poll."""

    def on_start(self) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": self.opts.bootstrap,
                "group.id": self.opts.group,
                "auto.offset.reset": "earliest",
                "client.id": "skiff-locust",
            }
        )
        self.consumer.subscribe([self.opts.topic])

    @task
    def poll(self) -> None:
        opts = self.opts
        start = time.perf_counter()
        deadline = start + opts.poll_timeout_ms / 1000
        while True:
            msgs = self.consumer.consume(num_messages=opts.consume_batch, timeout=0)
            if msgs or time.perf_counter() >= deadline:
                break
            gevent.sleep(0.005)
        if not msgs:
            self.fire("consume", f"{opts.topic} (empty poll)", start, 0)
            return
        length = 0
        error: Exception | None = None
        for msg in msgs:
            if msg.error() is not None:
                error = KafkaException(msg.error())
                continue
            key, value = msg.key() or b"", msg.value() or b""
            length += len(key) + len(value)
            rid = value.split(b":", 2)
            self.log.consumed.append(
                (msg.partition(), msg.offset(), b":".join(rid[:2]).decode(errors="replace"))
            )
        self.fire("consume", opts.topic, start, length, error)

    def on_stop(self) -> None:
        self.consumer.close()
        self.log.write()
