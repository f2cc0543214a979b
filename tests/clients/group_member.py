#!/usr/bin/env python3
"""One consumer-group member as a process, for the group tests (tests/groups_harness.py).

    python tests/clients/group_member.py --client confluent|kafka-python --bootstrap H:P
        --group G --topic T [--instance-id ID] [--assignor range|roundrobin|cooperative-sticky]
        [--session-timeout-ms N] [--heartbeat-interval-ms N] [--client-id X]
        [--max-records N] [--record-delay-ms N]

It subscribes to T (auto.offset.reset=earliest, auto commit off) and writes JSON lines to
stdout, flushed after each line:

    {"event": "assigned", "partitions": [[topic, p], ...], "via": "assign|revoke|lost"}
        the whole current assignment, after every change (eager and cooperative alike)
        and after the first assignment even when it is empty
    {"event": "record", "partition": p, "offset": o}     each record processed
    {"event": "committed", "offsets": [[p, next_offset], ...]}
        after each non-empty poll batch, once its synchronous commit succeeded
    {"event": "commit_failed", "error": "..."}            the batch's commit failed
    {"event": "error", "error": "..."}                   a consumer error reported by poll
    {"event": "closed"}                                  after close() on SIGTERM

``--max-records`` caps one poll batch (max.poll.records), so the uncommitted window is at
most one batch; ``--record-delay-ms`` sleeps per record to stretch processing. SIGTERM
finishes the current batch and its commit, closes the consumer (LeaveGroup for a dynamic
member; a static member, with --instance-id, keeps its place as Kafka's clients do) and
exits 0. SIGKILL is the crash case. The Java client's equivalent is
``skiff.ClientTool group-consume`` (tests/java) with the same flags and output.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

ASSIGNORS = ("range", "roundrobin", "cooperative-sticky")
POLL_TIMEOUT_S = 0.2  # how soon SIGTERM is noticed while idle


class Output:
    """JSON lines on stdout. kafka-python calls the rebalance listener on its IO thread,
    so writes are serialised."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def emit(self, **fields: Any) -> None:
        line = json.dumps(fields, separators=(",", ":"))
        with self.lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()


class Assignment:
    """The member's current partitions, kept from the rebalance callbacks: an assign is
    the whole new assignment (eager) or adds an increment (cooperative); a revoke or loss
    removes. Each change is printed with the full set."""

    def __init__(self, out: Output, topic: str, incremental: bool) -> None:
        self.out = out
        self.topic = topic
        self.incremental = incremental
        self.lock = threading.Lock()
        self.partitions: set[int] = set()
        self.announced = False

    def change(self, via: str, added: Iterable[int] = (), removed: Iterable[int] = ()) -> None:
        with self.lock:
            before = set(self.partitions)
            if via == "assign" and not self.incremental:
                self.partitions = set()
            self.partitions |= set(added)
            self.partitions -= set(removed)
            if self.partitions == before and self.announced:
                return  # e.g. a cooperative round that moved nothing of ours
            self.announced = True
            current = sorted(self.partitions)
        self.out.emit(event="assigned", partitions=[[self.topic, p] for p in current], via=via)

    def owns(self, partition: int) -> bool:
        with self.lock:
            return partition in self.partitions


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--client", required=True, choices=("confluent", "kafka-python"))
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--instance-id", default=None, help="group.instance.id (static member)")
    p.add_argument("--assignor", default="range", choices=ASSIGNORS)
    p.add_argument("--session-timeout-ms", type=int, default=None)
    p.add_argument("--heartbeat-interval-ms", type=int, default=None)
    p.add_argument("--client-id", default=None)
    p.add_argument("--max-records", type=int, default=500, help="records per poll batch")
    p.add_argument("--record-delay-ms", type=int, default=0, help="sleep per record")
    return p.parse_args(argv)


def process(
    out: Output, assignment: Assignment, records: Iterable[tuple[int, int]], delay_s: float
) -> dict[int, int]:
    """Print each record of a batch; return the offsets to commit (last + 1 per partition).
    Records of a partition no longer ours (revoked while the batch was fetched) are
    skipped: committing them could move the new owner's committed offset backwards."""
    commit: dict[int, int] = {}
    for partition, offset in records:
        if not assignment.owns(partition):
            continue
        if delay_s:
            time.sleep(delay_s)
        out.emit(event="record", partition=partition, offset=offset)
        commit[partition] = offset + 1
    return commit


# -- confluent-kafka (librdkafka) ------------------------------------------------------------


