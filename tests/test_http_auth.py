"""The HTTP endpoint's authentication and authorization (sidecar/security/http_auth.py)
over real TCP (aiohttp's client, HTTPS with trustme certificates) against real
sidecars on real Redis: probes and /metrics stay open, the queue API refuses missing
and wrong credentials (401, nothing changed), --http-auth without TLS is a start-up
mistake, and the default stays open and says so."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import known_secrets
import pytest
import trustme
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from conftest import ROOT, RedisServer, Skiff, start_redis, start_skiff, stop_process
from test_sasl_oauthbearer import AUDIENCE, ISSUER, Signer, write_jwks


@dataclass
class Tls:
    ca: trustme.CA
    cert: Path
    key: Path

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context

    def args(self) -> list[str]:
        return [
            "--http-ssl-keystore-certificate-location",
            str(self.cert),
            "--http-ssl-keystore-key-location",
            str(self.key),
        ]


def make_tls(tmp: Path) -> Tls:
    """A CA and a server certificate for 127.0.0.1 (files in the test's tmp only),
    each file replaced at once (os.replace), as a Kubernetes Secret update does."""
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    cert, key = tmp / "http.crt", tmp / "http.key"
    for path, data in (
        (key, server.private_key_pem.bytes()),
        (cert, b"".join(pem.bytes() for pem in server.cert_chain_pems)),
    ):
        path.with_suffix(".new").write_bytes(data)
        os.replace(path.with_suffix(".new"), path)
    return Tls(ca, cert, key)


def served_certificate(port: int) -> bytes:
    """The DER certificate a new TLS connection to the port is given."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw) as tls:
            der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    known_secrets.register(f"HTTP Basic credentials of {user}", token)
    return {"Authorization": f"Basic {token}"}


@dataclass
class Answer:
    status: int
    body: Any
    headers: Any


def call(
    base: str,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    tls: Tls | None = None,
) -> Answer:
    async def run() -> Answer:
        connector = aiohttp.TCPConnector(ssl=tls.client_context() if tls else False)
        async with aiohttp.ClientSession(connector=connector) as session:
            async with session.request(
                method,
                base + path,
                json=body,
                headers=headers or {},
                timeout=aiohttp.ClientTimeout(30),
            ) as resp:
                text = await resp.text()
                try:
                    parsed = await resp.json(content_type=None)
                except ValueError:
                    parsed = text
                return Answer(resp.status, parsed, resp.headers)

    return asyncio.run(run())


def wait_ready(base: str, tls: Tls | None, log: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            if call(base, "GET", "/readyz", tls=tls).status == 200:
                return
        except aiohttp.ClientError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"/readyz not 200 within {seconds:g}s; see {log}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return make_tls(tmp_path_factory.mktemp("http-tls"))


@pytest.fixture(scope="module")
def redis_for_auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = start_redis(tmp_path_factory.mktemp("http-auth-redis"))
    yield server
    stop_process(server.proc)


PLAIN_USERS = {"carol": known_secrets.register("HTTP PLAIN password", "carol-Http-Pw-6c1d")}
SCRAM_PW_1 = known_secrets.register("HTTP SCRAM password 1", "Http-Scram-Pw-1-b4e9")
SCRAM_PW_2 = known_secrets.register("HTTP SCRAM password 2", "Http-Scram-Pw-2-0f7a")


@pytest.fixture(scope="module")
def signer() -> Signer:
    return Signer("http-rsa-1")


@pytest.fixture(scope="module")
def secured(
    tls: Tls,
    redis_for_auth: RedisServer,
    signer: Signer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Skiff]:
    """A sidecar whose queue API wants Basic credentials (PLAIN users from a file, SCRAM
    users from Redis) or a bearer JWT (OAUTHBEARER's JWKS, issuer, audience) over HTTPS."""
    tmp = tmp_path_factory.mktemp("http-auth")
    jwks = write_jwks(tmp / "jwks.json", signer)
    users = tmp / "plain-users"
    users.write_text("".join(f"{u}:{p}\n" for u, p in PLAIN_USERS.items()))
    log = tmp / "skiff.log"
    server = start_skiff(
        log,
        "--redis-url",
        redis_for_auth.url,
        "--http-auth",
        "basic,bearer",
        "--sasl-plain-users-file",
        str(users),
        "--sasl-oauthbearer-jwks-endpoint-url",
        jwks,
        "--sasl-oauthbearer-expected-issuer",
        ISSUER,
        "--sasl-oauthbearer-expected-audience",
        AUDIENCE,
        *tls.args(),
    )
    try:
        wait_ready(https(server), tls, log)
        yield server
    finally:
        stop_process(server.proc)


def https(server: Skiff) -> str:
    return f"https://127.0.0.1:{server.http_port}"


def test_probes_metrics_and_document_stay_open(secured: Skiff, tls: Tls) -> None:
    for path in ("/healthz", "/readyz", "/metrics", "/v1/openapi.json"):
        answer = call(https(secured), "GET", path, tls=tls)
        assert answer.status == 200, (path, answer.body)
    doc = call(https(secured), "GET", "/v1/openapi.json", tls=tls).body
    assert set(doc["components"]["securitySchemes"]) == {"basic", "bearer"}
    assert doc["security"] == [{"basic": []}, {"bearer": []}]
    assert doc["paths"]["/v1/openapi.json"]["get"]["security"] == []


def test_missing_and_wrong_credentials_get_401_and_change_nothing(
    secured: Skiff, tls: Tls, redis_for_auth: RedisServer
) -> None:
    topic = f"t-{uuid.uuid4().hex[:10]}"
    produce = {"records": [{"value": "v"}]}
    attempts: list[dict[str, str]] = [
        {},
        basic("nobody", known_secrets.register("wrong HTTP password", "hunter2-secret")),
        {"Authorization": "Basic !!!not-base64"},
        {"Authorization": "Bearer not.a.jwt"},
        {"Authorization": "Digest whatever"},
    ]
    for headers in attempts:
        for method, path, body in (
            ("GET", "/v1/queues", None),
            ("POST", f"/v1/topics/{topic}/records", produce),
            ("PUT", "/v1/queues/qg-x", {}),
            ("GET", "/v1/no-such-route", None),  # no hint of which routes exist
        ):
            answer = call(https(secured), method, path, body, headers, tls=tls)
            assert answer.status == 401, (headers, path, answer.body)
            assert answer.body["error"]["code"] == "AUTHENTICATION_FAILED"
            challenges = answer.headers.getall("WWW-Authenticate")
            assert any(c.startswith('Basic realm="skiff"') for c in challenges)
            assert any(c.startswith('Bearer realm="skiff"') for c in challenges)
    # a wrong password and an unknown user read the same
    wrong = call(https(secured), "GET", "/v1/queues", None, basic("nobody", "x"), tls=tls)
    assert wrong.body == {
        "error": {"code": "AUTHENTICATION_FAILED", "message": "authentication failed"}
    }
    bad_token = call(
        https(secured), "GET", "/v1/queues", None, {"Authorization": "Bearer x"}, tls=tls
    )
    assert 'Bearer realm="skiff", error="invalid_token"' in bad_token.headers.getall(
        "WWW-Authenticate"
    )
    # nothing was created: no topic, no group
    keys = [k.decode() for k in redis_for_auth.client().scan_iter(count=1000)]
    assert not [k for k in keys if topic in k or "qg-x" in k]
    log = secured.log()
    assert "refused: wrong password or unknown user 'nobody'" in log
    assert "hunter2-secret" not in log and "not.a.jwt" not in log


def test_open_paths_can_be_closed(tls: Tls, redis_for_auth: RedisServer, tmp_path: Path) -> None:
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        redis_for_auth.url,
        "--http-auth",
        "basic",
        "--http-open-paths",
        "/healthz",
        *tls.args(),
    )
    try:
        base = https(server)
        deadline = time.monotonic() + 60
        while call(base, "GET", "/healthz", tls=tls).status != 200:
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.1)
        for path in ("/readyz", "/metrics", "/v1/openapi.json"):
            answer = call(base, "GET", path, tls=tls)
            assert answer.status == 401, (path, answer.body)
            assert answer.headers["WWW-Authenticate"].startswith("Basic ")
    finally:
        stop_process(server.proc)


