"""Authorization seen by real clients (librdkafka through confluent-kafka).

Each test has its own Redis. An admin sidecar (the ACL authorizer, User:ANONYMOUS a
super user) creates the ACLs with confluent-kafka's AdminClient and the data, and is
stopped; then a sidecar whose ANONYMOUS has only those ACLs serves the client alone (the
cluster's only broker, so no request reaches the admin one).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from conftest import RedisServer, Skiff, start_redis, start_skiff, stop_process
from rawkafka import RawKafka

ACL_AUTHORIZER = ("--authorizer-class-name", "standard")
DEADLINE = 30.0


class Cluster:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.redis: RedisServer = start_redis(tmp / "redis")
        self.sidecar: Skiff | None = None

    def prepare(self, topics: list[str], acls: list[AclBinding]) -> None:
        """Through an admin sidecar: the topics (one partition, two records each) and
        the ACLs; the admin sidecar is stopped afterwards."""
        admin_side = start_skiff(
            self.tmp / "admin.log",
            "--redis-url",
            self.redis.url,
            *ACL_AUTHORIZER,
            "--super-users",
            "User:ANONYMOUS",
        )
        try:
            admin = AdminClient({"bootstrap.servers": admin_side.bootstrap})
            for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
                future.result(DEADLINE)
            producer = Producer({"bootstrap.servers": admin_side.bootstrap})
            for t in topics:
                for value in (b"one", b"two"):
                    producer.produce(t, value)
            assert producer.flush(DEADLINE) == 0
            if acls:
                for future in admin.create_acls(acls, request_timeout=DEADLINE).values():
                    future.result(DEADLINE)
        finally:
            stop_process(admin_side.proc)

    def start(self) -> Skiff:
        self.sidecar = start_skiff(
            self.tmp / "user.log", "--redis-url", self.redis.url, *ACL_AUTHORIZER
        )
        return self.sidecar

    def stop(self) -> None:
        if self.sidecar is not None:
            stop_process(self.sidecar.proc)
        stop_process(self.redis.proc)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    yield c
    c.stop()


def allow(resource: ResourceType, name: str, operation: AclOperation) -> AclBinding:
    return AclBinding(
        resource,
        name,
        ResourcePatternType.LITERAL,
        "User:ANONYMOUS",
        "*",
        operation,
        AclPermissionType.ALLOW,
    )


def _poll_until_error_or_records(consumer: Consumer, want: int) -> tuple[list[bytes], object]:
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline and len(values) < want:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            return values, msg.error()
        values.append(msg.value())
    return values, None


def test_consumer_without_read_gets_topic_authorization_failed(cluster: Cluster) -> None:
    denied, readable = f"denied-{uuid.uuid4().hex[:8]}", f"readable-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    cluster.prepare(
        [denied, readable],
        [
            allow(ResourceType.GROUP, group, AclOperation.READ),
            allow(ResourceType.TOPIC, denied, AclOperation.DESCRIBE),
            allow(ResourceType.TOPIC, readable, AclOperation.READ),
        ],
    )
    side = cluster.start()
    config = {
        "bootstrap.servers": side.bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    consumer = Consumer(config)
    try:
        consumer.assign([TopicPartition(denied, 0, 0)])
        values, error = _poll_until_error_or_records(consumer, 1)
        assert values == []
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
    finally:
        consumer.close()
    # READ (which implies DESCRIBE) on the other topic: its records arrive.
    consumer = Consumer(config)
    try:
        consumer.assign([TopicPartition(readable, 0, 0)])
        values, error = _poll_until_error_or_records(consumer, 2)
        assert error is None and values == [b"one", b"two"]
    finally:
        consumer.close()
    assert "Traceback" not in side.log()


def test_metadata_hides_a_topic_the_principal_may_not_describe(cluster: Cluster) -> None:
    hidden, visible = f"hidden-{uuid.uuid4().hex[:8]}", f"visible-{uuid.uuid4().hex[:8]}"
    cluster.prepare([hidden, visible], [allow(ResourceType.TOPIC, visible, AclOperation.DESCRIBE)])
    side = cluster.start()
    admin = AdminClient({"bootstrap.servers": side.bootstrap})
    listed = admin.list_topics(timeout=DEADLINE)
    assert visible in listed.topics
    assert hidden not in listed.topics
    named = admin.list_topics(topic=hidden, timeout=DEADLINE).topics[hidden]
    assert named.error is not None
    assert named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert named.partitions == {}
    # A topic that does not exist is not auto-created without CREATE.
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    named = admin.list_topics(topic=missing, timeout=DEADLINE).topics[missing]
    assert named.error is not None
    assert named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


@pytest.mark.parametrize("granted", ["describe", "write"])
def test_idempotent_producer_needs_idempotent_write_or_write(
    cluster: Cluster, granted: str
) -> None:
    """InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster, or
    (Kafka's KIP-679) WRITE on some topic."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    operation = AclOperation.WRITE if granted == "write" else AclOperation.DESCRIBE
    cluster.prepare([topic], [allow(ResourceType.TOPIC, topic, operation)])
    side = cluster.start()
    errors: list[KafkaError] = []
    producer = Producer(
        {
            "bootstrap.servers": side.bootstrap,
            "enable.idempotence": True,
            "error_cb": errors.append,
            "message.timeout.ms": 10_000,
        }
    )
    producer.produce(topic, b"three")
    try:
        left = producer.flush(15)
    except KafkaException as exc:  # librdkafka raises the fatal error here
        errors.append(exc.args[0])
        left = -1
    if granted == "write":
        assert left == 0 and not errors, errors
        return
    # InitProducerId failed with CLUSTER_AUTHORIZATION_FAILED: a fatal error.
    assert any(e.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED for e in errors), errors


def test_regex_subscription_leaves_out_topics_the_member_may_not_describe(
    cluster: Cluster,
) -> None:
    # KIP-848: the broker resolves the regex; a matching topic without DESCRIBE is not
    # subscribed (as Kafka), so only the readable topic is assigned and read.
    prefix = f"rx{uuid.uuid4().hex[:8]}"
    readable, secret, group = f"{prefix}-open", f"{prefix}-secret", f"g-{uuid.uuid4().hex[:8]}"
    cluster.prepare(
        [readable, secret],
        [
            allow(ResourceType.GROUP, group, AclOperation.READ),
            allow(ResourceType.TOPIC, readable, AclOperation.READ),
        ],
    )
    side = cluster.start()
    consumer = Consumer(
        {
            "bootstrap.servers": side.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([f"^{prefix}-.*"])
        values, error = _poll_until_error_or_records(consumer, 2)
        assert error is None and values == [b"one", b"two"]
        assert [(tp.topic, tp.partition) for tp in consumer.assignment()] == [(readable, 0)]
        # librdkafka drops topics it cannot see from its assignment itself: ask the
        # broker what it assigned (READ on the group implies DESCRIBE).
        with RawKafka("127.0.0.1", side.port) as kafka:
            described = kafka.request(
                69, 1, {"group_ids": [group], "include_authorized_operations": False}
            ).groups[0]
        assert described.error_code == 0
        assert [
            [(t.topic_name, list(t.partitions)) for t in m.assignment.topic_partitions]
            for m in described.members
        ] == [[(readable, [0])]]
    finally:
        consumer.close()
    assert "Traceback" not in side.log()
