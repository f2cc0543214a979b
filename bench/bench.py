"""Skiff throughput bench: the raw Redis append ceiling against produce and fetch
through Skiff, in one run.

  (a) raw:      lua/append.lua by EVALSHA from Python (RedisStore.append, the call
                Produce makes), --batch records per call, one client, back to back
  (b) produce:  confluent-kafka through Skiff, acks=1, linger.ms=5, ~--batch records
                per batch, no compression; first produce() to final flush()
  (c) consume:  confluent-kafka through Skiff, assign from offset 0 until all read

Starts its own redis-server (unless --redis-url) and its own Skiff process, both on
free ports, both killed by pid at the end. Progress goes to stderr; the summary to
stdout (with --json: one JSON object on stdout, the summary on stderr).

  .venv/bin/python bench/bench.py [--records N] [--record-bytes 100] [--redis-url URL]
                                  [--retention-bytes N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from sidecar.maintenance.log_bytes import estimate  # noqa: E402
from sidecar.process.embedded_redis import STREAM_NODE_MAX_BYTES  # noqa: E402
from sidecar.storage.store import RedisStore  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
STALL_SECONDS = 60.0  # no progress for this long in (b) or (c): fail
_T0 = time.monotonic()


class BenchError(Exception):
    pass


def progress(message: str) -> None:
    print(f"[{time.monotonic() - _T0:7.1f}s] {message}", file=sys.stderr, flush=True)


# -- processes ----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(
    port: int, proc: subprocess.Popen[bytes], what: str, log: Path | None, timeout: float = 30.0
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(
                f"{what} exited with {proc.returncode} before listening" + _log_tail(log)
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise BenchError(
        f"{what}: nothing listens on port {port} after {timeout:.0f}s" + _log_tail(log)
    )


def _log_tail(log: Path | None, lines: int = 30) -> str:
    if log is None or not log.exists():
        return ""
    tail = log.read_text(errors="replace").splitlines()[-lines:]
    return f"\n--- last lines of {log} ---\n" + "\n".join(tail)


def stop_process(proc: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM) -> None:
    if proc is None or proc.poll() is not None:
        return
    os.kill(proc.pid, sig)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def start_redis(workdir: Path, unix_socket: bool) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise BenchError(
            "redis-server is not installed (apt-get install redis-server), or pass --redis-url"
        )
    port = free_port()
    log = workdir / "redis.log"
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
            "--daemonize",
            "no",
            "--logfile",
            str(log),
            # as the embedded redis-server and the shipped redis.conf files run
            "--stream-node-max-bytes",
            STREAM_NODE_MAX_BYTES,
            *(
                ["--unixsocket", str(workdir / "redis.sock"), "--unixsocketperm", "700"]
                if unix_socket
                else []
            ),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    wait_for_port(port, proc, "redis-server", log)
    if unix_socket:
        return proc, f"unix://{workdir / 'redis.sock'}?db=0"
    return proc, f"redis://127.0.0.1:{port}/0"


def start_skiff(
    redis_url: str,
    log: Path,
    cprofile: Path | None = None,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "sidecar.cli.main"]
    if cprofile is not None:  # the same CLI, in-process under cProfile (CPU clock)
        cmd = [sys.executable, str(ROOT / "bench" / "skiff_cprofile.py"), str(cprofile)]
    cmd += [
        "serve",
        "--redis-url",
        redis_url,
        "--listen",
        f"127.0.0.1:{port}",
        "--http-listen",
        "none",
        *extra,
    ]
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )
    wait_for_port(port, proc, "Skiff", log)
    return proc, f"127.0.0.1:{port}"


def start_py_spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """Sample Skiff with py-spy (collapsed stacks, idle samples included) until stopped."""
    binary = Path(sys.executable).with_name("py-spy")
    if not binary.exists():
        binary = Path(shutil.which("py-spy") or "")
    if not binary.is_file():
        raise BenchError("--py-spy needs py-spy: .venv/bin/pip install py-spy")
    proc = subprocess.Popen(
        [
            str(binary),
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--idle",
            "--nonblocking",
            "--rate",
            "200",
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(out.with_suffix(".log"), "wb"),  # noqa: SIM115
        stdin=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # let it attach before the phase starts
    if proc.poll() is not None:
        raise BenchError(
            f"py-spy exited with {proc.returncode}: "
            + out.with_suffix(".log").read_text(errors="replace")
        )
    return proc


def proc_cpu(pid: int | None) -> float | None:
    """user+system CPU seconds of a process (all its threads), None if unknown."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


