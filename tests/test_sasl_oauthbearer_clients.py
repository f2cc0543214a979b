"""SASL/OAUTHBEARER end to end: a sidecar with a SASL_PLAINTEXT listener that accepts
JWTs signed by a test identity provider (tests/oauth_issuer.py, JWKS over HTTP), and
real clients (librdkafka, kafka-python, aiokafka, franz-go, the Java client with
Kafka's OAuthBearerLoginCallbackHandler against a token endpoint) producing and consuming over
it (librdkafka over SASL_SSL too); refused tokens (expired, badly signed) close the
connection with a log line."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from aiokafka.abc import AbstractTokenProvider as AiokafkaTokenProvider
from clients import aiokafka_client, franz_client, java_client, kafka_python_client
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from conftest import Skiff, free_port, start_redis, start_skiff, stop_process
from kafka.net.sasl.oauth import AbstractTokenProvider as KafkaPythonTokenProvider
from oauth_issuer import AUDIENCE, ISSUER, IdentityProvider, Signer
from rawkafka import RawKafka

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3
INVALID_TOKEN = b'{"status":"invalid_token"}'
SASL_AUTHENTICATION_FAILED = 58


@pytest.fixture(scope="module")
def signer() -> Signer:
    return Signer("idp-key-1")


@pytest.fixture(scope="module")
def idp(signer: Signer) -> Iterator[IdentityProvider]:
    provider = IdentityProvider(signer)
    yield provider
    provider.close()


@pytest.fixture(scope="module")
def sidecar(idp: IdentityProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Skiff]:
    """One sidecar, on a Redis of its own, whose only listener is SASL_PLAINTEXT with
    OAUTHBEARER."""
    tmp = tmp_path_factory.mktemp("oauthbearer")
    redis = start_redis(tmp / "redis")
    port = free_port()
    skiff = start_skiff(
        tmp / "skiff.log",
        "--redis-url",
        redis.url,
        "--listeners",
        f"SASL://127.0.0.1:{port}",
        "--listener-security-protocol-map",
        "SASL:SASL_PLAINTEXT",
        "--sasl-enabled-mechanisms",
        "OAUTHBEARER",
        "--sasl-oauthbearer-jwks-endpoint-url",
        idp.url,
        "--sasl-oauthbearer-expected-issuer",
        ISSUER,
        "--sasl-oauthbearer-expected-audience",
        AUDIENCE,
        port=port,
    )
    yield skiff
    stop_process(skiff.proc)
    stop_process(redis.proc)


def wait_for_log(skiff: Skiff, pattern: str, timeout: float = 30.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while (found := re.search(pattern, skiff.log())) is None:
        assert time.monotonic() < deadline, f"{pattern!r} not in the log:\n{skiff.log()[-3000:]}"
        time.sleep(0.05)
    return found


def client_first(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def sasl_start(kafka: RawKafka, token: str) -> Any:
    handshake = kafka.request(SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"})
    assert (handshake.error_code, list(handshake.mechanisms)) == (0, ["OAUTHBEARER"])
    return kafka.request(SASL_AUTHENTICATE, 2, {"auth_bytes": client_first(token)})


def topic() -> str:
    return f"oauth-{uuid.uuid4().hex[:10]}"


RECORDS = [{"key": b"k1", "value": b"one"}, {"key": None, "value": b"two"}, {"value": b""}]


def test_jwks_is_fetched_at_start_up(sidecar: Skiff) -> None:
    """Before the sidecar says it is listening (so before any client), it has the keys."""
    listening = wait_for_log(sidecar, r"Skiff node \d+ listening on SASL://")
    jwks = wait_for_log(
        sidecar, r"OAUTHBEARER JWKS from http://127\.0\.0\.1:\d+/jwks\.json: key ids"
    )
    assert jwks.start() < listening.start()
    assert "['idp-key-1']" in sidecar.log()[jwks.end() : jwks.end() + 20]


def test_a_failing_jwks_is_retried_with_back_off(signer: Signer, tmp_path: Path) -> None:
    """The identity provider fails the first three JWKS fetches: the sidecar retries
    after 200, 400 and 400 ms (--sasl-oauthbearer-jwks-endpoint-retry-backoff-ms, and the
    listener's retry.backoff.max.ms from --config), then a login works; the scopes come
    from the claim --sasl-oauthbearer-scope-claim-name names."""
    idp = IdentityProvider(signer, failures=3)
    config = tmp_path / "server.properties"
    config.write_text(
        "listener.name.sasl.oauthbearer.sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms=400\n"
    )
    redis = start_redis(tmp_path / "redis")
    port = free_port()
    skiff = start_skiff(
        tmp_path / "skiff.log",
        "--config",
        str(config),
        "--redis-url",
        redis.url,
        "--listeners",
        f"SASL://127.0.0.1:{port}",
        "--listener-security-protocol-map",
        "SASL:SASL_PLAINTEXT",
        "--sasl-enabled-mechanisms",
        "OAUTHBEARER",
        "--sasl-oauthbearer-jwks-endpoint-url",
        idp.url,
        "--sasl-oauthbearer-jwks-endpoint-retry-backoff-ms",
        "200",
        "--sasl-oauthbearer-scope-claim-name",
        "scp",
        "--log-level",
        "DEBUG",
        port=port,
    )
    try:
        wait_for_log(skiff, r"OAUTHBEARER JWKS from http://127\.0\.0\.1:\d+/jwks\.json: key ids")
        token = signer.token("scoped", scp=["kafka.write", "kafka.read"], scope="ignored")
        with RawKafka("127.0.0.1", port) as kafka:
            assert sasl_start(kafka, token).error_code == 0
            meta = kafka.request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
            assert [int(b.port) for b in meta.brokers] == [port]
        wait_for_log(
            skiff,
            r"OAUTHBEARER token of scoped from 127\.0\.0\.1: scopes "
            r"\['kafka\.read', 'kafka\.write'\]",
        )
        assert "cannot load the OAUTHBEARER JWKS from http://127.0.0.1" in skiff.log()
    finally:
        stop_process(skiff.proc)
        stop_process(redis.proc)
        idp.close()
    assert len(idp.attempts) == 4 and idp.fetches == 1
    waits = [b - a for a, b in zip(idp.attempts, idp.attempts[1:], strict=False)]
    for wait, backoff in zip(waits, (0.2, 0.4, 0.4), strict=True):
        assert wait >= backoff - 0.01, waits


# -- the protocol, byte by byte -------------------------------------------------------------


def test_session_lifetime_is_the_tokens(sidecar: Skiff, signer: Signer) -> None:
    """KIP-368: SaslAuthenticate answers the session lifetime, the token's remaining
    life; a request after it closes the connection."""
    token = signer.token("alice", lifetime_s=4)
    expires = time.time() + 4
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        answer = sasl_start(kafka, token)
        assert (answer.error_code, answer.auth_bytes) == (0, b"")
        assert 0 < answer.session_lifetime.total_seconds() <= 4
        meta = kafka.request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
        assert [int(b.port) for b in meta.brokers] == [sidecar.port]
        while time.time() < expires + 0.5:  # until the token has expired
            time.sleep(0.1)
        kafka.send(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
        assert kafka.closed()
    wait_for_log(sidecar, r"after the SASL session of User:alice expired")


@pytest.mark.parametrize("problem", ["expired", "signature"])
def test_refused_token_is_kafkas_answer(sidecar: Skiff, signer: Signer, problem: str) -> None:
    """Kafka's OAuthBearerSaslServer: the error JSON as the challenge, the client's %x01,
    then SASL_AUTHENTICATION_FAILED and a closed connection; other connections go on."""
    if problem == "expired":
        token = signer.token("mallory", lifetime_s=-600)
    else:
        token = Signer(signer.kid).token("mallory")  # another key under the same kid
    with RawKafka("127.0.0.1", sidecar.port) as healthy:
        assert sasl_start(healthy, signer.token("bob")).error_code == 0
        with RawKafka("127.0.0.1", sidecar.port) as kafka:
            challenge = sasl_start(kafka, token)
            assert (challenge.error_code, challenge.auth_bytes) == (0, INVALID_TOKEN)
            failed = kafka.request(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x01"})
            assert failed.error_code == SASL_AUTHENTICATION_FAILED
            assert problem in failed.error_message and token not in failed.error_message
            assert kafka.closed()
        meta = healthy.request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
        assert meta.brokers
    wait_for_log(
        sidecar,
        rf"OAUTHBEARER authentication from 127\.0\.0\.1 on listener SASL "
        rf"refused: [^\n]*{problem}",
    )
    assert token not in sidecar.log() and token.split(".")[2] not in sidecar.log()


@pytest.mark.parametrize(
    "garbage",
    [b"\xff" * 1000, b"n,,\x01auth=Bearer \x01\x01", b"n,,\x01" + b"a=b\x01" * 5000],
)
def test_garbage_client_message_closes_the_connection(sidecar: Skiff, garbage: bytes) -> None:
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        handshake = kafka.request(SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"})
        assert handshake.error_code == 0
        answer = kafka.request(SASL_AUTHENTICATE, 2, {"auth_bytes": garbage})
        assert answer.error_code == SASL_AUTHENTICATION_FAILED
        assert answer.error_message == "Authentication failed: malformed OAUTHBEARER message"
        assert kafka.closed()
    assert sidecar.alive()


# -- real clients ----------------------------------------------------------------------------


def librdkafka_config(sidecar: Skiff, token: Any) -> dict[str, Any]:
    """librdkafka's OAUTHBEARER with an oauth_cb handing out `token()`."""
    return {
        "bootstrap.servers": sidecar.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER",
        # (token, expiry in seconds since the epoch, principal): librdkafka refuses to
        # send a token whose expiry is past, so the expiry is the callback's own.
        "oauth_cb": lambda _config: (token(), time.time() + 300, "librdkafka"),
    }


def test_librdkafka_produces_and_consumes(sidecar: Skiff, signer: Signer) -> None:
    name = topic()
    config = librdkafka_config(sidecar, lambda: signer.token("librdkafka"))
    producer = Producer(config)
    delivered: list[tuple[int, int]] = []
    for record in RECORDS:
        producer.produce(
            name,
            key=record.get("key"),
            value=record["value"],
            on_delivery=lambda err, msg: (
                delivered.append((msg.partition(), msg.offset()))
                if err is None
                else pytest.fail(str(err))
            ),
        )
    assert producer.flush(60) == 0
    assert delivered == [(0, 0), (0, 1), (0, 2)]
    consumer = Consumer({**config, "group.id": f"g-{name}", "enable.auto.commit": False})
    got: list[tuple[int, bytes | None, bytes]] = []
    try:
        consumer.assign([TopicPartition(name, 0, 0)])
        deadline = time.monotonic() + 60
        while len(got) < 3:
            assert time.monotonic() < deadline, got
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                assert msg is None or msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                continue
            got.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    assert got == [(0, b"k1", b"one"), (1, None, b"two"), (2, None, b"")]


def test_librdkafka_reauthenticates_before_its_token_expires(
    sidecar: Skiff, signer: Signer
) -> None:
    """KIP-368 with the token's lifetime as the session's: librdkafka fetches a new token
    and re-authenticates on its open connection before the old one expires, so producing
    goes on across several token lifetimes without a connection closed for expiry."""
    name = topic()
    issued: list[int] = []  # the exp of each token handed out

    def oauth_cb(_config: str) -> tuple[str, float, str]:
        token = signer.token("reauth", lifetime_s=6)
        issued.append(jwt.decode(token, options={"verify_signature": False})["exp"])
        return token, issued[-1], "reauth"

    config = librdkafka_config(sidecar, lambda: "")
    producer = Producer({**config, "oauth_cb": oauth_cb})
    offsets: list[int] = []
    deadline = time.monotonic() + 120
    while len(issued) < 3 or time.time() < issued[0] + 3:  # past the first token's life
        assert time.monotonic() < deadline, issued
        producer.produce(
            name,
            value=b"%d" % len(offsets),
            on_delivery=lambda err, msg: offsets.append(-1 if err else msg.offset()),
        )
        assert producer.flush(30) == 0
        time.sleep(0.2)
    assert offsets == list(range(len(offsets)))  # every record once, in order
    assert "session of User:reauth expired" not in sidecar.log()


def test_librdkafka_with_a_badly_signed_token_is_refused(sidecar: Skiff, signer: Signer) -> None:
    errors: list[KafkaError] = []
    impostor = Signer(signer.kid)
    config = librdkafka_config(sidecar, lambda: impostor.token("librdkafka-impostor"))
    admin = AdminClient({**config, "error_cb": errors.append})
    deadline = time.monotonic() + 60
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        assert time.monotonic() < deadline, errors
        admin.poll(0.2)
        try:
            admin.list_topics(timeout=1)
        except Exception:  # noqa: BLE001 - a refused client cannot list topics
            pass
    message = next(str(e) for e in errors if e.code() == KafkaError._AUTHENTICATION)
    assert "signature does not verify" in message
    wait_for_log(sidecar, r"refused: the JWT's signature does not verify")


def test_librdkafka_over_sasl_ssl(idp: IdentityProvider, signer: Signer, tmp_path: Path) -> None:
    """OAUTHBEARER on a SASL_SSL listener: the token travels inside TLS."""
    from tls_certs import TestCerts

    tmp = tmp_path
    certs = TestCerts(tmp / "certs")
    redis = start_redis(tmp / "redis")
    port = free_port()
    skiff = start_skiff(
        tmp / "skiff.log",
        "--redis-url",
        redis.url,
        "--listeners",
        f"SECURE://127.0.0.1:{port}",
        "--listener-security-protocol-map",
        "SECURE:SASL_SSL",
        "--ssl-keystore-location",
        str(certs.server_pem),
        "--sasl-enabled-mechanisms",
        "OAUTHBEARER",
        "--sasl-oauthbearer-jwks-endpoint-url",
        idp.url,
        port=port,
    )
    try:
        name = topic()
        config = librdkafka_config(skiff, lambda: signer.token("tls-client"))
        config |= {"security.protocol": "SASL_SSL", "ssl.ca.location": str(certs.ca_pem)}
        producer = Producer(config)
        delivered: list[int] = []
        producer.produce(
            name,
            value=b"over tls",
            on_delivery=lambda e, m: delivered.append(-1 if e else m.offset()),
        )
        assert producer.flush(60) == 0 and delivered == [0]
        consumer = Consumer({**config, "group.id": f"g-{name}", "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(name, 0, 0)])
            deadline = time.monotonic() + 60
            while (msg := consumer.poll(1.0)) is None or msg.error() is not None:
                assert time.monotonic() < deadline
            assert (msg.offset(), msg.value()) == (0, b"over tls")
        finally:
            consumer.close()
    finally:
        stop_process(skiff.proc)
        stop_process(redis.proc)


class KafkaPythonTokens(KafkaPythonTokenProvider):
    def __init__(self, signer: Signer) -> None:
        self.signer = signer

    def token(self) -> str:
        return self.signer.token("kafka-python")


def test_kafka_python_produces_and_consumes(sidecar: Skiff, signer: Signer) -> None:
    name = topic()
    sasl = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": KafkaPythonTokens(signer),
    }
    meta = kafka_python_client.produce(sidecar.bootstrap, name, RECORDS, **sasl)
    assert [(m["partition"], m["offset"]) for m in meta] == [(0, 0), (0, 1), (0, 2)]
    got = kafka_python_client.consume(sidecar.bootstrap, name, 0, 0, 3, **sasl)
    assert [(r["offset"], r["key"], r["value"]) for r in got] == [
        (0, b"k1", b"one"),
        (1, None, b"two"),
        (2, None, b""),
    ]


class AiokafkaTokens(AiokafkaTokenProvider):
    def __init__(self, signer: Signer) -> None:
        self.signer = signer

    async def token(self) -> str:
        return self.signer.token("aiokafka")


def test_aiokafka_produces_and_consumes(sidecar: Skiff, signer: Signer) -> None:
    name = topic()
    sasl = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": AiokafkaTokens(signer),
    }
    meta = aiokafka_client.produce(sidecar.bootstrap, name, RECORDS, **sasl)
    assert [(m["partition"], m["offset"]) for m in meta] == [(0, 0), (0, 1), (0, 2)]
    got = aiokafka_client.consume(sidecar.bootstrap, name, 0, 0, 3, **sasl)
    assert [(r["offset"], r["key"], r["value"]) for r in got] == [
        (0, b"k1", b"one"),
        (1, None, b"two"),
        (2, None, b""),
    ]


def test_java_client_with_kafkas_token_endpoint_login(
    sidecar: Skiff, idp: IdentityProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's OAuthBearerLoginCallbackHandler fetches a token from the provider's token
    endpoint (client_credentials) and presents it."""
    name = topic()
    monkeypatch.setenv(
        "JAVA_TOOL_OPTIONS", f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={idp.token_url}"
    )
    before = idp.token_requests
    properties = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.login.callback.handler.class": "org.apache.kafka.common.security.oauthbearer."
        "OAuthBearerLoginCallbackHandler",
        "sasl.oauthbearer.token.endpoint.url": idp.token_url,
        "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
        'required clientId="skiff-tests" clientSecret="not-a-real-secret";',
    }
    meta = java_client.produce(sidecar.bootstrap, name, RECORDS, properties=properties)
    assert [(m["partition"], m["offset"]) for m in meta] == [(0, 0), (0, 1), (0, 2)]
    got = java_client.consume(sidecar.bootstrap, name, 0, 0, 3, properties=properties)
    assert [(r["offset"], r["key"], r["value"]) for r in got] == [
        (0, b"k1", b"one"),
        (1, None, b"two"),
        (2, None, b""),
    ]
    assert idp.token_requests > before


def test_franz_go_produces_and_consumes(sidecar: Skiff, signer: Signer) -> None:
    name = topic()
    properties = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token": signer.token("franz-go"),
    }
    meta = franz_client.produce(sidecar.bootstrap, name, RECORDS, properties=properties)
    assert [(m["partition"], m["offset"]) for m in meta] == [(0, 0), (0, 1), (0, 2)]
    got = franz_client.consume(sidecar.bootstrap, name, 0, 0, 3, properties=properties)
    assert [(r["offset"], r["key"], r["value"]) for r in got] == [
        (0, b"k1", b"one"),
        (1, None, b"two"),
        (2, None, b""),
    ]


def test_a_mechanism_not_enabled_is_refused(sidecar: Skiff) -> None:
    """PLAIN is not enabled on this listener: Kafka's UNSUPPORTED_SASL_MECHANISM with the
    enabled list, and the connection closed."""
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        answer = kafka.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert (answer.error_code, list(answer.mechanisms)) == (33, ["OAUTHBEARER"])
        assert kafka.closed()
