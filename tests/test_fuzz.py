"""Fuzzing: no frame crashes a sidecar, leaves a traceback in its log or goes
unanswered.

* Coverage-guided (atheris/libFuzzer, tests/fuzz_decode.py) over request decoding, in
  a child process seeded with a valid frame for every API and version Skiff serves.
* Structured mutations of those frames (lengths and counts made huge, negative or
  null, bytes flipped, frames cut short or padded) sent over TCP to a real sidecar
  with a real redis-server. Each mutated frame is followed on its connection by an
  ApiVersions request: within a deadline the sidecar answers it or closes the
  connection. Afterwards the sidecar is alive, has logged no traceback, and answers
  ApiVersions and a produce/fetch canary.

The run takes SKIFF_FUZZ_SECONDS (default 60) in all, a third of it coverage-guided;
a longer run: SKIFF_FUZZ_SECONDS=3600 .venv/bin/pytest tests/test_fuzz.py
"""

from __future__ import annotations

import importlib.util
import os
import random
import socket
import struct
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import request_samples
from conftest import ROOT, RedisServer, Skiff, start_skiff, stop_process
from rawkafka import (
    ConnectionClosed,
    RawKafka,
    Rec,
    build_batch,
    fetch_request,
    fetched_records,
    produce_request,
)

SECONDS = float(os.environ.get("SKIFF_FUZZ_SECONDS", "60"))
GUIDED_SECONDS = max(5, int(SECONDS / 3))
MUTATION_SECONDS = max(5.0, SECONDS - GUIDED_SECONDS)
DEADLINE = 15.0  # seconds for an answer or a close, on a loaded machine
SENTINEL = -7  # correlation id of the ApiVersions request behind each mutated frame
# APIs that may legitimately hold a request for as long as the (mutated) request asks:
# Fetch and ShareFetch long-polls, JoinGroup/SyncGroup rebalances, Produce's timeout.
WAITING_APIS = {0, 1, 11, 14, 78}
pytestmark = pytest.mark.timeout(int(SECONDS) * 3 + 180)


@pytest.fixture(scope="module")
def fuzzed_skiff(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Skiff]:
    """A sidecar of its own (its log is checked whole) on its own Redis database, so
    mutated admin requests touch no other test's topics."""
    log_path = tmp_path_factory.mktemp("fuzz") / "skiff.log"
    url = redis_server.url.rsplit("/", 1)[0] + "/7"
    server = start_skiff(log_path, "--redis-url", url)
    yield server
    stop_process(server.proc)


def test_coverage_guided_decoding(tmp_path: Path) -> None:
    if importlib.util.find_spec("atheris") is None:
        pytest.skip("atheris is installed on CPython 3.11 only (pyproject.toml)")
    corpus = tmp_path / "corpus"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests" / "fuzz_decode.py"),
            str(corpus),
            f"-max_total_time={GUIDED_SECONDS}",
            "-timeout=20",  # seconds for one input: a hang
            "-rss_limit_mb=2048",
            "-malloc_limit_mb=512",  # one allocation over this is a finding
            "-print_final_stats=1",
            f"-artifact_prefix={tmp_path}/",  # a finding's input, named in the output
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=GUIDED_SECONDS + 240,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    runs = [line for line in output.splitlines() if line.startswith("stat::number_of_executed")]
    assert runs and int(runs[0].split(":")[-1]) > 1000, output[-3000:]


# -- structured mutations over TCP ----------------------------------------------------

HUGE_VALUES = [
    b"\xff\xff\xff\xff\x0f",  # uvarint 2**32 - 1
    b"\x80\x80\x80\x80\x08",  # uvarint 2**31
    b"\xff\xff\xff\xff\xff\xff",  # a varint that never ends
    b"\x7f\xff\xff\xff",  # int32 2**31 - 1
    b"\xff\xff\xff\xff",  # int32 -1: null
    b"\xff\xfe",  # int16 -2
    b"\x80\x00\x00\x00",  # int32 -2**31
    b"\x00",  # compact null
]

Mutation = Callable[[random.Random, bytes], bytes]


def overwrite(rng: random.Random, body: bytes) -> bytes:
    """A length-like value written over the body at a random place."""
    at = rng.randrange(len(body) + 1)
    value = rng.choice(HUGE_VALUES)
    return body[:at] + value + body[at + len(value) :]


def insert(rng: random.Random, body: bytes) -> bytes:
    at = rng.randrange(len(body) + 1)
    return body[:at] + rng.choice(HUGE_VALUES) + body[at:]


