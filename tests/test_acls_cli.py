"""Kafka's own `kafka-acls` against Skiff and against a real Kafka broker running
Kafka's StandardAuthorizer, with the same commands: the same output (adding, listing
with each filter kind, removing) on both. Both make User:ANONYMOUS (every PLAINTEXT
client) a super user so the tool may manage ACLs. Skipped without java or mvn, as the
other Kafka-tools tests are."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pytest
from conftest import RedisServer, start_skiff, stop_process
from kafka_tools import ToolsUnavailable, kafka_acls, reference_kafka

AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}


@pytest.fixture(scope="module")
def kafka() -> Iterator[str]:
    try:
        with reference_kafka(AUTHORIZER) as bootstrap:
            yield bootstrap
    except ToolsUnavailable as exc:
        pytest.skip(f"no reference Kafka: {exc}")


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
]  # fmt: skip


def run_step(step: list[str], bootstrap: str) -> subprocess.CompletedProcess[str]:
    return kafka_acls(bootstrap, *step)


@pytest.mark.timeout(900)  # two dozen JVM starts per broker on a loaded machine
def test_kafka_acls_same_output_on_skiff_and_kafka(kafka: str, skiff_acls: str) -> None:
    with ThreadPoolExecutor(2) as pool:
        for step in STEPS:
            on_kafka, on_skiff = pool.map(partial(run_step, step), (kafka, skiff_acls))
            assert on_kafka.returncode == 0, (step, on_kafka.stdout, on_kafka.stderr)
            assert (on_skiff.returncode, on_skiff.stderr) == (0, ""), step
            assert normalized(on_skiff.stdout) == normalized(on_kafka.stdout), step
    # What is left: the LITERAL ACLs of topic orders, without bob's WRITE.
    left = normalized(on_skiff.stdout)
    assert [re.findall(r"name=([^,]*)", head) for head, _ in left] == [["orders"]]
    assert len(left[0][1]) == 4
