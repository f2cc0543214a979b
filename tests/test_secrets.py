"""No secret in what Skiff prints, logs, exports or answers (docs/security.md, Secrets):
Kafka's sensitive configs are reported as Kafka reports them (null value,
is_sensitive=true), a mistake in a secret setting is reported without its value, and a
Redis URL's password stays masked even when the URL is malformed."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import known_secrets
import pytest
from conftest import ROOT, RedisServer, free_port, start_skiff, stop_process, wait_for_port

from sidecar.config import broker as broker_configs
from sidecar.config import server_properties
from sidecar.config.settings import Settings
from sidecar.telemetry.redact import is_sensitive, redact_text, redact_url, url_secrets

SECRET = "Hunter2-s3cret"


@pytest.mark.parametrize(
    "name",
    [
        "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password",
        "sasl.jaas.config", "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config",
        "listener.name.external.ssl.key.password", "ssl.keystore.key",
        "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
        "add-scram", "SKIFF_ADD_SCRAM", "ssl-key-password", "sasl.oauthbearer.client.secret",
    ],
)  # fmt: skip
def test_kafkas_password_configs_are_sensitive(name: str) -> None:
    assert is_sensitive(name)


@pytest.mark.parametrize(
    "name",
    ["ssl.keystore.location", "ssl.keystore.key.location", "ssl.keystore.certificate.location",
     "sasl.enabled.mechanisms", "listeners", "super.users", "ssl.client.auth"],
)  # fmt: skip
def test_paths_and_plain_settings_are_not(name: str) -> None:
    assert not is_sensitive(name)


def test_a_malformed_url_keeps_its_password_masked() -> None:
    """A password with an unencoded '/', '?' or '#' makes the URL malformed: the error
    quotes the URL and a piece of the password; neither may show it."""
    for url in (
        f"rediss://:{SECRET}/x@127.0.0.1:6379/0?ssl_ca_certs=/etc/ca.crt",
        f"redis://user:{SECRET}?x@127.0.0.1:6379/0",
        f"redis://user:{SECRET}#x@127.0.0.1:6379/0",
    ):
        assert SECRET not in redact_url(url), url
        assert "@127.0.0.1:6379" in redact_url(url)  # still says which Redis
        reason = f"Port could not be cast to integer value as '{SECRET}'"
        assert SECRET not in redact_text(reason, url_secrets(url))


def test_serve_with_a_malformed_url_shows_no_piece_of_the_password() -> None:
    url = f"redis://:{SECRET}/x@127.0.0.1:6379/0"
    proc = subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", "serve", "--listen",
         f"127.0.0.1:{free_port()}", "--http-listen", "off", "--redis-url", url],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Hunter2" not in proc.stdout + proc.stderr, proc.stderr
    assert "is malformed" in proc.stderr and "Traceback" not in proc.stderr


def _sensitive_key(name: str) -> broker_configs.BrokerKey:
    return broker_configs.BrokerKey(name, "password", None, lambda s, n, d: SECRET)


def test_describe_configs_lists_a_sensitive_broker_config_without_its_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As Kafka's ConfigHelper: value null, synonyms' values null, is_sensitive true,
    type PASSWORD (9); other entries unchanged."""
    catalogue = dict(broker_configs.CATALOGUE)
    for name in ("ssl.key.password", "listener.name.external.sasl.jaas.config"):
        catalogue[name] = _sensitive_key(name)
    monkeypatch.setattr(broker_configs, "CATALOGUE", catalogue)
    entries = broker_configs.describe_broker(Settings(), 0, {}, None, True, False)
    by_name: dict[str, dict[str, Any]] = {e["name"]: e for e in entries}
    for name in ("ssl.key.password", "listener.name.external.sasl.jaas.config"):
        entry = by_name[name]
        assert entry["value"] is None and entry["is_sensitive"] is True
        assert entry["config_type"] == 9
        assert entry["synonyms"] and all(s["value"] is None for s in entry["synonyms"])
    assert SECRET not in repr(entries)
    assert by_name["num.partitions"]["is_sensitive"] is False
    assert by_name["num.partitions"]["value"] == "1"


def _actions() -> dict[str, argparse.Action]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ssl-key-password", type=int)  # a type that refuses the value
    parser.add_argument("--num-partitions", type=int)
    return {a.option_strings[0][2:]: a for a in parser._actions if a.option_strings[0] != "-h"}


def test_a_bad_secret_in_server_properties_is_reported_without_its_value() -> None:
    values = {
        "ssl-key-password": server_properties.FlagValue(SECRET, "s.properties:3 ssl.key.password")
    }
    with pytest.raises(server_properties.ConfigFileError) as err:
        server_properties.check(values, _actions())
    assert SECRET not in str(err.value)
    assert "s.properties:3 ssl.key.password=***" in str(err.value)
    plain = {"num-partitions": server_properties.FlagValue("six", "s.properties:4 num.partitions")}
    with pytest.raises(server_properties.ConfigFileError, match="num.partitions=six"):
        server_properties.check(plain, _actions())  # other values are still shown

    text = f'sasl.jaas.config=x required password="{SECRET}\\uZZZZ";\n'
    with pytest.raises(server_properties.ConfigFileError) as err:
        server_properties.parse(text, "s.properties")
    assert SECRET[:4] not in str(err.value) and "ZZZZ" not in str(err.value)
    assert "s.properties:1: sasl.jaas.config: malformed" in str(err.value)


