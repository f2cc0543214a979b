"""Kafka's own `kafka-configs` (Kafka 4.x tools) managing SCRAM users on Skiff and on a
real Kafka 4.x broker with the same commands: adding both mechanisms in one command
(Kafka 4.x refuses it: DUPLICATE_RESOURCE) and one by one, describing one user and
every user, deleting a mechanism, users that do not exist, iterations outside Kafka's
bounds, an empty password. The same exit codes and output on both (normalised: see
_seen). Then a real client (librdkafka) logs in with what is left on both, and raw
AlterUserScramCredentials/DescribeUserScramCredentials requests the tool cannot send
(duplicates, empty keys, unknown mechanisms) get the same answers. Every run of the
tool against a broker shares one JVM (kafka_tools.run_batch); the Kafka broker is the
session's (conftest.kafka4_admin). Skipped without java or mvn."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import known_secrets
import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient
from conftest import RedisServer, free_port, start_redis, start_skiff, stop_process
from kafka_tools import ADMIN_KAFKA_VERSION, SCRAM_MECHANISMS, AdminKafka, run_batch
from rawkafka import RawKafka

DESCRIBE_SCRAM, ALTER_SCRAM = 50, 51
DUPLICATE = "A user credential cannot be altered twice in the same request"
PASSWORD = known_secrets.register("SCRAM password of alice (kafka-configs)", "al1ce-scram-5e7a")
OTHER = known_secrets.register("SCRAM password of bob (kafka-configs)", "b0b-scram-82c1")


@pytest.fixture(scope="module")
def skiff_scram(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminKafka]:
    """Skiff set up as kafka4_admin's broker: User:ANONYMOUS a super user of the
    StandardAuthorizer on PLAINTEXT, SCRAM on a SASL_PLAINTEXT listener."""
    tmp = tmp_path_factory.mktemp("scram-cli")
    redis: RedisServer = start_redis(tmp / "redis")
    log = tmp / "skiff.log"
    plain = free_port()
    server = start_skiff(
        log,
        "--redis-url",
        redis.url,
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{plain},SECURE://127.0.0.1:0",
        "--listener-security-protocol-map",
        "PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT",
        "--sasl-enabled-mechanisms",
        SCRAM_MECHANISMS,
        "--authorizer-class-name",
        "standard",
        "--super-users",
        "User:ANONYMOUS",
        port=plain,
    )
    deadline = time.monotonic() + 30
    pattern = r"listening on .*SECURE://127\.0\.0\.1:(\d+) \(SASL_PLAINTEXT\)"
    while (sasl := re.search(pattern, log.read_text(errors="replace"))) is None:
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    yield AdminKafka(server.bootstrap, f"127.0.0.1:{sasl[1]}")
    stop_process(server.proc)
    stop_process(redis.proc)


USERS = ["--entity-type", "users"]
ADD_BOTH = (
    f"SCRAM-SHA-512=[password={PASSWORD}],SCRAM-SHA-256=[iterations=8192,password={PASSWORD}]"
)
RUNS: list[list[str]] = [
    ["--describe", *USERS],
    # Kafka 4.x (KRaft) refuses two changes of one user in one request, even of two
    # mechanisms: DUPLICATE_RESOURCE, nothing changes
    ["--alter", "--add-config", ADD_BOTH, *USERS, "--entity-name", "alice"],
    ["--describe", *USERS, "--entity-name", "alice"],
    ["--alter", "--add-config", f"SCRAM-SHA-512=[password={PASSWORD}]", *USERS,
     "--entity-name", "alice"],
    ["--alter", "--add-config", f"SCRAM-SHA-256=[iterations=8192,password={PASSWORD}]",
     *USERS, "--entity-name", "alice"],
    ["--describe", *USERS, "--entity-name", "alice"],
    ["--alter", "--add-config", f"SCRAM-SHA-256=[password={OTHER}]", *USERS,
     "--entity-name", "bob"],
    ["--describe", *USERS],
    ["--alter", "--delete-config", "SCRAM-SHA-512", *USERS, "--entity-name", "alice"],
    ["--describe", *USERS, "--entity-name", "alice"],
    # a user that does not exist
    ["--describe", *USERS, "--entity-name", "nobody"],
    ["--alter", "--delete-config", "SCRAM-SHA-512", *USERS, "--entity-name", "nobody"],
    # iterations below Kafka's minimum (4096) and above its maximum (16384), and at both
    ["--alter", "--add-config", "SCRAM-SHA-256=[iterations=4095,password=x]", *USERS,
     "--entity-name", "carol"],
    ["--alter", "--add-config", "SCRAM-SHA-512=[iterations=16385,password=x]", *USERS,
     "--entity-name", "carol"],
    ["--alter", "--add-config", "SCRAM-SHA-256=[iterations=4096,password=x]", *USERS,
     "--entity-name", "carol"],
    ["--alter", "--add-config", "SCRAM-SHA-512=[iterations=16384,password=x]", *USERS,
     "--entity-name", "carol"],
    # an empty password
    ["--alter", "--add-config", "SCRAM-SHA-256=[password=]", *USERS, "--entity-name", "dave"],
    ["--describe", *USERS],
    ["--alter", "--delete-config", "SCRAM-SHA-256", *USERS, "--entity-name", "bob"],
    ["--alter", "--delete-config", "SCRAM-SHA-256,SCRAM-SHA-512", *USERS,
     "--entity-name", "carol"],
    ["--describe", *USERS, "--entity-name", "carol"],
]  # fmt: skip


def _runs(bootstrap: str) -> list[subprocess.CompletedProcess[str]]:
    return run_batch(
        ADMIN_KAFKA_VERSION,
        "kafka-configs",
        [["--bootstrap-server", bootstrap, *args] for args in RUNS],
    )


def _seen(done: subprocess.CompletedProcess[str], bootstrap: str) -> tuple[int, str, str]:
    """What the tool printed, with two normalisations: the bootstrap address (the tool
    repeats its arguments in error lines) and the order of a user's mechanisms (Kafka's
    ScramImage keeps them in a HashMap keyed by an enum: an order that changes from one
    JVM to the next)."""
    lines = []
    for line in done.stdout.replace(bootstrap, "BOOTSTRAP").splitlines(keepends=True):
        head, are, mechanisms = line.rstrip("\n").partition(" are ")
        if head.startswith("SCRAM credential configs for user-principal") and are:
            line = f"{head}{are}{', '.join(sorted(mechanisms.split(', ')))}\n"
        lines.append(line)
    return done.returncode, "".join(lines), done.stderr.replace(bootstrap, "BOOTSTRAP")


def _login(sasl_bootstrap: str, mechanism: str, user: str, password: str) -> Any:
    """Brokers in the metadata a librdkafka admin client gets after logging in, or its
    authentication error's text."""
    errors: list[KafkaError] = []
    admin = AdminClient(
        {
            "bootstrap.servers": sasl_bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            "error_cb": errors.append,
        }
    )
    deadline = time.monotonic() + 60
    while True:
        refused = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        if refused:
            # without the address and librdkafka's timing
            return refused[0].str().replace(sasl_bootstrap, "BOOTSTRAP").split(" (after ")[0]
        try:
            return len(admin.list_topics(timeout=1).brokers)
        except Exception:
            assert time.monotonic() < deadline, errors
            admin.poll(0.2)


