"""SASL on SASL_PLAINTEXT and SASL_SSL listeners: PLAIN (users file) and SCRAM-SHA-256/512
(credentials in Redis, from --add-scram or kafka-configs) with every client the project tests,
Kafka's answers to wrong passwords and protocol mistakes, credentials shared by the
sidecars of one Redis, the SCRAM admin APIs' validations and KIP-368 re-authentication.
Every sidecar here runs on a Redis of its own: its listeners are not the shared ones."""

from __future__ import annotations

import importlib
import json
import re
import shutil
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import known_secrets
import pytest
from clients import aiokafka_client, confluent_client, kafka_python_client
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient
from conftest import ROOT, RedisServer, Skiff, free_port, start_redis, start_skiff, stop_process
from rawkafka import ConnectionClosed, RawKafka
from scramp import ScramClient
from telemetry_helpers import scrape, value

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA, API_VERSIONS = 17, 36, 3, 18
DESCRIBE_SCRAM, ALTER_SCRAM = 50, 51
SASL_AUTHENTICATION_FAILED, ILLEGAL_SASL_STATE, UNSUPPORTED_SASL_MECHANISM = 58, 34, 33
PASSWORDS = {
    user: known_secrets.register(f"SASL password of {user}", password)
    for user, password in {"alice": "alice-secret-1", "bob": "bob-secret-2"}.items()
}
# Passwords of single tests, registered too (never in the sidecar's output either).
for _user, _password in (
    ("carol", "carol-pw-9d4f"),
    ("admin", "admin-pw-3b9e"),
    ("gina", "gina-pw-71c2"),
    ("alice (wrong, v0)", "wrong-pw-v0-1"),
):
    known_secrets.register(f"SASL password of {_user}", _password)
# (mechanism, user): alice is in the PLAIN users file, bob has SCRAM credentials (which
# PLAIN logins are also checked against).
LOGINS = {"PLAIN": "alice", "SCRAM-SHA-256": "bob", "SCRAM-SHA-512": "bob"}


@dataclass
class SaslSidecar:
    skiff: Skiff
    plain_port: int  # a PLAINTEXT listener
    sasl_port: int  # the SASL_PLAINTEXT listener
    redis: RedisServer

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"


def _wait_for(log: Path, pattern: str, timeout: float = 30.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while (found := re.search(pattern, log.read_text(errors="replace"))) is None:
        assert time.monotonic() < deadline, f"no {pattern!r} in:\n" + log.read_text()
        time.sleep(0.05)
    return found


def start_sasl_sidecar(
    tmp: Path,
    redis: RedisServer,
    name: str,
    *args: str,
    pattern: str = r"SECURE://127\.0\.0\.1:(\d+) \(SASL_PLAINTEXT\)",
) -> SaslSidecar:
    users = tmp / "plain-users"
    users.write_text(f"# PLAIN users\nalice:{PASSWORDS['alice']}\n")
    plain = free_port()
    log = tmp / f"{name}.log"
    skiff = start_skiff(
        log,
        "--redis-url",
        redis.url,
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{plain},SECURE://127.0.0.1:0",
        "--listener-security-protocol-map",
        "PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT",
        "--sasl-plain-users-file",
        str(users),
        "--add-scram",
        f"SCRAM-SHA-256=[name=bob,password={PASSWORDS['bob']}]",
        "--add-scram",
        f"SCRAM-SHA-512=[name=bob,password={PASSWORDS['bob']},iterations=8192]",
        *args,
        port=plain,
    )
    line = _wait_for(log, r"listening on .*" + pattern)
    return SaslSidecar(skiff, plain, int(line[1]), redis)


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslSidecar]:
    tmp = tmp_path_factory.mktemp("sasl")
    redis = start_redis(tmp / "redis")
    server = start_sasl_sidecar(tmp, redis, "skiff")
    yield server
    stop_process(server.skiff.proc)
    stop_process(redis.proc)


# -- every client, every mechanism ----------------------------------------------------------


def _client_config(client: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
    if client == "confluent":
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }
    if client in ("kafka-python", "aiokafka"):
        return {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism,
            "sasl_plain_username": user,
            "sasl_plain_password": password,
        }
    properties = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism}
    if client == "franz":
        properties |= {"sasl.username": user, "sasl.password": password}
    else:  # the Java client
        module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        properties["sasl.jaas.config"] = (
            f"org.apache.kafka.common.security.{module} required "
            f'username="{user}" password="{password}";'
        )
    return {"properties": properties}


def _clients() -> dict[str, Any]:
    clients: dict[str, Any] = {
        "confluent": confluent_client,
        "kafka-python": kafka_python_client,
        "aiokafka": aiokafka_client,
    }
    if shutil.which("mvn"):
        clients["java"] = importlib.import_module("clients.java_client")
    if shutil.which("go"):
        clients["franz"] = importlib.import_module("clients.franz_client")
    return clients


CLIENTS = _clients()