def test_a_bad_secret_flag_is_reported_without_its_value(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sidecar.cli.main import OneLineParser

    parser = OneLineParser(prog="skiff")
    parser.add_argument("--ssl-key-password", type=int)
    parser.add_argument("--num-partitions", type=int)
    monkeypatch.setattr(sys, "argv", ["skiff", "--ssl-key-password", SECRET])
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(["--ssl-key-password", SECRET])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and SECRET not in err
    assert "argument --ssl-key-password: invalid int value: ***" in err
    with pytest.raises(SystemExit):
        parser.parse_args(["--num-partitions", "six"])
    assert "'six'" in capsys.readouterr().err


# -- a sidecar with every kind of secret, driven, then searched -------------------------

REDIS_PW = "Redis-Pw-7f3a91"
PLAIN_PW = "Plain-Pw-2b8c44"
JAAS_PW = "Jaas-Pw-9d1e07"
ADMIN_PW = "Admin-Scram-Pw-5a6b"
USER_PW = "User-Scram-Pw-c3d2"
WRONG_PW = "Wrong-Pw-e8f1aa"
BAD_CONFIG_PW = "Bad-Config-Pw-41f0"
# A JWT (header.payload.signature), sent where a password goes: it must not be echoed.
JWT = (
    "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJjYXJvbCIsImV4cCI6NDEwMjQ0NDgwMH0."
    "c2lnbmF0dXJlLW5vdC12YWxpZC1idXQtc2VjcmV0LTc3MjE"
)
KEY_PW = "Key-Pw-6e5d4c3b"
SECRETS = [REDIS_PW, PLAIN_PW, JAAS_PW, ADMIN_PW, USER_PW, WRONG_PW, BAD_CONFIG_PW, JWT, KEY_PW]
for _number, _secret in enumerate([SECRET, *SECRETS]):
    known_secrets.register(f"test_secrets.py secret #{_number}", _secret)


def _sasl(port: int, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def _produce_one(client: dict[str, Any], topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({**client, "acks": "all"})
    producer.produce(topic, b"v")
    assert producer.flush(30) == 0


def _refused(client: dict[str, Any]) -> None:
    """The client's authentication is refused: librdkafka reports _AUTHENTICATION."""
    from confluent_kafka import KafkaError, Producer

    seen: list[Any] = []
    producer = Producer({**client, "error_cb": seen.append})
    deadline = time.monotonic() + 20
    while not any(e.code() == KafkaError._AUTHENTICATION for e in seen):
        assert time.monotonic() < deadline, seen
        producer.poll(0.2)


def _clean_environ() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("SKIFF_", "OTEL_"))}


def _serve_mistake(*args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", "serve", "--listen",
         f"127.0.0.1:{free_port()}", "--http-listen", "off", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**_clean_environ(), **(env or {})},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stdout + proc.stderr


def test_no_secret_in_logs_metrics_spans_or_answers(
    own_redis: RedisServer, tmp_path: Path, topic: str
) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ConfigResource,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )
    from otlp_receiver import OtlpReceiver
    from telemetry_helpers import get

    own_redis.client().config_set("requirepass", REDIS_PW)
    users = tmp_path / "plain-users"
    users.write_text(f"alice:{PLAIN_PW}\n")
    properties = tmp_path / "server.properties"
    properties.write_text(
        "listener.name.sasl_plaintext.plain.sasl.jaas.config="
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_bob="{JAAS_PW}";\n'
    )
    receiver = OtlpReceiver()
    plain_port, sasl_port = free_port(), free_port()
    env = {
        "SKIFF_ADD_SCRAM": f"SCRAM-SHA-512=[name=admin,password={ADMIN_PW}]",
        "SKIFF_SSL_KEY_PASSWORD": KEY_PW,  # listed by DescribeConfigs, never shown
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_TRACES_SAMPLER": "always_on",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    skiff = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url", f"redis://:{REDIS_PW}@127.0.0.1:{own_redis.port}/0",
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "--sasl-plain-users-file", str(users),
        "--config", str(properties),
        "--log-level", "DEBUG",
        port=plain_port, env=env,
    )  # fmt: skip
    try:
        wait_for_port(sasl_port, skiff.proc)
        alice = _sasl(sasl_port, "PLAIN", "alice", PLAIN_PW)
        _produce_one(alice, topic)
        _produce_one(_sasl(sasl_port, "PLAIN", "bob", JAAS_PW), topic)
        admin_client = _sasl(sasl_port, "SCRAM-SHA-512", "admin", ADMIN_PW)
        admin = AdminClient(admin_client)
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        upsert = UserScramCredentialUpsertion("dave", info, USER_PW.encode())
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=30)
        admin.describe_user_scram_credentials(["dave"])["dave"].result(timeout=30)
        _produce_one(_sasl(sasl_port, "SCRAM-SHA-512", "dave", USER_PW), topic)
        broker = ConfigResource(ConfigResource.Type.BROKER, "0")
        described = admin.describe_configs([broker])
        entries = {c.name: c for f in described.values() for c in f.result(timeout=30).values()}
        answers = repr([(c.name, c.value) for c in entries.values()])
        key_password = entries["ssl.key.password"]
        assert (key_password.value, key_password.is_sensitive) == (None, True)
        assert entries["sasl.enabled.mechanisms"].value == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"

        _refused(_sasl(sasl_port, "PLAIN", "alice", WRONG_PW))
        _refused(_sasl(sasl_port, "SCRAM-SHA-512", "admin", WRONG_PW))
        _refused(_sasl(sasl_port, "SCRAM-SHA-256", "dave", USER_PW))  # no such credential
        _refused(_sasl(sasl_port, "PLAIN", "carol", JWT))

        status, metrics, _ = get(skiff.http_port, "/metrics")
        assert status == 200
        receiver.wait_for(lambda s: s.name.startswith("produce"), timeout=15)
        time.sleep(0.5)  # one more export interval (100 ms) for the last spans
    finally:
        stop_process(skiff.proc)
        receiver.close()
    log = skiff.log()
    # The failed logins were logged, without what was sent.
    assert log.count("authentication failed") >= 4, log
    exported = b"".join(receiver.bodies)
    assert exported, "no spans exported"

    mistakes = [
        _serve_mistake("--add-scram", f"SCRAM-SHA-512=[name=x,password={BAD_CONFIG_PW},x=1]"),
        _serve_mistake(env={"SKIFF_ADD_SCRAM": f"SCRAM-SHA-9=[name=x,password={BAD_CONFIG_PW}]"}),
        _serve_mistake("--redis-url", f"redis://:{BAD_CONFIG_PW}/@127.0.0.1:{own_redis.port}/0"),
    ]
    bad_properties = tmp_path / "bad.properties"
    bad_properties.write_text(f'sasl.jaas.config=x required password="{BAD_CONFIG_PW}\\uZZ";\n')
    mistakes.append(_serve_mistake("--config", str(bad_properties)))

    for secret in SECRETS:
        for where, text in (
            ("log", log),
            ("/metrics", metrics.decode()),
            ("DescribeConfigs", answers),
            *(("start-up error", m) for m in mistakes),
        ):
            assert secret not in text, f"{secret!r} in {where}:\n{text}"
            assert quote(secret, safe="") not in text, f"{secret!r} in {where}"
        assert secret.encode() not in exported, f"{secret!r} in exported spans"