def test_plain_http_is_refused_on_the_tls_port(secured: Skiff) -> None:
    with pytest.raises(aiohttp.ClientError):
        call(f"http://127.0.0.1:{secured.http_port}", "GET", "/healthz")


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sidecar.cli.main",
            "serve",
            "--redis-url",
            "redis://127.0.0.1:1",
            "--http-listen",
            "127.0.0.1:0",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--http-auth", "basic"], "--http-auth needs TLS"),
        (["--http-auth", "bearer", "--http-auth-allow-plaintext", "true"], "needs --sasl-oauth"),
        (["--http-auth", "digest"], "expected none, basic, bearer"),
        (["--http-open-paths", "metrics"], "paths start with '/'"),
        (["--http-ssl-keystore-location", "/nonexistent.pem"], "cannot read /nonexistent.pem"),
        (["--http-ssl-keystore-certificate-location", "/x.crt"], "needs --http-ssl-keystore-key"),
    ],
)
def test_mistakes_are_one_line_and_exit_2(args: list[str], says: str) -> None:
    done = serve(*args)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_default_is_open_and_logs_so(skiff: Skiff) -> None:
    answer = call(f"http://127.0.0.1:{skiff.http_port}", "GET", "/v1/queues")
    assert answer.status == 200, answer.body
    assert "no authentication (--http-auth none)" in skiff.log()


def test_plaintext_allowed_when_the_operator_says_so(
    redis_for_auth: RedisServer, tmp_path: Path
) -> None:
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        redis_for_auth.url,
        "--http-auth",
        "basic",
        "--http-auth-allow-plaintext",
        "true",
    )
    try:
        base = f"http://127.0.0.1:{server.http_port}"
        wait_ready(base, None, tmp_path / "skiff.log")
        assert call(base, "GET", "/v1/queues").status == 401
    finally:
        stop_process(server.proc)


