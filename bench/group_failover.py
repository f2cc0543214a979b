#!/usr/bin/env python3
"""How long a consumer group takes to consume a SIGKILLed member's partitions again,
with the consumer group protocol (KIP-848) and with the classic one, in the same run.

    .venv/bin/python bench/group_failover.py [--members 4] [--partitions 32]
        [--protocols consumer,classic] [--rate 2000]

Starts a private redis-server and Skiff, fills nothing: a producer thread writes
--rate records/s round-robin over --partitions partitions for the whole run. Per
protocol, --members confluent-kafka consumer processes (this script with --member)
join one new group (auto commit, default session timeouts: the group config
consumer.session.timeout.ms, 45 s, and the client's session.timeout.ms, 45 s), and
print each partition they consume from. Once every partition is being consumed, the
first member is killed with SIGKILL, and the bench waits until every partition that
member was consuming has been consumed by another member. It prints that time beside
the session timeout (issue 18's target: at most the session timeout + 1 s).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench import BenchError, progress, start_redis, start_skiff, stop_process  # noqa: E402

SESSION_TIMEOUT_S = 45.0  # both protocols' defaults
SEEN_WINDOW_S = 2.0  # a partition is "being consumed" if a record of it came this recently
LIMIT_S = 150.0


def member(bootstrap: str, topic: str, group: str, protocol: str) -> None:
    """A group member: prints "<unix time> <partition>" per partition per poll."""
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "group.protocol": protocol,
        "log_level": 3,
    }
    if protocol == "classic":
        config["partition.assignment.strategy"] = "cooperative-sticky"
    consumer = Consumer(config)
    consumer.subscribe([topic])
    out = sys.stdout
    while True:
        messages = consumer.consume(500, 0.2)
        now = time.time()
        for p in {m.partition() for m in messages if m.error() is None}:
            out.write(f"{now:.3f} {p}\n")
        out.flush()


class Member:
    def __init__(self, index: int, bootstrap: str, topic: str, group: str, protocol: str):
        self.index = index
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--member", bootstrap, topic, group, protocol],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.last_seen: dict[int, float] = {}
        self.first_after: dict[int, float] = {}  # partition -> first time after `mark`
        self.mark = float("inf")
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            at, partition = line.split()
            t, p = float(at), int(partition)
            with self.lock:
                self.last_seen[p] = t
                if t >= self.mark and p not in self.first_after:
                    self.first_after[p] = t

    def consuming(self, now: float) -> set[int]:
        with self.lock:
            return {p for p, t in self.last_seen.items() if now - t < SEEN_WINDOW_S}

    def stop(self) -> None:
        stop_process(self.proc, signal.SIGKILL)  # type: ignore[arg-type]


def produce_forever(bootstrap: str, topic: str, partitions: int, rate: int, stop: threading.Event):
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 3})
    n = 0
    started = time.monotonic()
    while not stop.is_set():
        producer.produce(topic, b"x" * 100, partition=n % partitions)
        n += 1
        if n % 100 == 0:
            producer.poll(0)
            ahead = n / rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
    producer.flush(10)


def one_protocol(bootstrap: str, topic: str, args: argparse.Namespace, protocol: str) -> float:
    group = f"failover-{protocol}-{os.getpid()}"
    members = [Member(i, bootstrap, topic, group, protocol) for i in range(args.members)]
    try:
        progress(f"{protocol}: waiting for {args.members} members to consume every partition")
        deadline = time.monotonic() + LIMIT_S
        while True:
            now = time.time()
            seen = [m.consuming(now) for m in members]
            if set().union(*seen) == set(range(args.partitions)) and all(seen):
                break
            if time.monotonic() > deadline:
                raise BenchError(f"{protocol}: the group never consumed every partition")
            time.sleep(0.5)
        time.sleep(3.0)  # settled
        victim, others = members[0], members[1:]
        orphaned = victim.consuming(time.time())
        killed_at = time.time()
        for m in others:
            with m.lock:
                m.mark = killed_at
        victim.stop()
        progress(f"{protocol}: killed member 0, which consumed {len(orphaned)} partitions")
        deadline = time.monotonic() + LIMIT_S
        while True:
            taken: dict[int, float] = {}
            for m in others:
                with m.lock:
                    for p, t in m.first_after.items():
                        if p in orphaned:
                            taken[p] = min(t, taken.get(p, t))
            if set(taken) == orphaned:
                return max(taken.values()) - killed_at
            if time.monotonic() > deadline:
                raise BenchError(
                    f"{protocol}: partitions {sorted(orphaned - set(taken))} not consumed "
                    f"again within {LIMIT_S:.0f} s"
                )
            time.sleep(0.2)
    finally:
        for m in members:
            m.stop()


def run(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="skiff-group-failover-"))
    redis_proc, redis_url = start_redis(work, False)
    skiff = None
    stop = threading.Event()
    writer: threading.Thread | None = None
    try:
        skiff, bootstrap = start_skiff(redis_url, work / "skiff.log")
        topic = "failover"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(topic, args.partitions, 1)]).values():
            future.result(30)
        writer = threading.Thread(
            target=produce_forever,
            args=(bootstrap, topic, args.partitions, args.rate, stop),
            daemon=True,
        )
        writer.start()
        print(
            f"load average {os.getloadavg()[0]:.2f}; {args.members} members, "
            f"{args.partitions} partitions, session timeout {SESSION_TIMEOUT_S:.0f} s"
        )
        for protocol in args.protocols.split(","):
            took = one_protocol(bootstrap, topic, args, protocol)
            print(
                f"{protocol:9} partitions of the killed member consumed again after "
                f"{took:5.1f} s (session timeout + 1 s = {SESSION_TIMEOUT_S + 1:.0f} s)",
                flush=True,
            )
    finally:
        stop.set()
        if writer is not None:
            writer.join(15)  # its last flush, before Skiff goes
        stop_process(skiff)
        stop_process(redis_proc)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--member":
        member(*sys.argv[2:6])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=32)
    parser.add_argument("--protocols", default="consumer,classic")
    parser.add_argument("--rate", type=int, default=2000, help="records/s produced")
    args = parser.parse_args()
    try:
        run(args)
    except BenchError as exc:
        print(f"group_failover: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
