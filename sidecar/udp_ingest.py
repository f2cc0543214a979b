"""UDP ingest (`--udp-listen HOST:PORT --udp-topic NAME`): each datagram becomes one record
of the topic, appended through lua/append.lua like a Produce, in small batches. Like Kafka
0.7's produce there is no answer: a sender never learns whether its datagram landed.

A datagram is the record's value, unless it starts with the framing magic (docs/udp.md):

    0xFF 0x01  flags (bit 0: null value; others 0)  key length (zigzag varint, -1 null)
    key  headers (Kafka's record header encoding: zigzag varint count, then per header
    key length, key, value length (-1 null), value)  value = the rest of the datagram

0xFF never starts UTF-8 text, so text and JSON datagrams are never mistaken for frames.

Records with a key go to the partition Kafka's default partitioner picks
(murmur2(key) & 0x7fffffff % partitions), the others round-robin. The record timestamp
is the time of receipt (or the append time on LogAppendTime topics).

Memory is bounded: datagrams wait in a queue of at most QUEUE_RECORDS records and
QUEUE_BYTES bytes for the one writer task; what arrives while it is full is dropped and
counted (`dropped_overload`), as are malformed datagrams and those whose one-record
batch is larger than the topic's max.message.bytes (sized as Kafka sizes a batch).
asyncio-dgram's own receive queue stays short: the reader task empties it whenever the
loop delivers a datagram, and the kernel's socket buffer is the bound before that.
Counters live in `STATS` (read by the metrics endpoint) and are logged every
--udp-stats-interval-ms while they move, and once at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import asyncio_dgram
from aiokafka.partitioner import murmur2

from sidecar.config.settings import HostPort
from sidecar.config.topic import effective_config
from sidecar.protocol.primitives import read_uvarint, zigzag
from sidecar.protocol.record_batch import FLAG_KEY_NULL, FLAG_LOG_APPEND, FLAG_VALUE_NULL
from sidecar.storage.store import StoreError, TopicInfo
from sidecar.validation import record_sizes
from sidecar.validation.topic_names import invalid_name_reason

log = logging.getLogger(__name__)

MAGIC = 0xFF
VERSION = 1
FLAG_FRAME_NULL_VALUE = 0x01
BATCH_RECORDS = 500  # records per flush at most
LINGER_S = 0.002  # a flush waits this long for more datagrams once it has one
QUEUE_RECORDS = 20_000
QUEUE_BYTES = 16 * 1024 * 1024
DRAIN_MAX = 1000  # datagrams read from the socket per wake-up before yielding
MAX_DATAGRAM = 65536  # larger than any UDP payload (65,507 bytes over IPv4)
RECEIVE_BUFFER = 4 * 1024 * 1024  # SO_RCVBUF asked for (the kernel caps it at rmem_max)


@dataclass(slots=True)
class UdpStats:
    """Counters since start. received = appended + malformed + oversized +
    dropped_overload + failed + queued (still waiting)."""

    received: int = 0  # datagrams read from the socket
    appended: int = 0  # records the append script stored
    malformed: int = 0  # a frame that does not parse
    oversized: int = 0  # larger than the topic's max.message.bytes
    dropped_overload: int = 0  # the queue was full: Redis did not keep up
    failed: int = 0  # the append failed (Redis error, topic gone)
    batches: int = 0  # appends run

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def line(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.as_dict().items())


STATS = UdpStats()


class Malformed(ValueError):
    pass


class Datagram(NamedTuple):  # a tuple: the cheapest object per datagram
    """A parsed datagram: the append script's record fields (flags without LogAppendTime)."""

    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: bytes  # Kafka's header encoding, b"" for none
    size: int  # bytes received


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    try:
        raw, pos = read_uvarint(data, pos)
    except (IndexError, ValueError):
        raise Malformed("truncated varint") from None
    if pos > len(data):
        raise Malformed("truncated varint")
    return (raw >> 1) ^ -(raw & 1), pos


def _take(data: bytes, pos: int, length: int) -> tuple[bytes, int]:
    if length < 0 or pos + length > len(data):
        raise Malformed("length past the end of the datagram")
    return data[pos : pos + length], pos + length


