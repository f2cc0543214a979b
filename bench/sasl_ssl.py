"""What TLS and SASL cost: produce and consume through one sidecar over its PLAINTEXT
listener and over its SASL_SSL listener (SCRAM-SHA-512, TLS 1.3), in the same run, with
the broker CPU (sidecar + Redis) per record of each. Target: SASL_SSL at >= 0.7x
plaintext throughput (docs/security.md, "What security costs").

One redis-server and one sidecar with both listeners (certificates made with trustme,
the SCRAM user created at start by --add-scram), both started on free ports and stopped
by pid. Each round produces --records records of --record-bytes to a fresh topic with
confluent-kafka (acks=1, no compression, 1 partition) over one listener, then consumes
them from offset 0; rounds alternate PLAINTEXT and SASL_SSL so that drift (the machine
is shared) hits both alike, and each mode's best round is reported.

  .venv/bin/python bench/sasl_ssl.py [--records 200000] [--record-bytes 100] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import trustme  # noqa: E402
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench import (  # noqa: E402
    BenchError,
    Phase,
    RedisProbe,
    consumer_config,
    free_port,
    producer_config,
    progress,
    start_redis,
    stop_process,
    wait_for_port,
)

DEADLINE_S = 300.0  # one phase taking longer than this fails the bench


def start_sidecar(
    redis_url: str, workdir: Path, password: str
) -> tuple[subprocess.Popen[bytes], dict[str, dict[str, Any]]]:
    """The sidecar with a PLAINTEXT and a SASL_SSL listener, and each one's client
    settings."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.cert_chain_pems[0].write_to_path(str(workdir / "tls.crt"))
    for blob in cert.cert_chain_pems[1:]:
        blob.write_to_path(str(workdir / "tls.crt"), append=True)
    cert.private_key_pem.write_to_path(str(workdir / "tls.key"))
    ca.cert_pem.write_to_path(str(workdir / "ca.crt"))
    plain, tls = free_port(), free_port()
    log = workdir / "skiff.log"
    cmd = [
        sys.executable, "-m", "sidecar.cli.main", "serve", "--redis-url", redis_url,
        "--http-listen", "none",
        "--listeners", f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{tls}",
        "--ssl-keystore-certificate-location", str(workdir / "tls.crt"),
        "--ssl-keystore-key-location", str(workdir / "tls.key"),
        "--sasl-enabled-mechanisms", "SCRAM-SHA-512",
    ]  # fmt: skip
    env = {"SKIFF_ADD_SCRAM": f"SCRAM-SHA-512=[name=bench,password={password}]"}
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**_environ(), **env},
        )  # fmt: skip
    wait_for_port(plain, proc, "Skiff (PLAINTEXT)", log)
    wait_for_port(tls, proc, "Skiff (SASL_SSL)", log)
    clients = {
        "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{plain}"},
        "SASL_SSL": {
            "bootstrap.servers": f"127.0.0.1:{tls}",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "bench",
            "sasl.password": password,
            "ssl.ca.location": str(workdir / "ca.crt"),
        },
    }
    return proc, clients


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SKIFF_")}


def create_topic(client: dict[str, Any], topic: str) -> None:
    admin = AdminClient(client)
    future = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    future[topic].result(timeout=30)


def produce(client: dict[str, Any], topic: str, records: int, value: bytes,
            probe: RedisProbe, pid: int) -> dict[str, Any]:  # fmt: skip
    errors: list[str] = []
    delivered = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal delivered
        if err is not None:
            errors.append(str(err))
        else:
            delivered += 1

    producer = Producer({**producer_config("", 1000, len(value)), **client,
                         "on_delivery": on_delivery})  # fmt: skip
    producer.list_topics(topic, timeout=15)  # connect and authenticate, untimed
    deadline = time.monotonic() + DEADLINE_S
    with Phase(probe, pid) as phase:
        for i in range(records):
            while True:
                try:
                    producer.produce(topic, value, partition=0)
                    break
                except BufferError:
                    producer.poll(0.005)
            if i % 1000 == 999:
                producer.poll(0)
        while producer.flush(1.0) and not errors:
            if time.monotonic() > deadline:
                raise BenchError(f"produce to {topic}: {delivered:,}/{records:,} acknowledged")
        phase.stop()
    if errors or delivered != records:
        raise BenchError(f"produce to {topic}: {delivered:,}/{records:,}: {errors[:3]}")
    return phase.result(records, len(value))


