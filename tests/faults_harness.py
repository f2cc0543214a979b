"""Helpers for the Redis fault tests: a persistent redis-server that can be stopped and
started again on its port, a confluent-kafka produce loop that records what was
acknowledged, and a read-back that checks the log record by record."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import REDIS_NODE_ARGS, free_port, stop_process, wait_for_port


@dataclass
class PersistentRedis:
    """redis-server with AOF and appendfsync always: an acknowledged write survives a
    stop and start, which the restart test relies on."""

    dir: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    extra: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port)

    def start(self) -> PersistentRedis:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--dir",
                str(self.dir),
                "--daemonize",
                "no",
                *REDIS_NODE_ARGS,
                *self.extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.proc)
        deadline = time.monotonic() + 30
        while True:  # the AOF is loaded once PING answers PONG (not LOADING)
            try:
                if self.client().ping():
                    return self
            except redis.exceptions.BusyLoadingError:
                pass
            assert time.monotonic() < deadline, "redis-server did not load its AOF"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)  # SIGTERM: Redis fsyncs the AOF and exits
            self.proc = None


class ProduceLoop(threading.Thread):
    """Produce b"<i>" to partition i % partitions with an idempotent, acks=all producer
    until stop() is called, then flush. acked[p] holds (offset, value) as reported."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, **conf: object) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.conf = conf
        self.acked: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        self.acked_count = 0
        self.failed: list[str] = []
        self.errors: list[str] = []  # the client's own errors (error_cb): fatal ones too
        self.sent = 0
        self.unflushed = -1
        self._halt = threading.Event()

    def _report(self, err: object, msg: object) -> None:
        if err is not None:
            self.failed.append(str(err))
            return
        self.acked[msg.partition()].append((msg.offset(), msg.value()))  # type: ignore[attr-defined]
        self.acked_count += 1

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                "reconnect.backoff.max.ms": 200,
                "error_cb": lambda e: self.errors.append(str(e)),
                **self.conf,
            }
        )
        i = 0
        while not self._halt.is_set():
            try:
                producer.produce(
                    self.topic,
                    value=b"%d" % i,
                    partition=i % self.partitions,
                    on_delivery=self._report,
                )
            except BufferError:
                producer.poll(0.05)
                continue
            i += 1
            producer.poll(0)
            if i % 100 == 0:
                time.sleep(0.01)  # keep records flowing through the whole test
        self.sent = i
        self.unflushed = producer.flush(120)

    def wait_acked(self, count: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while self.acked_count < count:
            assert self.is_alive(), "the producer stopped"
            assert time.monotonic() < deadline, (
                f"only {self.acked_count} of {count} acked; failed {self.failed[:3]}, "
                f"client errors {self.errors[-3:]}"
            )
            time.sleep(0.02)

    def finish(self, timeout: float = 180.0) -> None:
        self.stop()
        self.join(timeout)
        assert not self.is_alive(), "the producer did not finish"
        assert self.unflushed == 0, f"{self.unflushed} records never acknowledged"
        assert not self.failed, self.failed[:3]

    def expected(self, partition: int) -> list[bytes]:
        """Every record produced to the partition, in production order."""
        return [b"%d" % i for i in range(partition, self.sent, self.partitions)]


def read_partition(
    bootstrap: str, topic: str, partition: int, count: int
) -> list[tuple[int, bytes]]:
    """(offset, value) of the first `count` records of a partition, via a consumer."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "readback", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < count:
            assert time.monotonic() < deadline, f"read {len(out)} of {count} records"
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append((msg.offset(), msg.value()))
        msg = consumer.poll(0.5)  # nothing more than what was acknowledged
        assert msg is None or msg.error(), f"unexpected record at offset {msg.offset()}"
    finally:
        consumer.close()
    return out


def check_exactly_once(loop: ProduceLoop, bootstrap: str) -> None:
    """Every record is in the log once, in production order, at the offset the producer
    was told: the log is exactly what was produced and acknowledged."""
    for p in range(loop.partitions):
        expected = loop.expected(p)
        stored = read_partition(bootstrap, loop.topic, p, len(expected))
        assert [v for _, v in stored] == expected, f"partition {p} differs from what was produced"
        assert [o for o, _ in stored] == list(range(len(expected)))
        assert sorted(loop.acked[p]) == stored, f"partition {p}: acknowledged offsets differ"
