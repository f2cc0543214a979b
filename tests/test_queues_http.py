"""The HTTP queue API (sidecar/queues/http_api.py) over real TCP against real sidecars:
many workers sharing one partition, leases that expire, delivery limits and dead
letters (read back with a Kafka client), cancel, acknowledge at another sidecar, a
sidecar killed while holding leases, OffsetFetch lag, bad input, and the OpenAPI
document against the routes and real answers."""

from __future__ import annotations

import base64
import http.client
import json
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from conftest import RedisServer, Skiff, start_skiff, stop_process

from sidecar.queues import openapi


class Api:
    """One keep-alive HTTP connection (one per worker thread)."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=90)

    def call(
        self, method: str, path: str, body: Any = None, raw: bytes | None = None
    ) -> tuple[int, Any]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        headers = {"Content-Type": "application/json"} if data is not None else {}
        self.conn.request(method, path, body=data, headers=headers)
        resp = self.conn.getresponse()
        payload = resp.read()
        return resp.status, json.loads(payload) if payload else None

    def close(self) -> None:
        self.conn.close()


def check(name: str, body: Any) -> None:
    """The answer matches the OpenAPI document's schema."""
    jsonschema.validate(body, openapi.schema(name), cls=jsonschema.Draft202012Validator)


def create_topic(bootstrap: str, topic: str, partitions: int = 1, fmt: str = "record") -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, partitions, 1, config={"skiff.storage.format": fmt})
    admin.create_topics([new])[topic].result(timeout=30)


# The tests that exercise per-record state run on both storage formats, same assertions.
BOTH = pytest.mark.parametrize("fmt", ["record", "batch"])


def produce(bootstrap: str, topic: str, values: list[bytes], **extra: Any) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for v in values:
        producer.produce(topic, value=v, partition=0, **extra)
    assert producer.flush(30) == 0


def committed(bootstrap: str, group: str, topic: str, partitions: int = 1) -> list[int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(partitions)]
    )
    result = admin.list_consumer_group_offsets([request])[group].result(timeout=30)
    return [tp.offset for tp in sorted(result.topic_partitions, key=lambda tp: tp.partition)]


def configure(api: Api, group: str, **cfg: Any) -> None:
    status, body = api.call("PUT", f"/v1/queues/{group}", {"auto_offset_reset": "earliest", **cfg})
    assert status == 201, body
    check("QueueConfig", body)


def read(api: Api, group: str, topic: str, worker: str, n: int, wait_ms: int = 0) -> list[dict]:
    status, body = api.call(
        "POST",
        f"/v1/queues/{group}/records:read",
        {"topics": [topic], "max_records": n, "worker": worker, "wait_ms": wait_ms},
    )
    assert status == 200, body
    assert body["worker"] == worker
    check("ReadResponse", body)
    return body["records"]


def settle(api: Api, group: str, verb: str, worker: str, recs: list[dict]) -> tuple[int, Any]:
    refs = [{"topic": r["topic"], "partition": r["partition"], "offset": r["offset"]} for r in recs]
    status, body = api.call(
        "POST", f"/v1/queues/{group}/records:{verb}", {"worker": worker, "records": refs}
    )
    check("SettleResponse" if status == 200 else "Error", body)
    return status, body


def names() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:10]
    return f"qt-{tag}", f"qg-{tag}"