@pytest.mark.timeout(600)
def test_kafka_configs_scram_users_same_on_skiff_and_kafka(
    kafka4_admin: AdminKafka, skiff_scram: AdminKafka
) -> None:
    on_kafka = _runs(kafka4_admin.bootstrap)
    on_skiff = _runs(skiff_scram.bootstrap)
    for args, kafka, skiff in zip(RUNS, on_kafka, on_skiff, strict=True):
        expected = _seen(kafka, kafka4_admin.bootstrap)
        assert _seen(skiff, skiff_scram.bootstrap) == expected, args
    # and they say something
    assert [r.returncode for r in on_kafka[1:5]] == [1, 0, 0, 0]
    assert "DuplicateResourceException: " + DUPLICATE in on_kafka[1].stderr
    assert _seen(on_kafka[5], kafka4_admin.bootstrap)[1] == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"
    )
    assert on_kafka[12].returncode == 1
    # what is left on both: alice's SCRAM-SHA-256 credential
    for mechanism, expected in (
        ("SCRAM-SHA-256", 1),
        (
            "SCRAM-SHA-512",
            "sasl_plaintext://BOOTSTRAP/bootstrap: SASL "
            "authentication error: Authentication failed during authentication due to "
            "invalid credentials with SASL mechanism SCRAM-SHA-512",
        ),
    ):
        on_kafka_login = _login(kafka4_admin.sasl_bootstrap, mechanism, "alice", PASSWORD)
        assert _login(skiff_scram.sasl_bootstrap, mechanism, "alice", PASSWORD) == (
            on_kafka_login
        ), mechanism
        assert on_kafka_login == expected


