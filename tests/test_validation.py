"""sidecar/validation against the parts it stands in for: a batch's size as a real Kafka
client encodes it (kafka-python's DefaultRecordBatchBuilder), Kafka's topic name rules,
and the CLIs refusing what the broker would refuse before any network call."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT
from kafka.record.default_records import DefaultRecordBatchBuilder

from sidecar.protocol.record_batch import encode_headers
from sidecar.validation import record_sizes, topic_configs, topic_names

RECORDS = [
    [(1_700_000_000_000, None, b"v", [])],
    [(1_700_000_000_000, b"k", None, [])],  # a tombstone
    [(5, b"", b"", [("h", b"x"), ("null", None)])],
    [(1_700_000_000_000 + i * 37, b"key-%d" % i, b"v" * (i * 50), []) for i in range(40)],
    [(1000, b"k", b"a" * 200, [("a" * 130, b"b" * 300)]), (10, None, b"older", [])],  # ts < base
    [(0, None, b"x" * 20_000, [("k", None)] * 70)],  # varints of 3 bytes, 70 headers
]


@pytest.mark.parametrize("records", RECORDS)
def test_batch_size_is_what_a_kafka_client_sends(
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
) -> None:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 2**31 - 1)
    for offset, (ts, key, value, headers) in enumerate(records):
        builder.append(offset, ts, key, value, headers)
    sent = len(builder.build())
    ours = record_sizes.batch_size((ts, k, v, encode_headers(h)) for ts, k, v, h in records)
    assert ours == sent


def test_topic_names_follow_kafka() -> None:
    for good in ("a", "A.b_c-9", "x" * 249, "..."):
        assert topic_names.check(good) == good
    for bad, why in [
        ("", "the empty string is not allowed"),
        (".", "'.' is not allowed"),
        ("..", "'..' is not allowed"),
        ("x" * 250, "is longer than the max allowed length 249"),
        ("bad/name", "contains one or more characters other than ASCII alphanumerics"),
        ("my topic", "contains one or more characters other than ASCII alphanumerics"),
        ("ünï", "contains one or more characters other than ASCII alphanumerics"),
    ]:
        with pytest.raises(topic_names.InvalidTopicName, match=why):
            topic_names.check(bad)
    with pytest.raises(topic_names.InvalidTopicName, match="topic names are strings"):
        topic_names.check({})


def test_topic_configs_are_checked_as_kafka_checks_them() -> None:
    assert topic_configs.validate([("retention.ms", "1000")]) == {"retention.ms": "1000"}
    with pytest.raises(topic_configs.ConfigError, match="Unknown topic config name: nope"):
        topic_configs.check_value("nope", "1")
    with pytest.raises(topic_configs.ConfigError, match="retention.ms"):
        topic_configs.check_value("retention.ms", "soon")


def skiff(*args: str) -> subprocess.CompletedProcess[str]:
    # Port 1: nothing listens there, so a command that reached the network would fail
    # with "cannot connect" (exit 1), not with the validation error (exit 2).
    return subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", *args, "--bootstrap", "127.0.0.1:1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("topics", "create", "bad/name"), "INVALID_TOPIC_EXCEPTION (Topic name is invalid"),
        (("topics", "create", "x" * 250), "is longer than the max allowed length 249"),
        (
            ("topics", "create", "ok", "--config", "no.such.config=1"),
            "INVALID_CONFIG (Unknown topic config name: no.such.config)",
        ),
        (("topics", "create", "ok", "--config", "retention.ms=soon"), "INVALID_CONFIG ("),
        (("topics", "alter", "ok", "--config", "retention.ms=soon"), "INVALID_CONFIG ("),
    ],
)
def test_cli_refuses_before_any_network_call(args: tuple[str, ...], said: str) -> None:
    proc = skiff(*args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], proc.stderr
    assert lines[0].endswith("nothing was sent to the broker")


def test_queues_redrive_refuses_an_illegal_dead_letter_topic() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sidecar.cli.main",
            "queues",
            "redrive",
            "g",
            "--dead-letter-topic",
            "bad/name",
            "--http",
            "http://127.0.0.1:1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "argument --dead-letter-topic: Topic name is invalid" in proc.stderr
