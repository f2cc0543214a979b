"""Client quotas: Kafka 4.x's `kafka-configs` setting, describing and deleting client-id,
user/client-id and ip quotas gives the same exit codes and output on Skiff as on a real
Kafka 4.x broker (the session's conftest.kafka4_admin); raw AlterClientQuotas and
DescribeClientQuotas requests the tool cannot send (bad entities, keys and values,
validate_only, every filter kind, malformed filters) get the same answers; and a
producer_byte_rate of 1 MB/s on a client id holds a librdkafka producer near that rate
with throttle times reported to it, while another client id runs unthrottled."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from conftest import RedisServer, Skiff, start_redis, start_skiff, stop_process
from kafka_tools import ADMIN_KAFKA_VERSION, AdminKafka, run_batch
from rawkafka import ConnectionClosed, RawKafka

from sidecar.quotas import CLIENT_ID, PRODUCER_BYTE_RATE, QuotaManager, entity_of

DESCRIBE, ALTER = 48, 49


@pytest.fixture(scope="module")
def skiff_own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Skiff]:
    """A Skiff on its own Redis: quotas set here reach no other test."""
    tmp = tmp_path_factory.mktemp("quotas")
    redis: RedisServer = start_redis(tmp / "redis")
    server = start_skiff(tmp / "skiff.log", "--redis-url", redis.url)
    yield server
    stop_process(server.proc)
    stop_process(redis.proc)


def _cli_runs(client: str, user: str) -> list[list[str]]:
    clients = ["--entity-type", "clients", "--entity-name", client]
    both = ["--entity-type", "users", "--entity-name", user, *clients]
    ips = ["--entity-type", "ips", "--entity-name", "127.0.0.9"]
    add, delete = "--add-config", "--delete-config"
    return [
        ["--alter", add, "producer_byte_rate=1048576,consumer_byte_rate=2097152", *clients],
        ["--describe", *clients],
        ["--alter", add, "request_percentage=50.5", *clients],
        ["--describe", *clients],
        ["--alter", add, "producer_byte_rate=1.5", *clients],
        ["--alter", add, "producer_byte_rate=0", *clients],
        ["--alter", add, "consumer_byte_rate=1000", *both],
        ["--describe", *both],
        ["--describe", "--entity-type", "users", "--entity-name", user, "--entity-type",
         "clients"],
        ["--alter", add, "connection_creation_rate=10", *ips],
        ["--describe", *ips],
        ["--alter", add, "producer_byte_rate=10", *ips],
        ["--alter", delete, "producer_byte_rate", *clients],
        ["--describe", *clients],
        # leave nothing behind on the session's Kafka
        ["--alter", delete, "consumer_byte_rate,request_percentage", *clients],
        ["--alter", delete, "consumer_byte_rate", *both],
        ["--alter", delete, "connection_creation_rate", *ips],
        ["--describe", *clients],
        ["--describe", *ips],
    ]  # fmt: skip


def _seen(done: subprocess.CompletedProcess[str], bootstrap: str) -> tuple[int, str, str]:
    return (
        done.returncode,
        done.stdout.replace(bootstrap, "BOOTSTRAP"),
        done.stderr.replace(bootstrap, "BOOTSTRAP"),
    )


@pytest.mark.timeout(600)
def test_kafka_configs_client_quotas_same_on_skiff_and_kafka(
    kafka4_admin: AdminKafka, skiff_own: Skiff
) -> None:
    tag = uuid.uuid4().hex[:8]
    runs = _cli_runs(f"app-{tag}", f"user-{tag}")
    results = {}
    for name, bootstrap in (("kafka", kafka4_admin.bootstrap), ("skiff", skiff_own.bootstrap)):
        done = run_batch(
            ADMIN_KAFKA_VERSION,
            "kafka-configs",
            [["--bootstrap-server", bootstrap, *args] for args in runs],
        )
        results[name] = [_seen(d, bootstrap) for d in done]
    for args, kafka, skiff in zip(runs, results["kafka"], results["skiff"], strict=True):
        assert skiff == kafka, args
    kafka = results["kafka"]
    # and they say something
    assert kafka[1] == (
        0,
        f"Quota configs for client-id 'app-{tag}' are "
        "consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0\n",
        "",
    )
    assert [r[0] for r in kafka[4:6]] == [1, 1]
    assert "producer_byte_rate cannot be a fractional value." in kafka[4][2]
    assert kafka[17][1] == ""


def _entity(*pairs: tuple[str, str | None]) -> list[dict[str, Any]]:
    return [{"entity_type": t, "entity_name": n} for t, n in pairs]


def _op(key: str, value: float = 0.0, remove: bool = False) -> dict[str, Any]:
    return {"key": key, "value": value, "remove": remove}


def _alters(tag: str) -> list[dict[str, Any]]:
    a, b, u = f"a-{tag}", f"b-{tag}", f"u-{tag}"
    return [
        # several entities, Kafka's (HashMap) order of the results
        {
            "entries": [
                {"entity": _entity(("client-id", a)), "ops": [_op("producer_byte_rate", 100)]},
                {"entity": _entity(("client-id", b)), "ops": [_op("consumer_byte_rate", 7)]},
                {
                    "entity": _entity(("user", u), ("client-id", None)),
                    "ops": [_op("request_percentage", 12.5), _op("controller_mutation_rate", 3)],
                },
                {"entity": _entity(("user", None)), "ops": [_op("producer_byte_rate", 5)]},
            ],
            "validate_only": False,
        },
        # validate_only changes nothing
        {
            "entries": [
                {"entity": _entity(("client-id", a)), "ops": [_op("producer_byte_rate", 999)]}
            ],
            "validate_only": True,
        },
        # refusals: duplicate key, duplicate entity, bad type, empty name, empty entity,
        # ip combined, bad ip, unknown key, ip key on a client, negative, too large
        {
            "entries": [
                {
                    "entity": _entity(("client-id", f"d-{tag}")),
                    "ops": [_op("producer_byte_rate", 1), _op("producer_byte_rate", 2)],
                },
                {"entity": _entity(("client-id", a)), "ops": [_op("producer_byte_rate", 1)]},
                {"entity": _entity(("client-id", a)), "ops": [_op("producer_byte_rate", 2)]},
                {"entity": _entity(("group", "g")), "ops": [_op("producer_byte_rate", 1)]},
                {"entity": _entity(("user", "")), "ops": [_op("producer_byte_rate", 1)]},
                {"entity": [], "ops": [_op("producer_byte_rate", 1)]},
                {
                    "entity": _entity(("ip", "127.0.0.1"), ("user", u)),
                    "ops": [_op("connection_creation_rate", 1)],
                },
                {
                    "entity": _entity(("ip", "no-such-host.invalid")),
                    "ops": [_op("connection_creation_rate", 1)],
                },
                {"entity": _entity(("client-id", f"e-{tag}")), "ops": [_op("nope", 1)]},
                {
                    "entity": _entity(("client-id", f"f-{tag}")),
                    "ops": [_op("connection_creation_rate", 1)],
                },
                {
                    "entity": _entity(("client-id", f"g-{tag}")),
                    "ops": [_op("consumer_byte_rate", -1)],
                },
                {
                    "entity": _entity(("ip", None)),
                    "ops": [_op("connection_creation_rate", 2.0**40)],
                },
                {
                    "entity": _entity(("client-id", f"h-{tag}")),
                    "ops": [_op("producer_byte_rate", 2.0**70)],
                },
            ],
            "validate_only": False,
        },
        # removal, of a key set and of one never set
        {
            "entries": [
                {
                    "entity": _entity(("client-id", b)),
                    "ops": [_op("consumer_byte_rate", remove=True), _op("x", remove=True)],
                }
            ],
            "validate_only": False,
        },
    ]


def _filters(tag: str) -> list[dict[str, Any]]:
    def c(kind: str, match_type: int, match: str | None = None) -> dict[str, Any]:
        return {"entity_type": kind, "match_type": match_type, "match": match}

    u = f"u-{tag}"
    return [
        {"components": [c("client-id", 0, f"a-{tag}")], "strict": True},
        {"components": [c("client-id", 0, f"b-{tag}")], "strict": True},
        {"components": [c("user", 0, u)], "strict": False},
        {"components": [c("user", 0, u)], "strict": True},
        {"components": [c("user", 0, u), c("client-id", 1)], "strict": True},
        {"components": [c("user", 1)], "strict": True},
        {"components": [c("user", 2)], "strict": False},
        {"components": [c("client-id", 2)], "strict": True},
        {"components": [], "strict": False},
        {"components": [c("client-id", 0)], "strict": False},
        {"components": [c("client-id", 1, "x")], "strict": False},
        {"components": [c("client-id", 2, "x")], "strict": False},
        {"components": [c("client-id", 7)], "strict": False},
        {"components": [c("group", 2)], "strict": False},
        {"components": [c("", 2)], "strict": False},
        {"components": [c("user", 2), c("user", 1)], "strict": False},
        {"components": [c("ip", 2), c("user", 1)], "strict": False},
    ]


def _raw(bootstrap: str, tag: str, expected: list[Any] | None = None) -> list[Any]:
    """The answers to _alters, each followed by the answers to _filters. Kafka's broker
    learns an alteration from its controller a moment later: with `expected` (Skiff's
    answers), the filters are asked again until they match or 15 s have passed."""
    host, port = bootstrap.rsplit(":", 1)
    answers: list[Any] = []
    with RawKafka(host, int(port)) as kafka:

        def settled() -> list[Any]:
            deadline = time.monotonic() + 15
            while True:
                seen = describe()
                if expected is None or seen == expected[len(answers)]:
                    return seen
                if time.monotonic() > deadline:
                    return seen
                time.sleep(0.1)

        def describe() -> list[Any]:
            out = []
            for f in _filters(tag):
                r = kafka.request(DESCRIBE, 1, f)
                entries = None
                if r.entries is not None:
                    # only this test's entities: the session's Kafka may hold others
                    # in a sorted order: Skiff's order of entities only approximates the
                    # one of Kafka's image (clients put them in a HashMap anyway)
                    entries = sorted(
                        (
                            (
                                [(e.entity_type, e.entity_name) for e in entry.entity],
                                [(v.key, v.value) for v in entry.values],
                            )
                            for entry in r.entries
                            if all(
                                e.entity_name is None or tag in e.entity_name for e in entry.entity
                            )
                        ),
                        key=repr,
                    )
                out.append((r.error_code, r.error_message, entries))
            return out

        for alter in _alters(tag):
            r = kafka.request(ALTER, 1, alter)
            answers.append(
                [
                    (
                        e.error_code,
                        e.error_message,
                        [(x.entity_type, x.entity_name) for x in e.entity],
                    )
                    for e in r.entries
                ]
            )
            answers.append(settled())
        # leave nothing behind on the session's Kafka
        cleanup = [
            {"entity": e["entity"], "ops": [_op(o["key"], remove=True) for o in e["ops"]]}
            for e in _alters(tag)[0]["entries"]
        ]
        kafka.request(ALTER, 1, {"entries": cleanup, "validate_only": False})
        answers.append(settled())
    return answers


def test_raw_client_quota_requests_same_answers_as_kafka(
    kafka4_admin: AdminKafka, skiff_own: Skiff
) -> None:
    tag = uuid.uuid4().hex[:8]
    on_skiff = _raw(skiff_own.bootstrap, tag)
    on_kafka = _raw(kafka4_admin.bootstrap, tag, on_skiff)
    for n, (kafka, skiff) in enumerate(zip(on_kafka, on_skiff, strict=True)):
        assert skiff == kafka, (n, kafka, skiff)
    # and they say something
    assert on_kafka[1][0] == (
        0,
        "",
        [([("client-id", f"a-{tag}")], [("producer_byte_rate", 100.0)])],
    )
    assert all(code == 42 for code, _, _ in on_kafka[4][1:])  # INVALID_REQUEST
    assert on_kafka[-1][0] == (0, "", [])


# -- enforcement ----------------------------------------------------------------------

QUOTA = 1024 * 1024  # bytes/s
# Kafka's rate spans at least 10 of its 11 one-second samples: a new client may take
# ~10 s worth at once (and its pace is bursty after that, as samples expire). Over a
# run of RUN_S from its first request it gets about QUOTA * (RUN_S + CREDIT_S).
RUN_S, CREDIT_S = 20.0, 10.0
RECORDS = 5000  # 50 MB to read, more than a consumer may in RUN_S
VALUE = b"q" * 10_000


class _Run(threading.Thread):
    """A librdkafka producer sending VALUE as fast as it may for `seconds`; delivered
    bytes by time, and the largest throttle time its statistics reported."""

    def __init__(self, bootstrap: str, topic: str, client_id: str, seconds: float) -> None:
        super().__init__(daemon=True)
        self.topic, self.seconds = topic, seconds
        self.delivered: list[tuple[float, int]] = []
        self.throttle_max = 0
        self.errors: list[str] = []
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "linger.ms": 5,
                "queue.buffering.max.kbytes": 4096,
                "statistics.interval.ms": 500,
                "stats_cb": self._stats,
            }
        )

    def _stats(self, raw: str) -> None:
        for b in json.loads(raw).get("brokers", {}).values():
            self.throttle_max = max(self.throttle_max, int(b.get("throttle", {}).get("max", 0)))

    def _done(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.delivered.append((time.monotonic(), len(msg.value())))

    def run(self) -> None:
        end = time.monotonic() + self.seconds
        while time.monotonic() < end:
            try:
                self.producer.produce(self.topic, VALUE, on_delivery=self._done)
            except BufferError:
                self.producer.poll(0.05)
            self.producer.poll(0)
        self.producer.flush(30)
        del self.producer  # closed now, not after the Skiff it talks to has stopped

    def rate(self, start: float, end: float) -> float:
        return sum(n for t, n in self.delivered if start <= t < end) / (end - start)

    def quota_rate(self, start: float) -> float:
        """The rate over RUN_S from `start`, less the credit a new client gets."""
        got = sum(n for t, n in self.delivered if start <= t < start + RUN_S)
        return (got - QUOTA * CREDIT_S) / RUN_S


@pytest.mark.timeout(180)
def test_producer_byte_rate_holds_a_client_near_its_quota(skiff_own: Skiff, topic: str) -> None:
    host, port = skiff_own.bootstrap.rsplit(":", 1)
    slow_id, fast_id = f"slow-{topic}", f"fast-{topic}"
    with RawKafka(host, int(port)) as kafka:
        r = kafka.request(
            ALTER,
            1,
            {
                "entries": [
                    {
                        "entity": _entity(("client-id", slow_id)),
                        "ops": [_op("producer_byte_rate", QUOTA)],
                    }
                ],
                "validate_only": False,
            },
        )
        assert [(e.error_code, e.error_message) for e in r.entries] == [(0, None)]
    slow = _Run(skiff_own.bootstrap, topic, slow_id, RUN_S + 1)
    fast = _Run(skiff_own.bootstrap, topic, fast_id, 5.0)
    started = time.monotonic()
    slow.start()
    slow.join(8.0)  # the other client starts while this one is throttled
    fast_start = time.monotonic()
    fast.start()
    slow.join(120)
    fast.join(120)
    assert not slow.errors and not fast.errors, (slow.errors[:3], fast.errors[:3])
    slow_rate = slow.quota_rate(started)
    fast_rate = fast.rate(fast_start + 1, fast_start + 5)
    print(f"slow {slow_rate / QUOTA:.2f} MB/s, fast {fast_rate / QUOTA:.2f} MB/s")
    assert 0.5 * QUOTA <= slow_rate <= 1.6 * QUOTA, slow_rate / QUOTA
    assert slow.throttle_max > 0
    assert fast.throttle_max == 0
    assert fast_rate > 3 * QUOTA, fast_rate / QUOTA


@pytest.mark.timeout(180)
def test_consumer_byte_rate_holds_a_consumer_near_its_quota(skiff_own: Skiff, topic: str) -> None:
    from confluent_kafka import Consumer

    host, port = skiff_own.bootstrap.rsplit(":", 1)
    reader = f"reader-{topic}"
    with RawKafka(host, int(port)) as kafka:
        r = kafka.request(
            ALTER,
            1,
            {
                "entries": [
                    {
                        "entity": _entity(("client-id", reader)),
                        "ops": [_op("consumer_byte_rate", QUOTA)],
                    }
                ],
                "validate_only": False,
            },
        )
        assert [(e.error_code, e.error_message) for e in r.entries] == [(0, None)]
    # more than the client may read in RUN_S
    producer = Producer({"bootstrap.servers": skiff_own.bootstrap, "linger.ms": 5})
    for _ in range(RECORDS):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    throttle_max = 0

    def stats(raw: str) -> None:
        nonlocal throttle_max
        for b in json.loads(raw).get("brokers", {}).values():
            throttle_max = max(throttle_max, int(b.get("throttle", {}).get("max", 0)))

    consumer = Consumer(
        {
            "bootstrap.servers": skiff_own.bootstrap,
            "client.id": reader,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "statistics.interval.ms": 500,
            "stats_cb": stats,
            # a small prefetch queue: what the application reads follows what is fetched
            "queued.max.messages.kbytes": 1024,
            "fetch.max.bytes": 1048576,
        }
    )
    consumer.subscribe([topic])
    read: list[tuple[float, int]] = []
    deadline = time.monotonic() + 60  # to the first record (the group's join first)
    try:
        while time.monotonic() < (read[0][0] + RUN_S if read else deadline):
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                read.append((time.monotonic(), len(msg.value())))
    finally:
        consumer.close()
    assert read, "nothing read in 60 s"
    total = sum(n for _, n in read)
    assert total < RECORDS * len(VALUE), "read everything: no quota held it back"
    # A consumer with a small prefetch queue takes little of the credit up front: its
    # plain rate, which the credit bounds at QUOTA * (RUN_S + CREDIT_S) / RUN_S.
    rate = total / RUN_S
    print(f"consumer {rate / QUOTA:.2f} MB/s")
    assert 0.5 * QUOTA <= rate <= 1.6 * QUOTA, rate / QUOTA
    assert throttle_max > 0


def test_rate_trackers_are_bounded_and_expire() -> None:
    """A client cycling client ids under a default quota leaves at most max_rates
    trackers; a tracker idle for the whole quota window is dropped."""
    manager = QuotaManager(samples=2, window_s=1, max_rates=100)
    manager.set_quotas({entity_of([(CLIENT_ID, None)]): {PRODUCER_BYTE_RATE: 1e9}})
    for n in range(5_000):
        assert manager.record(PRODUCER_BYTE_RATE, "", f"hostile-{n}", 10.0) == 0
    assert len(manager.rates) == 100
    assert (PRODUCER_BYTE_RATE, "", "hostile-4999") in manager.rates
    assert (PRODUCER_BYTE_RATE, "", "hostile-4899") not in manager.rates
    # A tracker in use keeps its history (over the quota: throttled).
    manager.set_quotas({entity_of([(CLIENT_ID, None)]): {PRODUCER_BYTE_RATE: 100.0}})
    assert manager.record(PRODUCER_BYTE_RATE, "", "busy", 10_000.0) > 0
    # Idle for the 2 s window: every tracker goes but the one just used.
    deadline = time.monotonic() + 30
    while len(manager.rates) > 1:
        assert time.monotonic() < deadline, len(manager.rates)
        manager.record(PRODUCER_BYTE_RATE, "", "busy", 0.0)
        time.sleep(0.05)
    assert list(manager.rates) == [(PRODUCER_BYTE_RATE, "", "busy")]


CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
THROTTLING_QUOTA_EXCEEDED = 89


def _new_topics(*names: str) -> dict[str, Any]:
    topics = [
        {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
        for n in names
    ]
    return {"topics": topics, "timeout": 30_000, "validate_only": False}


def _mutations(bootstrap: str, tag: str) -> list[Any]:
    """Under a controller_mutation_rate of 0.01 partitions/s (a burst of 0.11: one
    partition takes the bucket 89 s below zero) on one client id: strict versions are
    refused, older ones served and throttled, another client id unaffected. Each
    answer as (error code, message) per topic and whether a throttle time came."""
    host, port = bootstrap.rsplit(":", 1)
    client = f"m-{tag}"

    def ask(key: int, version: int, body: dict[str, Any], client_id: str = client) -> Any:
        with RawKafka(host, int(port), client_id=client_id) as kafka:  # muted: a fresh one
            return kafka.request(key, version, body)

    def quota(op: dict[str, Any]) -> None:
        entry = {"entity": _entity(("client-id", client)), "ops": [op]}
        r = ask(ALTER, 1, {"entries": [entry], "validate_only": False}, "admin")
        assert [e.error_code for e in r.entries] == [0]

    quota(_op("controller_mutation_rate", 0.01))
    # The first topic empties the bucket whenever the quota is in force (Kafka's
    # controller learns it a moment after the answer): ask until one is refused.
    deadline = time.monotonic() + 30
    made = []
    while True:
        name = f"mq-{tag}-{len(made)}"
        [t] = ask(CREATE_TOPICS, 7, _new_topics(name)).topics
        if t.error_code == THROTTLING_QUOTA_EXCEEDED:
            break
        assert t.error_code == 0, t
        made.append(name)
        assert time.monotonic() < deadline, "the quota never took effect"
    answers: list[Any] = []

    def seen(resp: Any, items: str) -> None:
        results = [(r.error_code, r.error_message) for r in getattr(resp, items)]
        answers.append((results, resp.throttle_time.total_seconds() > 0))

    first = made[0]
    seen(ask(CREATE_TOPICS, 7, _new_topics(f"mq-{tag}-strict", f"mq-{tag}-x")), "topics")
    seen(ask(DELETE_TOPICS, 6, {"topics": [{"name": first}], "timeout": 30_000}), "responses")
    grow = {"topics": [{"name": first, "count": 2, "assignments": None}], "timeout": 30_000}
    seen(ask(CREATE_PARTITIONS, 3, {**grow, "validate_only": False}), "results")
    # Versions before strictness: served, and throttled.
    seen(ask(CREATE_TOPICS, 5, _new_topics(f"mq-{tag}-old")), "topics")
    seen(ask(CREATE_PARTITIONS, 2, {**grow, "validate_only": False}), "results")
    # Another client id has no quota.
    other = ask(CREATE_TOPICS, 7, _new_topics(f"mq-{tag}-other"), "admin")
    seen(other, "topics")
    quota(_op("controller_mutation_rate", remove=True))
    names = [*made, f"mq-{tag}-old", f"mq-{tag}-other"]
    ask(DELETE_TOPICS, 6, {"topics": [{"name": n} for n in names], "timeout": 30_000}, "admin")
    return answers


def test_controller_mutation_rate_same_as_kafka(kafka4_admin: AdminKafka, skiff_own: Skiff) -> None:
    tag = uuid.uuid4().hex[:8]
    on_skiff = _mutations(skiff_own.bootstrap, tag)
    on_kafka = _mutations(kafka4_admin.bootstrap, tag)
    assert on_skiff == on_kafka
    served, throttled = (0, None), (THROTTLING_QUOTA_EXCEEDED, None)
    assert on_kafka == [
        ([throttled, throttled], True),
        ([throttled], True),
        ([throttled], True),
        ([served], True),
        ([served], True),
        ([served], False),
    ]


def test_controller_mutation_buckets_are_kafkas_and_bounded() -> None:
    """Kafka's TokenBucket: a burst of samples x window x rate, a request admitted while
    the bucket is not below zero, the throttle time -tokens / rate; a client cycling
    client ids leaves at most max_rates buckets."""
    manager = QuotaManager(samples=11, window_s=1, max_rates=100)
    manager.set_quotas({entity_of([(CLIENT_ID, None)]): {"controller_mutation_rate": 2.0}})
    strict = manager.mutation_quota("", "c", strict=True)
    assert strict is not None and strict.burst == 22.0
    assert strict.record(30)  # a full bucket admits a request larger than itself
    assert not strict.record(1)
    assert 3_900 <= strict.throttle_time_ms() <= 4_000  # 8 tokens short at 2/s
    permissive = manager.mutation_quota("", "c", strict=False)
    assert permissive is not None and permissive.record(1)
    assert 4_300 <= permissive.throttle_time_ms() <= 4_500
    for n in range(5_000):
        assert manager.mutation_quota("", f"hostile-{n}", strict=True) is not None
    assert len(manager.buckets) <= 100


def _answers_api_versions(bootstrap: str, source: str) -> bool:
    """Whether a new connection from `source` is served (ApiVersions answered) or
    closed without an answer."""
    host, port = bootstrap.rsplit(":", 1)
    body = {"client_software_name": "q", "client_software_version": "1"}
    with RawKafka(host, int(port), timeout=10, source_host=source) as kafka:
        try:
            kafka.request(18, 3, body)
        except (ConnectionClosed, ConnectionResetError):  # closed unanswered
            return False
    return True


def test_connection_creation_rate_throttles_one_ip(skiff_own: Skiff) -> None:
    """connection_creation_rate=1 on ip 127.0.0.2 (KIP-612): after the quota's
    window-long credit (Kafka's Rate: about 10 s worth at first), further connections
    from that address are closed unanswered, each after a throttle time of at most the
    1 s window; 127.0.0.1 connects as before; without the quota 127.0.0.2 is served
    again."""
    host, port = skiff_own.bootstrap.rsplit(":", 1)
    source = "127.0.0.2"

    def set_quota(op: dict[str, Any]) -> None:
        with RawKafka(host, int(port)) as kafka:
            entry = {"entity": _entity(("ip", source)), "ops": [op]}
            r = kafka.request(ALTER, 1, {"entries": [entry], "validate_only": False})
        assert [e.error_code for e in r.entries] == [0]

    set_quota(_op("connection_creation_rate", 1))
    started = time.monotonic()
    outcomes: list[bool] = []
    refusal_seconds: list[float] = []
    for _ in range(80):
        attempt = time.monotonic()
        outcomes.append(_answers_api_versions(skiff_own.bootstrap, source))
        if not outcomes[-1]:
            refusal_seconds.append(time.monotonic() - attempt)
    elapsed = time.monotonic() - started  # each refusal takes its throttle time
    served, refused = outcomes.count(True), outcomes.count(False)
    # At most the window's credit (11 samples of 1 s at 1/s) and 1/s since.
    assert served <= 11 + elapsed + 2 and refused >= 10, (served, refused, elapsed)
    assert outcomes[:10] == [True] * 10  # the credit first
    # Closed after the throttle time (at most the 1 s window), not left open.
    assert max(refusal_seconds) < 5, refusal_seconds
    assert all(_answers_api_versions(skiff_own.bootstrap, "127.0.0.1") for _ in range(20))
    set_quota(_op("connection_creation_rate", remove=True))
    wait_until = time.monotonic() + 30
    while not _answers_api_versions(skiff_own.bootstrap, source):
        assert time.monotonic() < wait_until, "still throttled without a quota"
