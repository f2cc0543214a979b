"""What tracing costs on the produce path: produce throughput through Skiff with
tracing off, on with sampling ratio 1.0, and on with ratio 0.01, as ratios to "off"
measured in one run.

Each configuration runs in its own Skiff process (tracing is configured by OTEL_*
variables at start-up) on one shared redis-server; configurations alternate over
--rounds rounds (each round starting with the next one) so drift on the machine
spreads over all of them, and the median
of each is reported. "On" exports every sampled span with the real OTLP/HTTP
exporter to a local sink in this process that reads and discards the requests, so
the sidecar pays span creation, attributes, Redis child spans and protobuf
serialisation, as it would against a collector.

  .venv/bin/python bench/tracing.py [--records 200000] [--batch 1000] [--rounds 3] [--json]

The produce phase is bench.py's (b): confluent-kafka, acks=1, linger.ms=5,
--batch records per producer batch, one partition.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench as harness  # noqa: E402

CONFIGS: dict[str, dict[str, str]] = {
    "off": {},
    "on, ratio 1.0": {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "1.0",
    },
    "on, ratio 0.01": {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.01",
    },
}


class OtlpSink:
    """Accepts OTLP/HTTP exports and discards them, counting the requests and bytes."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                n = int(self.headers.get("Content-Length", 0))
                self.rfile.read(n)
                sink.requests += 1
                sink.bytes += n
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_skiff(
    redis_url: str, log: Path, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], str]:
    port = harness.free_port()
    cmd = [
        sys.executable,
        "-m",
        "sidecar.cli.main",
        "serve",
        "--redis-url",
        redis_url,
        "--listen",
        f"127.0.0.1:{port}",
        "--http-listen",
        "none",
    ]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=harness.ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**clean, **env},
        )
    harness.wait_for_port(port, proc, "Skiff", log)
    return proc, f"127.0.0.1:{port}"


def one(
    name: str,
    env: dict[str, str],
    url: str,
    args: argparse.Namespace,
    value: bytes,
    probe: harness.RedisProbe,
    workdir: Path,
) -> dict[str, Any]:
    log = workdir / f"skiff-{uuid.uuid4().hex[:6]}.log"
    proc, bootstrap = start_skiff(url, log, env)
    try:
        run_id = uuid.uuid4().hex[:10]
        harness.warm_up(bootstrap, f"warm-{run_id}", value, args.batch)
        topic = f"trace-bench-{run_id}"
        harness.create_topic(bootstrap, topic)
        out = harness.produce(bootstrap, topic, args.records, value, args.batch, probe, proc, log)
        harness.progress(f"{name}: {out['records_per_s']:,.0f} records/s")
        return out
    finally:
        harness.stop_process(proc)
        if "tracing: " not in log.read_text(errors="replace"):
            raise harness.BenchError(f"Skiff did not log its tracing set-up: see {log}")


