"""Authorized operations and topic hiding, Skiff against a real Kafka broker with the
same ACLs (tools/kafka_reference): DescribeCluster's and Metadata's authorized
operations, which topics Metadata shows, DescribeGroups' operations.

Both run the StandardAuthorizer with allow.everyone.if.no.acl.found=true and get the same
ACLs through CreateAcls. Every client is User:ANONYMOUS (PLAINTEXT), so the ACLs tell
the principal under test apart by host: it connects from 127.0.0.2; the set-up (and
Kafka's own broker-to-controller traffic) from 127.0.0.1 is allowed everything.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, start_redis, start_skiff, stop_process
from rawkafka import RawKafka

KAFKA_VERSION = "4.2.0"  # its authorized operations are the ones Skiff reports
CLIENT_HOST = "127.0.0.2"
SETUP_HOST = "127.0.0.1"
TOPICS = ("ref-a", "ref-b", "other")
GROUPS = ("g-ref", "other-group")
COORDINATOR_LOADING = {14, 15, 16}
LITERAL, PREFIXED = 3, 4
ALLOW, DENY = 3, 2
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 2, 3, 4, 5
ALL, READ, WRITE, DELETE, DESCRIBE = 2, 3, 4, 6, 8
ALTER_CONFIGS, DESCRIBE_CONFIGS, IDEMPOTENT_WRITE = 11, 10, 12


def _acl(rtype: int, name: str, pattern: int, host: str, op: int, perm: int) -> dict[str, Any]:
    return {
        "resource_type": rtype,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": "User:ANONYMOUS",
        "host": host,
        "operation": op,
        "permission_type": perm,
    }


ACLS = [
    # the set-up host may do everything (Kafka's broker itself connects from it too)
    *(
        _acl(rtype, name, LITERAL, SETUP_HOST, ALL, ALLOW)
        for rtype, name in ((CLUSTER, "kafka-cluster"), (TOPIC, "*"), (GROUP, "*"))
    ),
    _acl(TRANSACTIONAL_ID, "*", LITERAL, SETUP_HOST, ALL, ALLOW),
    # the principal under test
    _acl(CLUSTER, "kafka-cluster", LITERAL, CLIENT_HOST, DESCRIBE, ALLOW),
    _acl(CLUSTER, "kafka-cluster", LITERAL, CLIENT_HOST, ALTER_CONFIGS, ALLOW),
    _acl(CLUSTER, "kafka-cluster", LITERAL, CLIENT_HOST, IDEMPOTENT_WRITE, DENY),
    _acl(TOPIC, "ref-", PREFIXED, CLIENT_HOST, READ, ALLOW),
    _acl(TOPIC, "ref-", PREFIXED, CLIENT_HOST, WRITE, ALLOW),
    _acl(TOPIC, "ref-b", LITERAL, CLIENT_HOST, WRITE, DENY),
    _acl(TOPIC, "ref-a", LITERAL, CLIENT_HOST, DESCRIBE_CONFIGS, ALLOW),
    _acl(GROUP, "g-", PREFIXED, CLIENT_HOST, DELETE, ALLOW),
    _acl(GROUP, "g-ref", LITERAL, CLIENT_HOST, READ, ALLOW),
]


def _ask(port: int, key: int, version: int, body: dict[str, Any], host: str) -> Any:
    with RawKafka("127.0.0.1", port, timeout=30, source_host=host) as client:
        return client.request(key, version, body)


def _until(port: int, key: int, version: int, body: dict[str, Any], ok: Any) -> Any:
    """Ask from the set-up host until `ok(answer)` (a broker still starting up)."""
    deadline = time.monotonic() + 90
    while True:
        answer = _ask(port, key, version, body, SETUP_HOST)
        if ok(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(0.5)


def _prepare(port: int) -> None:
    created = _ask(port, 30, 3, {"creations": ACLS}, SETUP_HOST)
    assert {r.error_code for r in created.results} == {0}, created
    for name in TOPICS:
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout": 30_000,
            "validate_only": False,
        }
        answer = _until(port, 19, 7, body, lambda a: a.topics[0].error_code in (0, 36))
        assert answer.topics[0].error_code in (0, 36), answer  # 36: exists
    # Kafka creates its offsets topic on the first FindCoordinator.
    find = {"key_type": 0, "coordinator_keys": ["g-ref"]}
    _until(port, 10, 4, find, lambda a: a.coordinators[0].error_code == 0)
    commit = {
        "group_id": "g-ref",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": "ref-a",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 0,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }
    answer = _until(port, 8, 8, commit, lambda a: a.topics[0].partitions[0].error_code == 0)
    assert answer.topics[0].partitions[0].error_code == 0, answer


def _observe(port: int) -> dict[str, Any]:
    """What the principal under test sees."""
    cluster = _ask(port, 60, 1, {"include_cluster_authorized_operations": True}, CLIENT_HOST)
    named = _ask(
        port,
        3,
        10,
        {
            "topics": [{"name": n, "topic_id": None} for n in TOPICS],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": True,
            "include_topic_authorized_operations": True,
        },
        CLIENT_HOST,
    )
    every = _ask(
        port,
        3,
        12,
        {"topics": None, "allow_auto_topic_creation": False},
        CLIENT_HOST,
    )
    body = {"groups": list(GROUPS), "include_authorized_operations": True}
    deadline = time.monotonic() + 90
    while True:
        groups = _ask(port, 15, 5, body, CLIENT_HOST)
        loading = {int(g.error_code) for g in groups.groups} & COORDINATOR_LOADING
        if not loading or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return {
        "describe_cluster": cluster.cluster_authorized_operations,
        "metadata_cluster": named.cluster_authorized_operations,
        "metadata_topics": {
            t.name: (int(t.error_code), t.topic_authorized_operations) for t in named.topics
        },
        "all_topics": sorted(t.name for t in every.topics if t.name in TOPICS),
        "groups": {g.group_id: (int(g.error_code), g.authorized_operations) for g in groups.groups},
    }


@pytest.fixture(scope="module")
def kafka_port() -> Iterator[int]:
    if shutil.which("java") is None:
        pytest.skip("java is not installed (apt-get install openjdk-17-jre-headless)")
    jars = Path.home() / ".cache" / "skiff" / f"kafka-{KAFKA_VERSION}" / "lib"
    if not (jars / ".complete").exists() and shutil.which("mvn") is None:
        pytest.skip("no cached Kafka jars and no mvn to fetch them")
    sys.path.insert(0, str(ROOT / "tools"))
    import kafka_reference

    authorizer = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    with (
        tempfile.TemporaryDirectory(prefix="authz-kafka-") as work,
        kafka_reference.running_kafka(KAFKA_VERSION, Path(work), 120, authorizer) as (port, _),
    ):
        yield port


def test_authorized_operations_and_hiding_match_kafka(kafka_port: int, tmp_path: Path) -> None:
    _prepare(kafka_port)
    kafka = _observe(kafka_port)
    server = start_redis(tmp_path / "redis")
    skiff = None
    try:
        skiff = start_skiff(
            tmp_path / "skiff.log",
            "--redis-url",
            server.url,
            "--authorizer-class-name",
            "standard",
            "--allow-everyone-if-no-acl-found",
            "true",
        )
        _prepare(skiff.port)
        ours = _observe(skiff.port)
    finally:
        if skiff is not None:
            stop_process(skiff.proc)
        stop_process(server.proc)
    assert ours == kafka
    # and they say something: the topic without ACLs for this host is hidden
    assert kafka["all_topics"] == ["ref-a", "ref-b"]
