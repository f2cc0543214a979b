"""SASL/OAUTHBEARER, the server side (sidecar/security/sasl/oauthbearer.py): JWTs
really signed with RSA and EC keys, checked against a JWKS from a file or a real HTTP
server, as Kafka's OAuthBearerValidatorCallbackHandler checks them."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from conftest import ROOT
from oauth_issuer import AUDIENCE, ISSUER, IdentityProvider, Signer, write_jwks

from sidecar.cli import main as cli
from sidecar.config.server_properties import Property, resolve
from sidecar.config.settings import Settings
from sidecar.security.principal import KafkaPrincipal
from sidecar.security.sasl import MECHANISMS, SaslAuthenticationFailed
from sidecar.security.sasl.oauthbearer import (
    INVALID_TOKEN,
    JwtValidator,
    OAuthBearerConfigError,
    OAuthBearerServer,
    OAuthBearerSettings,
    TokenRefused,
    parse_client_first,
)
from sidecar.security.session import ConnectionSecurity


@pytest.fixture(scope="module")
def rsa_signer() -> Signer:
    return Signer("rsa-1")


@pytest.fixture(scope="module")
def ec_signer() -> Signer:
    return Signer("ec-1", "EC")


@pytest.fixture
def jwks_file(tmp_path: Path, rsa_signer: Signer, ec_signer: Signer) -> Path:
    write_jwks(tmp_path / "jwks.json", rsa_signer, ec_signer)
    return tmp_path / "jwks.json"


def validator(url: str, **overrides: Any) -> JwtValidator:
    settings = OAuthBearerSettings(
        jwks_endpoint_url=url, expected_issuer=ISSUER, expected_audience=(AUDIENCE,)
    )
    for key, value in overrides.items():
        settings = OAuthBearerSettings(**{**_fields(settings), key: value})
    return JwtValidator(settings)


def _fields(settings: OAuthBearerSettings) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in OAuthBearerSettings.__slots__}


def refused(v: JwtValidator, token: str) -> str:
    with pytest.raises(TokenRefused) as info:
        asyncio.run(v.validate(token))
    assert token not in str(info.value)
    return str(info.value)


def client_first(token: str, authzid: str = "", **extensions: str) -> bytes:
    pairs = "".join(f"{k}={v}\x01" for k, v in extensions.items())
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{pairs}\x01".encode()


# -- the validator -------------------------------------------------------------------------


def test_valid_rs256_and_es256_tokens(
    jwks_file: Path, rsa_signer: Signer, ec_signer: Signer
) -> None:
    v = validator(jwks_file.as_uri())

    async def both() -> tuple[Any, Any]:
        return await v.validate(rsa_signer.token()), await v.validate(ec_signer.token("bob"))

    alice, bob = asyncio.run(both())
    assert alice.principal_name == "alice" and bob.principal_name == "bob"
    assert abs(alice.expires_at - (time.time() + 300)) < 60


IN_TEN_MINUTES = object()  # a claim of the time ten minutes after the test starts


@pytest.mark.parametrize(
    ("claims", "problem"),
    [
        ({"lifetime_s": -120}, "expired"),
        ({"iss": "https://evil.example/"}, "issuer (iss) is not https://idp.example/"),
        ({"aud": "someone-else"}, "audience (aud) is not one of skiff"),
        ({"nbf": IN_TEN_MINUTES}, "not valid yet"),
        ({"iat": IN_TEN_MINUTES}, "not valid yet"),
        ({"exp": None}, "exp"),
        ({"iat": None}, "iat"),
        ({"sub": None}, "no 'sub' claim"),
    ],
)
def test_refused_claims(
    jwks_file: Path, rsa_signer: Signer, claims: dict[str, Any], problem: str
) -> None:
    # Times are taken when the test runs, not when it is collected (a long suite runs
    # it many minutes later).
    claims = {k: int(time.time()) + 600 if v is IN_TEN_MINUTES else v for k, v in claims.items()}
    assert problem in refused(validator(jwks_file.as_uri()), rsa_signer.token(**claims))


def test_clock_skew_allows_a_just_expired_token(jwks_file: Path, rsa_signer: Signer) -> None:
    token = rsa_signer.token(lifetime_s=-10)
    assert "expired" in refused(validator(jwks_file.as_uri(), clock_skew_seconds=0), token)
    ok = asyncio.run(validator(jwks_file.as_uri(), clock_skew_seconds=60).validate(token))
    assert ok.principal_name == "alice"


def test_audience_list_and_no_expectations(jwks_file: Path, rsa_signer: Signer) -> None:
    token = rsa_signer.token(aud=["other", "skiff"], iss="anyone")
    v = validator(jwks_file.as_uri(), expected_issuer=None, expected_audience=("x", "other"))
    assert asyncio.run(v.validate(token)).principal_name == "alice"


def test_principal_from_another_claim(jwks_file: Path, rsa_signer: Signer) -> None:
    v = validator(jwks_file.as_uri(), sub_claim_name="preferred_username")
    token = rsa_signer.token(sub="0a1b", preferred_username="carol")
    assert asyncio.run(v.validate(token)).principal_name == "carol"


def test_bad_signature(jwks_file: Path, rsa_signer: Signer) -> None:
    impostor = Signer(rsa_signer.kid)  # another key claiming the same kid
    assert "signature does not verify" in refused(validator(jwks_file.as_uri()), impostor.token())
    good = rsa_signer.token().split(".")
    claims = json.loads(base64.urlsafe_b64decode(good[1] + "=="))
    claims["sub"] = "admin"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    token = ".".join([good[0], forged, good[2]])
    assert "signature does not verify" in refused(validator(jwks_file.as_uri()), token)


def test_none_and_hmac_algorithms_refused(jwks_file: Path, rsa_signer: Signer) -> None:
    now = int(time.time())
    claims = {"sub": "admin", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 300}
    v = validator(jwks_file.as_uri())
    unsigned = jwt.encode(claims, None, algorithm="none", headers={"kid": rsa_signer.kid})
    assert "algorithm 'none' refused" in refused(v, unsigned)
    # HS256 keyed with the public JWK's modulus: the classic key-confusion attack.
    hmac = jwt.encode(claims, rsa_signer.jwk["n"], algorithm="HS256", headers={"kid": "rsa-1"})
    assert "algorithm 'HS256' refused" in refused(v, hmac)
    assert "malformed JWT" in refused(v, "not.a.jwt")


def test_unknown_kid_then_rotated_jwks(tmp_path: Path, rsa_signer: Signer) -> None:
    path = tmp_path / "jwks.json"
    v = validator(write_jwks(path, rsa_signer))
    rotated = Signer("rsa-2")

    async def scenario() -> str:
        assert (await v.validate(rsa_signer.token())).principal_name == "alice"
        # The provider rotates: rsa-2 joins the JWKS; a token with it is accepted as soon
        # as the (rate-limited) unknown-kid refresh has run.
        write_jwks(path, rsa_signer, rotated)
        deadline = time.monotonic() + 30
        while True:
            try:
                return (await v.validate(rotated.token("dave"))).principal_name
            except TokenRefused as exc:
                assert "no key with kid 'rsa-2'" in str(exc)
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    assert asyncio.run(scenario()) == "dave"


@pytest.fixture
def jwks_http(rsa_signer: Signer) -> Iterator[IdentityProvider]:
    server = IdentityProvider(rsa_signer)
    yield server
    server.close()


def test_http_jwks_is_fetched_off_the_event_loop(
    jwks_http: IdentityProvider, rsa_signer: Signer
) -> None:
    """The fetch is held until the event loop itself releases it: a fetch on the loop's
    thread would never return."""
    jwks_http.gate.clear()
    v = validator(jwks_http.url)

    async def scenario() -> str:
        validation = asyncio.create_task(v.validate(rsa_signer.token()))
        deadline = time.monotonic() + 30
        while jwks_http.fetches == 0 and not validation.done():
            jwks_http.gate.set()  # runs only while the loop is free
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        return (await asyncio.wait_for(validation, 30)).principal_name

    assert asyncio.run(scenario()) == "alice"
    assert jwks_http.fetches == 1


def test_http_jwks_refreshes_on_schedule(jwks_http: IdentityProvider, rsa_signer: Signer) -> None:
    v = validator(jwks_http.url, jwks_endpoint_refresh_ms=200)

    async def scenario() -> None:
        await v.validate(rsa_signer.token())
        deadline = time.monotonic() + 30
        while jwks_http.fetches < 3:  # each validation after refresh.ms starts a fetch
            assert time.monotonic() < deadline, jwks_http.fetches
            await v.validate(rsa_signer.token())
            await asyncio.sleep(0.05)

    asyncio.run(scenario())


def test_unknown_kids_are_rate_limited(jwks_http: IdentityProvider, rsa_signer: Signer) -> None:
    v = validator(jwks_http.url)
    strangers = [Signer(f"made-up-{i}") for i in range(2)]

    async def scenario() -> None:
        await v.validate(rsa_signer.token())
        for stranger in strangers * 10:
            with pytest.raises(TokenRefused):
                await v.validate(stranger.token())

    started = time.monotonic()
    asyncio.run(scenario())
    elapsed = time.monotonic() - started
    # One fetch at most per UNKNOWN_KID_REFRESH_FLOOR_S (1 s), plus the first.
    assert jwks_http.fetches <= 2 + int(elapsed), (jwks_http.fetches, elapsed)


def test_unreachable_jwks_refuses_without_crashing(rsa_signer: Signer) -> None:
    v = validator("http://127.0.0.1:9/jwks.json")
    assert "no signing keys available" in refused(v, rsa_signer.token())


def test_failing_jwks_is_retried_with_back_off_then_a_login_succeeds(
    rsa_signer: Signer,
) -> None:
    """The first three fetches fail: the retries wait 100, 200 and then 300 ms (the
    doubling capped by retry.backoff.max.ms); clients meanwhile cause no fetch."""
    idp = IdentityProvider(rsa_signer, failures=3)
    v = validator(
        idp.url, jwks_endpoint_retry_backoff_ms=100, jwks_endpoint_retry_backoff_max_ms=300
    )

    async def scenario() -> bytes:
        with pytest.raises(TokenRefused, match="no signing keys available"):
            await v.validate(rsa_signer.token())  # the first fetch failed
        for _ in range(20):  # a client retrying at once is answered from what is known
            try:
                await v.validate(rsa_signer.token())
            except TokenRefused:
                pass
        deadline = time.monotonic() + 30
        while idp.fetches == 0:
            assert time.monotonic() < deadline, idp.attempts
            await asyncio.sleep(0.02)
        server = OAuthBearerServer(v, ConnectionSecurity("SASL", "SASL_PLAINTEXT", "10.0.0.1"))
        answer = await server.evaluate(client_first(rsa_signer.token()))
        assert server.complete and server.principal == KafkaPrincipal("User", "alice")
        return answer

    try:
        assert asyncio.run(scenario()) == b""
    finally:
        idp.close()
    assert len(idp.attempts) == 4 and idp.fetches == 1
    waits = [b - a for a, b in zip(idp.attempts, idp.attempts[1:], strict=False)]
    for wait, backoff in zip(waits, (0.1, 0.2, 0.3), strict=True):
        assert wait >= backoff - 0.01, waits


def test_scopes_come_from_the_scope_claim(jwks_file: Path, rsa_signer: Signer) -> None:
    default = validator(jwks_file.as_uri())
    token = rsa_signer.token(scope="kafka.read", scp=["a", " b ", "b"])
    assert asyncio.run(default.validate(token)).scopes == frozenset({"kafka.read"})
    renamed = validator(jwks_file.as_uri(), scope_claim_name="scp")
    assert asyncio.run(renamed.validate(token)).scopes == frozenset({"a", "b"})
    assert asyncio.run(renamed.validate(rsa_signer.token())).scopes == frozenset()
    # As Kafka's validateScopes: an empty scope refuses the token; a claim of another
    # type holds none.
    bad = rsa_signer.token(scope="ignored", scp=["a", " "])
    assert "'scp' claim holds an empty or non-string scope" in refused(renamed, bad)
    assert asyncio.run(renamed.validate(rsa_signer.token(scp=7))).scopes == frozenset()


# -- the SASL exchange ---------------------------------------------------------------------


def exchange(v: JwtValidator | None, message: bytes) -> tuple[OAuthBearerServer, bytes]:
    """The server of one exchange and its answer to the client's first message."""
    server = OAuthBearerServer(v, ConnectionSecurity("SASL", "SASL_PLAINTEXT", "10.0.0.1"))
    return server, asyncio.run(server.evaluate(message))


