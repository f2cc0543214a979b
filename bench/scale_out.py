"""Scale-out bench: records/s produced and consumed through 1, 2 and 4 sidecar
processes (`skiff serve --workers N`) on one redis-server, against the Redis ceiling
measured in the same run by the same number of client processes calling Redis
directly: lua/append.lua by EVALSHA (RedisStore.append, the call Produce makes) and
XRANGE in MULTI/EXEC (RedisStore.read, the call Fetch makes), with the same batch size.

Every phase runs --clients client processes at once (started together after their
imports), each on its own partitions of one --partitions topic: producers are
confluent-kafka (acks=1, linger.ms=5, --batch records per batch, no compression),
consumers are confluent-kafka with assign() from offset 0 until every record is read.
A phase's rate is all its records over the time from the common start to the last
client's end. Every consumer checks it read every record of its partitions.

  .venv/bin/python bench/scale_out.py [--sidecars 1,2,4] [--clients 4] [--records 100000]
                                      [--record-bytes 100] [--batch 1000] [--partitions 8]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def free_port(span: int = 1) -> int:
    """A port with `span` free ports from it (for --workers)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port + span < 65536 and all(_free(port + i) for i in range(1, span)):
            return port


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def my_partitions(index: int, clients: int, partitions: int) -> list[int]:
    return [p for p in range(partitions) if p % clients == index]


# -- client processes (spawned) -------------------------------------------------------


def _wait(start_at: float) -> None:
    time.sleep(max(start_at - time.time(), 0))


def produce_client(
    bootstrap: str, topic: str, parts: list[int], n: int, size: int, batch: int, start_at: float
) -> tuple[float, float, int]:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "batch.num.messages": batch,
            "batch.size": max(1_000_000, batch * (size + 64) * 2),
            "compression.type": "none",
            "enable.idempotence": False,
            "queue.buffering.max.messages": max(100_000, 4 * batch),
        }
    )
    producer.list_topics(topic, timeout=15)
    failed: list[str] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    value = b"x" * size
    _wait(start_at)
    started = time.time()
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value, partition=parts[i % len(parts)], on_delivery=report)
                break
            except BufferError:
                producer.poll(0.001)
    left = producer.flush(120)
    if left or failed:
        raise RuntimeError(f"{left} undelivered, errors {failed[:3]}")
    return started, time.time(), n


def consume_client(
    bootstrap: str, topic: str, parts: list[int], n: int, start_at: float
) -> tuple[float, float, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
        }
    )
    consumer.list_topics(topic, timeout=15)
    _wait(start_at)
    started = time.time()
    consumer.assign([TopicPartition(topic, p, 0) for p in parts])
    got = 0
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        for m in consumer.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
    ended = time.time()
    consumer.close()
    if got != n:
        raise RuntimeError(f"consumed {got} of {n}")
    return started, ended, got