def add_scram_user(bootstrap: str, user: str, password: str, mechanism: ScramMechanism) -> None:
    """Through Kafka's AlterUserScramCredentials, as kafka-configs does it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(mechanism, 4096), password.encode()
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=30)


@pytest.mark.parametrize("mechanism", [ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512])
def test_basic_with_a_scram_user_made_through_kafka(
    secured: Skiff, tls: Tls, mechanism: ScramMechanism
) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    topic = f"t-{uuid.uuid4().hex[:10]}"
    denied = call(https(secured), "GET", "/v1/queues", None, basic(user, SCRAM_PW_1), tls=tls)
    assert denied.status == 401  # not a user yet
    add_scram_user(secured.bootstrap, user, SCRAM_PW_1, mechanism)
    me = basic(user, SCRAM_PW_1)
    for _ in range(2):  # the second time from the verified-pair cache
        produced = call(
            https(secured),
            "POST",
            f"/v1/topics/{topic}/records",
            {"records": [{"value": "a"}]},
            me,
            tls=tls,
        )
        assert produced.status == 200, produced.body
    assert produced.body == {"offsets": [{"partition": 0, "offset": 1}]}
    wrong = call(https(secured), "GET", "/v1/queues", None, basic(user, SCRAM_PW_2), tls=tls)
    assert wrong.status == 401
    # a changed password takes effect at once, cache or not
    add_scram_user(secured.bootstrap, user, SCRAM_PW_2, mechanism)
    assert call(https(secured), "GET", "/v1/queues", None, me, tls=tls).status == 401
    ok = call(https(secured), "GET", "/v1/queues", None, basic(user, SCRAM_PW_2), tls=tls)
    assert ok.status == 200, ok.body


def test_basic_with_a_plain_users_file_user(secured: Skiff, tls: Tls) -> None:
    group = f"qg-{uuid.uuid4().hex[:8]}"
    me = basic("carol", PLAIN_USERS["carol"])
    made = call(https(secured), "PUT", f"/v1/queues/{group}", {}, me, tls=tls)
    assert made.status == 201, made.body
    listed = call(https(secured), "GET", "/v1/queues", None, me, tls=tls)
    assert group in listed.body["groups"]
    wrong = call(https(secured), "GET", "/v1/queues", None, basic("carol", "nope"), tls=tls)
    assert wrong.status == 401


def test_bearer_jwt_validated_as_oauthbearer(secured: Skiff, tls: Tls, signer: Signer) -> None:
    bearer = {"Authorization": f"Bearer {signer.token(sub='dave')}"}
    answer = call(https(secured), "GET", "/v1/queues", None, bearer, tls=tls)
    assert answer.status == 200, answer.body
    other = Signer("http-rsa-1")  # same kid, another key: the signature does not verify
    refused = {
        "expired": signer.token(sub="dave", lifetime_s=-3600),
        "wrong audience": signer.token(sub="dave", aud="someone-else"),
        "wrong issuer": signer.token(sub="dave", iss="https://evil.example/"),
        "bad signature": other.token(sub="dave"),
    }
    for why, token in refused.items():
        answer = call(
            https(secured), "GET", "/v1/queues", None, {"Authorization": f"Bearer {token}"}, tls=tls
        )
        assert answer.status == 401, why
        assert 'Bearer realm="skiff", error="invalid_token"' in answer.headers.getall(
            "WWW-Authenticate"
        )
    log = secured.log()
    assert "bearer token refused: the JWT has expired" in log
    assert not any(token in log for token in refused.values())


def test_a_rotated_certificate_is_served_to_new_connections(
    redis_for_auth: RedisServer, tmp_path: Path
) -> None:
    first = make_tls(tmp_path)
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        redis_for_auth.url,
        "--http-auth",
        "basic",
        *first.args(),
    )
    try:
        wait_ready(https(server), first, tmp_path / "skiff.log")
        before = served_certificate(server.http_port)
        assert before == ssl.PEM_cert_to_DER_cert(first.cert.read_text())
        second = make_tls(tmp_path)  # a new CA and certificate in the same files
        after = ssl.PEM_cert_to_DER_cert(second.cert.read_text())
        deadline = time.monotonic() + 30
        while served_certificate(server.http_port) != after:
            assert time.monotonic() < deadline, "the new certificate was not served in 30 s"
            time.sleep(0.2)
        assert call(https(server), "GET", "/healthz", tls=second).status == 200
        assert "reloaded its TLS certificate" in server.log()
    finally:
        stop_process(server.proc)


def test_settings_from_a_config_file(tmp_path: Path) -> None:
    """Kafka has no HTTP settings: server.properties names them as the flags."""
    config = tmp_path / "server.properties"
    config.write_text("http-auth=basic\nhttp-open-paths=/healthz\n")
    done = serve("--config", str(config))
    assert done.returncode == 2 and "--http-auth needs TLS" in done.stderr, done.stderr
