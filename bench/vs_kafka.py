"""Skiff against a real Apache Kafka broker, same client load, same run.

Starts a private redis-server (no persistence unless --redis-aof), a Skiff sidecar on it
and a single-node KRaft Apache Kafka broker (jars from Maven Central, cached in
~/.cache/skiff, started by tools/kafka_reference), all on 127.0.0.1 free ports. For each
partition count (1, 8) and compression (none, zstd) it runs, on both brokers:

  produce-acks1     confluent-kafka producer, acks=1, ~--batch records per batch
  produce-acksall   the same with acks=all and enable.idempotence=true
  produce-txn       the same in transactions of --txn-records records (transactional.id)
  consume           a consumer assigned every partition from offset 0 to the end
                    (librdkafka's default isolation.level, read_committed)
  consume-uncommitted  the same with isolation.level=read_uncommitted

and prints throughput, broker CPU per record (/proc utime+stime over the timed phase:
Skiff = sidecar and its children + redis-server, Kafka = the JVM) and stored bytes per
record, each with the Skiff/Kafka ratio, and records per stored batch on each (Kafka:
the .log batch headers; Skiff: stream entries), which decides the compression ratio.
The timed phase runs from the first record sent (or assigned to read) to the last one
acknowledged (or read): the client's start-up and close are not counted.
Progress goes to stderr; the table to stdout (with --json: one JSON object on stdout,
the table on stderr).

  .venv/bin/python bench/vs_kafka.py [--records N] [--rows GLOB,...] [--json]
                                     [--format default|batch|record|both] [--redis-aof]
                                     [--repeat N]
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import redis  # noqa: E402
from confluent_kafka import (  # noqa: E402
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench import (  # noqa: E402
    CLK_TCK,
    STALL_SECONDS,
    BenchError,
    _log_tail,
    check_alive,
    consumer_config,
    producer_config,
    progress,
    run_and_report,
    start_redis,
    start_skiff,
    stop_process,
)
from sidecar.storage.keys import all_partition_keys  # noqa: E402

KAFKA_VERSION = "4.2.0"  # the 4.x broker tests/test_authorization_reference.py runs
PARTITIONS = (1, 8)
COMPRESSIONS = ("none", "zstd")
KINDS = ("produce-acks1", "produce-acksall", "produce-txn", "consume", "consume-uncommitted")
TXN_RECORDS = 1000  # records per transaction of produce-txn
CLIENT_LOG_LEVEL = 3  # librdkafka: errors only (delivery errors come by callback anyway)
WARM_RECORDS = 20_000  # per broker and compression, untimed: JVM JIT, Skiff's first use
FORMAT_CONFIG = "skiff.storage.format"


# -- records ------------------------------------------------------------------------


def make_values(count: int, size: int) -> list[bytes]:
    """Deterministic JSON-like values of exactly `size` bytes: compressible the way event
    payloads are (repeated field names, small varying numbers), not random bytes."""
    actions = ("view", "click", "add_to_cart", "purchase", "search")
    pad = "lorem-ipsum-dolor-sit-amet-" * (size // 27 + 1)
    out = []
    for i in range(count):
        text = (
            f'{{"id":{i},"user":"u{(i * 7919) % 5000:04d}","act":"{actions[i % 5]}",'
            f'"ts":{1764000000000 + i * 3},"ok":{"true" if i % 3 else "false"},"p":"'
        )
        text = (text + pad)[: max(size - 2, 0)] + '"}'
        out.append(text.encode()[:size])
    return out


def partition_of(index: int, batch: int, partitions: int) -> int:
    """Records go to partitions in runs of `batch`, so each producer batch is ~full."""
    return (index // batch) % partitions


# -- CPU -----------------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def tree_cpu(pid: int) -> float:
    """user+system CPU seconds of a process and its live descendants (Skiff's --workers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry))  # ppid
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        fields = _stat(p)
        if fields is not None:
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
        todo.extend(children.get(p, []))
    return total


# -- brokers ----------------------------------------------------------------------------


@dataclass
class Broker:
    name: str  # "skiff" or "kafka"
    bootstrap: str
    cpu_pids: dict[str, int]  # part name -> pid whose tree's CPU counts
    alive: Callable[[], None]  # raises BenchError if a process died
    stored_bytes: Callable[[str, int], int]  # (topic, partitions) -> bytes at rest
    # (topic, partitions) -> (stored batches, their bytes): the producer's batch shape
    stored_batches: Callable[[str, int], tuple[int, int]]
    topic_config: dict[str, str] = field(default_factory=dict)
    tag: str = ""  # tells Skiff's formats apart (one server, distinct topics)

    def cpu(self) -> dict[str, float]:
        return {part: tree_cpu(pid) for part, pid in self.cpu_pids.items()}


def redis_stored_bytes(client: redis.Redis, topic: str, partitions: int) -> int:
    """MEMORY USAGE (all samples) of every key of the topic's partitions: the stream,
    its meta hash, time index and producer state (sidecar/storage/keys.py)."""
    total = 0
    for p in range(partitions):
        for key in all_partition_keys(topic, p):
            total += int(client.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0") or 0)
    return total


def redis_stored_batches(client: redis.Redis, topic: str, partitions: int) -> tuple[int, int]:
    """Stream entries and the bytes of their values: on a `batch` topic one entry per
    stored batch, field `b` its bytes; on a `record` topic one entry per record."""
    entries = payload = 0
    for p in range(partitions):
        start = "-"
        while True:
            chunk = client.xrange(f"skiff:{{{topic}/{p}}}:log", start, "+", count=500)
            for _id, fields in chunk:
                entries += 1
                payload += sum(len(v) for v in fields.values())
            if len(chunk) < 500:
                break
            start = "(" + chunk[-1][0].decode()
    return entries, payload


def kafka_log_batches(data: bytes) -> tuple[int, int]:
    """Batches in a .log segment and their bytes, from the batch headers (baseOffset
    int64, batchLength int32 counting from the next byte); stops at a torn tail."""
    batches = pos = 0
    while pos + 12 <= len(data):
        end = pos + 12 + int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        if end > len(data) or end < pos + 12:
            break
        batches, pos = batches + 1, end
    return batches, pos


def kafka_stored_batches(log_dir: Path, topic: str, partitions: int) -> tuple[int, int]:
    batches = size = 0
    for p in range(partitions):
        for f in (log_dir / f"{topic}-{p}").glob("*.log"):
            b, n = kafka_log_batches(f.read_bytes())
            batches, size = batches + b, size + n
    return batches, size


def kafka_stored_bytes(log_dir: Path, topic: str, partitions: int) -> int:
    """Bytes of the .log segment files of the topic's partition directories (the
    preallocated index files are left out)."""
    return sum(
        f.stat().st_size
        for p in range(partitions)
        for f in (log_dir / f"{topic}-{p}").glob("*.log")
    )


def enable_aof(client: redis.Redis) -> None:
    """appendonly yes, appendfsync everysec on the running server; waits for the initial
    rewrite so it does not land in a timed phase."""
    client.config_set("appendfsync", "everysec")
    client.config_set("appendonly", "yes")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        info = client.info("persistence")
        if not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled"):
            return
        time.sleep(0.1)
    raise BenchError("redis-server did not finish its first AOF rewrite in 60 s")


@contextlib.contextmanager
def started_kafka(work: Path) -> Iterator[tuple[int, subprocess.Popen[bytes], Path]]:
    """A single-node KRaft Kafka (tools/kafka_reference's settings: -Xmx1g, 2 network and
    2 I/O threads), stopped by pid on the way out; yields port, JVM process, log dir."""
    sys.path.insert(0, str(ROOT / "tools"))
    # kafka_reference prints its progress to stdout, which --json keeps for the result
    with contextlib.redirect_stdout(sys.stderr):
        try:
            import kafka_reference
        except ImportError as exc:
            raise BenchError(f"cannot import tools/kafka_reference: {exc}") from None
        kafka_reference.broker.say = progress  # one clock and one stream for all progress
        with contextlib.ExitStack() as stack:
            try:
                port, jvm = stack.enter_context(
                    kafka_reference.running_kafka(KAFKA_VERSION, work, 180.0)
                )
            except (RuntimeError, subprocess.SubprocessError) as exc:
                raise BenchError(f"Kafka {KAFKA_VERSION} did not start: {exc}") from None
            yield port, jvm, work / "kafka-logs"


# -- topics ---------------------------------------------------------------------------


def _create(broker: Broker, topic: str, partitions: int, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": CLIENT_LOG_LEVEL})
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config)
    admin.create_topics([new], operation_timeout=10, request_timeout=15)[topic].result(timeout=30)


def create_topic(broker: Broker, topic: str, partitions: int, config: dict[str, str]) -> None:
    try:
        _create(broker, topic, partitions, config)
    except KafkaException as exc:
        raise BenchError(f"CreateTopics {topic} on {broker.name} failed: {exc}") from None


def format_refusal(broker: Broker, topic: str, config: dict[str, str]) -> str | None:
    """None if Skiff creates a topic with `config`, else its error (INVALID_CONFIG, ...)."""
    try:
        _create(broker, topic, 1, config)
    except KafkaException as exc:
        err = exc.args[0]
        return f"{err.name()}: {err.str()}" if isinstance(err, KafkaError) else str(exc)
    return None


# -- phases ---------------------------------------------------------------------------


@dataclass
class Phase:
    seconds: float
    cpu: dict[str, float]
    verified: int


class Clock:
    """The timed part of a client run: started once the client is set up (connections,
    metadata, producer id), stopped before it closes, so neither is counted."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.cpu0: dict[str, float] = {}
        self.wall0 = 0.0
        self.phase: Phase | None = None

    def start(self) -> None:
        self.cpu0 = self.broker.cpu()
        self.wall0 = time.perf_counter()

    def stop(self, verified: int) -> None:
        seconds = time.perf_counter() - self.wall0
        cpu1 = self.broker.cpu()
        self.phase = Phase(seconds, {k: cpu1[k] - self.cpu0[k] for k in self.cpu0}, verified)


def timed(broker: Broker, body: Callable[[Clock], object]) -> Phase:
    clock = Clock(broker)
    body(clock)
    if clock.phase is None:
        raise BenchError(f"internal: a timed run on {broker.name} did not stop its clock")
    return clock.phase


def produce(
    broker: Broker,
    topic: str,
    values: list[bytes],
    partitions: int,
    batch: int,
    compression: str,
    idempotent: bool,
    txn_records: int = 0,
    clock: Clock | None = None,
) -> int:
    """Produce every value, flush, and return how many were acknowledged (all, or fail).
    txn_records > 0: in transactions of that many records, each committed. `clock` runs
    from the first record to the last acknowledgement (or commit)."""
    errors: list[str] = []
    acked = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        elif len(errors) < 5:
            errors.append(str(err))

    config = producer_config(broker.bootstrap, batch, len(values[0]) if values else 0)
    config.update(
        {
            "acks": "all" if idempotent else 1,
            "enable.idempotence": idempotent,
            "compression.type": compression,
            "on_delivery": on_delivery,
            "log_level": CLIENT_LOG_LEVEL,
        }
    )
    if txn_records:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    producer = Producer(config)
    producer.list_topics(topic, timeout=15)  # metadata and connections before the clock
    if txn_records:
        producer.init_transactions(30)
    records = len(values)
    if clock is not None:
        clock.start()
    watch = {"acked": 0, "since": time.monotonic()}

    def check_progress() -> None:
        broker.alive()
        now = time.monotonic()
        if acked != watch["acked"]:
            watch["acked"], watch["since"] = acked, now
        elif now - watch["since"] > STALL_SECONDS:
            raise BenchError(f"produce to {broker.name} stalled at {acked:,}/{records:,} acked")

    send = producer.produce
    for i, value in enumerate(values):
        if txn_records and i % txn_records == 0:
            if i:
                producer.commit_transaction(60)
            producer.begin_transaction()
        part = (i // batch) % partitions
        while True:
            try:
                send(topic, value, partition=part)
                break
            except BufferError:  # local queue full: let deliveries drain it
                producer.poll(0.005)
                check_progress()
        if i % 1000 == 999:
            producer.poll(0)
            if errors:
                break
    while not errors and producer.flush(2.0) != 0:
        check_progress()
    if txn_records and not errors:
        producer.commit_transaction(60)
    if errors:
        raise BenchError(f"produce to {broker.name} failed: {'; '.join(errors)}")
    if clock is not None:
        clock.stop(acked)
    return acked


def high_watermarks(broker: Broker, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({**consumer_config(broker.bootstrap), "log_level": CLIENT_LOG_LEVEL})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
            for p in range(partitions)
        ]
    finally:
        consumer.close()


def expected_counts(records: int, batch: int, partitions: int) -> list[int]:
    counts = [0] * partitions
    for start in range(0, records, batch):
        counts[partition_of(start, batch, partitions)] += min(batch, records - start)
    return counts


def transaction_markers(records: int, batch: int, partitions: int, txn_records: int) -> list[int]:
    """COMMIT markers per partition: one per transaction that wrote to it."""
    markers = [0] * partitions
    for start in range(0, records, txn_records):
        end = min(start + txn_records, records)
        touched = {partition_of(i, batch, partitions) for i in range(start, end, batch)}
        touched.add(partition_of(end - 1, batch, partitions))
        for p in touched:
            markers[p] += 1
    return markers


def consume(
    broker: Broker,
    topic: str,
    values: list[bytes],
    partitions: int,
    batch: int,
    isolation: str = "read_committed",
    clock: Clock | None = None,
) -> int:
    """Read every partition from offset 0 to the end; checks the count per partition and
    each partition's first value. Returns the records read. `clock` runs from the
    assignment to the last record (the consumer's start and close not counted)."""
    expected = expected_counts(len(values), batch, partitions)
    consumer = Consumer(
        {
            **consumer_config(broker.bootstrap),
            "log_level": CLIENT_LOG_LEVEL,
            "isolation.level": isolation,
        }
    )
    consumer.list_topics(topic, timeout=15)
    counts = [0] * partitions
    total, records = 0, len(values)
    try:
        if clock is not None:
            clock.start()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        last_change = time.monotonic()
        while total < records:
            msgs = consumer.consume(num_messages=10_000, timeout=1.0)
            if not msgs:
                broker.alive()
                if time.monotonic() - last_change > STALL_SECONDS:
                    raise BenchError(
                        f"consume from {broker.name} stalled at {total:,}/{records:,} records"
                    )
                continue
            last_change = time.monotonic()
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise BenchError(f"consume from {broker.name} failed: {err}")
                p = m.partition()
                if counts[p] == 0 and m.value() != values[p * batch]:
                    raise BenchError(f"{broker.name}: partition {p}'s first value differs")
                counts[p] += 1
                total += 1
        if clock is not None:
            clock.stop(total)
    finally:
        consumer.close()
    if counts != expected:
        raise BenchError(f"{broker.name}: read {counts} records per partition, expected {expected}")
    return total


# -- the run ------------------------------------------------------------------------------


@dataclass
class Case:
    partitions: int
    compression: str
    kind: str

    @property
    def id(self) -> str:
        return f"p{self.partitions}-{self.compression}-{self.kind}"


def selected_cases(patterns: list[str]) -> list[Case]:
    cases = [Case(p, c, k) for p in PARTITIONS for c in COMPRESSIONS for k in KINDS]
    if not patterns:
        return cases
    return [c for c in cases if any(fnmatch.fnmatchcase(c.id, pat) for pat in patterns)]


def measure(
    broker: Broker,
    case: Case,
    values: list[bytes],
    batch: int,
    run_id: str,
    prepared: dict[tuple[str, int, str], str],
    rep: int = 0,
) -> dict[str, Any]:
    """One row on one broker. `prepared` remembers each (broker, partitions, compression)
    topic already filled, so consume reads what a produce row wrote (or fills one untimed).
    `rep` > 0: a repetition, which produces to a topic of its own."""
    records = len(values)
    slot = (broker.name + broker.tag, case.partitions, case.compression)
    base = f"vk-{run_id}-{broker.name}{broker.tag}-p{case.partitions}-{case.compression}"
    out: dict[str, Any] = {}
    if case.kind.startswith("consume"):
        topic = prepared.get(slot)
        if topic is None:
            topic = f"{base}-fill"
            create_topic(broker, topic, case.partitions, broker.topic_config)
            # idempotent: without it a retried batch may land after the next one, and the
            # check of each partition's first value fails (seen on Kafka under load)
            produce(broker, topic, values, case.partitions, batch, case.compression, True)
            prepared[slot] = topic
        isolation = "read_uncommitted" if case.kind == "consume-uncommitted" else "read_committed"
        phase = timed(
            broker,
            lambda clock: consume(broker, topic, values, case.partitions, batch, isolation, clock),
        )
    else:
        topic = f"{base}-{case.kind}" + (f"-r{rep}" if rep else "")
        create_topic(broker, topic, case.partitions, broker.topic_config)
        idempotent = case.kind in ("produce-acksall", "produce-txn")
        txn = TXN_RECORDS if case.kind == "produce-txn" else 0
        phase = timed(
            broker,
            lambda clock: produce(
                broker,
                topic,
                values,
                case.partitions,
                batch,
                case.compression,
                idempotent,
                txn,
                clock,
            ),
        )
        marks = high_watermarks(broker, topic, case.partitions)
        expected = expected_counts(records, batch, case.partitions)
        if txn:
            markers = transaction_markers(records, batch, case.partitions, txn)
            expected = [e + m for e, m in zip(expected, markers, strict=True)]
        if marks != expected:
            raise BenchError(f"{broker.name}: {topic} holds {marks} offsets per partition")
        phase.verified = records if txn else sum(marks)
        if case.kind == "produce-acksall":  # in order: what consume checks (its fill above)
            prepared[slot] = topic
        stored = broker.stored_bytes(topic, case.partitions)
        out["stored_bytes"] = stored
        out["stored_bytes_per_record"] = round(stored / records, 1)
        # the batches as stored: their count decides the compression ratio, and the
        # difference between stored bytes and their bytes is the store's own overhead
        batches, batch_bytes = broker.stored_batches(topic, case.partitions)
        out["stored_batches"] = batches
        out["stored_batch_bytes"] = batch_bytes
        out["records_per_stored_batch"] = round(records / batches, 1) if batches else None
    cpu_total = sum(phase.cpu.values())
    out |= {
        "topic": topic,
        "seconds": round(phase.seconds, 3),
        "records_per_s": round(records / phase.seconds, 1),
        "verified_records": phase.verified,
        "cpu_s": {k: round(v, 3) for k, v in phase.cpu.items()},
        "cpu_us_per_record": round(cpu_total * 1e6 / records, 3),
        "cpu_us_per_record_parts": {k: round(v * 1e6 / records, 3) for k, v in phase.cpu.items()},
    }
    return out


def warm(broker: Broker, values: list[bytes], batch: int, run_id: str) -> None:
    """Untimed produce and read-back per compression: the JVM's JIT and Skiff's first-use
    imports and caches are not what the rows measure."""
    sample = values[:WARM_RECORDS]
    for compression in COMPRESSIONS:
        topic = f"vk-{run_id}-{broker.name}{broker.tag}-warm-{compression}"
        create_topic(broker, topic, 1, broker.topic_config)
        produce(broker, topic, sample, 1, batch, compression, True)
        consume(broker, topic, sample, 1, batch)


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One broker's repetitions of a row as one: the median throughput and CPU per record
    (each the median run's), the rest from the last run; every run's figures kept."""
    if len(runs) == 1:
        return runs[0]
    by_rate = sorted(runs, key=lambda r: r["records_per_s"])
    by_cpu = sorted(runs, key=lambda r: r["cpu_us_per_record"])
    mid = len(runs) // 2
    return runs[-1] | {
        "records_per_s": by_rate[mid]["records_per_s"],
        "cpu_us_per_record": by_cpu[mid]["cpu_us_per_record"],
        "cpu_us_per_record_parts": by_cpu[mid]["cpu_us_per_record_parts"],
        "runs": [
            {"records_per_s": r["records_per_s"], "cpu_us_per_record": r["cpu_us_per_record"]}
            for r in runs
        ],
    }


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def run(args: argparse.Namespace) -> dict[str, Any]:
    cases = selected_cases(args.rows)
    if not cases:
        raise BenchError(
            f"--rows {','.join(args.rows)} matches no row ({selected_cases([])[0].id}, ...)"
        )
    values = make_values(args.records, args.record_bytes)
    run_id = uuid.uuid4().hex[:8]
    workdir = Path(tempfile.mkdtemp(prefix="skiff-vs-kafka-"))
    skiff_log = workdir / "skiff.log"
    redis_proc = skiff_proc = None
    failed = True
    try:
        redis_proc, url = start_redis(workdir, unix_socket=False)
        client = redis.Redis.from_url(url)
        redis_version = client.info("server")["redis_version"]
        if args.redis_aof:
            enable_aof(client)
        persistence = "AOF, appendfsync everysec" if args.redis_aof else "none (no RDB, no AOF)"
        progress(
            f"started redis-server {redis_version} pid {redis_proc.pid} at {url}; "
            f"persistence: {persistence}"
        )
        skiff_proc, skiff_bootstrap = start_skiff(url, skiff_log)
        progress(f"started Skiff pid {skiff_proc.pid} on {skiff_bootstrap} (log {skiff_log})")

        def skiff_alive() -> None:
            check_alive(skiff_proc, skiff_log)
            if redis_proc is not None and redis_proc.poll() is not None:
                raise BenchError(f"redis-server exited with {redis_proc.returncode}")

        skiff_base = Broker(
            "skiff",
            skiff_bootstrap,
            {"sidecar": skiff_proc.pid, "redis": redis_proc.pid},
            skiff_alive,
            lambda topic, parts: redis_stored_bytes(client, topic, parts),
            lambda topic, parts: redis_stored_batches(client, topic, parts),
        )
        skiffs: list[tuple[str, Broker]] = []
        unavailable: dict[str, str] = {}
        formats = ["batch", "record"] if args.format == "both" else [args.format]
        for fmt in formats:
            config = dict(args.skiff_topic_config)
            if fmt != "default":
                config[FORMAT_CONFIG] = fmt
            broker = Broker(**{**skiff_base.__dict__, "topic_config": config, "tag": f"-{fmt}"})
            refusal = format_refusal(broker, f"vk-{run_id}-probe-{fmt}", config) if config else None
            if refusal is not None:
                unavailable[fmt] = refusal
                progress(
                    f"Skiff format {fmt} is not available (CreateTopics with "
                    f"{config} refused: {refusal}); going on without it"
                )
                continue
            skiffs.append((fmt, broker))
        if not skiffs:
            raise BenchError(
                "no Skiff topic format left to measure: "
                + "; ".join(f"{k}: {v}" for k, v in unavailable.items())
            )

        with started_kafka(workdir / "kafka") as (kafka_port, jvm, log_dir):
            kafka_log = workdir / "kafka" / "kafka.log"

            def kafka_alive() -> None:
                if jvm.poll() is not None:
                    raise BenchError(f"Kafka exited with {jvm.returncode}" + _log_tail(kafka_log))

            kafka = Broker(
                "kafka",
                f"127.0.0.1:{kafka_port}",
                {"jvm": jvm.pid},
                kafka_alive,
                lambda topic, parts: kafka_stored_bytes(log_dir, topic, parts),
                lambda topic, parts: kafka_stored_batches(log_dir, topic, parts),
            )
            progress(f"Kafka {KAFKA_VERSION} JVM pid {jvm.pid} on {kafka.bootstrap}")
            for broker in [kafka] + [b for _, b in skiffs]:
                progress(f"warm-up on {broker.name} {broker.topic_config or ''}".rstrip())
                warm(broker, values, args.batch, run_id)
            prepared: dict[tuple[str, int, str], str] = {}
            rows = []
            for case in cases:
                load_before = os.getloadavg()[0]
                # Each repetition measures Kafka, then every Skiff format, so both see
                # the same stretch of machine load; the row keeps the medians.
                kafka_runs: list[dict[str, Any]] = []
                skiff_runs: dict[str, list[dict[str, Any]]] = {fmt: [] for fmt, _ in skiffs}
                for rep in range(args.repeat):
                    tag = f" (run {rep + 1}/{args.repeat})" if args.repeat > 1 else ""
                    progress(f"{case.id}: Kafka{tag}")
                    kafka_runs.append(
                        measure(kafka, case, values, args.batch, run_id, prepared, rep)
                    )
                    for fmt, broker in skiffs:
                        progress(f"{case.id}: Skiff ({fmt}){tag}")
                        skiff_runs[fmt].append(
                            measure(broker, case, values, args.batch, run_id, prepared, rep)
                        )
                k = median_run(kafka_runs)
                for fmt, _ in skiffs:
                    s = median_run(skiff_runs[fmt])
                    rows.append(
                        {
                            "row": case.id,
                            "partitions": case.partitions,
                            "compression": case.compression,
                            "kind": case.kind,
                            "skiff_format": fmt,
                            "skiff": s,
                            "kafka": k,
                            "ratio_throughput": ratio(s["records_per_s"], k["records_per_s"]),
                            "ratio_cpu_per_record": ratio(
                                s["cpu_us_per_record"], k["cpu_us_per_record"]
                            ),
                            "ratio_stored_bytes": ratio(
                                s.get("stored_bytes"), k.get("stored_bytes")
                            ),
                            "loadavg_1m": {
                                "before": round(load_before, 2),
                                "after": round(os.getloadavg()[0], 2),
                            },
                        }
                    )
                progress(f"{case.id}: done")
        failed = False
    finally:
        stop_process(skiff_proc)
        stop_process(redis_proc)
        progress(
            "stopped Skiff and redis-server"
            + (f"; logs kept in {workdir}" if failed or args.keep_logs else "")
        )
        if not failed and not args.keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)
    cpus = os.cpu_count() or 0
    return {
        "records": args.records,
        "repeat": args.repeat,
        "record_bytes": args.record_bytes,
        "batch_records": args.batch,
        "kafka_version": KAFKA_VERSION,
        "redis_version": redis_version,
        "redis_persistence": persistence,
        "skiff_topic_config": dict(args.skiff_topic_config),
        "skiff_formats": [f for f, _ in skiffs],
        "skiff_formats_unavailable": unavailable,
        "stored_bytes_method": {
            "skiff": "sum of MEMORY USAGE key SAMPLES 0 over the partitions' keys",
            "kafka": "sum of the partition directories' .log segment file sizes",
        },
        "cpus": cpus,
        "note": (
            f"{cpus} CPU(s) shared by redis-server, Skiff, Kafka's JVM and the bench client; "
            "both brokers run for the whole bench, so idle work of one counts against the other"
        ),
        "rows": rows,
    }


def _num(v: float | None, spec: str) -> str:
    """`v` formatted by `spec` (width.precision f), or a dash as wide."""
    return format(v, spec) if v is not None else "-".rjust(int(spec.split(".")[0]))


def table(r: dict[str, Any]) -> str:
    lines = [
        f"Skiff vs Apache Kafka {r['kafka_version']}: {r['records']:,} records x "
        f"{r['record_bytes']} B JSON-like values, ~{r['batch_records']:,} records per batch; "
        f"Redis {r['redis_version']}, persistence {r['redis_persistence']}"
        + (f"; medians of {r['repeat']} runs per row" if r.get("repeat", 1) > 1 else ""),
        f"NOTE: {r['note']}.",
        "CPU = broker utime+stime per record (Skiff = sidecar + redis-server, Kafka = JVM); "
        "stored = Redis MEMORY USAGE vs Kafka .log bytes, per record.",
    ]
    if r["skiff_formats_unavailable"]:
        for fmt, why in r["skiff_formats_unavailable"].items():
            lines.append(f"Skiff format {fmt} not available: {why}")
    lines += [
        "",
        f"{'row':<24} {'fmt':<7} {'Skiff rec/s':>12} {'Kafka rec/s':>12} {'x':>5}  "
        f"{'Skiff us/rec (side+redis)':>26} {'Kafka':>6} {'x':>5}  "
        f"{'B/rec Skiff':>11} {'Kafka':>6} {'x':>5}  {'rec/batch S':>11} {'K':>6}  load 1m",
    ]
    for row in r["rows"]:
        s, k = row["skiff"], row["kafka"]
        parts = s["cpu_us_per_record_parts"]
        cpu = f"{s['cpu_us_per_record']:.2f} ({parts['sidecar']:.2f}+{parts['redis']:.2f})"
        lines.append(
            f"{row['row']:<24} {row['skiff_format']:<7} {s['records_per_s']:>12,.0f} "
            f"{k['records_per_s']:>12,.0f} {_num(row['ratio_throughput'], '5.2f')}  "
            f"{cpu:>26} "
            f"{k['cpu_us_per_record']:>6.2f} {_num(row['ratio_cpu_per_record'], '5.2f')}  "
            f"{_num(s.get('stored_bytes_per_record'), '11.1f')} "
            f"{_num(k.get('stored_bytes_per_record'), '6.1f')} "
            f"{_num(row['ratio_stored_bytes'], '5.2f')}  "
            f"{_num(s.get('records_per_stored_batch'), '11.1f')} "
            f"{_num(k.get('records_per_stored_batch'), '6.1f')}  "
            f"{row['loadavg_1m']['before']:.2f}->{row['loadavg_1m']['after']:.2f}"
        )
    lines.append("x = Skiff / Kafka. Every row's records were read back or counted (no loss).")
    return "\n".join(lines)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def config_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--records",
        type=int,
        default=200_000,
        help="records per row and broker (default 200,000: the whole run in ~5 min on 2 cores)",
    )
    parser.add_argument("--record-bytes", type=int, default=100, help="value size (default 100)")
    parser.add_argument(
        "--batch", type=int, default=1000, help="records per producer batch (default 1000)"
    )
    parser.add_argument(
        "--rows",
        type=lambda s: [p for p in s.split(",") if p],
        default=[],
        help="comma-separated globs over the row names p{1,8}-{none,zstd}-"
        "{produce-acks1,produce-acksall,produce-txn,consume,consume-uncommitted}, "
        "e.g. 'p1-*' (default: all 20)",
    )
    parser.add_argument(
        "--format",
        choices=["default", "batch", "record", "both"],
        default="default",
        help=f"Skiff topics' {FORMAT_CONFIG} (default: not set, Skiff's default); "
        "a format Skiff refuses is reported and skipped",
    )
    parser.add_argument(
        "--skiff-topic-config",
        type=config_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic config for Skiff's CreateTopics only (repeatable)",
    )
    parser.add_argument(
        "--redis-aof",
        action="store_true",
        help="redis-server with appendonly yes, appendfsync everysec (Kafka's page-cache "
        "durability is closer to this than to no persistence)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="measure each row N times, Kafka and Skiff alternating, and report the "
        "medians (default 1); on a shared 2-core machine one run's ratio moves by ~10%%",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--keep-logs", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    if args.records < 1 or args.record_bytes < 1 or args.batch < 1 or args.repeat < 1:
        parser.error("--records, --record-bytes, --batch and --repeat must be >= 1")
    signal.signal(signal.SIGTERM, _interrupt)  # stop the brokers as on Ctrl-C
    return run_and_report(run, table, args)


if __name__ == "__main__":
    sys.exit(main())