def parse(data: bytes, timestamp: int) -> Datagram:
    """A datagram as a record; raises Malformed for a bad frame."""
    if not data or data[0] != MAGIC:
        return Datagram(timestamp, None, data, b"", len(data))
    if len(data) < 3:
        raise Malformed("frame shorter than its header")
    if data[1] != VERSION:
        raise Malformed(f"unknown framing version {data[1]}")
    flags = data[2]
    if flags & ~FLAG_FRAME_NULL_VALUE:
        raise Malformed(f"unknown flags 0x{flags:02x}")
    pos = 3
    key_length, pos = _varint(data, pos)
    key = None
    if key_length >= 0:
        key, pos = _take(data, pos, key_length)
    elif key_length != -1:
        raise Malformed("negative key length")
    headers_start = pos
    count, pos = _varint(data, pos)
    if count < 0:
        raise Malformed("negative header count")
    for _ in range(count):
        name_length, pos = _varint(data, pos)
        name, pos = _take(data, pos, name_length)
        try:
            name.decode()
        except UnicodeDecodeError:
            raise Malformed("header key is not UTF-8") from None
        value_length, pos = _varint(data, pos)
        if value_length >= 0:
            _, pos = _take(data, pos, value_length)
        elif value_length != -1:
            raise Malformed("negative header value length")
    headers = data[headers_start:pos] if count else b""
    value: bytes | None = data[pos:]
    if flags & FLAG_FRAME_NULL_VALUE:
        if value:
            raise Malformed("null value flag with value bytes")
        value = None
    return Datagram(timestamp, key, value, headers, len(data))


def frame(
    value: bytes | None,
    key: bytes | None = None,
    headers: list[tuple[str, bytes | None]] | None = None,
) -> bytes:
    """A framed datagram (for senders written in Python, and the tests)."""
    parts = [bytes([MAGIC, VERSION, FLAG_FRAME_NULL_VALUE if value is None else 0])]
    parts.append(zigzag(-1) if key is None else zigzag(len(key)) + key)
    parts.append(zigzag(len(headers or ())))
    for name, hvalue in headers or ():
        encoded = name.encode()
        parts.append(zigzag(len(encoded)) + encoded)
        parts.append(zigzag(-1) if hvalue is None else zigzag(len(hvalue)) + hvalue)
    parts.append(value or b"")
    return b"".join(parts)


