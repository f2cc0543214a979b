"""No secret in what Skiff prints, logs, exports or answers (docs/security.md, Secrets):
Kafka's sensitive configs are reported as Kafka reports them (null value,
is_sensitive=true), a mistake in a secret setting is reported without its value, and a
Redis URL's password stays masked even when the URL is malformed."""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

import pytest
from conftest import ROOT, free_port

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

    text = f"sasl.jaas.config=x required password=\"{SECRET}\\uZZZZ\";\n"
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