def test_exchange_success_with_extensions(jwks_file: Path, rsa_signer: Signer) -> None:
    first = client_first(rsa_signer.token(), traceId="x1")
    server, answer = exchange(validator(jwks_file.as_uri()), first)
    assert answer == b""
    assert server.complete and server.principal == KafkaPrincipal("User", "alice")
    assert server.extensions == {"traceId": "x1"}
    assert server.lifetime_ms is not None and 200_000 < server.lifetime_ms <= 300_000
    assert MECHANISMS["OAUTHBEARER"] is not None


def test_exchange_failure_is_kafkas(
    jwks_file: Path, rsa_signer: Signer, caplog: pytest.LogCaptureFixture
) -> None:
    token = rsa_signer.token(lifetime_s=-300)
    server, answer = exchange(validator(jwks_file.as_uri()), client_first(token))
    # Kafka's OAuthBearerSaslServer: the error as the server challenge, not complete ...
    assert answer == INVALID_TOKEN == b'{"status":"invalid_token"}'
    assert not server.complete and server.principal is None
    # ... and the client's %x01 ends the exchange with the reason, never the token.
    with pytest.raises(SaslAuthenticationFailed) as info:
        asyncio.run(server.evaluate(b"\x01"))
    assert "expired" in str(info.value) and token not in str(info.value)
    assert "invalid_token" in str(info.value)
    refusals = [r for r in caplog.records if "OAUTHBEARER authentication" in r.getMessage()]
    assert len(refusals) == 1 and "10.0.0.1" in refusals[0].getMessage()
    assert token not in caplog.text and token.split(".")[2] not in caplog.text