def _upsert(name: str, mechanism: int = 2, salt: bytes = b"salt", salted: bytes = b"k" * 64) -> Any:
    return {
        "name": name,
        "mechanism": mechanism,
        "iterations": 4096,
        "salt": salt,
        "salted_password": salted,
    }


# (deletions, upsertions) of one AlterUserScramCredentials request each, in this order
ALTERS: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = [
    ([], [_upsert("two-mechs", 1), _upsert("two-mechs", 2)]),
    ([], [_upsert("thrice"), _upsert("thrice"), _upsert("thrice")]),
    ([{"name": "absent", "mechanism": 1}], [_upsert("absent")]),
    ([{"name": "gone", "mechanism": 2}, {"name": "gone", "mechanism": 2}], []),
    ([], [_upsert("no-key", salted=b""), _upsert("no-salt", salt=b""), _upsert("", 1)]),
    ([], [_upsert("odd", 3), _upsert("kept", 1)]),
    ([{"name": "kept", "mechanism": 1}], [_upsert("kept", 2), _upsert("other", 1)]),
    ([{"name": "kept", "mechanism": 1}, {"name": "no-salt", "mechanism": 2}], []),
]


BARRIER = "zz-barrier"


def _barrier(kafka: RawKafka) -> None:
    """Kafka answers an alteration once its controller committed it; the broker that
    describes applies it from the metadata log a moment later (under load, after the
    describe that followed: a deleted credential was still described). Changes apply in
    log order, so once one more alteration is visible all before it are. Skiff's are at
    once; it takes the same step so both answers list the same users."""
    kafka.request(ALTER_SCRAM, 0, {"deletions": [], "upsertions": [_upsert(BARRIER, 1)]})
    deadline = time.monotonic() + 60
    while True:
        described = kafka.request(DESCRIBE_SCRAM, 0, {"users": [{"name": BARRIER}]})
        if described.results and described.results[0].error_code == 0:
            return
        assert time.monotonic() < deadline, "the barrier credential never became visible"
        time.sleep(0.1)


def _raw_alters(bootstrap: str) -> list[Any]:
    host, port = bootstrap.rsplit(":", 1)
    answers: list[Any] = []
    with RawKafka(host, int(port)) as kafka:
        for deletions, upsertions in ALTERS:
            body = {"deletions": deletions, "upsertions": upsertions}
            answer = kafka.request(ALTER_SCRAM, 0, body)
            # in Kafka's order (its HashMaps' order, sidecar/protocol/java_order.py)
            answers.append([(r.user, r.error_code, r.error_message) for r in answer.results])
        _barrier(kafka)
        names = [{"name": n} for n in ("kept", "other", "no-salt", "two-mechs", "other")]
        for users in (names, names[:4], None):
            described = kafka.request(DESCRIBE_SCRAM, 0, {"users": users})
            answers.append(
                [(described.error_code, described.error_message)]
                + [  # a user's mechanisms come from Kafka in an order that changes per start
                    (
                        r.user,
                        r.error_code,
                        r.error_message,
                        sorted((c.mechanism, c.iterations) for c in r.credential_infos),
                    )
                    for r in described.results
                ]
            )
    return answers


def test_alter_user_scram_credentials_same_answers_as_kafka(
    kafka4_admin: AdminKafka, skiff_scram: AdminKafka
) -> None:
    on_kafka = _raw_alters(kafka4_admin.bootstrap)
    for alter, kafka, skiff in zip(
        [*ALTERS, "describe", "describe", "describe all"],
        on_kafka,
        _raw_alters(skiff_scram.bootstrap),
        strict=True,
    ):
        assert skiff == kafka, alter
    assert on_kafka[0] == [("two-mechs", 92, DUPLICATE)]