@pytest.mark.parametrize("mechanism", list(LOGINS))
@pytest.mark.parametrize("client", list(CLIENTS))
def test_client_produces_and_consumes_over_sasl(
    sidecar: SaslSidecar, client: str, mechanism: str
) -> None:
    user = LOGINS[mechanism]
    config = _client_config(client, mechanism, user, PASSWORDS[user])
    module = CLIENTS[client]
    topic = f"sasl-{uuid.uuid4().hex[:10]}"
    value = f"{client} {mechanism}".encode()
    meta = module.produce(sidecar.bootstrap, topic, [{"key": b"k", "value": value}], **config)
    assert meta[0]["offset"] == 0
    got = module.consume(sidecar.bootstrap, topic, 0, 0, 1, **config)
    assert [(r["key"], r["value"], r["offset"]) for r in got] == [(b"k", value, 0)]


# -- refusals -----------------------------------------------------------------------------


def _handshake(kafka: RawKafka, mechanism: str) -> Any:
    return kafka.request(SASL_HANDSHAKE, 1, {"mechanism": mechanism})


def _authenticate(kafka: RawKafka, auth_bytes: bytes, version: int = 2) -> Any:
    return kafka.request(SASL_AUTHENTICATE, version, {"auth_bytes": auth_bytes})


def _plain_login(kafka: RawKafka, user: str, password: str, version: int = 2) -> Any:
    assert _handshake(kafka, "PLAIN").error_code == 0
    return _authenticate(kafka, f"\0{user}\0{password}".encode(), version)


def _scram_login(kafka: RawKafka, mechanism: str, user: str, password: str) -> Any:
    assert _handshake(kafka, mechanism).error_code == 0
    client = ScramClient([mechanism], user, password)
    first = _authenticate(kafka, client.get_client_first().encode())
    if first.error_code != 0:  # an unknown user is refused at once
        return first
    client.set_server_first(first.auth_bytes.decode())
    final = _authenticate(kafka, client.get_client_final().encode())
    if final.error_code == 0:
        client.set_server_final(final.auth_bytes.decode())  # the server proved its key
    return final


def _metadata_ok(kafka: RawKafka) -> None:
    meta = kafka.request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
    assert meta.brokers, meta


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_is_refused_and_closed_other_connections_unaffected(
    sidecar: SaslSidecar, mechanism: str
) -> None:
    user = LOGINS[mechanism]
    with RawKafka("127.0.0.1", sidecar.sasl_port) as good:
        if mechanism == "PLAIN":
            assert _plain_login(good, user, PASSWORDS[user]).error_code == 0
        else:
            assert _scram_login(good, mechanism, user, PASSWORDS[user]).error_code == 0
        with RawKafka("127.0.0.1", sidecar.sasl_port) as bad:
            if mechanism == "PLAIN":
                refused = _plain_login(bad, user, "wrong-password")
                assert (
                    refused.error_message == "Authentication failed: Invalid username or password"
                )
            else:
                refused = _scram_login(bad, mechanism, user, "wrong-password")
                assert refused.error_message == (
                    "Authentication failed during authentication due to invalid credentials "
                    f"with SASL mechanism {mechanism}"
                )
            assert refused.error_code == SASL_AUTHENTICATION_FAILED
            assert "wrong-password" not in refused.error_message
            assert bad.closed()
        _metadata_ok(good)  # the authenticated connection goes on
    log = _wait_for(sidecar.skiff.log_path, rf"SASL {mechanism} authentication failed on listener")
    assert log is not None
    assert "wrong-password" not in sidecar.skiff.log()


def test_librdkafka_reports_the_authentication_error(sidecar: SaslSidecar) -> None:
    errors: list[KafkaError] = []
    admin = AdminClient(
        {
            "bootstrap.servers": sidecar.bootstrap,
            **_client_config("confluent", "SCRAM-SHA-512", "bob", "not-bobs-password"),
            "error_cb": errors.append,
        }
    )
    deadline = time.monotonic() + 30
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        assert time.monotonic() < deadline, errors
        admin.poll(0.2)
    auth = next(e for e in errors if e.code() == KafkaError._AUTHENTICATION)
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in auth.str()


def test_unknown_user_is_refused_like_a_wrong_password(sidecar: SaslSidecar) -> None:
    with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
        refused = _scram_login(kafka, "SCRAM-SHA-256", "nobody", "x")
        assert refused.error_code == SASL_AUTHENTICATION_FAILED
        assert kafka.closed()
    with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
        refused = _plain_login(kafka, "nobody", "x")
        assert refused.error_code == SASL_AUTHENTICATION_FAILED
        assert kafka.closed()


