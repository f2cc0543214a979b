"""OpenTelemetry traces: a real sidecar process exports through its real OTLP/HTTP
exporter (configured by OTEL_* variables) to a receiver in the test, which decodes
the protobuf spans. Checked: the span tree of a produce and a fetch made by
confluent-kafka, their attributes, the links to producer spans named by records'
traceparent headers (malformed ones ignored), and error attributes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import RedisServer, Skiff, start_skiff, stop_process
from otlp_receiver import OtlpReceiver
from rawkafka import RawKafka, fetch_request, metadata_request

from sidecar.telemetry.tracing import parse_traceparent

TRACE_A = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_A = "00f067aa0ba902b7"
TRACE_B = "0af7651916cd43dd8448eb211c80319c"
SPAN_B = "b7ad6b7169203331"
STATUS_ERROR = 2


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver()
    yield r
    r.close()


@pytest.fixture
def traced(own_redis: RedisServer, receiver: OtlpReceiver, tmp_path: Path) -> Iterator[Skiff]:
    env = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_TRACES_SAMPLER": "always_on",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_SERVICE_NAME": "skiff-under-test",
    }
    skiff = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url, env=env)
    yield skiff
    stop_process(skiff.proc)


def produce(skiff: Skiff, topic: str, headers: list[list[tuple[str, bytes]]]) -> None:
    producer = Producer(
        {"bootstrap.servers": skiff.bootstrap, "client.id": "trace-producer", "linger.ms": 200}
    )
    errors: list[Any] = []
    for i, h in enumerate(headers):
        producer.produce(
            topic,
            value=b"v%d" % i,
            partition=0,
            headers=h or None,
            on_delivery=lambda err, msg: errors.append(err) if err else None,
        )
    assert producer.flush(30) == 0
    assert errors == []


def consume(skiff: Skiff, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": skiff.bootstrap,
            "group.id": f"g-{topic}",
            "client.id": "trace-consumer",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value())
    consumer.close()
    return got


def for_topic(name: str, topic: str) -> Any:
    return lambda s: s.name == name and s.attributes.get("messaging.destination.name") == topic


def test_produce_and_fetch_spans(
    traced: Skiff, receiver: OtlpReceiver, own_redis: RedisServer, topic: str
) -> None:
    headers = [
        [("traceparent", f"00-{TRACE_A}-{SPAN_A}-01".encode())],
        [("other", b"x"), ("traceparent", f"00-{TRACE_B}-{SPAN_B}-00".encode())],
        [("traceparent", b"00-not-a-trace-01")],  # malformed: ignored
        [("traceparent", f"00-{'0' * 32}-{SPAN_A}-01".encode())],  # zero trace id: invalid
        [],
        [("traceparent", f"00-{TRACE_A}-{SPAN_A}-01".encode())],  # same producer span again
    ]
    produce(traced, topic, headers)
    assert consume(traced, topic, len(headers)) == [b"v%d" % i for i in range(len(headers))]

    produces = receiver.wait_for(for_topic("produce", topic))
    assert len(produces) == 1, produces  # linger.ms batched all six records
    span = produces[0]
    assert span.kind == "SERVER"
    assert span.parent_span_id == ""  # a root span: Kafka requests carry no trace context
    assert span.resource["service.name"] == "skiff-under-test"
    attrs = span.attributes
    assert attrs["messaging.system"] == "kafka"
    assert attrs["messaging.operation.name"] == "produce"
    assert attrs["messaging.operation.type"] == "send"
    assert attrs["messaging.destination.partition.id"] == "0"
    assert attrs["messaging.batch.message_count"] == len(headers)
    assert attrs["messaging.client.id"] == "trace-producer"
    assert attrs["skiff.kafka.api_key"] == 0
    assert isinstance(attrs["skiff.kafka.api_version"], int)
    assert "error.type" not in attrs
    assert sorted(span.links) == sorted([(TRACE_A, SPAN_A), (TRACE_B, SPAN_B)])

    appends = [s for s in receiver.children(span) if s.name == "EVALSHA append"]
    assert len(appends) == 1
    child = appends[0]
    assert child.kind == "CLIENT"
    assert child.trace_id == span.trace_id
    assert child.attributes["db.system"] == "redis"
    assert child.attributes["db.operation.name"] == "EVALSHA"
    assert child.attributes["db.stored_procedure.name"] == "append"
    assert child.attributes["server.address"] == "127.0.0.1"
    assert child.attributes["server.port"] == own_redis.port

    fetches = receiver.wait_for(
        lambda s: (
            for_topic("fetch", topic)(s)
            and s.attributes.get("messaging.batch.message_count", 0) > 0
        )
    )
    assert sum(s.attributes["messaging.batch.message_count"] for s in fetches) == len(headers)
    fetch = fetches[0]
    assert fetch.kind == "SERVER"
    assert fetch.attributes["messaging.operation.type"] == "receive"
    assert fetch.attributes["messaging.destination.partition.id"] == "0"
    assert fetch.attributes["messaging.client.id"] == "trace-consumer"
    reads = [s for s in receiver.children(fetch) if s.name == "MULTI/EXEC"]
    assert reads, [s.name for s in receiver.children(fetch)]
    assert reads[0].kind == "CLIENT"
    assert reads[0].attributes["db.system"] == "redis"
    assert reads[0].attributes["db.operation.name"] == "MULTI/EXEC"
    assert reads[0].attributes["skiff.redis.commands"] == ["HMGET", "XRANGE"]


def test_error_and_multi_topic_attributes(
    traced: Skiff, receiver: OtlpReceiver, topic: str
) -> None:
    other = topic + "-b"
    with RawKafka("127.0.0.1", traced.port, client_id="raw-tracer") as kafka:
        kafka.request(3, 9, metadata_request([topic, other]))
        response = kafka.request(1, 12, fetch_request(topic, {0: 100}))
        assert response.responses[0].partitions[0].error_code == 1  # OFFSET_OUT_OF_RANGE

    metadata = receiver.wait_for(
        lambda s: (
            s.name == "metadata"
            and s.attributes.get("skiff.messaging.destination.names") == [topic, other]
        )
    )
    assert len(metadata) == 1
    assert "messaging.destination.name" not in metadata[0].attributes
    assert metadata[0].attributes["messaging.client.id"] == "raw-tracer"
    assert "messaging.operation.type" not in metadata[0].attributes

    failed = receiver.wait_for(for_topic("fetch", topic))
    assert len(failed) == 1
    attrs = failed[0].attributes
    assert attrs["error.type"] == "OFFSET_OUT_OF_RANGE"
    assert attrs["skiff.kafka.error_code"] == 1
    assert attrs["messaging.batch.message_count"] == 0
    assert failed[0].status_code == STATUS_ERROR


@pytest.mark.parametrize(
    "header,expected",
    [
        (f"00-{TRACE_A}-{SPAN_A}-01", (int(TRACE_A, 16), int(SPAN_A, 16), 1)),
        (f"00-{TRACE_A}-{SPAN_A}-00", (int(TRACE_A, 16), int(SPAN_A, 16), 0)),
        (f"01-{TRACE_A}-{SPAN_A}-01-future", (int(TRACE_A, 16), int(SPAN_A, 16), 1)),
        (f"00-{TRACE_A}-{SPAN_A}-01-extra", None),  # version 00 has four fields
        (f"ff-{TRACE_A}-{SPAN_A}-01", None),
        (f"00-{TRACE_A.upper()}-{SPAN_A}-01", None),  # W3C: lower-case hex only
        (f"00-{'0' * 32}-{SPAN_A}-01", None),
        (f"00-{TRACE_A}-{'0' * 16}-01", None),
        (f"00-{TRACE_A[:-1]}-{SPAN_A}-01", None),
        ("garbage", None),
    ],
)
def test_traceparent_parsing(header: str, expected: tuple[int, int, int] | None) -> None:
    got = parse_traceparent(header.encode())
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert (got.trace_id, got.span_id, int(got.trace_flags)) == expected
        assert got.is_remote


def test_tracing_is_off_without_an_exporter(
    own_redis: RedisServer, receiver: OtlpReceiver, tmp_path: Path, topic: str
) -> None:
    # An endpoint alone does not turn tracing on: OTEL_TRACES_EXPORTER must name one.
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    skiff = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url, env=env)
    try:
        produce(skiff, topic, [[]])
        time.sleep(1.0)  # longer than the batch delay a configured exporter would use
        assert receiver.spans == []
        assert "tracing: off" in skiff.log()
    finally:
        stop_process(skiff.proc)


def test_grpc_and_console_exporters(own_redis: RedisServer, tmp_path: Path, topic: str) -> None:
    """OTEL_EXPORTER_OTLP_PROTOCOL=grpc exports to an OTLP/gRPC receiver; console and
    otlp together also print each span on stdout."""
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    received: list[str] = []

    class Service(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's name
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    received.extend(s.name for s in ss.spans)
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    env = {
        "OTEL_TRACES_EXPORTER": "otlp,console",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    skiff = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url, env=env)
    try:
        produce(skiff, topic, [[]])
        deadline = time.monotonic() + 15
        while "produce" not in received and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "produce" in received
        assert "OTLP/gRPC exporter" in skiff.log()
        assert '"name": "produce"' in skiff.log()  # the console exporter's JSON
    finally:
        stop_process(skiff.proc)
        server.stop(0)


def test_unknown_exporter_stops_start_up(own_redis: RedisServer, tmp_path: Path) -> None:
    log = tmp_path / "skiff.log"
    with pytest.raises(RuntimeError):
        start_skiff(log, "--redis-url", own_redis.url, env={"OTEL_TRACES_EXPORTER": "jaeger"})
    text = log.read_text()
    assert "cannot set up tracing: OTEL_TRACES_EXPORTER 'jaeger' is not one of otlp" in text
    assert "Traceback" not in text


def test_in_memory_exporter_in_process(own_redis: RedisServer, topic: str) -> None:
    """The sidecar in this process (app.serve on this thread's loop, the client in a
    worker thread) with tracing.install_for_tests(InMemorySpanExporter): the SDK's own
    span objects show the produce span as the parent of its Redis round trip."""
    import asyncio
    import os
    import signal

    from conftest import free_port
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    from sidecar.config.settings import HostPort, Settings
    from sidecar.process import app
    from sidecar.telemetry import tracing

    exporter = InMemorySpanExporter()
    tracing.install_for_tests(exporter)
    port = free_port()
    settings = Settings(
        listen=HostPort("127.0.0.1", port), redis_url=own_redis.url, http_listen=None
    )
    link = f"00-{TRACE_A}-{SPAN_A}-01".encode()

    def client() -> None:
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "client.id": "in-proc"})
        producer.produce(topic, value=b"v", partition=0, headers=[("traceparent", link)])
        assert producer.flush(30) == 0

    async def main() -> None:
        ready = asyncio.Event()
        served = asyncio.create_task(app.serve(settings, ready))
        await asyncio.wait_for(ready.wait(), 30)
        try:
            await asyncio.to_thread(client)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # serve's own handler: a clean stop
            await asyncio.wait_for(served, 30)

    try:
        asyncio.run(main())
    finally:
        tracing.shutdown()
    spans = exporter.get_finished_spans()
    produce_span = next(
        s
        for s in spans
        if s.name == "produce" and s.attributes.get("messaging.destination.name") == topic
    )
    assert produce_span.kind == SpanKind.SERVER
    assert produce_span.attributes["messaging.client.id"] == "in-proc"
    assert produce_span.attributes["messaging.batch.message_count"] == 1
    assert [
        (f"{k.context.trace_id:032x}", f"{k.context.span_id:016x}") for k in produce_span.links
    ] == [(TRACE_A, SPAN_A)]
    children = [s for s in spans if s.parent and s.parent.span_id == produce_span.context.span_id]
    assert [s.name for s in children if s.name.startswith("EVALSHA")] == ["EVALSHA append"]
    assert all(s.kind == SpanKind.CLIENT for s in children)
    assert all(s.context.trace_id == produce_span.context.trace_id for s in children)