def test_exchange_authzid_must_be_the_principal(jwks_file: Path, rsa_signer: Signer) -> None:
    v = validator(jwks_file.as_uri())
    assert exchange(v, client_first(rsa_signer.token(), "alice"))[0].complete
    with pytest.raises(SaslAuthenticationFailed, match="differs from the token's principal"):
        exchange(validator(jwks_file.as_uri()), client_first(rsa_signer.token(), "admin"))


def test_exchange_without_configuration_refuses(rsa_signer: Signer) -> None:
    server, answer = exchange(None, client_first(rsa_signer.token()))
    assert answer == INVALID_TOKEN and not server.complete


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"n,,\x01auth=Bearer abc\x01",  # no final separator
        b"n,,\x01\x01",  # no auth
        b"n,,\x01auth=Basic abc\x01\x01",
        b"n,,\x01auth=Bearer a b\x01\x01",
        b"y,,\x01auth=Bearer abc\x01\x01",
        b"n,a=x=y,\x01auth=Bearer abc\x01\x01",
        b"n,,\x01auth=Bearer abc\x01k\xff=v\x01\x01",
        b"\x00" * 10_000,
    ],
)
def test_malformed_client_first_message(message: bytes) -> None:
    with pytest.raises(ValueError):
        parse_client_first(message)