def per_request_cost(sink: OtlpSink, requests_n: int = 20_000) -> dict[str, float]:
    """CPU microseconds per request that telemetry adds, measured in this process
    (all threads, so the exporter's serialisation and HTTP posts count): the
    request wrapper (server.dispatch's requests.observe) around a produce-like
    request with one Redis round trip (EVALSHA append) and a 1,000-record batch
    reported, with tracing off and on at each sampling ratio. Deterministic where the
    throughput runs are at the mercy of the machine's load."""
    import asyncio
    import time
    from types import SimpleNamespace

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBasedTraceIdRatio

    from sidecar.apis import produce as produce_api
    from sidecar.protocol.framing import RequestHeader
    from sidecar.telemetry import redis_calls, requests, tracing

    header = RequestHeader(0, 9, 1, "bench-client")
    batch = SimpleNamespace(count=1000, records=[0, b"", b"v", b"", 0] * 1000)
    server = {"server.address": "127.0.0.1", "server.port": 6379, "db.namespace": "0"}

    async def handle() -> bytes:
        requests.batch_decoded("bench-topic", 0, 110_000, batch)
        started = redis_calls.begin("EVALSHA append", server, {"skiff.redis.wait_replicas": 0})
        redis_calls.end(started)
        requests.batch_appended("bench-topic", 0, False)
        requests.partition_errors([0])
        return b""

    async def loop(n: int) -> float:
        cpu0 = time.process_time()
        for _ in range(n):
            await requests.observe(produce_api, header, "127.0.0.1", handle())
        return time.process_time() - cpu0

    async def bare(n: int) -> None:
        for _ in range(n):
            await handle_bare()

    async def handle_bare() -> bytes:
        return b""

    asyncio.run(bare(1000))
    cpu0 = time.process_time()
    asyncio.run(bare(requests_n))
    out: dict[str, float] = {
        "no telemetry": round((time.process_time() - cpu0) / requests_n * 1e6, 1)
    }
    for name, ratio in (("off", None), ("on, ratio 1.0", 1.0), ("on, ratio 0.01", 0.01)):
        provider = None
        if ratio is not None:
            provider = TracerProvider(sampler=ParentBasedTraceIdRatio(ratio))
            exporter = OTLPSpanExporter(endpoint=sink.endpoint + "/v1/traces")
            # A queue that holds every span, so none is dropped uncounted (a sidecar
            # drops spans when its exporter falls behind: OTEL_BSP_MAX_QUEUE_SIZE).
            queue = 3 * (requests_n + 1000)
            provider.add_span_processor(
                BatchSpanProcessor(exporter, max_queue_size=queue, max_export_batch_size=512)
            )
            tracing.install(provider)
        asyncio.run(loop(1000))  # warm-up
        cpu0 = time.process_time()
        asyncio.run(loop(requests_n))
        if provider is not None:
            provider.force_flush()
        out[name] = round((time.process_time() - cpu0) / requests_n * 1e6, 1)
        tracing.shutdown()
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    value = bytes((i * 7 + 13) % 251 for i in range(args.record_bytes))
    workdir = Path(tempfile.mkdtemp(prefix="skiff-trace-bench-"))
    sink = OtlpSink()
    redis_proc = None
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in CONFIGS}
    try:
        harness.progress("in-process cost per request of the telemetry wrapper")
        micro = per_request_cost(sink)
        harness.progress(f"CPU us per request: {micro}")
        redis_proc, url = harness.start_redis(workdir, False)
        probe = harness.RedisProbe(url)
        names = list(CONFIGS)
        for r in range(args.rounds):
            # Each round starts with another configuration, so none always runs first.
            for name in names[r % len(names) :] + names[: r % len(names)]:
                env = CONFIGS[name]
                env = {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": sink.endpoint} if env else env
                harness.progress(f"round {r + 1}/{args.rounds}: tracing {name}")
                results[name].append(one(name, env, url, args, value, probe, workdir))
    finally:
        harness.stop_process(redis_proc)
        sink.close()
        shutil.rmtree(workdir, ignore_errors=True)
    rates = {n: statistics.median(x["records_per_s"] for x in rs) for n, rs in results.items()}
    cpu = {
        n: statistics.median(
            x["cpu_s"]["skiff"] / (args.records / 1e6) for x in rs if x["cpu_s"]["skiff"]
        )
        for n, rs in results.items()
    }
    return {
        "records": args.records,
        "record_bytes": args.record_bytes,
        "batch_records": args.batch,
        "rounds": args.rounds,
        "cpus": os.cpu_count(),
        "records_per_s_median": {n: round(v) for n, v in rates.items()},
        "records_per_s_all": {
            n: [round(x["records_per_s"]) for x in rs] for n, rs in results.items()
        },
        "ratio_to_off": {n: round(v / rates["off"], 3) for n, v in rates.items()},
        "skiff_cpu_s_per_million_records": {n: round(v, 2) for n, v in cpu.items()},
        "cpu_ratio_to_off": {n: round(v / cpu["off"], 3) for n, v in cpu.items()},
        "skiff_cpu_s_per_million_records_all": {
            n: [round((x["cpu_s"]["skiff"] or 0) / (args.records / 1e6), 2) for x in rs]
            for n, rs in results.items()
        },
        "avg_records_per_produce_request": {
            n: statistics.median(x["avg_records_per_batch"] or 0 for x in rs)
            for n, rs in results.items()
        },
        "otlp_exports": {"requests": sink.requests, "bytes": sink.bytes},
        "telemetry_cpu_us_per_request": micro,
    }


def summary(r: dict[str, Any]) -> str:
    lines = [
        f"Tracing overhead on produce: {r['records']:,} records x {r['record_bytes']} B, "
        f"{r['batch_records']:,} records per batch, median of {r['rounds']} rounds, "
        f"{r['cpus']} CPUs shared by redis-server, Skiff and the client",
        f"{'tracing':<16}{'records/s':>12}{'ratio to off':>14}{'Skiff CPU s/1M rec':>20}"
        f"{'CPU ratio':>11}{'records/request':>17}",
    ]
    for name, rate in r["records_per_s_median"].items():
        lines.append(
            f"{name:<16}{rate:>12,}{r['ratio_to_off'][name]:>14.3f}"
            f"{r['skiff_cpu_s_per_million_records'][name]:>20.2f}"
            f"{r['cpu_ratio_to_off'][name]:>11.3f}"
            f"{r['avg_records_per_produce_request'][name]:>17.1f}"
        )
    lines.append(f"all rounds (records/s): {r['records_per_s_all']}")
    lines.append(f"all rounds (Skiff CPU s/1M rec): {r['skiff_cpu_s_per_million_records_all']}")
    micro = r["telemetry_cpu_us_per_request"]
    lines.append(
        "telemetry CPU per produce request, measured in-process (wrapper + one Redis round "
        "trip + export): " + ", ".join(f"{n} {v:.1f} us" for n, v in micro.items())
    )
    lines.append(
        f"OTLP sink received {r['otlp_exports']['requests']:,} export requests, "
        f"{r['otlp_exports']['bytes']:,} bytes"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        result = run(args)
    except harness.BenchError as exc:
        print(f"bench FAILED: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