def consume(client: dict[str, Any], topic: str, records: int, value: bytes,
            probe: RedisProbe, pid: int) -> dict[str, Any]:  # fmt: skip
    consumer = Consumer({**consumer_config(""), **client})
    consumer.list_topics(topic, timeout=15)
    count = 0
    deadline = time.monotonic() + DEADLINE_S
    try:
        with Phase(probe, pid) as phase:
            consumer.assign([TopicPartition(topic, 0, 0)])
            while count < records:
                if time.monotonic() > deadline:
                    raise BenchError(f"consume from {topic}: {count:,}/{records:,}")
                for m in consumer.consume(num_messages=10_000, timeout=1.0):
                    if m.error() is not None:
                        raise BenchError(f"consume from {topic}: {m.error()}")
                    if count == 0 and m.value() != value:
                        raise BenchError("the first record read back differs")
                    count += 1
            phase.stop()
    finally:
        consumer.close()
    return phase.result(records, len(value))


def per_record_us(phase: dict[str, Any], records: int) -> dict[str, float]:
    cpu = phase["cpu_s"]
    sidecar, redis_s = cpu["skiff"] or 0.0, cpu["redis"]
    return {
        "sidecar": round(sidecar / records * 1e6, 2),
        "redis": round(redis_s / records * 1e6, 2),
        "broker": round((sidecar + redis_s) / records * 1e6, 2),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    value = bytes((i * 7 + 13) % 251 for i in range(args.record_bytes))
    workdir = Path(tempfile.mkdtemp(prefix="skiff-bench-sasl-"))
    redis_proc = sidecar = None
    try:
        redis_proc, url = start_redis(workdir, False)
        probe = RedisProbe(url)
        sidecar, clients = start_sidecar(url, workdir, secrets.token_hex(16))
        progress(
            f"sidecar pid {sidecar.pid}: {clients['PLAINTEXT']['bootstrap.servers']} "
            f"PLAINTEXT, {clients['SASL_SSL']['bootstrap.servers']} SASL_SSL"
        )
        for mode, client in clients.items():  # warm-up, untimed
            topic = f"bench-warmup-{mode.lower()}-{uuid.uuid4().hex[:6]}"
            create_topic(client, topic)
            produce(client, topic, 5000, value, probe, sidecar.pid)
            consume(client, topic, 5000, value, probe, sidecar.pid)
        best: dict[str, dict[str, Any]] = {}
        for round_ in range(args.rounds):
            for mode, client in clients.items():
                topic = f"bench-{mode.lower()}-{uuid.uuid4().hex[:8]}"
                create_topic(client, topic)
                prod = produce(client, topic, args.records, value, probe, sidecar.pid)
                cons = consume(client, topic, args.records, value, probe, sidecar.pid)
                progress(
                    f"round {round_ + 1} {mode}: produce {prod['records_per_s']:,.0f}/s, "
                    f"consume {cons['records_per_s']:,.0f}/s"
                )
                for phase, result in (("produce", prod), ("consume", cons)):
                    kept = best.setdefault(mode, {}).get(phase)
                    if kept is None or result["records_per_s"] > kept["records_per_s"]:
                        best[mode][phase] = {
                            **result,
                            "us_per_record": per_record_us(result, args.records),
                        }
        if sidecar.poll() is not None:
            raise BenchError(f"the sidecar exited with {sidecar.returncode}")
    finally:
        stop_process(sidecar)
        stop_process(redis_proc)
        shutil.rmtree(workdir, ignore_errors=True)
    ratios = {
        phase: round(best["SASL_SSL"][phase]["records_per_s"]
                     / best["PLAINTEXT"][phase]["records_per_s"], 2)
        for phase in ("produce", "consume")
    }  # fmt: skip
    return {"records": args.records, "record_bytes": args.record_bytes, "rounds": args.rounds,
            "best": best, "ratio_sasl_ssl_to_plaintext": ratios}  # fmt: skip


def summary(r: dict[str, Any]) -> str:
    lines = [
        f"SASL_SSL (SCRAM-SHA-512, TLS) against PLAINTEXT, one sidecar, {r['records']:,} "
        f"records x {r['record_bytes']} B, best of {r['rounds']} round(s) each",
        f"{'':22}{'records/s':>12}{'MB/s':>8}   broker CPU us/record (sidecar + redis)",
    ]
    for phase in ("produce", "consume"):
        for mode in ("PLAINTEXT", "SASL_SSL"):
            p = r["best"][mode][phase]
            us = p["us_per_record"]
            lines.append(
                f"{phase + ' ' + mode:22}{p['records_per_s']:>12,.0f}"
                f"{p['mb_per_s']:>8.2f}   {us['broker']:.2f} "
                f"({us['sidecar']:.2f} + {us['redis']:.2f})"
            )
        ratio = r["ratio_sasl_ssl_to_plaintext"][phase]
        verdict = "meets" if ratio >= 0.7 else "misses"
        lines.append(f"{phase} SASL_SSL / PLAINTEXT = {ratio:.2f} ({verdict} the 0.7 target)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    try:
        result = run(args)
    except BenchError as exc:
        print(f"bench FAILED: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result) if args.json else summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