def run_confluent(args: argparse.Namespace, out: Output, stop: threading.Event) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "partition.assignment.strategy": args.assignor,  # librdkafka uses the same names
        "client.id": args.client_id or "group-member-confluent",
    }
    if os.environ.get("SKIFF_TEST_RDKAFKA_DEBUG"):
        # librdkafka's group state machine on stderr: the harness shows its tail on failure
        config["debug"] = os.environ["SKIFF_TEST_RDKAFKA_DEBUG"]
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    if args.session_timeout_ms:
        config["session.timeout.ms"] = args.session_timeout_ms
    if args.heartbeat_interval_ms:
        config["heartbeat.interval.ms"] = args.heartbeat_interval_ms
    consumer = Consumer(config)
    assignment = Assignment(out, args.topic, args.assignor == "cooperative-sticky")

    def partitions(tps: list[Any]) -> list[int]:
        return [tp.partition for tp in tps if tp.topic == args.topic]

    # confluent-kafka applies the (incremental) assign/unassign itself after these return.
    consumer.subscribe(
        [args.topic],
        on_assign=lambda _c, tps: assignment.change("assign", added=partitions(tps)),
        on_revoke=lambda _c, tps: assignment.change("revoke", removed=partitions(tps)),
        on_lost=lambda _c, tps: assignment.change("lost", removed=partitions(tps)),
    )
    try:
        while not stop.is_set():
            batch = []
            for msg in consumer.consume(num_messages=args.max_records, timeout=POLL_TIMEOUT_S):
                if msg.error() is not None:
                    out.emit(event="error", error=str(msg.error()))
                else:
                    batch.append((msg.partition(), msg.offset()))
            commit = process(out, assignment, batch, args.record_delay_ms / 1000)
            if not commit:
                continue
            offsets = [TopicPartition(args.topic, p, o) for p, o in sorted(commit.items())]
            try:
                result = consumer.commit(offsets=offsets, asynchronous=False) or []
            except KafkaException as exc:
                out.emit(event="commit_failed", error=str(exc))
                continue
            failed = [f"{tp.partition}: {tp.error}" for tp in result if tp.error is not None]
            if failed:
                out.emit(event="commit_failed", error="; ".join(failed))
            else:
                out.emit(event="committed", offsets=sorted(commit.items()))
    finally:
        consumer.close()  # LeaveGroup (unless static)


# -- kafka-python ------------------------------------------------------------------------------


def run_kafka_python(args: argparse.Namespace, out: Output, stop: threading.Event) -> None:
    with warnings.catch_warnings():
        # kafka-python reads its protocol schemas with a deprecated importlib API at import.
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from kafka.errors import KafkaError

    assignors = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }
    config: dict[str, Any] = {
        "bootstrap_servers": args.bootstrap.split(","),
        "group_id": args.group,
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "partition_assignment_strategy": [assignors[args.assignor]],
        "client_id": args.client_id or "group-member-kafka-python",
        "group_instance_id": args.instance_id,
    }
    if args.session_timeout_ms:
        config["session_timeout_ms"] = args.session_timeout_ms
    if args.heartbeat_interval_ms:
        config["heartbeat_interval_ms"] = args.heartbeat_interval_ms
    consumer = KafkaConsumer(**config)
    assignment = Assignment(out, args.topic, args.assignor == "cooperative-sticky")

    def partitions(tps: Iterable[Any]) -> list[int]:
        return [tp.partition for tp in tps if tp.topic == args.topic]

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_assigned(self, assigned: Iterable[Any]) -> None:
            assignment.change("assign", added=partitions(assigned))

        def on_partitions_revoked(self, revoked: Iterable[Any]) -> None:
            assignment.change("revoke", removed=partitions(revoked))

        def on_partitions_lost(self, lost: Iterable[Any]) -> None:
            assignment.change("lost", removed=partitions(lost))

    consumer.subscribe([args.topic], listener=Listener())
    try:
        while not stop.is_set():
            polled = consumer.poll(
                timeout_ms=int(POLL_TIMEOUT_S * 1000), max_records=args.max_records
            )
            batch = [(r.partition, r.offset) for records in polled.values() for r in records]
            commit = process(out, assignment, batch, args.record_delay_ms / 1000)
            if not commit:
                continue
            offsets = {
                TopicPartition(args.topic, p): OffsetAndMetadata(o, "", -1)
                for p, o in commit.items()
            }
            try:
                consumer.commit(offsets)
            except KafkaError as exc:
                out.emit(event="commit_failed", error=repr(exc))
                continue
            out.emit(event="committed", offsets=sorted(commit.items()))
    finally:
        consumer.close(autocommit=False)  # LeaveGroup (unless static)


RUNNERS: dict[str, Callable[[argparse.Namespace, Output, threading.Event], None]] = {
    "confluent": run_confluent,
    "kafka-python": run_kafka_python,
}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Output()
    # The harness sends SIGUSR1 to a member that seems stuck: every thread's stack to stderr.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    stop = threading.Event()
    # SIGTERM only asks the loop to stop: the batch in hand is finished and committed, then
    # the consumer is closed. The handler runs on the main thread between (short) polls.
    signal.signal(signal.SIGTERM, lambda _sig, _frame: stop.set())
    signal.signal(signal.SIGINT, lambda _sig, _frame: stop.set())
    RUNNERS[args.client](args, out, stop)
    out.emit(event="closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