# -- Redis-side accounting --------------------------------------------------------------


class RedisProbe:
    """INFO deltas around a phase: CPU seconds of redis-server and commandstats."""

    def __init__(self, url: str) -> None:
        if url.startswith(("redis+cluster://", "rediss+cluster://")):
            # A Redis Cluster: the sums over every node (primaries and replicas).
            seed = url.split("://", 1)[1].split("/", 1)[0].rpartition("@")[2].split(",")[0]
            host, _, port = seed.rpartition(":")
            nodes = redis.Redis(host=host, port=int(port)).execute_command("CLUSTER NODES")
            self.clients = [
                redis.Redis(host=a.split(":")[0], port=int(a.split(":")[1])) for a in nodes
            ]
        else:
            self.clients = [redis.Redis.from_url(url)]

    def snapshot(self) -> dict[str, Any]:
        total = 0.0
        cmd: dict[str, tuple[int, int]] = {}
        for client in self.clients:
            cpu = client.info("cpu")
            total += float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
            for k, v in client.info("commandstats").items():
                calls, usec = cmd.get(k.removeprefix("cmdstat_"), (0, 0))
                cmd[k.removeprefix("cmdstat_")] = (calls + int(v["calls"]), usec + int(v["usec"]))
        return {"cpu": total, "cmd": cmd}

    @staticmethod
    def delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
        cmds = {}
        for name, (calls, usec) in after["cmd"].items():
            c0, u0 = before["cmd"].get(name, (0, 0))
            if calls > c0:
                cmds[name] = {"calls": calls - c0, "usec": usec - u0}
        return {"cpu_s": round(after["cpu"] - before["cpu"], 3), "commands": cmds}


class Phase:
    """Wall clock, client CPU, Skiff CPU and Redis deltas of one phase."""

    def __init__(
        self, probe: RedisProbe, skiff_pid: int | None, py_spy_out: Path | None = None
    ) -> None:
        self.probe = probe
        self.skiff_pid = skiff_pid
        self.py_spy_out = py_spy_out
        self.spy: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Phase:
        if self.py_spy_out is not None and self.skiff_pid is not None:
            self.spy = start_py_spy(self.skiff_pid, self.py_spy_out)
        self.redis0 = self.probe.snapshot()
        self.skiff0 = proc_cpu(self.skiff_pid)
        self.client0 = time.process_time()
        self.wall0 = time.perf_counter()
        return self

    def stop(self) -> None:
        self.seconds = time.perf_counter() - self.wall0
        self.client_cpu = time.process_time() - self.client0
        skiff1 = proc_cpu(self.skiff_pid)
        self.skiff_cpu = None if skiff1 is None or self.skiff0 is None else skiff1 - self.skiff0
        self.redis = RedisProbe.delta(self.redis0, self.probe.snapshot())
        self._stop_spy()

    def _stop_spy(self) -> None:
        if self.spy is not None:
            stop_process(self.spy, signal.SIGINT)
            self.spy = None
            progress(f"py-spy profile of Skiff written to {self.py_spy_out}")

    def __exit__(self, *exc: object) -> None:
        if not hasattr(self, "seconds"):
            self.stop()
        self._stop_spy()

    def result(self, records: int, record_bytes: int) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 3),
            "records_per_s": round(records / self.seconds, 1),
            "mb_per_s": round(records * record_bytes / self.seconds / 1e6, 2),
            "cpu_s": {
                "client": round(self.client_cpu, 3),
                "skiff": None if self.skiff_cpu is None else round(self.skiff_cpu, 3),
                "redis": self.redis["cpu_s"],
            },
            "redis_commands": self.redis["commands"],
        }