def test_ten_workers_share_one_partition_exactly_once(skiff: Skiff) -> None:
    topic, group = names()
    create_topic(skiff.bootstrap, topic)
    produce(skiff.bootstrap, topic, [f"r{i}".encode() for i in range(5000)])
    admin_api = Api(skiff.http_port)
    configure(admin_api, group, lock_ms=60_000)
    got: dict[str, list[int]] = {}
    errors: list[str] = []
    start = threading.Barrier(10)

    def worker(name: str) -> None:
        api = Api(skiff.http_port)
        mine: list[int] = got.setdefault(name, [])
        start.wait()
        try:
            while True:
                recs = read(api, group, topic, name, 25, wait_ms=300)
                if not recs:
                    return
                for r in recs:
                    if r["value"] != f"r{r['offset']}" or r["delivery_count"] != 1:
                        errors.append(f"{name}: unexpected {r}")
                status, body = settle(api, group, "acknowledge", name, recs)
                if status != 200:
                    errors.append(f"{name}: {body}")
                mine += [r["offset"] for r in recs]
        except Exception as exc:  # surfaced below
            errors.append(f"{name}: {exc!r}")
        finally:
            api.close()

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors[:5]
    everything = sorted(o for offsets in got.values() for o in offsets)
    assert everything == list(range(5000))  # each record finished exactly once
    assert all(got[f"w{i}"] for i in range(10)), {k: len(v) for k, v in got.items()}
    status, desc = admin_api.call("GET", f"/v1/queues/{group}")
    assert status == 200
    check("Description", desc)
    (part,) = desc["partitions"]
    assert (part["pending"], part["committed_offset"], part["lag"]) == (0, 5000, 0)
    assert committed(skiff.bootstrap, group, topic) == [5000]


@BOTH
def test_unacknowledged_records_come_back_then_dead_letter(skiff: Skiff, fmt: str) -> None:
    topic, group = names()
    dlq = f"{topic}-dlq"
    create_topic(skiff.bootstrap, topic, fmt=fmt)
    values = [b"\x00\xff binary", "naïve".encode(), b"plain"]
    producer = Producer({"bootstrap.servers": skiff.bootstrap})
    for i, v in enumerate(values):
        producer.produce(
            topic, value=v, key=f"k{i}".encode(), partition=0, headers=[("h", b"\x01")]
        )
    assert producer.flush(30) == 0
    api = Api(skiff.http_port)
    configure(api, group, lock_ms=1000, delivery_limit=3, dead_letter_topic=dlq)
    first = read(api, group, topic, "sleepy", 10)
    assert [(r["offset"], r["delivery_count"]) for r in first] == [(0, 1), (1, 1), (2, 1)]
    assert base64.b64decode(first[0]["value"]) == values[0]
    assert first[0]["value_encoding"] == "base64"
    assert (first[1]["value"], first[1]["value_encoding"]) == ("naïve", "utf8")
    assert first[0]["headers"] == [{"key": "h", "value": "\x01", "value_encoding": "utf8"}]
    assert read(api, group, topic, "other", 10) == []  # leased: nobody else gets them
    assert committed(skiff.bootstrap, group, topic) == [0]
    # The leases expire: the records come back to another worker, counted again.
    second = read(api, group, topic, "other", 10, wait_ms=5000)
    assert [(r["offset"], r["delivery_count"]) for r in second] == [(0, 2), (1, 2), (2, 2)]
    status, body = settle(api, group, "acknowledge", "sleepy", first[:1])
    assert status == 409
    assert body["results"][0]["error"]["code"] == "RECORD_HELD_BY_OTHER"
    third = read(api, group, topic, "third", 10, wait_ms=5000)
    assert [r["delivery_count"] for r in third] == [3, 3, 3]
    # Past the limit the records are rejected automatically into the dead-letter topic.
    assert read(api, group, topic, "fourth", 10, wait_ms=2500) == []
    status, desc = api.call("GET", f"/v1/queues/{group}")
    assert desc["partitions"][0]["pending"] == 0
    assert committed(skiff.bootstrap, group, topic) == [3]
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": skiff.bootstrap,
            "group.id": f"dlq-reader-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(dlq, 0, 0)])
    dead = []
    while len(dead) < 3:
        msg = consumer.poll(10)
        assert msg is not None, "dead letters missing"
        assert msg.error() is None, msg.error()
        dead.append(msg)
    consumer.close()
    assert [m.value() for m in dead] == values
    assert [m.key() for m in dead] == [b"k0", b"k1", b"k2"]
    for i, m in enumerate(dead):
        assert m.headers() == [
            ("h", b"\x01"),
            ("skiff.dlq.reason", b"delivery limit"),
            ("skiff.dlq.group", group.encode()),
            ("skiff.dlq.topic", topic.encode()),
            ("skiff.dlq.partition", b"0"),
            ("skiff.dlq.offset", str(i).encode()),
            ("skiff.dlq.delivery.count", b"3"),
        ]
    from telemetry_helpers import scrape, value

    samples = scrape(skiff.http_port)
    counted = {
        action: value(samples, "skiff_queue_records_total", group=group, action=action)
        for action in ("delivered", "redelivered", "delivery_limit", "dead_lettered")
    }
    assert counted == {
        "delivered": 3,
        "redelivered": 6,
        "delivery_limit": 3,
        "dead_lettered": 3,
    }
    assert value(samples, "skiff_queue_records_total", group=group, action="settle_refused") == 1
    # Redrive puts them back on the original partition, without the dlq headers.
    status, moved = api.call("POST", f"/v1/queues/{group}/dead-letters:redrive", {})
    assert status == 200 and moved["moved"] == 3, moved
    check("RedriveResponse", moved)
    back = read(api, group, topic, "fifth", 10)
    assert [(r["offset"], r["delivery_count"]) for r in back] == [(3, 1), (4, 1), (5, 1)]
    assert [r["headers"] for r in back] == [first[0]["headers"]] * 3
    status, moved = api.call("POST", f"/v1/queues/{group}/dead-letters:redrive", {})
    assert moved["moved"] == 0  # each dead letter moves once
    api.close()


