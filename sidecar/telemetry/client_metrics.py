"""Client metrics (KIP-714): what GetTelemetrySubscriptions tells clients to push, and the
metrics PushTelemetry delivers, decoded and exposed on /metrics.

A pushed payload is OpenTelemetry's MetricsData protobuf, compressed with one of the
accepted types (Kafka's framing: gzip stream, xerial-framed snappy, zstd frame).
Decompression stops at MAX_DECOMPRESSED bytes. Each number data point (gauge or sum)
becomes one sample of `skiff_client_metric{client_instance_id, client_id, metric,
attributes}` (the client id from the pushing request's header, as Kafka adds it):
a gauge or cumulative sum keeps its latest value, a delta sum adds up. A client's series
go when it has not pushed for three push intervals (also after its terminating push, so
that a short-lived client's last figures are scraped);
at most MAX_SERIES_PER_CLIENT series per client are kept (later ones are dropped).
The state is per sidecar: a client pushes to the sidecar it is connected to."""

from __future__ import annotations

import io
import struct
import time
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import cramjam
import zstandard
from google.protobuf.message import DecodeError
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality, MetricsData
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from sidecar.protocol.primitives import read_uvarint
from sidecar.telemetry.metrics import REGISTRY

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
# In order of preference (Kafka's is zstd, lz4, snappy, gzip; lz4 frames are not accepted
# here: the frame decoder at hand cannot stop at a size limit).
ACCEPTED_COMPRESSION = (ZSTD, SNAPPY, GZIP)
TELEMETRY_MAX_BYTES = 1024 * 1024  # Kafka's telemetry.max.bytes default
MAX_DECOMPRESSED = 16 * 1024 * 1024
MAX_SERIES_PER_CLIENT = 10_000
XERIAL_MAGIC = b"\x82SNAPPY\x00"


class BadPayload(Exception):
    """A payload that does not decompress or decode (Kafka: INVALID_RECORD)."""


def subscription_id(metrics: tuple[str, ...], interval_ms: int) -> int:
    """Changes whenever what clients should push changes (Kafka: a CRC32 of it too)."""
    text = ",".join(metrics) + f"|{interval_ms}"
    return struct.unpack(">i", struct.pack(">I", zlib.crc32(text.encode())))[0]


def decompress(codec: int, data: bytes) -> bytes:
    try:
        if codec == NONE:
            out = data
        elif codec == GZIP:
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = inflater.decompress(data, MAX_DECOMPRESSED + 1)
        elif codec == ZSTD:
            reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data))
            out = reader.read(MAX_DECOMPRESSED + 1)
        elif codec == SNAPPY:
            out = _xerial(data)
        else:
            raise BadPayload(f"compression type {codec} is not accepted")
    except (zlib.error, zstandard.ZstdError, cramjam.DecompressionError) as exc:
        raise BadPayload(f"undecompressable metrics: {exc}") from None
    if len(out) > MAX_DECOMPRESSED:
        raise BadPayload(f"metrics inflate to more than {MAX_DECOMPRESSED} bytes")
    return out


def _xerial(data: bytes) -> bytes:
    """xerial's snappy framing (Kafka's SnappyOutputStream): a 16-byte header, then blocks
    of a 4-byte length and raw snappy; each block's declared size is checked first."""
    if not data.startswith(XERIAL_MAGIC) or len(data) < 16:
        raise BadPayload("snappy metrics without xerial framing")
    pos, total, parts = 16, 0, []
    while pos < len(data):
        if pos + 4 > len(data):
            raise BadPayload("truncated snappy block length")
        (size,) = struct.unpack_from(">i", data, pos)
        block = data[pos + 4 : pos + 4 + size]
        if size < 0 or len(block) != size:
            raise BadPayload("truncated snappy block")
        try:
            declared, _ = read_uvarint(block, 0)
        except (IndexError, ValueError):
            raise BadPayload("bad snappy block header") from None
        total += declared
        if total > MAX_DECOMPRESSED:
            raise BadPayload(f"metrics inflate to more than {MAX_DECOMPRESSED} bytes")
        parts.append(bytes(cramjam.snappy.decompress_raw(block)))
        pos += 4 + size
    return b"".join(parts)


def decode(payload: bytes) -> list[tuple[str, str, float, bool]]:
    """(metric name, attributes as k=v joined by ',', value, is delta) per number point."""
    data = MetricsData()
    try:
        data.ParseFromString(payload)
    except DecodeError as exc:
        raise BadPayload(f"undecodable MetricsData: {exc}") from None
    points: list[tuple[str, str, float, bool]] = []
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                kind = metric.WhichOneof("data")
                if kind == "gauge":
                    series, delta = metric.gauge.data_points, False
                elif kind == "sum":
                    delta = (
                        metric.sum.aggregation_temporality
                        == AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
                    )
                    series = metric.sum.data_points
                else:
                    continue  # histograms and summaries: Kafka's clients send none
                for point in series:
                    attrs = ",".join(
                        f"{a.key}={_attr(a.value)}"
                        for a in sorted(point.attributes, key=lambda a: a.key)
                    )
                    which = point.WhichOneof("value")
                    value = float(point.as_int if which == "as_int" else point.as_double)
                    points.append((metric.name, attrs, value, delta))
    return points


def _attr(value: Any) -> str:
    which = value.WhichOneof("value")
    return "" if which is None else str(getattr(value, which))


@dataclass
class _Client:
    last_push: float
    client_id: str
    series: dict[tuple[str, str], float] = field(default_factory=dict)


class ClientMetrics(Collector):
    """The pushed metrics of this sidecar's clients, collected by Prometheus scrapes."""

    def __init__(self) -> None:
        self.clients: dict[uuid.UUID, _Client] = {}
        self.interval_ms = 300_000

    def record(
        self, client: uuid.UUID, client_id: str, points: list[tuple[str, str, float, bool]]
    ) -> None:
        now = time.monotonic()
        self._expire(now)
        state = self.clients.setdefault(client, _Client(now, client_id))
        state.last_push, state.client_id = now, client_id
        for name, attrs, value, delta in points:
            key = (name, attrs)
            if key not in state.series and len(state.series) >= MAX_SERIES_PER_CLIENT:
                continue
            state.series[key] = state.series.get(key, 0.0) + value if delta else value

    def _expire(self, now: float) -> None:
        horizon = now - 3 * self.interval_ms / 1000
        for client in [c for c, s in self.clients.items() if s.last_push < horizon]:
            del self.clients[client]

    def collect(self) -> Iterator[Any]:
        self._expire(time.monotonic())
        family = GaugeMetricFamily(
            "skiff_client_metric",
            "Metrics Kafka clients pushed (KIP-714 PushTelemetry), by client instance, "
            "OpenTelemetry metric name and data point attributes",
            labels=["client_instance_id", "client_id", "metric", "attributes"],
        )
        for client, state in self.clients.items():
            for (name, attrs), value in state.series.items():
                family.add_metric([str(client), state.client_id, name, attrs], value)
        yield family


CLIENT_METRICS = ClientMetrics()
REGISTRY.register(CLIENT_METRICS)
