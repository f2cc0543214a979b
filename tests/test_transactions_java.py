"""Kafka transactions from the Java client and Kafka Streams with
processing.guarantee=exactly_once_v2 (docs/transactions.md): commit, abort and zombie
fencing as the Java producer and consumer see them, and a word count that stays exactly
once while its instance is SIGKILLed twice and a Skiff sidecar once."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from clients.java_streams_client import run_txn, wordcount_cmd
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from conftest import stop_process
from groups_harness import FAILOVER_ENV, Cluster, SkiffCluster, create_topic, start_cluster
from rawkafka import RawKafka
from test_transactions_v2 import stored_batches


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    started = start_cluster(tmp_path / "cluster", nodes=2, env=FAILOVER_ENV)
    yield started
    started.stop()


@pytest.mark.parametrize("storage_format", ["batch", "record"])
def test_java_producer_commits_aborts_and_is_fenced(cluster: Cluster, storage_format: str) -> None:
    topic = f"jtx-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic, 1, {"skiff.storage.format": storage_format})
    lines = run_txn(cluster.bootstrap, topic, f"id-{topic}")
    # c0-c2 at 0-2, COMMIT 3; a0 a1 at 4-5, ABORT 6; c3 at 7, COMMIT 8; the zombie's
    # record at 9, ABORTed at 10 by the new instance; fresh at 11, COMMIT 12.
    committed = [line for line in lines if line.startswith("committed ")]
    assert committed == [
        "committed 0 c0",
        "committed 1 c1",
        "committed 2 c2",
        "committed 7 c3",
        "committed 11 fresh",
    ]
    uncommitted = [line.split()[2] for line in lines if line.startswith("uncommitted ")]
    assert uncommitted == ["c0", "c1", "c2", "a0", "a1", "c3", "zombie", "fresh"]
    assert "committed-end 13" in lines and "committed-position 13" in lines
    assert "uncommitted-position 13" in lines
    fenced = [line for line in lines if line.startswith(("fenced", "not fenced"))]
    assert fenced in (["fenced ProducerFencedException"], ["fenced InvalidProducerEpochException"])
    # Kafka 4.x's client uses transaction version 2 (KIP-890): each EndTxn bumps the
    # epoch, so the markers of its three transactions carry three epochs in a row.
    host, port = cluster.bootstrap.split(",")[0].rsplit(":", 1)
    with RawKafka(host, int(port)) as kafka:
        markers = [b for b in stored_batches(kafka, topic) if b[1]]
    epochs = [epoch for _, _, epoch, _ in markers[:3]]
    assert [offset for offset, *_ in markers[:3]] == [3, 6, 8]
    assert epochs == [epochs[0], epochs[0] + 1, epochs[0] + 2], markers


class WordCount:
    """One Kafka Streams instance in its own JVM; `running` is set on each RUNNING."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.log = log
        self.running = threading.Event()
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=open(log, "ab"),
            text=True,  # noqa: SIM115
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with open(self.log, "a") as f:
                f.write(line)
            if line.strip() == "RUNNING":
                self.running.set()

    def wait_running(self, timeout: float = 120) -> None:
        if not self.running.wait(timeout):
            raise AssertionError(
                f"Kafka Streams never reached RUNNING:\n{self.log.read_text()[-3000:]}"
            )

    def kill(self) -> None:
        stop_process(self.proc, signal.SIGKILL)