def test_an_encrypted_tls_key_and_its_password_stay_out_of_the_output(tmp_path: Path) -> None:
    """ssl.key.password (SKIFF_SSL_KEY_PASSWORD): a wrong one stops `skiff serve` with one
    line and exit status 2, a right one serves TLS; neither the password nor the key's
    PEM body is printed."""
    import trustme
    from cryptography.hazmat.primitives import serialization

    issued = trustme.CA().issue_cert("127.0.0.1")
    key = serialization.load_pem_private_key(issued.private_key_pem.bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(KEY_PW.encode()),
    )
    (tmp_path / "tls.key").write_bytes(encrypted)
    issued.cert_chain_pems[0].write_to_path(str(tmp_path / "tls.crt"))
    key_body = encrypted.decode().splitlines()[1]
    tls_args = [
        "--listeners", f"SSL://127.0.0.1:{free_port()}",
        "--ssl-keystore-certificate-location", str(tmp_path / "tls.crt"),
        "--ssl-keystore-key-location", str(tmp_path / "tls.key"),
    ]  # fmt: skip
    wrong = _serve_mistake(*tls_args, env={"SKIFF_SSL_KEY_PASSWORD": KEY_PW + "x"})
    flag = _serve_mistake(*tls_args, "--ssl-key-password", KEY_PW + "x")
    for out in (wrong, flag):
        assert KEY_PW not in out and key_body not in out, out
        assert "ssl.key.password" in out, out

    port = free_port()
    tls_args[1] = f"SSL://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sidecar.cli.main", "serve", "--http-listen", "off", *tls_args,
         "--log-level", "DEBUG"],
        cwd=ROOT, env={**_clean_environ(), "SKIFF_SSL_KEY_PASSWORD": KEY_PW},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_for_port(port, proc)
    finally:
        stop_process(proc)
    out = proc.stdout.read().decode() if proc.stdout else ""
    assert "listening on SSL://" in out, out
    assert KEY_PW not in out and key_body not in out, out