def test_unsupported_mechanism_gets_the_enabled_list_and_a_close(sidecar: SaslSidecar) -> None:
    with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
        answer = _handshake(kafka, "GSSAPI")
        assert answer.error_code == UNSUPPORTED_SASL_MECHANISM
        assert list(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert kafka.closed()


def test_authenticate_before_handshake_is_illegal_state_and_closes(sidecar: SaslSidecar) -> None:
    with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
        answer = _authenticate(kafka, b"\0alice\0" + PASSWORDS["alice"].encode())
        assert answer.error_code == ILLEGAL_SASL_STATE
        assert kafka.closed()


def test_request_before_authentication_closes_the_connection(sidecar: SaslSidecar) -> None:
    with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
        assert _handshake(kafka, "PLAIN").error_code == 0  # handshake done, not authenticated
        kafka.send(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
        assert kafka.closed()


def test_malformed_sasl_bytes_are_refused_not_crashed(sidecar: SaslSidecar) -> None:
    with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
        assert _handshake(kafka, "SCRAM-SHA-512").error_code == 0
        answer = _authenticate(kafka, b"\xff\x00garbage")
        assert answer.error_code == SASL_AUTHENTICATION_FAILED
        assert kafka.closed()
    with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
        assert _handshake(kafka, "PLAIN").error_code == 0
        assert _authenticate(kafka, b"only-one-token").error_code == SASL_AUTHENTICATION_FAILED
        assert kafka.closed()
    assert sidecar.skiff.alive()
    assert "Traceback" not in sidecar.skiff.log()


def test_a_large_frame_before_authentication_closes_the_connection(sidecar: SaslSidecar) -> None:
    """Kafka's sasl.server.max.receive.size (512 KiB): an unauthenticated client cannot
    make the sidecar buffer a large frame."""
    with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
        kafka.send_raw(struct.pack(">i", 524_289) + b"\0" * 1024)
        assert kafka.closed()
    _wait_for(
        sidecar.skiff.log_path,
        r"request size 524289 is outside 0\.\.524288 \(before SASL authentication\)",
    )
    with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:  # the limit is the SASL one only
        assert _plain_login(kafka, "alice", PASSWORDS["alice"]).error_code == 0
        kafka.send_raw(struct.pack(">i", 524_289) + b"\0" * 1024)
        assert not kafka.closed(timeout=1)


def test_sasl_on_a_plaintext_listener_is_illegal_state(sidecar: SaslSidecar) -> None:
    with RawKafka("127.0.0.1", sidecar.plain_port) as kafka:
        assert _handshake(kafka, "PLAIN").error_code == ILLEGAL_SASL_STATE
        _metadata_ok(kafka)  # as Kafka: an answer, not a close


def test_api_versions_lists_the_sasl_apis_as_kafka_4(sidecar: SaslSidecar) -> None:
    with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
        versions = kafka.request(
            API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
    ranges = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert ranges[SASL_HANDSHAKE] == (0, 1)
    assert ranges[SASL_AUTHENTICATE] == (0, 2)
    assert ranges[DESCRIBE_SCRAM] == (0, 0)
    assert ranges[ALTER_SCRAM] == (0, 0)


# -- SaslHandshake v0: bare tokens --------------------------------------------------------


def _token(kafka: RawKafka, token: bytes) -> bytes:
    """Send a SASL token as SaslHandshake v0 has them (4-byte size, the bytes); the answer."""
    kafka.send_raw(struct.pack(">i", len(token)) + token)
    return kafka.recv_sized()


def _handshake_v0(kafka: RawKafka, mechanism: str) -> None:
    answer = kafka.request(SASL_HANDSHAKE, 0, {"mechanism": mechanism})
    assert answer.error_code == 0
    assert list(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


def test_handshake_v0_plain_then_kafka_requests(sidecar: SaslSidecar) -> None:
    with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
        _handshake_v0(kafka, "PLAIN")
        # Kafka's PLAIN server answers the one token with an empty one.
        assert _token(kafka, b"\0alice\0" + PASSWORDS["alice"].encode()) == b""
        _metadata_ok(kafka)
        _metadata_ok(kafka)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_handshake_v0_scram_then_kafka_requests(sidecar: SaslSidecar, mechanism: str) -> None:
    with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
        _handshake_v0(kafka, mechanism)
        client = ScramClient([mechanism], "bob", PASSWORDS["bob"])
        server_first = _token(kafka, client.get_client_first().encode())
        client.set_server_first(server_first.decode())
        server_final = _token(kafka, client.get_client_final().encode())
        client.set_server_final(server_final.decode())  # the server proved its key
        _metadata_ok(kafka)


def test_handshake_v0_wrong_password_closes_without_an_answer(sidecar: SaslSidecar) -> None:
    with RawKafka("127.0.0.1", sidecar.sasl_port) as good:
        _handshake_v0(good, "SCRAM-SHA-256")
        client = ScramClient(["SCRAM-SHA-256"], "bob", PASSWORDS["bob"])
        client.set_server_first(_token(good, client.get_client_first().encode()).decode())
        with RawKafka("127.0.0.1", sidecar.sasl_port) as bad:
            _handshake_v0(bad, "PLAIN")
            bad.send_raw(struct.pack(">i", 20) + b"\0alice\0wrong-pw-v0-1")
            assert bad.closed()
            with pytest.raises(ConnectionClosed):  # v0 has no error frame
                bad.recv_sized(timeout=1)
        # A connection in the middle of its own v0 exchange goes on.
        client.set_server_final(_token(good, client.get_client_final().encode()).decode())
        _metadata_ok(good)
    _wait_for(
        sidecar.skiff.log_path,
        r"SASL PLAIN authentication failed on listener SECURE: "
        r"Authentication failed: Invalid username or password",
    )
    assert "wrong-pw-v0" not in sidecar.skiff.log()


def test_handshake_v0_oversize_or_garbage_token_closes(sidecar: SaslSidecar) -> None:
    with RawKafka("127.0.0.1", sidecar.sasl_port) as good:
        assert _plain_login(good, "alice", PASSWORDS["alice"]).error_code == 0
        with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
            _handshake_v0(kafka, "SCRAM-SHA-512")
            # sasl.server.max.receive.size: refused on the size, before any byte of it.
            kafka.send_raw(struct.pack(">i", 0x7FFF_FFF0) + b"n,,n=bob")
            assert kafka.closed()
        _wait_for(
            sidecar.skiff.log_path,
            r"request size 2147483632 is outside 0\.\.524288 \(before SASL authentication\)",
        )
        for garbage in (b"\xff\x00garbage", b"", b"\x00\x00\x00\x01" * 8):
            with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
                _handshake_v0(kafka, "SCRAM-SHA-512")
                kafka.send_raw(struct.pack(">i", len(garbage)) + garbage)
                assert kafka.closed()
        with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
            _handshake_v0(kafka, "PLAIN")  # a negative size
            kafka.send_raw(struct.pack(">i", -5) + b"\0alice\0")
            assert kafka.closed()
        _metadata_ok(good)
    assert sidecar.skiff.alive()
    assert "Traceback" not in sidecar.skiff.log()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def _sasl_requests(sidecar: SaslSidecar) -> tuple[float, float]:
    """(SaslHandshake v0 requests, SaslAuthenticate requests of any version) so far."""
    samples = scrape(sidecar.skiff.http_port)
    v0 = value(samples, "skiff_requests_total", api="sasl_handshake", version="0")
    authenticate = sum(
        value(samples, "skiff_requests_total", api="sasl_authenticate", version=str(v))
        for v in range(3)
    )
    return v0, authenticate


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_kafka_python_with_handshake_v0(sidecar: SaslSidecar, mechanism: str) -> None:
    """kafka-python told it talks to a 0.11 broker sends SaslHandshake v0 and bare tokens."""
    user = LOGINS[mechanism]
    config = _client_config("kafka-python", mechanism, user, PASSWORDS[user])
    config["api_version"] = (0, 11, 0)
    topic = f"sasl-v0-{uuid.uuid4().hex[:10]}"
    handshakes, authenticates = _sasl_requests(sidecar)
    records = [{"key": b"k", "value": b"v0"}]
    meta = kafka_python_client.produce(sidecar.bootstrap, topic, records, **config)
    assert meta[0]["offset"] == 0
    got = kafka_python_client.consume(sidecar.bootstrap, topic, 0, 0, 1, **config)
    assert [(r["key"], r["value"], r["offset"]) for r in got] == [(b"k", b"v0", 0)]
    handshakes_after, authenticates_after = _sasl_requests(sidecar)
    assert handshakes_after >= handshakes + 2  # a connection of the producer, the consumer
    assert authenticates_after == authenticates  # every token went bare


# -- the SCRAM admin APIs -----------------------------------------------------------------


def _alter(kafka: RawKafka, deletions: list[dict], upsertions: list[dict]) -> dict[str, Any]:
    answer = kafka.request(ALTER_SCRAM, 0, {"deletions": deletions, "upsertions": upsertions})
    return {r.user: (r.error_code, r.error_message) for r in answer.results}


def _upsert(name: str, mechanism: int = 2, iterations: int = 4096) -> dict[str, Any]:
    return {
        "name": name,
        "mechanism": mechanism,
        "iterations": iterations,
        "salt": b"salt-" + name.encode(),
        "salted_password": b"x" * 64,
    }


def test_alter_user_scram_credentials_validates_as_kafka(sidecar: SaslSidecar) -> None:
    with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
        assert _scram_login(kafka, "SCRAM-SHA-512", "bob", PASSWORDS["bob"]).error_code == 0
        got = _alter(
            kafka,
            [{"name": "nobody", "mechanism": 1}],
            [
                _upsert("few", iterations=4095),
                _upsert("many", iterations=16385),
                _upsert(""),
                _upsert("odd", mechanism=3),
                _upsert("ok", iterations=16384),
            ],
        )
        assert got == {
            "nobody": (91, "Attempt to delete a user credential that does not exist"),
            "few": (93, "Too few iterations"),
            "many": (93, "Too many iterations"),
            "": (93, "Username must not be empty"),
            "odd": (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
            "ok": (0, None),
        }
        twice = _alter(kafka, [{"name": "ok", "mechanism": 2}], [_upsert("ok")])
        assert twice == {
            "ok": (92, "A user credential cannot be altered twice in the same request")
        }
        described = kafka.request(DESCRIBE_SCRAM, 0, {"users": [{"name": "ok"}, {"name": "few"}]})
        by_user = {r.user: r for r in described.results}
        assert by_user["ok"].error_code == 0
        assert [(c.mechanism, c.iterations) for c in by_user["ok"].credential_infos] == [(2, 16384)]
        assert by_user["few"].error_code == 91
        assert _alter(kafka, [{"name": "ok", "mechanism": 2}], []) == {"ok": (0, None)}


# -- credentials shared by sidecars ---------------------------------------------------------


def test_kafka_configs_credentials_work_at_once_on_a_second_sidecar(
    sidecar: SaslSidecar, tmp_path: Path
) -> None:
    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.skip("java and mvn are needed for Kafka's kafka-configs")
    from test_kafka_cli import kafka_cli

    admin = tmp_path / "admin.properties"
    admin.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="bob" password="{PASSWORDS["bob"]}";\n'
    )
    second = start_sasl_sidecar(tmp_path, sidecar.redis, "second")
    try:
        common = ["--bootstrap-server", sidecar.bootstrap, "--command-config", str(admin)]
        # one mechanism per command: like Kafka 4.x, Skiff refuses two changes of one user
        # in one request (tests/test_scram_cli.py)
        for config in (
            "SCRAM-SHA-512=[password=carol-pw-9d4f]",
            "SCRAM-SHA-256=[iterations=8192,password=carol-pw-9d4f]",
        ):
            altered = kafka_cli(
                "kafka-configs",
                *common,
                "--alter",
                "--add-config",
                config,
                "--entity-type",
                "users",
                "--entity-name",
                "carol",
            )
            assert altered.returncode == 0, altered.stderr
            assert "Completed updating config for user carol." in altered.stdout
        described = kafka_cli(
            "kafka-configs",
            *common,
            "--describe",
            "--entity-type",
            "users",
            "--entity-name",
            "carol",
        )
        assert described.returncode == 0, described.stderr
        assert (
            "SCRAM credential configs for user-principal 'carol' are "
            "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"
        ) in described.stdout
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            with RawKafka("127.0.0.1", second.sasl_port) as kafka:
                assert _scram_login(kafka, mechanism, "carol", "carol-pw-9d4f").error_code == 0
                _metadata_ok(kafka)
        with RawKafka("127.0.0.1", second.sasl_port) as kafka:  # PLAIN against SCRAM's keys
            assert _plain_login(kafka, "carol", "carol-pw-9d4f").error_code == 0
        deleted = kafka_cli(
            "kafka-configs",
            *common,
            "--alter",
            "--delete-config",
            "SCRAM-SHA-512",
            "--entity-type",
            "users",
            "--entity-name",
            "carol",
        )
        assert deleted.returncode == 0, deleted.stderr
        with RawKafka("127.0.0.1", second.sasl_port) as kafka:
            refused = _scram_login(kafka, "SCRAM-SHA-512", "carol", "carol-pw-9d4f")
            assert refused.error_code == SASL_AUTHENTICATION_FAILED
    finally:
        stop_process(second.skiff.proc)


def test_add_scram_keeps_an_existing_credential(sidecar: SaslSidecar, tmp_path: Path) -> None:
    """A restart with the same --add-scram (or another password) changes nothing: the
    credential may have been rotated with kafka-configs since."""
    again = start_sasl_sidecar(
        tmp_path, sidecar.redis, "again", "--add-scram", "SCRAM-SHA-512=[name=bob,password=other]"
    )
    try:
        _wait_for(again.skiff.log_path, r"SCRAM-SHA-512 credential of user bob already exists")
        with RawKafka("127.0.0.1", again.sasl_port) as kafka:
            assert _scram_login(kafka, "SCRAM-SHA-512", "bob", PASSWORDS["bob"]).error_code == 0
        assert "other" not in again.skiff.log().replace("another", "")
    finally:
        stop_process(again.skiff.proc)


# -- KIP-368 re-authentication --------------------------------------------------------------

REAUTH_MS = 4000  # connections.max.reauth.ms of the sidecar below


@pytest.fixture(scope="module")
def reauth_sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslSidecar]:
    tmp = tmp_path_factory.mktemp("reauth")
    redis = start_redis(tmp / "redis")
    server = start_sasl_sidecar(
        tmp, redis, "skiff", "--connections-max-reauth-ms", str(REAUTH_MS), "--log-level", "DEBUG"
    )
    yield server
    stop_process(server.skiff.proc)
    stop_process(redis.proc)


def test_session_lifetime_is_answered_and_enforced(reauth_sidecar: SaslSidecar) -> None:
    lifetime = REAUTH_MS / 1000
    with RawKafka("127.0.0.1", reauth_sidecar.sasl_port) as kafka:
        done = _plain_login(kafka, "alice", PASSWORDS["alice"], version=1)
        first_ends = time.monotonic() + lifetime  # at the latest
        assert done.error_code == 0
        assert done.session_lifetime.total_seconds() == lifetime
        _metadata_ok(kafka)
        time.sleep(lifetime / 2)
        # Re-authentication on the live connection starts a new session.
        second_starts = time.monotonic()
        again = _plain_login(kafka, "alice", PASSWORDS["alice"], version=1)
        assert again.error_code == 0 and again.session_lifetime.total_seconds() == lifetime
        time.sleep(max(first_ends + 0.2 - time.monotonic(), 0))
        if time.monotonic() < second_starts + lifetime - 0.5:  # else the machine stalled
            _metadata_ok(kafka)  # past the first session, within the second
        time.sleep(max(second_starts + lifetime + 0.2 - time.monotonic(), 0))
        kafka.send(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
        assert kafka.closed()  # a request after the session closes the connection
    _wait_for(reauth_sidecar.skiff.log_path, r"SASL session of User:alice expired")


def test_reauthentication_cannot_change_the_principal(reauth_sidecar: SaslSidecar) -> None:
    with RawKafka("127.0.0.1", reauth_sidecar.sasl_port) as kafka:
        assert _plain_login(kafka, "alice", PASSWORDS["alice"]).error_code == 0
        refused = _plain_login(kafka, "bob", PASSWORDS["bob"])
        assert refused.error_code == SASL_AUTHENTICATION_FAILED
        assert "Cannot change principals during re-authentication" in refused.error_message
        assert kafka.closed()
    with RawKafka("127.0.0.1", reauth_sidecar.sasl_port) as kafka:
        assert _plain_login(kafka, "alice", PASSWORDS["alice"]).error_code == 0
        answer = _handshake(kafka, "SCRAM-SHA-256")  # another mechanism than the session's
        assert answer.error_code == UNSUPPORTED_SASL_MECHANISM
        assert list(answer.mechanisms) == ["PLAIN"]
        assert kafka.closed()


def test_librdkafka_reauthenticates_a_long_lived_consumer(reauth_sidecar: SaslSidecar) -> None:
    topic = f"reauth-{uuid.uuid4().hex[:10]}"
    config = _client_config("confluent", "SCRAM-SHA-256", "bob", PASSWORDS["bob"])
    confluent_client.produce(reauth_sidecar.bootstrap, topic, [{"value": b"first"}], **config)
    consumer = Consumer(
        {"bootstrap.servers": reauth_sidecar.bootstrap, "group.id": topic, **config}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        first = consumer.poll(30)
        assert first is not None and first.value() == b"first"
        log = reauth_sidecar.skiff.log_path
        # Sessions last REAUTH_MS: the client must re-authenticate on its connections.
        deadline = time.monotonic() + 30
        while "re-authenticated User:bob with SCRAM-SHA-256" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            consumer.poll(0.2)
        confluent_client.produce(reauth_sidecar.bootstrap, topic, [{"value": b"second"}], **config)
        deadline = time.monotonic() + 30
        while (msg := consumer.poll(0.5)) is None or msg.error():
            assert time.monotonic() < deadline
        assert msg.value() == b"second" and msg.offset() == 1
    finally:
        consumer.close()
    assert "SASL session of User:bob expired" not in reauth_sidecar.skiff.log()


def test_connections_max_reauth_ms_per_mechanism(tmp_path: Path) -> None:
    """Kafka's listener.name.<l>.<mechanism>.connections.max.reauth.ms: SCRAM-SHA-256
    sessions get their own lifetime, PLAIN's the broker-wide one."""
    short_ms = 1500
    config = tmp_path / "server.properties"
    config.write_text(f"listener.name.secure.scram-sha-256.connections.max.reauth.ms={short_ms}\n")
    redis = start_redis(tmp_path / "redis")
    server = start_sasl_sidecar(
        tmp_path, redis, "skiff", "--config", str(config), "--connections-max-reauth-ms", "600000"
    )
    try:
        with (
            RawKafka("127.0.0.1", server.sasl_port) as scram,
            RawKafka("127.0.0.1", server.sasl_port) as plain,
        ):
            done = _scram_login(scram, "SCRAM-SHA-256", "bob", PASSWORDS["bob"])
            ends = time.monotonic() + short_ms / 1000  # at the latest
            assert done.error_code == 0
            assert done.session_lifetime.total_seconds() == short_ms / 1000
            other = _plain_login(plain, "alice", PASSWORDS["alice"], version=1)
            assert other.error_code == 0 and other.session_lifetime.total_seconds() == 600
            time.sleep(max(ends + 0.2 - time.monotonic(), 0))
            scram.send(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
            assert scram.closed()  # its session is over
            _metadata_ok(plain)  # this one lasts 10 minutes
        _wait_for(server.skiff.log_path, r"SASL session of User:bob expired")
    finally:
        stop_process(server.skiff.proc)
        stop_process(redis.proc)


def test_a_negative_per_mechanism_reauth_ms_is_refused_at_start(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(
        "listeners=SECURE://127.0.0.1:0\n"
        "listener.security.protocol.map=SECURE:SASL_PLAINTEXT\n"
        "listener.name.secure.plain.connections.max.reauth.ms=-1\n"
    )
    result = _skiff("serve", "--config", str(config), "--redis-url", "redis://127.0.0.1:1")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "skiff serve: error: listener.name.secure.plain.connections.max.reauth.ms: expected "
        "a number of milliseconds >= 0"
    )


# -- the command line -----------------------------------------------------------------------


def _skiff(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", *args],
        cwd=ROOT,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_skiff_users_manages_credentials_a_sidecar_accepts(sidecar: SaslSidecar) -> None:
    redis = ["--redis-url", sidecar.redis.url]
    made = _skiff(
        "users",
        "set-scram",
        "frank",
        "--iterations",
        "8192",
        "--password-stdin",
        *redis,
        stdin="frank-pw-3\n",
    )
    assert made.returncode == 0, made.stderr
    assert "frank-pw-3" not in made.stdout + made.stderr
    listed = _skiff("users", "list", "--json", *redis)
    assert json.loads(listed.stdout)["frank"] == {"SCRAM-SHA-256": 8192, "SCRAM-SHA-512": 8192}
    with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
        assert _scram_login(kafka, "SCRAM-SHA-512", "frank", "frank-pw-3").error_code == 0
    deleted = _skiff("users", "delete-scram", "frank", "--mechanism", "SCRAM-SHA-512", *redis)
    assert deleted.returncode == 0, deleted.stderr
    with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
        refused = _scram_login(kafka, "SCRAM-SHA-512", "frank", "frank-pw-3")
        assert refused.error_code == SASL_AUTHENTICATION_FAILED
    again = _skiff("users", "delete-scram", "frank", "--mechanism", "SCRAM-SHA-512", *redis)
    assert again.returncode == 2
    assert again.stderr == "skiff users: error: user frank has no SCRAM-SHA-512 credential\n"
    no_tty = _skiff("users", "set-scram", "frank", *redis)
    assert no_tty.returncode == 2
    assert len(no_tty.stderr.splitlines()) == 1 and "--password-stdin" in no_tty.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--sasl-enabled-mechanisms", "GSSAPI"], "Skiff does not serve GSSAPI"),
        (["--sasl-enabled-mechanisms", "PLAIN,MD5"], "unknown SASL mechanism 'MD5'"),
        (["--add-scram", "SCRAM-SHA-1=[name=a,password=s3cr3t]"], "unknown SCRAM mechanism"),
        (["--add-scram", "SCRAM-SHA-512=[name=a,password=s3cr3t,iterations=10]"], "4096..16384"),
        (["--add-scram", "SCRAM-SHA-512=[password=s3cr3t]"], "name= is missing"),
        (["--add-scram", "admin:s3cr3t"], "expected MECHANISM=[name=USER,password=PASSWORD]"),
    ],
)
def test_bad_sasl_settings_are_one_line_and_status_2(args: list[str], says: str) -> None:
    result = _skiff("serve", "--redis-url", "redis://127.0.0.1:1", *args)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert says in result.stderr
    assert "s3cr3t" not in result.stderr


def test_gssapi_in_a_listener_override_is_refused_at_start(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(
        "listeners=SECURE://127.0.0.1:0\n"
        "listener.security.protocol.map=SECURE:SASL_PLAINTEXT\n"
        "listener.name.secure.sasl.enabled.mechanisms=GSSAPI\n"
    )
    result = _skiff("serve", "--config", str(config), "--redis-url", "redis://127.0.0.1:1")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "skiff serve: error: listener.name.secure.sasl.enabled.mechanisms: Skiff does not "
        "serve GSSAPI (Kerberos); use SCRAM-SHA-512 or PLAIN"
    )


@pytest.mark.skipif(shutil.which("mvn") is None, reason="the Java client needs mvn")
def test_java_client_reauthenticates_and_keeps_consuming(reauth_sidecar: SaslSidecar) -> None:
    java = CLIENTS["java"]
    topic = f"reauth-java-{uuid.uuid4().hex[:8]}"
    config = _client_config("java", "SCRAM-SHA-512", "bob", PASSWORDS["bob"])
    bootstrap = reauth_sidecar.bootstrap
    confluent = _client_config("confluent", "SCRAM-SHA-512", "bob", PASSWORDS["bob"])
    confluent_client.produce(bootstrap, topic, [{"value": b"one"}], **confluent)
    got: list[Any] = []
    failed: list[BaseException] = []

    def consume() -> None:
        try:
            got.extend(java.consume(bootstrap, topic, 0, 0, 2, timeout_ms=90_000, **config))
        except BaseException as exc:  # reported by the test thread
            failed.append(exc)

    reader = threading.Thread(target=consume)
    reader.start()
    log = reauth_sidecar.skiff.log_path
    deadline = time.monotonic() + 90
    # The Java consumer re-authenticates its connections before each session ends.
    while "re-authenticated User:bob with SCRAM-SHA-512" not in log.read_text():
        assert time.monotonic() < deadline and reader.is_alive(), failed
        time.sleep(0.2)
    confluent_client.produce(bootstrap, topic, [{"value": b"two"}], **confluent)
    reader.join(120)
    assert not failed, failed
    assert [r["value"] for r in got] == [b"one", b"two"]
    assert "SASL session of User:bob expired" not in reauth_sidecar.skiff.log()


def test_listener_settings_from_server_properties_and_add_scram_from_the_environment(
    tmp_path: Path,
) -> None:
    """Kafka's per-listener keys: the listener's mechanisms and its PLAIN JAAS users; the
    SCRAM bootstrap from SKIFF_ADD_SCRAM, one credential per line (a Kubernetes Secret)."""
    redis = start_redis(tmp_path / "redis")
    config = tmp_path / "server.properties"
    config.write_text(
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT\n"
        "listener.name.secure.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256\n"
        "listener.name.secure.plain.sasl.jaas.config="
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-pw-3b9e" user_gina="gina-pw-71c2" '
        'user_hal="hal \\\\"quoted\\\\" pw";\n'
    )
    plain = free_port()
    log = tmp_path / "skiff.log"
    skiff = start_skiff(
        log,
        "--config",
        str(config),
        "--redis-url",
        redis.url,
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{plain},SECURE://127.0.0.1:0",
        port=plain,
        env={
            "SKIFF_ADD_SCRAM": "SCRAM-SHA-256=[name=ida,password=ida-pw]\n"
            "SCRAM-SHA-256=[name=jo,password=jo-pw,iterations=4096]\n"
        },
    )
    try:
        port = int(_wait_for(log, r"SECURE://127\.0\.0\.1:(\d+) \(SASL_PLAINTEXT\)")[1])
        with RawKafka("127.0.0.1", port) as kafka:
            answer = _handshake(kafka, "SCRAM-SHA-512")
            assert answer.error_code == UNSUPPORTED_SASL_MECHANISM
            assert list(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]
        for user, password in (("gina", "gina-pw-71c2"), ("hal", 'hal "quoted" pw')):
            with RawKafka("127.0.0.1", port) as kafka:
                assert _plain_login(kafka, user, password).error_code == 0, user
                _metadata_ok(kafka)
        with RawKafka("127.0.0.1", port) as kafka:  # the broker's own login is no user
            refused = _plain_login(kafka, "admin", "admin-pw-3b9e")
            assert refused.error_code == SASL_AUTHENTICATION_FAILED
        for user in ("ida", "jo"):
            with RawKafka("127.0.0.1", port) as kafka:
                assert _scram_login(kafka, "SCRAM-SHA-256", user, f"{user}-pw").error_code == 0
        assert "-pw" not in skiff.log()
    finally:
        stop_process(skiff.proc)
        stop_process(redis.proc)


def test_redis_down_closes_a_scram_login_instead_of_refusing_it(tmp_path: Path) -> None:
    """A refusal would tell the client its password is wrong (clients give up on it);
    a close during authentication is what clients retry after."""
    redis = start_redis(tmp_path / "redis")
    server = start_sasl_sidecar(tmp_path, redis, "skiff", "--redis-retry-ms", "600")
    try:
        stop_process(redis.proc)
        with RawKafka("127.0.0.1", server.sasl_port) as kafka:
            assert _handshake(kafka, "SCRAM-SHA-512").error_code == 0
            client = ScramClient(["SCRAM-SHA-512"], "bob", PASSWORDS["bob"])
            kafka.send(SASL_AUTHENTICATE, 2, {"auth_bytes": client.get_client_first().encode()})
            assert kafka.closed(timeout=30)
            with pytest.raises(ConnectionClosed):  # closed without an answer
                kafka.recv_raw(timeout=1)
        with RawKafka("127.0.0.1", server.sasl_port) as kafka:  # file users need no Redis
            assert _plain_login(kafka, "alice", PASSWORDS["alice"]).error_code == 0
        _wait_for(
            server.skiff.log_path, r"Redis is unavailable: SASL credentials cannot be checked"
        )
    finally:
        stop_process(server.skiff.proc)


@pytest.fixture(scope="module")
def sasl_ssl_sidecar(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SaslSidecar, Path]]:
    """One sidecar with a SASL_SSL listener for the whole client matrix, and its CA file."""
    from tls_certs import TestCerts

    tmp = tmp_path_factory.mktemp("sasl-ssl")
    certs = TestCerts(tmp / "certs")
    redis = start_redis(tmp / "redis")
    server = start_sasl_sidecar(
        tmp,
        redis,
        "skiff",
        "--listener-security-protocol-map",
        "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL",
        "--ssl-keystore-location",
        str(certs.server_pem),
        pattern=r"SECURE://127\.0\.0\.1:(\d+) \(SASL_SSL\)",
    )
    yield server, certs.ca_pem
    stop_process(server.skiff.proc)
    stop_process(redis.proc)


def _sasl_ssl_config(client: str, mechanism: str, ca: Path) -> dict[str, Any]:
    """_client_config's login over TLS, trusting the test CA as each client is told to."""
    user = LOGINS[mechanism]
    config = _client_config(client, mechanism, user, PASSWORDS[user])
    if client == "confluent":
        return config | {"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca)}
    if client == "kafka-python":
        return config | {"security_protocol": "SASL_SSL", "ssl_cafile": str(ca)}
    if client == "aiokafka":
        from aiokafka.helpers import create_ssl_context

        context = create_ssl_context(cafile=str(ca))
        return config | {"security_protocol": "SASL_SSL", "ssl_context": context}
    config["properties"] |= {  # the Java client and franz-go read Java's property names
        "security.protocol": "SASL_SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca),
    }
    return config


@pytest.mark.parametrize("mechanism", list(LOGINS))
@pytest.mark.parametrize("client", list(CLIENTS))
def test_client_produces_and_consumes_over_sasl_ssl(
    sasl_ssl_sidecar: tuple[SaslSidecar, Path], client: str, mechanism: str
) -> None:
    """SASL over TLS (listener protocol SASL_SSL): every client logs in with each
    mechanism, produces and reads back exactly what it wrote."""
    server, ca = sasl_ssl_sidecar
    config = _sasl_ssl_config(client, mechanism, ca)
    module = CLIENTS[client]
    topic = f"sasl-ssl-{uuid.uuid4().hex[:10]}"
    records = [{"key": b"k%d" % i, "value": f"{client} {mechanism} {i}".encode()} for i in range(3)]
    meta = module.produce(server.bootstrap, topic, records, **config)
    assert [m["offset"] for m in meta] == [0, 1, 2]
    got = module.consume(server.bootstrap, topic, 0, 0, 3, **config)
    assert [(r["key"], r["value"], r["offset"]) for r in got] == [
        (rec["key"], rec["value"], n) for n, rec in enumerate(records)
    ]
    assert "Traceback" not in server.skiff.log()
