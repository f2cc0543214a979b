"""The HTTP queue API authorized by the same ACLs as the Kafka APIs: a real sidecar
with the ACL authorizer (authorizer.class.name), users from a PLAIN users file over
HTTP Basic, ACLs made with Kafka's CreateAcls (confluent-kafka's AdminClient). A
principal without the ACL gets 403 with Kafka's error name and nothing changes (no
record consumed, settled, produced or redriven); one with it works."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("sidecar.security.acls", reason="needs the ACL authorizer (acls)")

import known_secrets  # noqa: E402
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, ResourceType  # noqa: E402
from conftest import Skiff  # noqa: E402
from http_auth_setup import allow, basic, basic_auth_skiff  # noqa: E402
from test_http_auth import Answer, call  # noqa: E402

USERS = {
    user: known_secrets.register(f"HTTP password of {user}", f"{user}-Http-Acl-Pw-27e")
    for user in ("admin", "alice", "bob", "carol")
}


def as_(user: str) -> dict[str, str]:
    return basic(user, USERS[user])


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Skiff]:
    """Basic over plain HTTP (TLS is test_http_auth's), ACLs on, User:admin (HTTP) and
    User:ANONYMOUS (the PLAINTEXT Kafka listener, to create ACLs) super users."""
    tmp = tmp_path_factory.mktemp("http-acls")
    with basic_auth_skiff(tmp, USERS, "User:admin;User:ANONYMOUS") as server:
        yield server


def api(server: Skiff, user: str, method: str, path: str, body: Any = None) -> Answer:
    return call(f"http://127.0.0.1:{server.http_port}", method, path, body, as_(user))


def create_topics(server: Skiff, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(timeout=30)


def wait_until(what: str, check: Any, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {seconds:g}s: {what}")
        time.sleep(0.1)


def refused(answer: Answer, code: str) -> None:
    assert answer.status == 403, answer.body
    assert answer.body["error"]["code"] == code, answer.body


def state(server: Skiff, group: str) -> dict[str, Any]:
    described = api(server, "admin", "GET", f"/v1/queues/{group}")
    assert described.status == 200, described.body
    return described.body


def test_queue_routes_need_the_acls_kafka_would_check(sidecar: Skiff) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, dlq, group = f"t-{tag}", f"dlq-{tag}", f"qg-{tag}"
    create_topics(sidecar, topic, dlq)
    records = {"records": [{"value": f"r{i}"} for i in range(5)]}
    assert api(sidecar, "admin", "POST", f"/v1/topics/{topic}/records", records).status == 200
    cfg = {"auto_offset_reset": "earliest", "dead_letter_topic": dlq, "delivery_limit": 1}
    assert api(sidecar, "admin", "PUT", f"/v1/queues/{group}", cfg).status == 201

    allow(sidecar, "alice", ResourceType.GROUP, group, AclOperation.READ)
    allow(sidecar, "alice", ResourceType.TOPIC, topic, AclOperation.READ)
    allow(sidecar, "alice", ResourceType.TOPIC, dlq, AclOperation.READ)
    allow(sidecar, "bob", ResourceType.TOPIC, topic, AclOperation.READ)  # no group ACL
    allow(sidecar, "carol", ResourceType.GROUP, group, AclOperation.READ)  # no topic ACL
    wait_until(
        "alice's ACLs in force",
        lambda: group in (api(sidecar, "alice", "GET", "/v1/queues").body or {}).get("groups", []),
    )

    read = {"topics": [topic], "max_records": 10, "worker": "w"}
    refused(
        api(sidecar, "bob", "POST", f"/v1/queues/{group}/records:read", read),
        "GROUP_AUTHORIZATION_FAILED",
    )
    refused(
        api(sidecar, "carol", "POST", f"/v1/queues/{group}/records:read", read),
        "TOPIC_AUTHORIZATION_FAILED",
    )
    refused(api(sidecar, "bob", "GET", f"/v1/queues/{group}"), "GROUP_AUTHORIZATION_FAILED")
    refused(
        api(sidecar, "bob", "PUT", f"/v1/queues/{group}", {"lock_ms": 1}),
        "GROUP_AUTHORIZATION_FAILED",
    )
    refused(
        api(sidecar, "carol", "PUT", f"/v1/queues/{group}", {"lock_ms": 1}),
        "GROUP_AUTHORIZATION_FAILED",
    )  # READ is not ALTER_CONFIGS
    refused(api(sidecar, "carol", "DELETE", f"/v1/queues/{group}"), "GROUP_AUTHORIZATION_FAILED")
    reset = {"topic": topic, "to": "latest"}
    refused(
        api(sidecar, "bob", "POST", f"/v1/queues/{group}/offsets:reset", reset),
        "GROUP_AUTHORIZATION_FAILED",
    )
    refused(
        api(sidecar, "carol", "POST", f"/v1/queues/{group}/offsets:reset", reset),
        "TOPIC_AUTHORIZATION_FAILED",
    )
    refused(
        api(sidecar, "bob", "POST", f"/v1/topics/{topic}/records", records),
        "TOPIC_AUTHORIZATION_FAILED",
    )
    refused(
        api(sidecar, "alice", "POST", f"/v1/topics/{topic}/records", records),
        "TOPIC_AUTHORIZATION_FAILED",
    )  # READ is not WRITE
    # a group unknown to an unauthorized caller is 403, not 404: existence stays hidden
    refused(api(sidecar, "bob", "GET", "/v1/queues/no-such-group"), "GROUP_AUTHORIZATION_FAILED")
    assert group not in api(sidecar, "bob", "GET", "/v1/queues").body["groups"]
    assert group in api(sidecar, "carol", "GET", "/v1/queues").body["groups"]

    before = state(sidecar, group)
    # settings unchanged, nothing handed out or reset (no partition state at all yet)
    assert before["lock_ms"] == 30000 and before["pending"] == 0 and before["partitions"] == []

    got = api(sidecar, "alice", "POST", f"/v1/queues/{group}/records:read", read)
    assert got.status == 200, got.body
    # all five, and only five: nothing was consumed before, nothing produced by the refused
    assert [r["offset"] for r in got.body["records"]] == [0, 1, 2, 3, 4]
    refs = [{"topic": topic, "partition": 0, "offset": r["offset"]} for r in got.body["records"]]
    settle = {"worker": "w", "records": refs}
    for verb in ("acknowledge", "cancel", "reject", "renew"):
        refused(
            api(sidecar, "bob", "POST", f"/v1/queues/{group}/records:{verb}", settle),
            "GROUP_AUTHORIZATION_FAILED",
        )
        refused(
            api(sidecar, "carol", "POST", f"/v1/queues/{group}/records:{verb}", settle),
            "TOPIC_AUTHORIZATION_FAILED",
        )
    assert state(sidecar, group)["pending"] == 5  # still leased to alice, none settled

    rejected = {"worker": "w", "records": refs[:1]}
    done = api(sidecar, "alice", "POST", f"/v1/queues/{group}/records:reject", rejected)
    assert done.status == 200, done.body
    acked = {"worker": "w", "records": refs[1:]}
    assert (
        api(sidecar, "alice", "POST", f"/v1/queues/{group}/records:acknowledge", acked).status
        == 200
    )
    assert state(sidecar, group)["pending"] == 0

    # redrive: bob may not; alice may read the dead letters but not write them back
    refused(
        api(sidecar, "bob", "POST", f"/v1/queues/{group}/dead-letters:redrive", {}),
        "GROUP_AUTHORIZATION_FAILED",
    )
    redriven = api(sidecar, "alice", "POST", f"/v1/queues/{group}/dead-letters:redrive", {})
    assert redriven.status == 200, redriven.body
    assert redriven.body["moved"] == 0 and redriven.body["skipped"] == 1
    assert state(sidecar, group)["partitions"][0]["high_watermark"] == 5  # nothing moved back


def test_a_principal_with_write_produces(sidecar: Skiff) -> None:
    topic, missing = f"t-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    create_topics(sidecar, topic)
    allow(sidecar, "bob", ResourceType.TOPIC, topic, AclOperation.WRITE)
    allow(sidecar, "bob", ResourceType.TOPIC, missing, AclOperation.WRITE)
    body = {"records": [{"value": "b"}]}
    wait_until(
        "bob's WRITE in force",
        lambda: api(sidecar, "bob", "POST", f"/v1/topics/{topic}/records", body).status == 200,
    )
    # WRITE without CREATE: a missing topic is not auto-created for bob (as Kafka's
    # Metadata would not create it for his producer)
    answer = api(sidecar, "bob", "POST", f"/v1/topics/{missing}/records", body)
    assert answer.status == 404, answer.body
    assert api(sidecar, "admin", "POST", f"/v1/topics/{missing}/records", body).status == 200