# -- (a) raw EVALSHA ceiling ------------------------------------------------------------


async def raw_append(
    url: str,
    topic: str,
    records: int,
    value: bytes,
    batch: int,
    probe: RedisProbe,
    retention_bytes: int = -1,
    fmt: str = "record",
) -> dict[str, Any]:
    store = await RedisStore.connect(url, "bench")  # SCRIPT LOADs lua/append.lua
    configs = {"retention.bytes": str(retention_bytes)} if retention_bytes >= 0 else {}
    configs["skiff.storage.format"] = fmt
    try:
        info = await store.create_topic(topic, 1, configs)
        if info is None:
            raise BenchError(f"topic {topic} exists already")
        step = max(records // 10, batch)
        next_report = step
        done = 0
        with Phase(probe, None) as phase:
            while done < records:
                n = min(batch, records - done)
                ts = int(time.time() * 1000)
                flat: list[Any] = [ts, b"", value, b"", 1] * n  # t, k, v, h, f (key null)
                # ARGV as Produce builds it: count, timestamp type, max ts, its delta,
                # producer id, epoch, base sequence, then the flat records.
                args: list[Any] = [n, 0, ts, 0, -1, -1, -1, *flat]
                size = estimate(flat)  # the batch's bytes, as Produce measures them
                # A batch topic: the records built into one v2 batch, one XADD per call.
                result = await store.append(
                    store.prepare_records(info, 0, args, size, retention_bytes)
                )
                if result.base_offset != done:
                    raise BenchError(
                        f"raw append returned base offset {result.base_offset}, expected {done}"
                    )
                done += n
                if done >= next_report and done < records:
                    progress(f"(a) raw: {done:,}/{records:,} records")
                    next_report += step
            phase.stop()
        out = phase.result(records, len(value))
        evalsha = out["redis_commands"].get("evalsha")
        if evalsha:
            redis_s = evalsha["usec"] / 1e6
            out["redis_evalsha_s"] = round(redis_s, 3)
            out["redis_evalsha_us_per_call"] = round(evalsha["usec"] / evalsha["calls"], 1)
            out["redis_side_records_per_s"] = round(records / redis_s, 1) if redis_s else None
            out["client_side_s"] = round(out["seconds"] - redis_s, 3)  # pack, send, parse
        out["calls"] = -(-records // batch)
        await store.delete_topic(topic)
        return out
    finally:
        await store.close()


# -- (b) produce and (c) consume through Skiff --------------------------------------------


def check_alive(skiff: subprocess.Popen[bytes] | None, log: Path) -> None:
    if skiff is not None and skiff.poll() is not None:
        raise BenchError(f"Skiff exited with {skiff.returncode}" + _log_tail(log))


def create_topic(
    bootstrap: str, topic: str, retention_bytes: int = -1, fmt: str = "record"
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"retention.bytes": str(retention_bytes)} if retention_bytes >= 0 else {}
    config["skiff.storage.format"] = fmt
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=1, config=config)],
        operation_timeout=10,
        request_timeout=15,
    )
    try:
        futures[topic].result(timeout=30)
    except Exception as exc:
        raise BenchError(f"CreateTopics {topic} through Skiff failed: {exc}") from None


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.delete_topics([topic], request_timeout=15)[topic].result(timeout=30)
    except Exception as exc:
        progress(f"warning: could not delete topic {topic}: {exc}")


def producer_config(bootstrap: str, batch: int, record_bytes: int) -> dict[str, Any]:
    batch_bytes = max(1_000_000, batch * (record_bytes + 64) * 2)
    return {
        "bootstrap.servers": bootstrap,
        "acks": 1,
        "linger.ms": 5,
        "batch.num.messages": batch,
        "batch.size": batch_bytes,
        "message.max.bytes": max(1_000_000, batch_bytes + 1024),
        "compression.type": "none",
        "enable.idempotence": False,
        "queue.buffering.max.messages": max(100_000, 4 * batch),
    }


def consumer_config(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-{uuid.uuid4().hex[:8]}",  # required; no group protocol used
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "auto.offset.reset": "earliest",
    }