def test_client_first_message_parts() -> None:
    token, authzid, ext = parse_client_first(
        b"n,a=us=2Cer=3D,\x01auth=bearer t.k.n\x01a=b c\x01\x01"
    )
    assert (token, authzid, ext) == ("t.k.n", "us,er=", {"a": "b c"})


# -- settings ------------------------------------------------------------------------------


def test_flags_env_and_server_properties(
    tmp_path: Path, jwks_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "server.properties"
    conf.write_text(
        f"sasl.oauthbearer.jwks.endpoint.url={jwks_file.as_uri()}\n"
        "sasl.oauthbearer.expected.audience=a, b\n"
        "sasl.oauthbearer.clock.skew.seconds=5\n"
        "sasl.oauthbearer.expected.issuer=https://idp/\n"
        "listener.name.external.sasl.oauthbearer.expected.issuer=https://plain/\n"
        "listener.name.external.oauthbearer.sasl.oauthbearer.expected.issuer=https://ext/\n"
        "listener.name.internal.sasl.oauthbearer.sub.claim.name=client_id\n"
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms=250\n"
        "listener.name.external.oauthbearer.sasl.oauthbearer.scope.claim.name=scp\n"
        "listener.name.internal.oauthbearer.sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"
        "=2000\n"
    )
    monkeypatch.delenv("SKIFF_CONFIG", raising=False)
    monkeypatch.setenv("SKIFF_SASL_OAUTHBEARER_SUB_CLAIM_NAME", "azp")
    monkeypatch.setenv("SKIFF_SASL_OAUTHBEARER_SCOPE_CLAIM_NAME", "roles")
    argv = ["serve", "--config", str(conf), "--sasl-oauthbearer-clock-skew-seconds", "7"]
    try:
        config = cli._load_config(argv)
        args = cli.build_parser().parse_args(argv)
    finally:
        cli._FILE_VALUES.clear()
    assert config is not None
    assert args.sasl_oauthbearer_jwks_endpoint_url == jwks_file.as_uri()
    assert args.sasl_oauthbearer_expected_audience == ("a", "b")
    assert args.sasl_oauthbearer_clock_skew_seconds == 7  # flag beats file
    assert args.sasl_oauthbearer_sub_claim_name == "azp"  # env beats default
    assert args.sasl_oauthbearer_jwks_endpoint_refresh_ms == 3_600_000
    assert args.sasl_oauthbearer_scope_claim_name == "roles"  # env
    assert args.sasl_oauthbearer_jwks_endpoint_retry_backoff_ms == 250  # file
    assert args.sasl_oauthbearer_jwks_endpoint_retry_backoff_max_ms == 10_000  # default
    settings = Settings(
        sasl_oauthbearer_jwks_endpoint_url=args.sasl_oauthbearer_jwks_endpoint_url,
        sasl_oauthbearer_expected_issuer=args.sasl_oauthbearer_expected_issuer,
        sasl_oauthbearer_scope_claim_name=args.sasl_oauthbearer_scope_claim_name,
        sasl_oauthbearer_jwks_endpoint_retry_backoff_ms=(
            args.sasl_oauthbearer_jwks_endpoint_retry_backoff_ms
        ),
        listener_overrides=tuple(config.listener_overrides),
    )
    external = OAuthBearerSettings.for_listener(settings, "EXTERNAL")
    internal = OAuthBearerSettings.for_listener(settings, "internal")
    other = OAuthBearerSettings.for_listener(settings, "OTHER")
    # The mechanism-prefixed form beats the plain per-listener one, which beats the broker's.
    assert external.expected_issuer == "https://ext/" and external.sub_claim_name == "sub"
    assert internal.expected_issuer == "https://idp/" and internal.sub_claim_name == "client_id"
    assert other == OAuthBearerSettings.for_listener(settings, "PLAINTEXT")
    assert other.jwks_endpoint_url == jwks_file.as_uri()
    assert (external.scope_claim_name, internal.scope_claim_name) == ("scp", "roles")
    assert external.jwks_endpoint_retry_backoff_ms == 250
    assert internal.jwks_endpoint_retry_backoff_max_ms == 2000
    assert other.jwks_endpoint_retry_backoff_max_ms == 10_000


def test_server_properties_keys_are_mapped_not_ignored(tmp_path: Path) -> None:
    props = [
        Property("sasl.oauthbearer.expected.issuer", "https://idp/", 1),
        Property("listener.name.sasl.oauthbearer.sasl.oauthbearer.expected.audience", "k", 2),
        Property("sasl.oauthbearer.token.endpoint.url", "https://idp/token", 3),  # a client's
    ]
    out = resolve(props, tmp_path / "p", {"sasl-oauthbearer-expected-issuer"})
    assert out.values["sasl-oauthbearer-expected-issuer"].value == "https://idp/"
    assert out.listener_overrides == [
        ("SASL", "oauthbearer.sasl.oauthbearer.expected.audience", "k")
    ]
    assert out.ignored == ["sasl.oauthbearer.token.endpoint.url"]


SASL_LISTENER = [
    "--listeners",
    "SASL://127.0.0.1:0",
    "--listener-security-protocol-map",
    "SASL:SASL_PLAINTEXT",
]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sasl-oauthbearer-jwks-endpoint-url", "ftp://x/jwks"], "expected an https://"),
        (["--sasl-oauthbearer-jwks-endpoint-url", "file:///nope/jwks.json"], "does not exist"),
        (["--sasl-oauthbearer-clock-skew-seconds", "-1"], "too small"),
        (["--sasl-oauthbearer-jwks-endpoint-retry-backoff-ms", "0"], "too small"),
        (["--sasl-oauthbearer-scope-claim-name", " "], "must name a claim"),
        (
            [*SASL_LISTENER, "--sasl-enabled-mechanisms", "OAUTHBEARER"],
            "OAUTHBEARER is enabled on listener SASL without sasl.oauthbearer.jwks.endpoint.url",
        ),
    ],
)
def test_bad_settings_are_one_line_exit_2(args: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", "serve", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert message in lines[0]


def test_bad_per_listener_setting_names_the_listener(tmp_path: Path, jwks_file: Path) -> None:
    conf = tmp_path / "server.properties"
    conf.write_text(
        "listeners=SASL://127.0.0.1:0\nlistener.security.protocol.map=SASL:SASL_PLAINTEXT\n"
        "sasl.enabled.mechanisms=OAUTHBEARER\n"
        f"sasl.oauthbearer.jwks.endpoint.url={jwks_file.as_uri()}\n"
        "listener.name.sasl.oauthbearer.sasl.oauthbearer.clock.skew.seconds=soon\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", "serve", "--config", str(conf)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "listener SASL: sasl.oauthbearer.clock.skew.seconds: expected an integer" in proc.stderr


def test_validator_needs_a_jwks() -> None:
    with pytest.raises(OAuthBearerConfigError, match="jwks.endpoint.url"):
        JwtValidator(OAuthBearerSettings())