def raw_client(
    url: str, topic: str, parts: list[int], n: int, size: int, batch: int, start_at: float
) -> tuple[float, float, float, float, int]:
    """The Redis ceiling: append n records with lua/append.lua, then read them back with
    XRANGE (MULTI/EXEC), `batch` records per call; (start, end) of both."""
    from sidecar.maintenance.log_bytes import estimate
    from sidecar.storage.store import RedisStore

    async def work() -> tuple[float, float, float, float, int]:
        store = await RedisStore.connect(url, "bench")
        value = b"x" * size
        try:
            _wait(start_at)
            a0 = time.time()
            done = 0
            while done < n:
                k = min(batch, n - done)
                ts = int(time.time() * 1000)
                flat: list[Any] = [ts, b"", value, b"", 1] * k
                args: list[Any] = [k, 0, ts, 0, -1, -1, -1, *flat]
                p = parts[(done // batch) % len(parts)]
                await store.append(store.prepare_append(topic, p, args, estimate(flat), -1))
                done += k
            a1 = time.time()
            offsets = dict.fromkeys(parts, 0)
            read = 0
            while read < n:
                for p in parts:
                    [r] = await store.read([(topic, p, offsets[p], batch)])
                    offsets[p] += len(r.entries)
                    read += len(r.entries)
            return a0, a1, a1, time.time(), read
        finally:
            await store.close()

    return asyncio.run(work())


# -- phases ---------------------------------------------------------------------------


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of live processes so far."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


class Cpu:
    """CPU seconds of Redis, the sidecar processes and the client processes over a phase."""

    def __init__(self, redis: int, sidecars: list[int], clients: list[int]) -> None:
        self.groups = (redis and [redis], sidecars, clients)

    def __enter__(self) -> Cpu:
        self.before = [cpu_seconds(g) for g in self.groups]
        return self

    def __exit__(self, *exc: object) -> None:
        self.spent = "/".join(
            f"{cpu_seconds(g) - b:.1f}" for g, b in zip(self.groups, self.before, strict=True)
        )


def rate(results: list[tuple[float, ...]]) -> float:
    """All records over the time from the first client's start to the last one's end
    (a client whose imports took longer than the common start delay starts late)."""
    total = sum(r[-1] for r in results)
    return total / (max(r[1] for r in results) - min(r[0] for r in results))


def pool_pids(pool: Any) -> list[int]:
    return [p.pid for p in pool._pool]


def run_raw(pool: Any, args: argparse.Namespace, url: str, redis_pid: int) -> tuple[Any, ...]:
    from sidecar.storage.store import RedisStore

    topic = f"raw-{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        store = await RedisStore.connect(url, "bench")
        await store.create_topic(topic, args.partitions)
        await store.close()

    asyncio.run(create())
    start_at = time.time() + 5
    jobs = [
        (url, topic, my_partitions(i, args.clients, args.partitions), args.records,
         args.record_bytes, args.batch, start_at)
        for i in range(args.clients)
    ]  # fmt: skip
    with Cpu(redis_pid, [], pool_pids(pool)) as cpu:
        results = pool.starmap(raw_client, jobs)
    appended = rate([(r[0], r[1], r[-1]) for r in results])
    read_s = max(r[3] for r in results) - min(r[2] for r in results)
    return appended, sum(r[-1] for r in results) / read_s, cpu.spent


def run_sidecars(
    pool: Any, args: argparse.Namespace, url: str, workers: int, work: Path, redis_pid: int
) -> tuple[Any, ...]:
    from confluent_kafka.admin import AdminClient, NewTopic

    port = free_port(workers)
    log = work / f"skiff-{workers}.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sidecar.cli.main", "serve", "--redis-url", url,
             "--listen", f"127.0.0.1:{port}", "--http-listen", "none",
             "--workers", str(workers), "--log-level", "WARNING"],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        for i in range(workers):
            wait_for_port(port + i, proc)
        bootstrap = f"127.0.0.1:{port}"
        topic = f"scale-{workers}-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, args.partitions, -1)])[topic].result(30)
        # Every worker registered and in Metadata before the clock starts.
        deadline = time.monotonic() + 30
        while len(admin.list_topics(timeout=10).brokers) < workers:
            if time.monotonic() > deadline:
                raise RuntimeError("not every worker is in Metadata")
            time.sleep(0.2)
        leaders = {p.leader for p in admin.list_topics(topic).topics[topic].partitions.values()}
        parts = [my_partitions(i, args.clients, args.partitions) for i in range(args.clients)]
        start_at = time.time() + 5
        jobs = [
            (bootstrap, topic, parts[i], args.records, args.record_bytes, args.batch, start_at)
            for i in range(args.clients)
        ]
        import psutil

        sidecars = [proc.pid] + [c.pid for c in psutil.Process(proc.pid).children()]
        with Cpu(redis_pid, sidecars, pool_pids(pool)) as cpu_p:
            produced = rate(pool.starmap(produce_client, jobs))
        start_at = time.time() + 5
        jobs2 = [(bootstrap, topic, parts[i], args.records, start_at) for i in range(args.clients)]
        with Cpu(redis_pid, sidecars, pool_pids(pool)) as cpu_c:
            consumed = rate(pool.starmap(consume_client, jobs2))
        return produced, consumed, len(leaders), cpu_p.spent, cpu_c.spent
    finally:
        stop(proc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sidecars", default="1,2,4", help="sidecar process counts")
    parser.add_argument("--clients", type=int, default=4, help="client processes per phase")
    parser.add_argument("--records", type=int, default=100_000, help="records per client")
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.sidecars.split(",")]
    binary = shutil.which("redis-server")
    if binary is None:
        print("redis-server is not installed", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="skiff-scale-") as tmp:
        work = Path(tmp)
        rport = free_port()
        redis = subprocess.Popen(
            [binary, "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", tmp, "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        url = f"redis://127.0.0.1:{rport}/0"
        rows: list[tuple[str, float, float, str, str, str]] = []
        try:
            wait_for_port(rport, redis)
            ctx = multiprocessing.get_context("spawn")
            with ctx.Pool(args.clients) as pool:
                progress(f"Redis ceiling: {args.clients} clients, lua/append.lua and XRANGE")
                appended, read, cpu = run_raw(pool, args, url, redis.pid)
                rows.append(("Redis ceiling (no sidecar)", appended, read, "-", cpu, ""))
                for n in counts:
                    progress(f"{n} sidecar process(es): produce, then consume")
                    produced, consumed, leading, cpu_p, cpu_c = run_sidecars(
                        pool, args, url, n, work, redis.pid
                    )
                    rows.append(
                        (f"{n} sidecar process(es)", produced, consumed, str(leading), cpu_p, cpu_c)
                    )
        finally:
            stop(redis)
    total = args.clients * args.records
    print(
        f"\n{args.clients} client processes x {args.records:,} records of {args.record_bytes} B "
        f"({total:,} per phase), batches of {args.batch}, {args.partitions} partitions, "
        f"{os.cpu_count()} CPUs\n"
    )
    print(
        "| setup | produced records/s | consumed records/s | leaders | produce / ceiling | "
        "consume / ceiling | CPU s produce: redis/sidecars/clients | CPU s consume |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---|")
    ceiling, read_ceiling = rows[0][1], rows[0][2]
    for name, produced, consumed, leaders, cpu_p, cpu_c in rows:
        ratios = ("-", "-") if leaders == "-" else (
            f"{produced / ceiling:.0%}", f"{consumed / read_ceiling:.0%}"
        )  # fmt: skip
        print(
            f"| {name} | {produced:,.0f} | {consumed:,.0f} | {leaders} | {ratios[0]} | "
            f"{ratios[1]} | {cpu_p} | {cpu_c or '(append and read: one column)'} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