def warm_up(bootstrap: str, topic: str, value: bytes, batch: int) -> None:
    """One batch produced and read back, untimed: Skiff imports its request schemas
    and fills its caches on first use, which is not what the phases measure."""
    create_topic(bootstrap, topic)
    producer = Producer(producer_config(bootstrap, batch, len(value)))
    for _ in range(batch):
        producer.produce(topic, value, partition=0)
    if producer.flush(30) != 0:
        raise BenchError("warm-up: produce through Skiff did not complete in 30 s")
    consumer = Consumer(consumer_config(bootstrap))
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        count, deadline = 0, time.monotonic() + 30
        while count < batch and time.monotonic() < deadline:
            count += sum(1 for m in consumer.consume(batch, timeout=1.0) if m.error() is None)
    finally:
        consumer.close()
    if count < batch:
        raise BenchError(f"warm-up: read back {count}/{batch} records through Skiff in 30 s")


def produce(
    bootstrap: str,
    topic: str,
    records: int,
    value: bytes,
    batch: int,
    probe: RedisProbe,
    skiff: subprocess.Popen[bytes] | None,
    log: Path,
    py_spy_out: Path | None = None,
) -> dict[str, Any]:
    errors: list[str] = []
    delivered = 0
    batch_sum = 0
    batch_cnt = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal delivered
        if err is not None:
            if len(errors) < 5:
                errors.append(str(err))
        else:
            delivered += 1

    def on_stats(raw: str) -> None:
        nonlocal batch_sum, batch_cnt
        stats = json.loads(raw).get("topics", {}).get(topic, {}).get("batchcnt", {})
        batch_sum += int(stats.get("sum", 0))
        batch_cnt += int(stats.get("cnt", 0))

    producer = Producer(
        {
            **producer_config(bootstrap, batch, len(value)),
            "statistics.interval.ms": 1000,
            "stats_cb": on_stats,
            "on_delivery": on_delivery,
        }
    )
    producer.list_topics(topic, timeout=15)  # metadata and connection, not timed
    step = max(records // 10, 1)
    produce_one = producer.produce
    watch = {"delivered": 0, "since": time.monotonic(), "checked": 0.0}

    def check_progress() -> None:
        """Fail if Skiff died or nothing was acknowledged for STALL_SECONDS."""
        now = time.monotonic()
        if now - watch["checked"] < 1.0:
            return
        watch["checked"] = now
        check_alive(skiff, log)
        if delivered != watch["delivered"]:
            watch["delivered"], watch["since"] = delivered, now
        elif now - watch["since"] > STALL_SECONDS:
            raise BenchError(
                f"produce stalled at {delivered:,}/{records:,} acknowledged" + _log_tail(log)
            )

    with Phase(probe, skiff.pid if skiff else None, py_spy_out) as phase:
        for i in range(records):
            while True:
                try:
                    produce_one(topic, value, partition=0)
                    break
                except BufferError:  # local queue full: let deliveries drain it
                    producer.poll(0.005)
                    check_progress()
            if i % 1000 == 999:
                producer.poll(0)
                if (i + 1) % step == 0:
                    progress(
                        f"(b) produce: {i + 1:,}/{records:,} queued, {delivered:,} acknowledged"
                    )
                    check_progress()
            if errors:
                break
        while not errors:
            if producer.flush(2.0) == 0:
                break
            progress(f"(b) produce: flushing, {delivered:,}/{records:,} acknowledged")
            check_progress()
        phase.stop()
    if errors:
        raise BenchError(f"produce failed: {'; '.join(errors)}" + _log_tail(log))
    if delivered != records:
        raise BenchError(f"only {delivered:,}/{records:,} records were acknowledged")
    producer.poll(1.2)  # one more stats callback for the batch sizes
    out = phase.result(records, len(value))
    out["avg_records_per_batch"] = round(batch_sum / batch_cnt, 1) if batch_cnt else None
    evalsha = out["redis_commands"].get("evalsha")
    if evalsha:
        out["redis_evalsha_s"] = round(evalsha["usec"] / 1e6, 3)
        out["append_calls"] = evalsha["calls"]
    return out


def consume(
    bootstrap: str,
    topic: str,
    records: int,
    value: bytes,
    probe: RedisProbe,
    skiff: subprocess.Popen[bytes] | None,
    log: Path,
    py_spy_out: Path | None = None,
) -> dict[str, Any]:
    consumer = Consumer(consumer_config(bootstrap))
    consumer.list_topics(topic, timeout=15)  # metadata and connection, not timed
    count = 0
    fetch_calls = 0
    step = max(records // 10, 1)
    next_report = step
    last_offset = -1
    try:
        with Phase(probe, skiff.pid if skiff else None, py_spy_out) as phase:
            consumer.assign([TopicPartition(topic, 0, 0)])
            last_change = time.monotonic()
            while count < records:
                msgs = consumer.consume(num_messages=min(10_000, records - count), timeout=1.0)
                if not msgs:
                    check_alive(skiff, log)
                    if time.monotonic() - last_change > STALL_SECONDS:
                        raise BenchError(
                            f"consume stalled at {count:,}/{records:,} records" + _log_tail(log)
                        )
                    continue
                fetch_calls += 1
                last_change = time.monotonic()
                for m in msgs:
                    err = m.error()
                    if err is not None and err.code() != KafkaError._PARTITION_EOF:
                        raise BenchError(f"consume failed: {err}")
                good = [m for m in msgs if m.error() is None]
                if count == 0 and good and (good[0].value() or b"") != value:
                    raise BenchError("the first record read back differs from the one produced")
                count += len(good)
                if good:
                    last_offset = good[-1].offset()
                if count >= next_report and count < records:
                    progress(f"(c) consume: {count:,}/{records:,} records")
                    next_report += step
            phase.stop()
    finally:
        consumer.close()
    if count != records or last_offset != records - 1:
        raise BenchError(
            f"read {count:,} records ending at offset {last_offset}, expected "
            f"{records:,} ending at {records - 1}"
        )
    out = phase.result(records, len(value))
    out["consume_calls"] = fetch_calls
    return out


# -- main ---------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    value = bytes((i * 7 + 13) % 251 for i in range(args.record_bytes))
    workdir = Path(tempfile.mkdtemp(prefix="skiff-bench-"))
    skiff_log = workdir / "skiff.log"
    redis_proc = skiff_proc = None
    run_id = uuid.uuid4().hex[:10]
    failed = True
    load_before = os.getloadavg()[0]
    try:
        if args.redis_url:
            url = args.redis_url
            progress(f"using Redis at {url}")
        else:
            redis_proc, url = start_redis(workdir, args.unix_socket)
            progress(f"started redis-server pid {redis_proc.pid} at {url}")
        probe = RedisProbe(url)
        try:
            version = probe.clients[0].info("server")["redis_version"]
        except redis.RedisError as exc:
            raise BenchError(f"cannot reach Redis at {url}: {exc}") from None

        progress(f"(a) raw EVALSHA append.lua: {args.records:,} records, {args.batch:,} per call")
        raw = asyncio.run(
            raw_append(
                url,
                f"bench-raw-{run_id}",
                args.records,
                value,
                args.batch,
                probe,
                args.retention_bytes,
                args.format,
            )
        )
        progress(f"(a) done: {raw['records_per_s']:,.0f} records/s")

        skiff_proc, bootstrap = start_skiff(url, skiff_log, args.cprofile)
        progress(f"started Skiff pid {skiff_proc.pid} on {bootstrap} (log {skiff_log})")
        warm_up(bootstrap, f"bench-warmup-{run_id}", value, args.batch)
        progress("warm-up done (one batch produced and read back through Skiff, untimed)")
        topic = f"bench-{run_id}"
        create_topic(bootstrap, topic, args.retention_bytes, args.format)
        progress(f"(b) produce through Skiff to {topic}: {args.records:,} records")
        prod = produce(
            bootstrap,
            topic,
            args.records,
            value,
            args.batch,
            probe,
            skiff_proc,
            skiff_log,
            args.py_spy and args.py_spy / "produce.txt",
        )
        progress(f"(b) done: {prod['records_per_s']:,.0f} records/s")

        cons: dict[str, Any] | None = None
        if args.retention_bytes < 0:
            progress(f"(c) consume through Skiff from {topic}, offset 0")
            cons = consume(
                bootstrap,
                topic,
                args.records,
                value,
                probe,
                skiff_proc,
                skiff_log,
                args.py_spy and args.py_spy / "fetch.txt",
            )
            progress(f"(c) done: {cons['records_per_s']:,.0f} records/s")
        else:
            progress("(c) skipped: retention.bytes removed the start of the log")
        if args.redis_url:
            delete_topic(bootstrap, topic)
            delete_topic(bootstrap, f"bench-warmup-{run_id}")
        failed = False
    finally:
        stop_process(skiff_proc)
        if skiff_proc is not None and args.cprofile:
            progress(f"cProfile stats of Skiff written to {args.cprofile}")
        stop_process(redis_proc)
        if skiff_proc is not None or redis_proc is not None:
            progress(
                "stopped "
                + ", ".join(
                    f"{name} pid {p.pid}"
                    for name, p in (("Skiff", skiff_proc), ("redis-server", redis_proc))
                    if p
                )
            )
        if (failed and any(workdir.iterdir())) or args.keep_logs:
            progress(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    cpus = os.cpu_count() or 0
    return {
        "records": args.records,
        "record_bytes": args.record_bytes,
        "batch_records": args.batch,
        "storage_format": args.format,
        "partitions": 1,
        "cpus": cpus,
        "shared_cpus_note": (
            f"{cpus} CPU(s) shared by redis-server, Skiff and the bench "
            "client: the figures are not isolated"
        ),
        "loadavg_1m": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        "redis_version": version,
        "own_redis": not args.redis_url,
        "redis_transport": "unix" if url.startswith("unix:") else "tcp",
        "raw": raw,
        "produce": prod,
        "consume": cons,
        "ratio_produce_to_raw": round(prod["records_per_s"] / raw["records_per_s"], 3),
        "ratio_consume_to_raw": (
            round(cons["records_per_s"] / raw["records_per_s"], 3) if cons else None
        ),
        "retention_bytes": args.retention_bytes,
    }


def _cpu(phase: dict[str, Any]) -> str:
    c = phase["cpu_s"]
    parts = [f"redis {c['redis']:.2f}"]
    if c["skiff"] is not None:
        parts.append(f"skiff {c['skiff']:.2f}")
    parts.append(f"client {c['client']:.2f}")
    return "CPU s: " + ", ".join(parts) + f" in {phase['seconds']:.2f} s wall"


def summary(r: dict[str, Any]) -> str:
    raw, prod, cons = r["raw"], r["produce"], r["consume"]
    lines = [
        f"Skiff bench: {r['records']:,} records x {r['record_bytes']} B values, "
        f"{r['batch_records']:,} records per batch, 1 partition, Redis {r['redis_version']} "
        f"over {r['redis_transport'].upper()}",
        f"NOTE: {r['shared_cpus_note']}; 1-minute load average "
        f"{r['loadavg_1m']['before']:.2f} before, {r['loadavg_1m']['after']:.2f} after "
        "(the latter includes the bench's own processes).",
        "",
        f"(a) raw EVALSHA append.lua  {raw['records_per_s']:>12,.0f} records/s "
        f"{raw['mb_per_s']:>8.2f} MB/s   ({raw['calls']:,} calls)",
    ]
    if "redis_evalsha_s" in raw:
        lines.append(
            f"      Redis-side evalsha time {raw['redis_evalsha_s']:.2f} s "
            f"({raw['redis_evalsha_us_per_call']:,.0f} us/call) = "
            f"{raw['redis_side_records_per_s']:,.0f} records/s if Redis were "
            "the only cost"
        )
        lines.append(
            f"      the other {raw['client_side_s']:.2f} s of the wall time: redis-py "
            "packing the command, the socket and the reply (one client, serial)"
        )
    lines.append(f"      {_cpu(raw)}")
    lines.append(
        f"(b) produce via Skiff       {prod['records_per_s']:>12,.0f} records/s "
        f"{prod['mb_per_s']:>8.2f} MB/s   (b)/(a) = {r['ratio_produce_to_raw']:.2f}"
    )
    batch = prod.get("avg_records_per_batch")
    extra = f"avg {batch:,.0f} records per producer batch" if batch else ""
    if "append_calls" in prod:
        extra += (
            f", {prod['append_calls']:,} append calls, "
            f"Redis-side evalsha {prod['redis_evalsha_s']:.2f} s"
        )
    if extra:
        lines.append(f"      {extra.lstrip(', ')}")
    lines.append(f"      {_cpu(prod)}")
    if cons is None:
        lines.append(f"(c) consume skipped: retention.bytes={r['retention_bytes']} on (a) and (b)")
    else:
        lines.append(
            f"(c) consume via Skiff       {cons['records_per_s']:>12,.0f} records/s "
            f"{cons['mb_per_s']:>8.2f} MB/s   (c)/(a) = {r['ratio_consume_to_raw']:.2f}"
        )
        lines.append(f"      {_cpu(cons)}")
    lines.append("MB/s counts record values only (records x record bytes / 1e6).")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--records", type=int, default=300_000, help="records per phase (default 300,000)"
    )
    parser.add_argument(
        "--record-bytes", type=int, default=100, help="value size of each record (default 100)"
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=1000,
        help="records per EVALSHA in (a) and per producer batch in (b) (default 1000)",
    )
    parser.add_argument(
        "--redis-url", default=None, help="use this Redis instead of starting a redis-server"
    )
    parser.add_argument(
        "--unix-socket",
        action="store_true",
        help="connect the bench and Skiff to the started redis-server over a "
        "Unix socket instead of TCP (ignored with --redis-url)",
    )
    parser.add_argument(
        "--retention-bytes",
        type=int,
        default=-1,
        help="retention.bytes of the topics of (a) and (b), so every append "
        "also trims (size retention); skips (c). Default -1: off",
    )
    parser.add_argument(
        "--format",
        choices=("batch", "record"),
        default="record",
        help="skiff.storage.format of the topics of (a) and (b); for batch, "
        "(a) appends each call's records as one batch (one XADD)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the results as one JSON object on stdout"
    )
    parser.add_argument(
        "--keep-logs",
        action="store_true",
        help="keep the temporary directory with skiff.log and redis.log",
    )
    parser.add_argument(
        "--py-spy",
        type=Path,
        default=None,
        metavar="DIR",
        help="profile Skiff with py-spy during (b) and (c): collapsed stacks "
        "in DIR/produce.txt and DIR/fetch.txt (see bench/profile_summary.py); "
        "sampling costs Skiff some speed, so do not compare those figures",
    )
    parser.add_argument(
        "--cprofile",
        type=Path,
        default=None,
        metavar="FILE",
        help="run Skiff under cProfile (CPU clock, bench/skiff_cprofile.py) "
        "and write its stats to FILE when it is stopped; slows Skiff a lot",
    )
    args = parser.parse_args(argv)
    if args.cprofile:
        args.cprofile = args.cprofile.resolve()
    if args.py_spy:
        args.py_spy.mkdir(parents=True, exist_ok=True)
    if args.records < 1 or args.record_bytes < 0 or args.batch < 1:
        parser.error("--records and --batch must be >= 1, --record-bytes >= 0")
    return run_and_report(run, summary, args)


def run_and_report(
    run: Callable[[argparse.Namespace], Any],
    render: Callable[[Any], str],
    args: argparse.Namespace,
) -> int:
    """Run a bench; print its summary (with --json: the summary to stderr, one JSON
    object to stdout) or one `bench FAILED: ...` line. The exit status."""
    try:
        results = run(args)
    except BenchError as exc:
        print(f"bench FAILED: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a client library or Redis error: say which, then fail
        print(f"bench FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    text = render(results)
    if args.json:
        print(text, file=sys.stderr)
        print(json.dumps(results))
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