def _bind(listen: HostPort) -> socket.socket:
    """A non-blocking UDP socket on `listen` with a large receive buffer (the kernel caps
    it at net.core.rmem_max): the socket is ours, so the reader can drain it directly."""
    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        sock.bind((listen.host, listen.port))
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def partition_for_key(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner for a keyed record (Utils.murmur2, toPositive)."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class UdpIngest:
    def __init__(self, broker: Any, listen: HostPort, topic: str, stats_interval_ms: int) -> None:
        self.broker = broker
        self.listen = listen
        self.topic = topic
        self.stats_interval = stats_interval_ms / 1000
        self.stats = STATS
        self._queue: deque[Datagram] = deque()
        self._queued_bytes = 0
        self._ready = asyncio.Event()
        self._info: TopicInfo | None = None
        self._next_partition = 0
        self._stream: Any = None
        self._sock: socket.socket | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._stream.sockname[:2]
        return host, port

    async def start(self) -> None:
        reason = invalid_name_reason(self.topic)  # the flag's parser checked it already
        if reason:
            raise RuntimeError(f"--udp-topic: {reason}")
        self._info = await self._topic()
        if self._info is None:
            raise RuntimeError(
                f"--udp-topic {self.topic!r} does not exist and topic auto-creation is off: "
                "create it first (skiff topics create, kafka-topics) or enable "
                "--auto-create-topics"
            )
        try:
            self._sock = _bind(self.listen)
        except OSError as exc:
            raise RuntimeError(f"--udp-listen {self.listen}: {exc.strerror or exc}") from None
        self._stream = await asyncio_dgram.from_socket(self._sock)
        self._tasks = [
            asyncio.create_task(self._receive(), name="udp-receive"),
            asyncio.create_task(self._write(), name="udp-write"),
            asyncio.create_task(self._report(), name="udp-stats"),
        ]
        host, port = self.address
        log.info(
            "UDP ingest on %s into topic %s (%d partition(s))",
            HostPort(host, port),
            self.topic,
            self._info.partitions,
        )

    async def stop(self, drain_timeout: float = 2.0) -> None:
        """Stop receiving, give the writer `drain_timeout` to append what is queued, then
        log the counters."""
        self._stopping = True
        if self._stream is not None:
            self._stream.close()
        receive, write, report = self._tasks or (None, None, None)
        for task in (receive, report):
            if task is not None:
                task.cancel()
        if write is not None:
            self._ready.set()
            try:
                await asyncio.wait_for(write, drain_timeout)
            except (TimeoutError, asyncio.CancelledError):
                pass
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        log.info("UDP ingest stopped: %s", self.stats.line())

    async def _topic(self) -> TopicInfo | None:
        result: TopicInfo | None = await self.broker.topic_for_produce_or_metadata(self.topic)
        return result

    # -- receiving ---------------------------------------------------------------------------

    async def _receive(self) -> None:
        """asyncio-dgram wakes this task with one datagram; the socket (non-blocking) is
        then drained directly, up to DRAIN_MAX datagrams per wake-up: one recvfrom each
        instead of a trip through the event loop and asyncio-dgram's queue, which tripled
        the rate one sidecar reads (docs/udp.md)."""
        sock = self._sock
        while True:
            try:
                data, _ = await self._stream.recv()
            except asyncio_dgram.TransportClosed:
                return
            now = int(time.time() * 1000)
            self._accept(data, now)
            for _ in range(DRAIN_MAX):
                try:
                    data = sock.recv(MAX_DATAGRAM)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:  # closed under us, or an ICMP error report: carry on
                    break
                self._accept(data, now)
            await asyncio.sleep(0)  # let the writer run between drains

    def _accept(self, data: bytes, now: int) -> None:
        stats = self.stats
        stats.received += 1
        # Full: drop before parsing, so an overload costs as little CPU as possible (the
        # writer needs it); a malformed or oversized datagram dropped here counts as overload.
        if len(self._queue) >= QUEUE_RECORDS or self._queued_bytes + len(data) > QUEUE_BYTES:
            stats.dropped_overload += 1
            return
        try:
            datagram = parse(data, now)
        except Malformed:
            stats.malformed += 1
            return
        info = self._info
        # Each datagram is a producer's one-record batch, sized as Kafka sizes it.
        if info is not None and record_sizes.batch_size((datagram[:4],)) > effective_config(
            info, "max.message.bytes"
        ):
            stats.oversized += 1
            return
        self._queue.append(datagram)
        self._queued_bytes += datagram.size
        self._ready.set()

    # -- appending ---------------------------------------------------------------------------

    async def _write(self) -> None:
        while True:
            if not self._queue:
                if self._stopping:
                    return
                self._ready.clear()
                await self._ready.wait()
                continue
            if len(self._queue) < BATCH_RECORDS and not self._stopping:
                await asyncio.sleep(LINGER_S)  # let a burst fill the batch
            batch = [self._queue.popleft() for _ in range(min(BATCH_RECORDS, len(self._queue)))]
            self._queued_bytes -= sum(d.size for d in batch)
            try:
                await self._append(batch)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let the writer die: count and go on
                self.stats.failed += len(batch)
                log.warning("UDP ingest: append of %d record(s) failed: %s", len(batch), exc)
                await asyncio.sleep(0.1)

    async def _append(self, batch: list[Datagram]) -> None:
        info = await self._topic()  # cached by the store for a second: sees new partitions
        if info is None:
            self.stats.failed += len(batch)
            log.warning("UDP ingest: topic %s does not exist; dropped", self.topic)
            return
        self._info = info
        partitions = info.partitions
        log_append = effective_config(info, "message.timestamp.type") == "LogAppendTime"
        by_partition: dict[int, list[Datagram]] = {}
        for d in batch:
            if d.key is not None:
                p = partition_for_key(d.key, partitions)
            else:
                p = self._next_partition % partitions
                self._next_partition = p + 1
            by_partition.setdefault(p, []).append(d)
        results = await asyncio.gather(
            *(self._append_partition(info, p, ds, log_append) for p, ds in by_partition.items())
        )
        self.stats.batches += len(results)

    async def _append_partition(
        self, info: TopicInfo, partition: int, batch: list[Datagram], log_append: bool
    ) -> None:
        base_flags = FLAG_LOG_APPEND if log_append else 0
        max_ts, max_delta = -1, 0
        records: list[Any] = []
        for i, d in enumerate(batch):
            if d.timestamp > max_ts:
                max_ts, max_delta = d.timestamp, i
            flags = (
                base_flags
                | (FLAG_KEY_NULL if d.key is None else 0)
                | (FLAG_VALUE_NULL if d.value is None else 0)
            )
            records += (d.timestamp, d.key or b"", d.value or b"", d.headers, flags)
        args = [len(batch), 1 if log_append else 0, max_ts, max_delta, -1, -1, -1, *records]
        store = self.broker.store
        try:
            # a `batch` topic stores the datagrams as one batch (storage_format.py)
            await store.append(store.prepare_records(info, partition, args))
        except StoreError as exc:
            self.stats.failed += len(batch)
            log.warning(
                "UDP ingest: %d record(s) for %s-%d not appended: %s",
                len(batch),
                self.topic,
                partition,
                exc,
            )
            return
        self.stats.appended += len(batch)

    # -- reporting ---------------------------------------------------------------------------

    async def _report(self) -> None:
        last: dict[str, int] = {}
        while True:
            await asyncio.sleep(self.stats_interval)
            now = self.stats.as_dict()
            if now != last:
                log.info("UDP ingest: %s", self.stats.line())
                last = now
