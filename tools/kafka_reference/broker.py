"""Fetching Apache Kafka's jars from Maven Central and running the Kafka broker, redis-server
and Skiff, each stopped by pid."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conftest import free_port, stop_process, wait_for_port
from kafka_jars import JarsUnavailable, broker_jars
from rawkafka import (
    ConnectionClosed,
    ProtocolError,
    RawKafka,
    metadata_request,
)

from .constants import API_VERSIONS, METADATA, ROOT
from .talk import api_versions_body

_T0 = time.monotonic()


def say(message: str) -> None:
    print(f"[{time.monotonic() - _T0:6.1f}s] {message}", flush=True)


# -- processes ------------------------------------------------------------------------------


class Processes:
    """Every long-running child this tool starts, stopped by pid (newest first)."""

    def __init__(self) -> None:
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(
        self,
        name: str,
        cmd: list[str],
        log: Path,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> Any:
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                cmd,
                cwd=cwd,
                env={**os.environ, **env} if env else None,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches only us; we stop the children in order
            )
        self.children.append((name, proc))
        say(f"started {name} (pid {proc.pid})")
        return proc

    def stop_all(self) -> None:
        while self.children:
            name, proc = self.children.pop()
            if proc.poll() is None:
                say(f"stopping {name} (pid {proc.pid})")
                stop_process(proc)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# -- Apache Kafka ------------------------------------------------------------------------------


def kafka_jars(version: str) -> Path:
    """The folder holding the broker's jars (kafka_2.13 and its runtime dependencies: kafka-server,
    -raft, -metadata, -storage, -clients, scala, ... plus slf4j-simple), fetched once."""
    try:
        lib = broker_jars(version, say)
    except JarsUnavailable as exc:
        raise RuntimeError(str(exc)) from None
    say(f"Kafka {version} jars: {lib} ({len(list(lib.glob('*.jar')))} jars)")
    return lib


def random_cluster_id() -> str:
    """Like Kafka's Uuid.randomUuid().toString(): 22 base64url characters, no leading '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def kafka_properties(
    port: int, controller_port: int, log_dir: Path, extra: dict[str, str] | None = None
) -> str:
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dir),
        "num.partitions": "1",
        "default.replication.factor": "1",
        "auto.create.topics.enable": "true",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",  # Skiff gets the same (SKIFF_ENV)
        "offsets.retention.check.interval.ms": "1000",
        "num.network.threads": "2",
        "num.io.threads": "2",
        # `{port}` and `{controller_port}` in a value are this broker's ports (another
        # listener's `listeners` names both)
        **{
            k: v.replace("{port}", str(port)).replace("{controller_port}", str(controller_port))
            for k, v in (extra or {}).items()
        },
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


# The scenarios' records carry fixed 2020 timestamps: no time retention on either side, so
# that neither removes them in the middle of a run (Skiff gets the same, SKIFF_ENV).
SCENARIO_PROPERTIES = {"log.retention.ms": "-1"}

# Skiff's settings for what kafka_properties and SCENARIO_PROPERTIES change from Kafka's
# defaults
SKIFF_ENV = {
    "SKIFF_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
    "SKIFF_OFFSETS_RETENTION_CHECK_INTERVAL_MS": "1000",
    "SKIFF_LOG_RETENTION_MS": "-1",
}


def start_kafka(
    procs: Processes,
    version: str,
    work: Path,
    start_timeout: float,
    extra: dict[str, str] | None = None,
) -> int:
    """Start a KRaft broker; `extra` adds to (or overrides) kafka_properties' (`{port}`
    and `{controller_port}` in its values are the broker's ports)."""
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java is not installed (apt-get install openjdk-17-jre-headless)")
    lib = kafka_jars(version)
    port, controller_port = free_port(), free_port()
    config = work / "server.properties"
    config.write_text(kafka_properties(port, controller_port, work / "kafka-logs", extra))
    jvm = [
        java,
        "-Xms256m",
        "-Xmx1g",
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        str(lib / "*"),
    ]
    cluster_id = random_cluster_id()
    say(f"formatting the KRaft log dir (cluster id {cluster_id})")
    log = work / "kafka.log"
    with open(log, "ab") as out:
        subprocess.run(
            [*jvm, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)],
            check=True,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
    proc = procs.start(
        f"Kafka {version} on 127.0.0.1:{port}", [*jvm, "kafka.Kafka", str(config)], log
    )
    try:
        wait_kafka_ready(port, proc, start_timeout)
    except RuntimeError as exc:
        raise RuntimeError(f"{exc}\n--- {log} ---\n{tail(log)}") from None
    return port


@contextmanager
def running_kafka(
    version: str, work: Path, start_timeout: float = 120.0, extra: dict[str, str] | None = None
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """start_kafka with its own Processes, stopped by pid on the way out (also on an error or
    Ctrl-C); yields the broker's port and its JVM process. For tests and bench/vs_kafka.py."""
    work.mkdir(parents=True, exist_ok=True)
    procs = Processes()
    try:
        port = start_kafka(procs, version, work, start_timeout, extra)
        yield port, procs.children[-1][1]
    finally:
        procs.stop_all()


def wait_kafka_ready(port: int, proc: Any, timeout: float) -> None:
    """Until the broker answers ApiVersions and its Metadata lists a broker and a controller."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"Kafka exited with {proc.returncode} while starting")
        try:
            with RawKafka("127.0.0.1", port, timeout=3) as client:
                versions = client.request(API_VERSIONS, 3, api_versions_body())
                meta = client.request(METADATA, 12, metadata_request([]))
                if versions.error_code == 0 and meta.brokers and meta.controller_id >= 0:
                    say(f"Kafka answers on 127.0.0.1:{port}")
                    return
        except (OSError, ConnectionClosed, ProtocolError):
            pass
        time.sleep(0.3)
    raise RuntimeError(f"Kafka did not become ready within {timeout:.0f}s")


# -- Skiff ----------------------------------------------------------------------------------


def start_skiff(procs: Processes, work: Path) -> int:
    redis_server = shutil.which("redis-server")
    if redis_server is None:
        raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
    redis_port, port = free_port(), free_port()
    (work / "redis").mkdir()
    redis_proc = procs.start(
        f"redis-server on 127.0.0.1:{redis_port}",
        [
            redis_server,
            "--port",
            str(redis_port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(work / "redis"),
            "--daemonize",
            "no",
        ],
        work / "redis.log",
    )
    wait_for_port(redis_port, redis_proc)
    log = work / "skiff.log"
    skiff = procs.start(
        f"Skiff on 127.0.0.1:{port}",
        [
            sys.executable,
            "-m",
            "sidecar.cli.main",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--redis-url",
            f"redis://127.0.0.1:{redis_port}/0",
            "--http-listen",
            "none",
        ],
        log,
        cwd=ROOT,
        env=SKIFF_ENV,
    )
    try:
        wait_for_port(port, skiff)
    except RuntimeError as exc:
        raise RuntimeError(f"Skiff did not start: {exc}\n--- {log} ---\n{tail(log)}") from None
    say(f"Skiff answers on 127.0.0.1:{port}")
    return port
