"""`skiff serve` flags and their SKIFF_* environment variables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import AdminClient
from conftest import ROOT, RedisServer, free_port, start_skiff, stop_process


def test_environment_variables_set_flags(own_redis: RedisServer, tmp_path: Path) -> None:
    server = start_skiff(
        tmp_path / "skiff.log",
        env={
            "SKIFF_REDIS_URL": own_redis.url,
            "SKIFF_NUM_PARTITIONS": "3",
            "SKIFF_ADVERTISE": "localhost.example:19999",
        },
    )
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        # Metadata auto-creates the topic with SKIFF_NUM_PARTITIONS partitions.
        meta = admin.list_topics("env-flags-topic", timeout=10)
        assert len(meta.topics["env-flags-topic"].partitions) == 3
        assert [(b.host, b.port) for b in meta.brokers.values()] == [("localhost.example", 19999)]
        assert "advertised as localhost.example:19999" in server.log()
        assert own_redis.url in server.log()  # the log says which Redis it uses
    finally:
        stop_process(server.proc)
    assert server.proc.returncode == 0


def test_a_flag_overrides_its_environment_variable(own_redis: RedisServer, tmp_path: Path) -> None:
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--auto-create-topics",
        "false",
        env={"SKIFF_AUTO_CREATE_TOPICS": "true"},
    )
    try:
        meta = AdminClient({"bootstrap.servers": server.bootstrap}).list_topics(
            "never-created", timeout=10
        )
        assert meta.topics["never-created"].error is not None
    finally:
        stop_process(server.proc)


def test_bad_flag_values_are_refused_with_a_message() -> None:
    for args, says in (
        (["--listen", "nonsense"], "expected HOST:PORT"),
        (["--auto-create-topics", "maybe"], "expected true or false"),
        (["--message-timestamp-type", "Whenever"], "invalid choice"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "sidecar.cli.main", "serve", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.returncode == 2, args
        assert says in proc.stderr, proc.stderr


def test_unreachable_redis_fails_start_up_with_a_clear_message() -> None:
    port = free_port()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sidecar.cli.main",
            "serve",
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--redis-url",
            f"redis://127.0.0.1:{port}/0",
            "--redis-connect-timeout",
            "2",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 1
    assert f"cannot reach Redis at redis://127.0.0.1:{port}/0" in proc.stderr