def test_cancel_acknowledge_elsewhere_and_record_errors(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    one = start_skiff(tmp_path / "one.log", "--redis-url", own_redis.url)
    two = start_skiff(tmp_path / "two.log", "--redis-url", own_redis.url)
    try:
        topic, group = names()
        create_topic(one.bootstrap, topic)
        produce(one.bootstrap, topic, [b"a", b"b", b"c", b"d"])
        a, b = Api(one.http_port), Api(two.http_port)
        configure(a, group, lock_ms=60_000)
        recs = read(a, group, topic, "w1", 2)
        assert [r["offset"] for r in recs] == [0, 1]
        # A waiting read on sidecar one is woken by a cancel sent to sidecar two.
        woken: list[Any] = []
        waiter = threading.Thread(
            target=lambda: woken.extend(
                read(Api(one.http_port), group, topic, "w3", 1, wait_ms=30_000)
            )
        )
        read(b, group, topic, "w2", 2)  # offsets 2 and 3: nothing new is left
        waiter.start()
        status, body = settle(b, group, "cancel", "w1", recs[:1])
        assert status == 200, body
        waiter.join(timeout=60)
        assert [(r["offset"], r["delivery_count"]) for r in woken] == [(0, 2)]
        # Acknowledge at the other sidecar than the read.
        status, body = settle(b, group, "acknowledge", "w1", recs[1:])
        assert status == 200 and body["results"][0]["error"] is None
        # w1 no longer holds 0 (w3 does), 1 is finished, 9 was never read.
        bad = recs + [{"topic": topic, "partition": 0, "offset": 9}]
        status, body = settle(a, group, "acknowledge", "w1", bad)
        assert status == 409
        assert body["error"]["code"] == "RECORD_STATE"
        assert [r["error"]["code"] for r in body["results"]] == [
            "RECORD_HELD_BY_OTHER",
            "RECORD_NOT_PENDING",
            "RECORD_NOT_PENDING",
        ]
        status, body = settle(a, group, "acknowledge", "w3", recs[:1])  # unchanged: still w3's
        assert status == 200
        status, body = settle(
            a, group, "renew", "w2", [{"topic": topic, "partition": 0, "offset": 2}]
        )
        assert status == 200 and body["results"][0]["lease_deadline_ms"] > 0
        # An expired lease: acknowledging it fails and changes nothing.
        short = f"{group}-short"
        configure(a, short, lock_ms=200)  # a stall only makes the expiry surer
        held = read(a, short, topic, "slow", 1)
        time.sleep(0.3)
        status, body = settle(b, short, "acknowledge", "slow", held)
        assert status == 409 and body["results"][0]["error"]["code"] == "LEASE_EXPIRED"
        again = read(b, short, topic, "fast", 1)
        assert [(r["offset"], r["delivery_count"]) for r in again] == [(0, 2)]
        assert committed(one.bootstrap, group, topic) == [2]
        a.close()
        b.close()
    finally:
        stop_process(one.proc)
        stop_process(two.proc)


def test_sidecar_killed_while_holding_leases_loses_nothing(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    one = start_skiff(tmp_path / "one.log", "--redis-url", own_redis.url)
    two = start_skiff(tmp_path / "two.log", "--redis-url", own_redis.url)
    try:
        topic, group = names()
        create_topic(one.bootstrap, topic)
        produce(one.bootstrap, topic, [f"v{i}".encode() for i in range(100)])
        a = Api(one.http_port)
        configure(a, group, lock_ms=1000)
        held = read(a, group, topic, "doomed", 60)
        assert len(held) == 60
        os.kill(one.proc.pid, signal.SIGKILL)
        one.proc.wait()
        b = Api(two.http_port)
        seen: list[tuple[int, int]] = []
        while len(seen) < 100:
            recs = read(b, group, topic, "survivor", 100, wait_ms=5000)
            assert recs, f"only {len(seen)} records came back"
            assert settle(b, group, "acknowledge", "survivor", recs)[0] == 200
            seen += [(r["offset"], r["delivery_count"]) for r in recs]
        assert sorted(o for o, _ in seen) == list(range(100))
        assert {o: c for o, c in seen if o < 60} == {o: 2 for o in range(60)}
        assert committed(two.bootstrap, group, topic) == [100]
        b.close()
    finally:
        stop_process(one.proc, signal.SIGKILL)
        stop_process(two.proc)


@BOTH
def test_bad_input_and_binary_round_trip(skiff: Skiff, fmt: str) -> None:
    topic, group = names()
    create_topic(skiff.bootstrap, topic, fmt=fmt)
    api = Api(skiff.http_port)
    q = f"/v1/queues/{group}"
    # Unknown group: 404 with a message, for every group route.
    for method, path, body in [
        ("GET", q, None),
        ("POST", q + "/records:read", {"topics": [topic]}),
        ("POST", q + "/records:acknowledge", {"worker": "w", "records": []}),
    ]:
        status, answer = api.call(method, path, body)
        assert status == 404, (path, answer)
        assert answer["error"]["code"] == "GROUP_NOT_FOUND" and group in answer["error"]["message"]
        check("Error", answer)
    configure(api, group)
    cases = [
        ("POST", q + "/records:read", b"{not json", "MALFORMED_JSON", 400),
        ("POST", q + "/records:read", b"[1]", "INVALID_REQUEST", 400),
        ("POST", q + "/records:read", b'{"topics": []}', "INVALID_REQUEST", 400),
        ("POST", q + "/records:read", b'{"topics": ["nope-x"]}', "UNKNOWN_TOPIC_OR_PARTITION", 404),
        (
            "POST",
            q + "/records:read",
            b'{"topics": ["t"], "max_records": 0}',
            "INVALID_REQUEST",
            400,
        ),
        ("POST", q + "/records:acknowledge", b'{"records": []}', "INVALID_REQUEST", 400),
        (
            "POST",
            q + "/records:acknowledge",
            b'{"worker": "~x", "records": []}',
            "INVALID_WORKER",
            400,
        ),
        ("PUT", q, b'{"lock_ms": -1}', "INVALID_CONFIG", 400),
        ("PUT", q, b'{"colour": "red"}', "INVALID_CONFIG", 400),
        ("PUT", "/v1/queues/bad%20name", b"{}", "INVALID_GROUP_ID", 400),
        (
            "POST",
            f"/v1/topics/{topic}/records",
            b'{"records": [{"value": "***", "value_encoding": "base64"}]}',
            "INVALID_BASE64",
            400,
        ),
        (
            "POST",
            f"/v1/topics/{topic}/records",
            b'{"records": [{"value": "x", "value_encoding": "hex"}]}',
            "INVALID_REQUEST",
            400,
        ),
    ]
    for method, path, raw, code, want in cases:
        status, answer = api.call(method, path, raw=raw)
        assert (status, answer["error"]["code"]) == (want, code), (path, raw, answer)
        assert answer["error"]["message"]
        check("Error", answer)
    status, body = api.call(
        "POST",
        q + "/records:acknowledge",
        {"worker": "w", "records": [{"topic": topic, "partition": 0, "offset": 0}]},
    )
    assert status == 409 and body["results"][0]["error"]["code"] == "RECORD_NOT_PENDING"
    # Binary keys, values and header values round-trip through base64.
    key, value, hval = b"\xff\xfe\x00", bytes(range(256)), b"\x80"
    produce_body = {
        "records": [
            {
                "key": base64.b64encode(key).decode(),
                "key_encoding": "base64",
                "value": base64.b64encode(value).decode(),
                "value_encoding": "base64",
                "headers": [
                    {
                        "key": "bin",
                        "value": base64.b64encode(hval).decode(),
                        "value_encoding": "base64",
                    },
                    {"key": "none", "value": None},
                ],
                "partition": 0,
            },
            {"key": None, "value": "text ✓", "partition": 0},
        ]
    }
    check("ProduceRequest", produce_body)
    status, answer = api.call("POST", f"/v1/topics/{topic}/records", produce_body)
    assert status == 200, answer
    check("ProduceResponse", answer)
    assert answer["offsets"] == [{"partition": 0, "offset": 0}, {"partition": 0, "offset": 1}]
    recs = read(api, group, topic, "w", 10)
    assert base64.b64decode(recs[0]["key"]) == key and recs[0]["key_encoding"] == "base64"
    assert base64.b64decode(recs[0]["value"]) == value
    assert recs[0]["headers"] == [
        {"key": "bin", "value": base64.b64encode(hval).decode(), "value_encoding": "base64"},
        {"key": "none", "value": None, "value_encoding": "utf8"},
    ]
    assert (recs[1]["key"], recs[1]["value"], recs[1]["value_encoding"]) == (None, "text ✓", "utf8")
    # A batch naming an unknown partition changes nothing, not even its good records.
    status, body = settle(api, group, "acknowledge", "w", [recs[0], {**recs[1], "partition": 7}])
    assert status == 404 and body["error"]["code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    status, body = settle(api, group, "acknowledge", "w", [recs[0], recs[0], recs[1]])
    assert status == 200, body  # a record named twice is acknowledged once, both say so
    assert [r["error"] for r in body["results"]] == [None, None, None]
    # ListGroups and DescribeGroups keep working with a queue group present.
    admin = AdminClient({"bootstrap.servers": skiff.bootstrap})
    admin.list_consumer_groups().result(timeout=30)
    admin.describe_consumer_groups([group])[group].result(timeout=30)
    api.close()


def test_openapi_document_lists_exactly_the_served_routes(skiff: Skiff) -> None:
    api = Api(skiff.http_port)
    status, doc = api.call("GET", "/v1/openapi.json")
    assert status == 200 and doc == json.loads(json.dumps(openapi.DOCUMENT))
    api.close()
    jsonschema.Draft202012Validator.check_schema(openapi.schema("Record"))
    from aiohttp import web

    from sidecar.queues.http_api import add_routes

    broker = SimpleNamespace(store=SimpleNamespace(redis=None), settings=SimpleNamespace())
    app = web.Application()
    add_routes(app, broker)
    served = set()
    for route in app.router.routes():
        if route.method == "HEAD":
            continue
        info = route.resource.get_info()
        served.add((route.method.lower(), info.get("formatter") or info.get("path")))
    documented = {
        (method, path)
        for path, item in doc["paths"].items()
        for method in item
        if method in ("get", "put", "post", "delete", "patch")
    }
    assert served == documented
    # Every schema a request names exists, and every operation answers errors as Error.
    for item in doc["paths"].values():
        for method, op in item.items():
            if method == "parameters":
                continue
            for status, response in op["responses"].items():
                content = response.get("content")
                if content and status >= "400":
                    assert content["application/json"]["schema"] == {"$ref": openapi.REF + "Error"}


def test_docs_examples_validate() -> None:
    """The JSON bodies in docs/queues.md's curl examples match the document."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "queues.md").read_text()
    checked = 0
    for block in text.split("```")[1::2]:
        for line in block.splitlines():
            if "-d '" not in line or "# schema:" not in line:
                continue
            body = line.split("-d '", 1)[1].rsplit("'", 1)[0]
            name = line.rsplit("# schema:", 1)[1].strip()
            check(name, json.loads(body))
            checked += 1
    assert checked >= 5


def test_queue_group_and_consumer_group_ids_do_not_mix(skiff: Skiff) -> None:
    from rawkafka import RawKafka

    topic, group = names()
    create_topic(skiff.bootstrap, topic)
    api = Api(skiff.http_port)
    configure(api, group)
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        join = kafka.request(
            11,
            5,
            {
                "group_id": group,
                "session_timeout": 10_000,
                "rebalance_timeout": 10_000,
                "member_id": "",
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            },
        )
        assert join.error_code == 23  # INCONSISTENT_GROUP_PROTOCOL, as Kafka for a share group
        commit = kafka.request(
            8,
            2,
            {
                "group_id": group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "retention_time": -1,
                "topics": [
                    {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 5}]}
                ],
            },
        )
        assert commit.topics[0].partitions[0].error_code == 69  # GROUP_ID_NOT_FOUND
    # A consumer group's id cannot become a queue group.
    classic = f"{group}-classic"
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": skiff.bootstrap, "group.id": classic})
    consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    consumer.close()
    status, body = api.call("PUT", f"/v1/queues/{classic}", {})
    assert status == 409 and body["error"]["code"] == "GROUP_ID_CONFLICT"
    api.close()


def test_workers_across_two_sidecars_and_partitions(own_redis: RedisServer, tmp_path: Path) -> None:
    """Six workers, each reading at one sidecar and acknowledging at the other, over a
    3-partition topic: every record finished exactly once, every partition drained."""
    one = start_skiff(tmp_path / "one.log", "--redis-url", own_redis.url)
    two = start_skiff(tmp_path / "two.log", "--redis-url", own_redis.url)
    try:
        topic, group = names()
        create_topic(one.bootstrap, topic, 3)
        producer = Producer({"bootstrap.servers": one.bootstrap, "linger.ms": 5})
        for i in range(3000):
            producer.produce(topic, value=f"{i % 3}:{i}".encode(), partition=i % 3)
        assert producer.flush(30) == 0
        configure(Api(one.http_port), group, lock_ms=60_000)
        got: dict[str, list[tuple[int, int]]] = {}
        errors: list[str] = []

        def worker(name: str, read_port: int, ack_port: int) -> None:
            reader, acker = Api(read_port), Api(ack_port)
            mine = got.setdefault(name, [])
            try:
                while True:
                    recs = read(reader, group, topic, name, 40, wait_ms=300)
                    if not recs:
                        return
                    status, body = settle(acker, group, "acknowledge", name, recs)
                    if status != 200:
                        errors.append(f"{name}: {body}")
                    mine += [(r["partition"], r["offset"]) for r in recs]
            except Exception as exc:
                errors.append(f"{name}: {exc!r}")

        ports = [(one.http_port, two.http_port), (two.http_port, one.http_port)]
        threads = [threading.Thread(target=worker, args=(f"w{i}", *ports[i % 2])) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert not errors, errors[:5]
        everything = sorted(x for v in got.values() for x in v)
        assert everything == sorted((p, o) for p in range(3) for o in range(1000))
        assert all(got.values())
        assert committed(two.bootstrap, group, topic, 3) == [1000, 1000, 1000]
    finally:
        stop_process(one.proc)
        stop_process(two.proc)


def test_sigterm_answers_waiting_reads(own_redis: RedisServer, tmp_path: Path) -> None:
    one = start_skiff(tmp_path / "one.log", "--redis-url", own_redis.url)
    try:
        topic, group = names()
        create_topic(one.bootstrap, topic)
        api = Api(one.http_port)
        configure(api, group)
        answers: list[Any] = []
        waiter = threading.Thread(
            target=lambda: answers.append(read(Api(one.http_port), group, topic, "w", 5, 60_000))
        )
        waiter.start()
        from telemetry_helpers import scrape, value

        deadline = time.monotonic() + 30
        while value(scrape(one.http_port), "skiff_longpoll_waiters") < 1:  # read is waiting
            assert time.monotonic() < deadline, "the read never waited"
            time.sleep(0.05)
        os.kill(one.proc.pid, signal.SIGTERM)
        waiter.join(timeout=30)
        assert answers == [[]]  # answered (empty) by the draining sidecar, not cut off
        assert one.proc.wait(timeout=30) == 0
    finally:
        stop_process(one.proc)


def test_oversized_body_is_refused_with_json(skiff: Skiff) -> None:
    api = Api(skiff.http_port)
    raw = b'{"records": [{"value": "' + b"x" * (17 * 1024 * 1024) + b'"}]}'
    status, body = api.call("POST", "/v1/topics/never-made/records", raw=raw)
    assert status == 413 and body["error"]["code"] == "REQUEST_TOO_LARGE"
    check("Error", body)
    api.close()


def test_topic_names_are_checked_as_kafka_checks_them(skiff: Skiff) -> None:
    """Names Kafka refuses are refused by every route that names a topic (nothing is
    created under them), including dead-letter topics."""
    topic, group = names()
    api = Api(skiff.http_port)
    configure(api, group)
    bad = ["bad%2Fname", "my%20topic", "x" * 250, ".."]
    for name in bad:
        status, body = api.call("POST", f"/v1/topics/{name}/records", {"records": [{"value": "v"}]})
        assert (status, body["error"]["code"]) == (400, "INVALID_TOPIC_EXCEPTION"), (name, body)
        assert "Topic name is invalid" in body["error"]["message"]
        check("Error", body)
    for name in ["bad/name", "my topic", "x" * 300, "", "."]:
        cases = [
            ("POST", f"/v1/queues/{group}/records:read", {"topics": [name]}),
            ("POST", f"/v1/queues/{group}/offsets:reset", {"topic": name, "to": "earliest"}),
            ("POST", f"/v1/queues/{group}/dead-letters:redrive", {"dead_letter_topic": name}),
            (
                "POST",
                f"/v1/queues/{group}/records:acknowledge",
                {"worker": "w", "records": [{"topic": name, "partition": 0, "offset": 0}]},
            ),
        ]
        for method, path, request in cases:
            status, body = api.call(method, path, request)
            assert (status, body["error"]["code"]) == (400, "INVALID_TOPIC_EXCEPTION"), (path, body)
            check("Error", body)
        if name:  # "" means no dead-letter topic
            status, body = api.call("PUT", f"/v1/queues/{group}", {"dead_letter_topic": name})
            assert (status, body["error"]["code"]) == (400, "INVALID_CONFIG"), body
            assert "Topic name is invalid" in body["error"]["message"]
    admin = AdminClient({"bootstrap.servers": skiff.bootstrap})
    listed = admin.list_topics(timeout=30).topics
    assert not [t for t in listed if "/" in t or " " in t or len(t) > 249]
    status, body = api.call("GET", f"/v1/queues/{group}")
    assert status == 200 and body["dead_letter_topic"] is None
    api.close()


def test_max_message_bytes_and_topic_configs_apply_to_http_produce(skiff: Skiff) -> None:
    """A partition's records are one batch, sized as Kafka sizes a producer's: over the
    topic's max.message.bytes is 413 MESSAGE_TOO_LARGE and nothing is appended."""
    topic, _ = names()
    admin = AdminClient({"bootstrap.servers": skiff.bootstrap})
    new = NewTopic(topic, 1, 1, config={"max.message.bytes": "1000"})
    admin.create_topics([new])[topic].result(timeout=30)
    api = Api(skiff.http_port)
    path = f"/v1/topics/{topic}/records"
    # One record of value length n with no key or headers: 61 + 2 + (n + 7) bytes.
    status, body = api.call("POST", path, {"records": [{"value": "v" * 930, "partition": 0}]})
    assert status == 200, body  # 1000 bytes: at the limit
    status, body = api.call("POST", path, {"records": [{"value": "v" * 931, "partition": 0}]})
    assert (status, body["error"]["code"]) == (413, "MESSAGE_TOO_LARGE"), body
    assert body["error"]["message"] == (
        f"The record batch size in the append to {topic}-0 is 1001 bytes which exceeds "
        "the maximum configured value of 1000."
    )
    check("Error", body)
    # Records of one partition add up, as in one producer batch.
    status, body = api.call("POST", path, {"records": [{"value": "v" * 500}] * 2})
    assert (status, body["error"]["code"]) == (413, "MESSAGE_TOO_LARGE"), body
    # A compacted topic refuses records without a key, as Produce does.
    compacted = topic + "-c"
    new = NewTopic(compacted, 1, 1, config={"cleanup.policy": "compact"})
    admin.create_topics([new])[compacted].result(timeout=30)
    status, body = api.call(
        "POST", f"/v1/topics/{compacted}/records", {"records": [{"value": "v"}]}
    )
    assert (status, body["error"]["code"]) == (400, "INVALID_RECORD"), body
    offsets = admin.list_offsets(
        {TopicPartition(t, 0): OffsetSpec.latest() for t in (topic, compacted)}
    )
    ends = {tp.topic: f.result(timeout=30).offset for tp, f in offsets.items()}
    assert ends == {topic: 1, compacted: 0}  # only the record at the limit was appended
    api.close()


def test_every_error_is_json(skiff: Skiff) -> None:
    """Unknown routes, wrong methods, deep or malformed JSON and wrong shapes are the
    documented JSON errors, never a 500 or plain text."""
    topic, group = names()
    create_topic(skiff.bootstrap, topic)
    api = Api(skiff.http_port)
    configure(api, group)
    q = f"/v1/queues/{group}"
    deep = b'{"topics": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    nested = b'{"lock_ms": ' + b"[" * 500 + b"]" * 500 + b"}"  # parses: a wrong value
    cases = [
        ("GET", "/v1/nope", None, 404, "NOT_FOUND"),
        ("GET", "/nope", None, 404, "NOT_FOUND"),
        ("DELETE", "/v1/queues", None, 405, "METHOD_NOT_ALLOWED"),
        ("POST", "/healthz", b"{}", 405, "METHOD_NOT_ALLOWED"),
        ("POST", q + "/records:read", deep, 400, "MALFORMED_JSON"),
        ("PUT", q, nested, 400, "INVALID_CONFIG"),
        ("POST", q + "/records:read", b'{"topics": [{}]}', 400, "INVALID_TOPIC_EXCEPTION"),
        ("POST", q + "/records:read", b'{"topics": [[1]]}', 400, "INVALID_TOPIC_EXCEPTION"),
        ("POST", q + "/records:read", b'{"topics": ["t"], "colour": 1}', 400, "INVALID_REQUEST"),
        ("POST", q + "/records:read", b'{"topics": ["t"], "worker": 0}', 400, "INVALID_REQUEST"),
        (
            "POST",
            f"/v1/topics/{topic}/records",
            b'{"records": [{"value": "v", "headers": 7}]}',
            400,
            "INVALID_REQUEST",
        ),
        (
            "POST",
            f"/v1/topics/{topic}/records",
            b'{"records": [{"value": "v", "headers": [{"key": "\\ud800", "value": null}]}]}',
            400,
            "INVALID_REQUEST",
        ),
        (
            "POST",
            q + "/records:acknowledge",
            b'{"worker": "w", "records": [{"topic": "t", "partition": 0, "offset": 1e400}]}',
            400,
            "INVALID_REQUEST",
        ),
        (
            "POST",
            q + "/records:acknowledge",
            json.dumps(
                {"worker": "w", "records": [{"topic": topic, "partition": 0, "offset": 2**64}]}
            ).encode(),
            400,
            "INVALID_REQUEST",
        ),
    ]
    for method, path, raw, want, code in cases:
        api.conn.request(method, path, body=raw)
        resp = api.conn.getresponse()
        payload = resp.read()
        assert resp.getheader("Content-Type", "").startswith("application/json"), (path, payload)
        answer = json.loads(payload)
        assert (resp.status, answer["error"]["code"]) == (want, code), (path, raw[:60], answer)
        check("Error", answer)
        if want == 405:
            assert resp.getheader("Allow")
    api.close()
