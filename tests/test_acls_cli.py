"""Kafka's own `kafka-acls` against Skiff and against a real Kafka 4.x broker running
Kafka's StandardAuthorizer, with the same commands: the same output (adding, listing
with each filter kind, removing) on both, with the tool of Kafka 3.9 (Scala) and of 4.x
(rewritten in Java). Both make User:ANONYMOUS (every PLAINTEXT client) a super user so
the tool may manage ACLs. The Kafka broker is the session's (conftest.kafka4_admin);
every run of one tool against one broker shares a JVM (kafka_tools.run_batch). Skipped
without java or mvn, as the other Kafka-tools tests are."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import RedisServer, start_skiff, stop_process
from kafka_tools import ADMIN_KAFKA_VERSION, AUTHORIZER, AdminKafka, run_batch

TOOL_VERSIONS = ("3.9.1", ADMIN_KAFKA_VERSION)


@pytest.fixture
def skiff_acls(own_redis: RedisServer, tmp_path: Path) -> Iterator[str]:
    """Skiff configured from the same server.properties keys as the Kafka broker."""
    config = tmp_path / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in AUTHORIZER.items()))
    server = start_skiff(
        tmp_path / "skiff.log", "--redis-url", own_redis.url, "--config", str(config)
    )
    yield server.bootstrap
    stop_process(server.proc)


def normalized(output: str) -> list[tuple[str, tuple[str, ...]]]:
    """The tool's blocks ("Current ACLs for resource `...`:" and its tab-indented
    entries), each block's entries sorted and the blocks sorted: Kafka answers in a hash
    order, Skiff in a fixed one; what is listed must be the same."""
    blocks: list[tuple[str, list[str]]] = []
    for line in output.splitlines():
        if not line.strip():
            continue
        if line.startswith(("\t", " ")) and blocks:
            blocks[-1][1].append(line.strip())
        else:
            blocks.append((line.strip(), []))
    return sorted((head, tuple(sorted(entries))) for head, entries in blocks)


# Each step runs against both brokers; its output must be the same.
STEPS: list[list[str]] = [
    ["--list"],
    [
        "--add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
        "--operation", "Read", "--operation", "Write", "--topic", "orders",
    ],
    [
        "--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9",
        "--operation", "All", "--topic", "orders",
    ],
    [
        "--add", "--allow-principal", "User:alice", "--operation", "Read",
        "--group", "app-", "--resource-pattern-type", "prefixed",
    ],
    ["--add", "--allow-principal", "User:*", "--operation", "Describe", "--cluster"],
    ["--add", "--allow-principal", "User:alice", "--operation", "Describe", "--topic", "*"],
    [
        "--add", "--allow-principal", "User:carol", "--operation", "Write",
        "--topic", "ord", "--resource-pattern-type", "prefixed",
    ],
    # the same ACL again: nothing changes
    ["--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders"],
    ["--list"],
    ["--list", "--topic", "orders"],
    ["--list", "--topic", "orders", "--resource-pattern-type", "match"],
    ["--list", "--principal", "User:alice"],
    ["--list", "--group", "app-", "--resource-pattern-type", "any"],
    ["--list", "--topic", "nothing-here"],
    [
        "--remove", "--force", "--allow-principal", "User:bob", "--operation", "Write",
        "--topic", "orders",
    ],
    ["--remove", "--force", "--group", "app-", "--resource-pattern-type", "prefixed"],
    ["--remove", "--force", "--topic", "ord", "--resource-pattern-type", "match"],
    ["--list"],
    ["--remove", "--force", "--cluster"],
    ["--remove", "--force", "--topic", "*"],
    ["--list"],
    ["--remove", "--force", "--topic", "orders"],
    ["--list"],
]  # fmt: skip


def run_steps(version: str, bootstrap: str) -> list[subprocess.CompletedProcess[str]]:
    return run_batch(version, "kafka-acls", [["--bootstrap-server", bootstrap, *s] for s in STEPS])


@pytest.mark.timeout(600)
@pytest.mark.parametrize("tool", TOOL_VERSIONS)
def test_kafka_acls_same_output_on_skiff_and_kafka(
    kafka4_admin: AdminKafka, skiff_acls: str, tool: str
) -> None:
    with ThreadPoolExecutor(2) as pool:
        on_kafka, on_skiff = pool.map(
            lambda bootstrap: run_steps(tool, bootstrap), (kafka4_admin.bootstrap, skiff_acls)
        )
    for step, kafka, skiff in zip(STEPS, on_kafka, on_skiff, strict=True):
        assert kafka.returncode == 0, (step, kafka.stdout, kafka.stderr)
        assert (skiff.returncode, skiff.stderr) == (0, ""), step
        assert normalized(skiff.stdout) == normalized(kafka.stdout), step
    # What is left before the last removal: the LITERAL ACLs of topic orders, without
    # bob's WRITE.
    left = normalized(on_skiff[-3].stdout)
    assert [re.findall(r"name=([^,]*)", head) for head, _ in left] == [["orders"]]
    assert len(left[0][1]) == 4
    assert on_kafka[-1].stdout == ""  # the broker is left without ACLs for the next run