def flip(rng: random.Random, body: bytes) -> bytes:
    out = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        if out:
            out[rng.randrange(len(out))] = rng.choice(
                (0x00, 0x01, 0x7F, 0x80, 0xFF, rng.getrandbits(8))
            )
    return bytes(out)


def cut(rng: random.Random, body: bytes) -> bytes:
    return body[: rng.randrange(len(body) + 1)]


def pad(rng: random.Random, body: bytes) -> bytes:
    return body + bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64)))


def splice(rng: random.Random, body: bytes) -> bytes:
    """A piece of another API's valid body in the middle of this one."""
    key, version = rng.choice(list(request_samples.served()))
    other = request_samples.body(key, version)
    start = rng.randrange(len(other) + 1)
    piece = other[start : start + rng.randint(1, 32)]
    at = rng.randrange(len(body) + 1)
    return body[:at] + piece + body[at:]


MUTATIONS: list[Mutation] = [overwrite, overwrite, insert, flip, flip, cut, pad, splice]


class Outcome:
    ANSWERED, CLOSED, WAITING = "answered", "closed", "waiting"


def send_and_settle(kafka: RawKafka, frame: bytes, api_key: int) -> str:
    """Send the mutated frame and an ApiVersions request behind it; wait until that is
    answered or the connection is closed."""
    sentinel = request_samples.frame(18, 0, b"", SENTINEL)
    try:
        kafka.send_raw(frame + sentinel)
    except OSError:
        return Outcome.CLOSED  # closed while the frame was still being sent
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            response = kafka.recv_raw(timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            if api_key in WAITING_APIS:
                return Outcome.WAITING
            raise AssertionError(
                f"no answer and no close within {DEADLINE}s for {frame.hex()}"
            ) from None
        except (ConnectionClosed, OSError):
            return Outcome.CLOSED
        if struct.unpack_from(">i", response)[0] == SENTINEL:
            return Outcome.ANSWERED


def test_structured_mutations_over_tcp(fuzzed_skiff: Skiff) -> None:
    rng = random.Random(int(os.environ.get("SKIFF_FUZZ_SEED", "20261125")))
    samples = [(k, v, request_samples.body(k, v)) for k, v in request_samples.served()]
    outcomes: Counter[str] = Counter()
    kafka: RawKafka | None = None
    stop = time.monotonic() + MUTATION_SECONDS
    sent = 0
    try:
        # Every API and version at least once, then random picks until the time is up.
        while sent < len(samples) or time.monotonic() < stop:
            key, version, body = samples[sent] if sent < len(samples) else rng.choice(samples)
            for _ in range(rng.randint(1, 3)):
                body = rng.choice(MUTATIONS)(rng, body)
            frame = request_samples.frame(key, version, body, sent)
            if kafka is None:
                kafka = RawKafka("127.0.0.1", fuzzed_skiff.port, timeout=DEADLINE)
            outcome = send_and_settle(kafka, frame, key)
            outcomes[outcome] += 1
            if outcome != Outcome.ANSWERED:
                kafka.close()
                kafka = None
            sent += 1
            if sent % 200 == 0:
                assert fuzzed_skiff.alive(), fuzzed_skiff.log()[-3000:]
    finally:
        if kafka is not None:
            kafka.close()
    print(f"{sent} mutated frames: {dict(outcomes)}")
    assert outcomes[Outcome.ANSWERED] and outcomes[Outcome.CLOSED]
    assert_healthy(fuzzed_skiff)


def assert_healthy(server: Skiff) -> None:
    assert server.alive(), f"the sidecar died:\n{server.log()[-3000:]}"
    log = server.log()
    assert "Traceback" not in log, log[log.index("Traceback") - 2000 :][:6000]
    with RawKafka("127.0.0.1", server.port, timeout=DEADLINE) as kafka:
        resp = kafka.request(
            18, 3, {"client_software_name": "fuzz", "client_software_version": "1"}
        )
        assert resp.error_code == 0
        topic = f"fuzz-canary-{os.getpid()}-{time.monotonic_ns()}"
        batch = build_batch([Rec(b"canary-%d" % i) for i in range(3)])
        produced = kafka.request(0, 9, produce_request(topic, {0: batch}))
        assert produced.responses[0].partition_responses[0].error_code == 0
        fetched = kafka.request(1, 12, fetch_request(topic, {0: 0}))
        records = fetched_records(fetched.responses[0].partitions[0].records)
        assert [r.value for r in records] == [b"canary-0", b"canary-1", b"canary-2"]
    # A fresh connection is still accepted.
    with socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE):
        pass
