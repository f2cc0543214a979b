"""Delegation tokens (KIP-48): CreateDelegationToken, RenewDelegationToken,
ExpireDelegationToken and DescribeDelegationToken, and SCRAM logins with a token
(`tokenauth=true`), with Kafka's own kafka-delegation-tokens tool and Java client and
with raw requests for the error codes. A sidecar of this module's own, with a
PLAINTEXT and a SASL_PLAINTEXT listener: bob has SCRAM credentials, alice is a PLAIN
user (tests/test_sasl.py's start_sasl_sidecar)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import shutil
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import known_secrets
import pytest
from conftest import start_redis, stop_process
from kafka_tools import KAFKA_VERSION, run_batch
from rawkafka import ConnectionClosed, RawKafka
from test_sasl import (
    PASSWORDS,
    SaslSidecar,
    _authenticate,
    _handshake,
    _plain_login,
    _scram_login,
    start_sasl_sidecar,
)

CREATE, RENEW, EXPIRE, DESCRIBE = 38, 39, 40, 41
METADATA = 3
SASL_AUTHENTICATION_FAILED = 58
AUTH_DISABLED, NOT_FOUND, OWNER_MISMATCH, NOT_ALLOWED, EXPIRED, INVALID_PRINCIPAL_TYPE = (
    61,
    62,
    63,
    64,
    66,
    67,
)
SECRET_KEY = known_secrets.register("delegation.token.secret.key", "dt-key-5c1e9a7f2b")
DAY_MS = 24 * 3600 * 1000


@pytest.fixture(scope="module")
def tokens_sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslSidecar]:
    tmp = tmp_path_factory.mktemp("tokens")
    redis = start_redis(tmp / "redis")
    server = start_sasl_sidecar(tmp, redis, "skiff", "--delegation-token-secret-key", SECRET_KEY)
    yield server
    stop_process(server.skiff.proc)
    stop_process(redis.proc)


def _bob(sidecar: SaslSidecar) -> RawKafka:
    kafka = RawKafka("127.0.0.1", sidecar.sasl_port)
    assert _scram_login(kafka, "SCRAM-SHA-512", "bob", PASSWORDS["bob"]).error_code == 0
    return kafka


def _alice(sidecar: SaslSidecar) -> RawKafka:
    kafka = RawKafka("127.0.0.1", sidecar.sasl_port)
    assert _plain_login(kafka, "alice", PASSWORDS["alice"]).error_code == 0
    return kafka


def _create(kafka: RawKafka, renewers: list[str] = (), max_lifetime_ms: int = -1) -> Any:  # type: ignore[assignment]
    body = {
        "owner_principal_type": None,
        "owner_principal_name": None,
        "renewers": [{"principal_type": "User", "principal_name": r} for r in renewers],
        "max_lifetime": max_lifetime_ms,
    }
    return kafka.request(CREATE, 3, body)


def _describe(kafka: RawKafka, owners: list[str] | None = None) -> Any:
    body = {
        "owners": None
        if owners is None
        else [{"principal_type": "User", "principal_name": o} for o in owners]
    }
    return kafka.request(DESCRIBE, 3, body)


def _v1(kafka: RawKafka, api_key: int, body: dict[str, Any]) -> tuple[int, int]:
    """Version 1 of Create/Renew/ExpireDelegationToken (not flexible), read by hand: the
    error code and, for renew and expire, the expiry (-1 with an error, which kio's
    reader refuses as a timestamp)."""
    kafka.send(api_key, 1, body)
    frame = kafka.recv_raw()
    (error,) = struct.unpack_from(">h", frame, 4)
    if api_key == CREATE:
        return error, 0
    (expiry,) = struct.unpack_from(">q", frame, 6)
    return error, expiry


def _renew(kafka: RawKafka, token_hmac: bytes, period_ms: int) -> tuple[int, int]:
    return _v1(kafka, RENEW, {"hmac": token_hmac, "renew_period": period_ms})


def _expire(kafka: RawKafka, token_hmac: bytes, period_ms: int) -> tuple[int, int]:
    return _v1(kafka, EXPIRE, {"hmac": token_hmac, "expiry_time_period": period_ms})


def _create_error(kafka: RawKafka, renewer_type: str = "User") -> int:
    body = {
        "renewers": [{"principal_type": renewer_type, "principal_name": "x"}],
        "max_lifetime": -1,
    }
    return _v1(kafka, CREATE, body)[0]


def _token_login(kafka: RawKafka, token_id: str, token_hmac: bytes, mechanism: str) -> Any:
    """A SCRAM login as Kafka's ScramLoginModule with tokenauth=true makes it: the
    extension after the nonce (which scramp's client cannot send), the HMAC in base64 as
    the password. Returns the last SaslAuthenticate answer."""
    digest = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    assert _handshake(kafka, mechanism).error_code == 0
    nonce = base64.b64encode(os.urandom(18)).decode()
    bare = f"n={token_id},r={nonce},tokenauth=true"
    first = _authenticate(kafka, f"n,,{bare}".encode())
    if first.error_code != 0:
        return first
    server_first = first.auth_bytes.decode()
    attrs = dict(p.split("=", 1) for p in server_first.split(","))
    assert attrs["r"].startswith(nonce)
    salted = hashlib.pbkdf2_hmac(
        digest, base64.b64encode(token_hmac), base64.b64decode(attrs["s"]), int(attrs["i"])
    )
    client_key = hmac.digest(salted, b"Client Key", digest)
    stored_key = hashlib.new(digest, client_key).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(stored_key, auth_message, digest)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = _authenticate(kafka, f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    if final.error_code == 0:
        server_key = hmac.digest(salted, b"Server Key", digest)
        expected = hmac.digest(server_key, auth_message, digest)
        assert final.auth_bytes.decode() == "v=" + base64.b64encode(expected).decode()
    return final


def _register(token_hmac: bytes) -> None:
    known_secrets.register("a delegation token's HMAC", base64.b64encode(token_hmac).decode())


def test_create_renew_expire_describe_with_raw_requests(tokens_sidecar: SaslSidecar) -> None:
    with _bob(tokens_sidecar) as bob:
        before = int(time.time() * 1000)
        created = _create(bob, ["alice"], max_lifetime_ms=3 * DAY_MS)
        after = int(time.time() * 1000)
        assert created.error_code == 0
        _register(created.hmac)
        assert (created.principal_type, created.principal_name) == ("User", "bob")
        assert created.token_requester_principal_name == "bob"
        issued = int(created.issue_timestamp.timestamp() * 1000)
        assert before <= issued <= after
        # expiry: a day (delegation.token.expiry.time.ms); max: the 3 days asked for
        assert int(created.expiry_timestamp.timestamp() * 1000) == issued + DAY_MS
        assert int(created.max_timestamp.timestamp() * 1000) == issued + 3 * DAY_MS
        secret = SECRET_KEY.encode()
        assert created.hmac == hmac.digest(secret, created.token_id.encode(), hashlib.sha512)

        [described] = [t for t in _describe(bob).tokens if t.token_id == created.token_id]
        assert described.hmac == created.hmac
        assert [(r.principal_type, r.principal_name) for r in described.renewers] == [
            ("User", "alice")
        ]
        assert [t.token_id for t in _describe(bob, ["alice"]).tokens] == [created.token_id]
        assert _describe(bob, []).tokens == ()

    with _alice(tokens_sidecar) as alice:
        # a renewer renews, for at most the period asked for
        error, expiry = _renew(alice, created.hmac, 3600_000)
        assert error == 0
        assert abs(expiry - (int(time.time() * 1000) + 3600_000)) < 60_000
        # alice is a renewer: she sees the token too
        assert created.token_id in [t.token_id for t in _describe(alice).tokens]
        assert _renew(alice, b"x" * 64, -1) == (NOT_FOUND, -1)
        # a token alice neither owns nor renews
        own = _create(alice)
        assert own.error_code == 0
        _register(own.hmac)

    with _bob(tokens_sidecar) as bob:
        # no authorizer: as on Kafka, anyone may describe any token; but only its owner
        # and renewers renew or expire it
        assert own.token_id in [t.token_id for t in _describe(bob).tokens]
        assert _expire(bob, own.hmac, -1) == (OWNER_MISMATCH, -1)
        assert _expire(bob, created.hmac, -1) == (0, -1)
        assert created.token_id not in [t.token_id for t in _describe(bob).tokens]
        assert _renew(bob, created.hmac, -1) == (NOT_FOUND, -1)
        assert _create_error(bob, "Group") == INVALID_PRINCIPAL_TYPE


def test_a_token_logs_in_as_its_owner_and_cannot_ask_for_tokens(
    tokens_sidecar: SaslSidecar,
) -> None:
    with _bob(tokens_sidecar) as bob:
        created = _create(bob)
        assert created.error_code == 0
        _register(created.hmac)
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        with RawKafka("127.0.0.1", tokens_sidecar.sasl_port) as kafka:
            done = _token_login(kafka, created.token_id, created.hmac, mechanism)
            assert done.error_code == 0, done
            # the session lasts until the token expires (KIP-368), about a day from now
            assert abs(done.session_lifetime.total_seconds() * 1000 - DAY_MS) < 60_000
            meta = kafka.request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
            assert meta.brokers
            # a token-authenticated session asks for no tokens (Kafka's allowTokenRequests)
            assert _create_error(kafka) == NOT_ALLOWED
            assert _describe(kafka).error_code == NOT_ALLOWED
            assert _renew(kafka, created.hmac, -1) == (NOT_ALLOWED, -1)
    # a wrong HMAC, and an unknown token id, are refused as a wrong password is
    for token_id, token_hmac in ((created.token_id, b"y" * 64), ("no-such-token", created.hmac)):
        with RawKafka("127.0.0.1", tokens_sidecar.sasl_port) as kafka:
            refused = _token_login(kafka, token_id, token_hmac, "SCRAM-SHA-512")
            assert refused.error_code == SASL_AUTHENTICATION_FAILED
            with pytest.raises(ConnectionClosed):
                kafka.request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
    # an expired token no longer logs in
    with _bob(tokens_sidecar) as bob:
        assert _expire(bob, created.hmac, -1) == (0, -1)
    with RawKafka("127.0.0.1", tokens_sidecar.sasl_port) as kafka:
        refused = _token_login(kafka, created.token_id, created.hmac, "SCRAM-SHA-512")
        assert refused.error_code == SASL_AUTHENTICATION_FAILED


def test_token_requests_over_plaintext_are_not_allowed(tokens_sidecar: SaslSidecar) -> None:
    with RawKafka("127.0.0.1", tokens_sidecar.plain_port) as kafka:
        assert _create_error(kafka) == NOT_ALLOWED
        assert _describe(kafka).error_code == NOT_ALLOWED
        assert _renew(kafka, b"h", -1) == (NOT_ALLOWED, -1)
        assert _expire(kafka, b"h", -1) == (NOT_ALLOWED, -1)


def test_without_a_secret_key_tokens_are_disabled(tmp_path: Path) -> None:
    redis = start_redis(tmp_path / "redis")
    sidecar = start_sasl_sidecar(tmp_path, redis, "no-key")
    try:
        with _bob(sidecar) as bob:
            assert _create_error(bob) == AUTH_DISABLED
            assert _describe(bob).error_code == AUTH_DISABLED
            assert _renew(bob, b"h", -1) == (AUTH_DISABLED, -1)
        with RawKafka("127.0.0.1", sidecar.sasl_port) as kafka:
            refused = _token_login(kafka, "some-token", b"z" * 64, "SCRAM-SHA-512")
            assert refused.error_code == SASL_AUTHENTICATION_FAILED
    finally:
        stop_process(sidecar.skiff.proc)
        stop_process(redis.proc)


def _properties(path: Path, mechanism: str, user: str, password: str, token: bool = False) -> str:
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    extra = " tokenauth=true" if token else ""
    path.write_text(
        f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
        f"sasl.jaas.config=org.apache.kafka.common.security.{module} required "
        f'username="{user}" password="{password}"{extra};\n'
    )
    return str(path)


@pytest.mark.timeout(600)
def test_kafka_delegation_tokens_tool_and_a_java_client_with_a_token(
    tokens_sidecar: SaslSidecar, tmp_path: Path
) -> None:
    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.skip("java and mvn are needed for Kafka's tools")
    bootstrap = ["--bootstrap-server", tokens_sidecar.bootstrap]
    bob = _properties(tmp_path / "bob.properties", "SCRAM-SHA-512", "bob", PASSWORDS["bob"])
    alice = _properties(tmp_path / "alice.properties", "PLAIN", "alice", PASSWORDS["alice"])
    [created] = run_batch(
        KAFKA_VERSION,
        "kafka-delegation-tokens",
        [
            [
                *bootstrap,
                "--command-config",
                bob,
                "--create",
                "--max-life-time-period",
                "-1",
                "--renewer-principal",
                "User:alice",
            ]
        ],
    )
    assert created.returncode == 0, created.stdout + created.stderr
    token_id = re.search(r"tokenId\s*:\s*(\S+)", created.stdout)
    assert token_id, created.stdout
    row = re.search(rf"^{re.escape(token_id[1])}\s+(\S+)\s+User:bob\s", created.stdout, re.M)
    assert row, created.stdout
    token_hmac = row[1]
    known_secrets.register("the tool's delegation token HMAC", token_hmac)
    token_props = _properties(
        tmp_path / "token.properties", "SCRAM-SHA-512", token_id[1], token_hmac, token=True
    )
    described, renewed = run_batch(
        KAFKA_VERSION,
        "kafka-delegation-tokens",
        [
            # without --owner-principal the tool asks for an empty owner list, which
            # Kafka answers with no tokens (DescribeDelegationTokenRequest.ownersListEmpty)
            [*bootstrap, "--command-config", alice, "--describe", "--owner-principal", "User:bob"],
            [
                *bootstrap,
                "--command-config",
                alice,
                "--renew",
                "--hmac",
                token_hmac,
                "--renew-time-period",
                "-1",
            ],
        ],
    )
    assert described.returncode == 0, described.stderr
    assert re.search(
        rf"^{re.escape(token_id[1])}\s+{re.escape(token_hmac)}\s+User:bob\s+User:bob\s+\[User:alice\]",
        described.stdout,
        re.M,
    ), described.stdout
    assert renewed.returncode == 0, renewed.stderr
    assert "Completed renew operation" in renewed.stdout, renewed.stdout
    # A Java client logs in with the token (ScramLoginModule tokenauth=true) and acts as
    # bob; a token session may not create tokens. (TopicCommand reports Kafka's Exit as
    # an error under tools/ToolBatch.java, so its output is what counts.)
    topic = f"made-with-a-token-{os.getpid()}"
    [made] = run_batch(
        KAFKA_VERSION,
        "kafka-topics",
        [[*bootstrap, "--command-config", token_props, "--create", "--topic", topic]],
    )
    assert f"Created topic {topic}." in made.stdout, made.stdout + made.stderr
    [refused] = run_batch(
        KAFKA_VERSION,
        "kafka-delegation-tokens",
        [[*bootstrap, "--command-config", token_props, "--create", "--max-life-time-period", "-1"]],
    )
    assert refused.returncode != 0
    assert "DelegationTokenDisabledException" not in refused.stdout + refused.stderr
    assert "not allowed" in (refused.stdout + refused.stderr).lower(), (
        refused.stdout + refused.stderr
    )
    [expired] = run_batch(
        KAFKA_VERSION,
        "kafka-delegation-tokens",
        [
            [
                *bootstrap,
                "--command-config",
                bob,
                "--expire",
                "--hmac",
                token_hmac,
                "--expiry-time-period",
                "-1",
            ]
        ],
    )
    assert expired.returncode == 0, expired.stderr
    assert "Completed expire operation" in expired.stdout, expired.stdout
    with RawKafka("127.0.0.1", tokens_sidecar.sasl_port) as kafka:
        refused_login = _token_login(
            kafka, token_id[1], base64.b64decode(token_hmac), "SCRAM-SHA-512"
        )
        assert refused_login.error_code == SASL_AUTHENTICATION_FAILED


@pytest.mark.parametrize(
    ("first", "final"),
    [
        ("n,,n=,r=abc,tokenauth=true", None),
        ("n,,r=abc,n=x,tokenauth=true", None),
        ("p=tls-unique,,n=x,r=abc,tokenauth=true", None),
        ("n,a=other,n=x,r=abc,tokenauth=true", None),
        ("n,,n=x,tokenauth=true", None),
        ("x" * 5000 + ",tokenauth=true", None),
        ("n,,n={token},r=abc,tokenauth=true", "c=biws,r=wrong,p=AAAA"),
        ("n,,n={token},r=abc,tokenauth=true", "c=biws,r={nonce}"),
        ("n,,n={token},r=abc,tokenauth=true", "c=biws,r={nonce},p=not base64!"),
        ("n,,n={token},r=abc,tokenauth=true", "c=biws,r={nonce},p=AAAA"),
        ("n,,n={token},r=abc,tokenauth=true", "c=eSws,r={nonce},p=" + "A" * 88),
        ("n,,n={token},r=abc,tokenauth=true", "\xff\xfe"),
    ],
)
def test_malformed_token_logins_are_refused_not_crashed(
    tokens_sidecar: SaslSidecar, first: str, final: str | None
) -> None:
    with _bob(tokens_sidecar) as bob:
        created = _create(bob)
        _register(created.hmac)
    with RawKafka("127.0.0.1", tokens_sidecar.sasl_port) as kafka:
        assert _handshake(kafka, "SCRAM-SHA-512").error_code == 0
        answer = _authenticate(kafka, first.format(token=created.token_id).encode())
        if final is not None:
            assert answer.error_code == 0, answer
            nonce = dict(p.split("=", 1) for p in answer.auth_bytes.decode().split(","))["r"]
            answer = _authenticate(kafka, final.format(nonce=nonce).encode("utf-8", "replace"))
        assert answer.error_code == SASL_AUTHENTICATION_FAILED, answer
        with pytest.raises(ConnectionClosed):
            kafka.request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
    # the sidecar still serves token logins
    with RawKafka("127.0.0.1", tokens_sidecar.sasl_port) as kafka:
        assert _token_login(kafka, created.token_id, created.hmac, "SCRAM-SHA-512").error_code == 0
    assert "Traceback" not in tokens_sidecar.skiff.log()