def _counts(bootstrap: str, topic: str, partitions: int, expected: int) -> dict[bytes, list[int]]:
    """Every count the application wrote (read_committed), per word, until `expected`
    records are read or 180 s pass."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    counts: dict[bytes, list[int]] = {}
    read = 0
    deadline = time.monotonic() + 180
    try:
        while read < expected and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None or m.error():
                continue
            counts.setdefault(m.key(), []).append(struct.unpack(">q", m.value())[0])
            read += 1
    finally:
        consumer.close()
    return counts


def test_kafka_streams_exactly_once_through_instance_and_sidecar_kills(
    cluster: Cluster, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    source, sink, app = f"words-{suffix}", f"counts-{suffix}", f"wc-{suffix}"
    create_topic(cluster.bootstrap, source, 2)
    create_topic(cluster.bootstrap, sink, 2)
    words = [b"w%d" % i for i in range(7)]
    rounds, per_round = 5, 200
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    argv = wordcount_cmd(cluster.bootstrap, app, source, sink, tmp_path / "state")
    instance = WordCount(argv, tmp_path / "streams.log")
    instance.wait_running()
    sent = 0
    for round_no in range(rounds):
        for _ in range(per_round):
            producer.produce(source, words[sent % len(words)])
            sent += 1
        producer.flush(60)
        time.sleep(1.5)  # the application is mid-way through the round
        if round_no in (1, 3):
            instance.kill()  # mid-transaction, as like as not
            instance = WordCount(argv, tmp_path / "streams.log")
            instance.wait_running()
        elif round_no == 2:
            cluster.kill(max(cluster.nodes))
    try:
        counts = _counts(cluster.bootstrap, sink, 2, sent)
    finally:
        instance.kill()
    # Exactly once: each word's counts are 1, 2, ..., n, each once, n its occurrences.
    expected = {
        w: sent // len(words) + (1 if i < sent % len(words) else 0) for i, w in enumerate(words)
    }
    assert {w: len(c) for w, c in counts.items()} == expected
    for word, seen in counts.items():
        assert seen == list(range(1, expected[word] + 1)), word


def test_consume_transform_produce_is_exactly_once_when_a_sidecar_dies(cluster: Cluster) -> None:
    """librdkafka's send_offsets_to_transaction loop, handling errors as its docs say
    (retry what is retriable, abort and rewind what is abortable), while a sidecar it
    talks to is SIGKILLed mid-run and started again (a pod restart): every input record is
    in the output exactly once.

    The sidecar comes back before its registration lapses: librdkafka 2.16 can hang for
    good in send_offsets_to_transaction when a broker it was about to ask leaves the
    cluster's Metadata mid-call (its handle loops in "terminating in state TRY_CONNECT");
    a Kafka broker that dies leaves Metadata the same way."""
    suffix = uuid.uuid4().hex[:8]
    source, sink, group = f"in-{suffix}", f"out-{suffix}", f"g-{suffix}"
    create_topic(cluster.bootstrap, source, 2)
    create_topic(cluster.bootstrap, sink, 2)
    total = 400
    plain = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    for i in range(total):
        plain.produce(source, b"%d" % i, partition=i % 2)
    plain.flush(60)
    progress = {"committed": 0}
    failure: list[BaseException] = []

    def consumer() -> Consumer:
        c = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
            }
        )
        c.subscribe([source])
        return c

    def loop() -> None:
        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "transactional.id": f"tx-{suffix}",
                **({"debug": "eos,protocol,broker"} if os.environ.get("TXN_DEBUG") else {}),
            }
        )
        producer.init_transactions(60)
        c = consumer()
        deadline = time.monotonic() + 240
        try:
            while progress["committed"] < total:
                assert time.monotonic() < deadline, f"stuck at {progress}"
                batch = [m for m in c.consume(20, 1.0) if not m.error()]
                if not batch:
                    continue
                producer.begin_transaction()
                for m in batch:
                    producer.produce(sink, m.value() + b"!", partition=m.partition())
                try:
                    producer.send_offsets_to_transaction(
                        c.position(c.assignment()), c.consumer_group_metadata(), 60
                    )
                    while True:
                        try:
                            producer.commit_transaction(60)
                            break
                        except KafkaException as exc:
                            if not exc.args[0].retriable():
                                raise
                    progress["committed"] += len(batch)
                except KafkaException as exc:
                    if not exc.args[0].txn_requires_abort():
                        raise
                    producer.abort_transaction(60)
                    c.close()  # rewind: the next consumer starts at the committed offsets
                    c = consumer()
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
            failure.append(exc)
        finally:
            c.close()

    worker = threading.Thread(target=loop, daemon=True)
    worker.start()
    deadline = time.monotonic() + 120
    while progress["committed"] < total // 3 and time.monotonic() < deadline and not failure:
        time.sleep(0.05)
    killed = max(cluster.nodes)
    cluster.kill(killed)
    if isinstance(cluster, SkiffCluster):
        cluster.revive(killed)
    worker.join(300)
    assert not failure, failure
    assert progress["committed"] >= total

    check = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"check-{suffix}",
            "isolation.level": "read_committed",
        }
    )
    check.assign([TopicPartition(sink, p, 0) for p in range(2)])
    got: list[bytes] = []
    end = time.monotonic() + 60
    while len(got) < total and time.monotonic() < end:
        m = check.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    time.sleep(1)  # nothing more may come: duplicates would
    while (m := check.poll(0.5)) is not None:
        if not m.error():
            got.append(m.value())
    check.close()
    assert sorted(got) == sorted(b"%d!" % i for i in range(total))
    committed_by = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    offsets = committed_by.committed([TopicPartition(source, p) for p in range(2)], 30)
    committed_by.close()
    assert [tp.offset for tp in offsets] == [total // 2, total // 2]
