"""Skiff against a Redis that wants credentials or TLS, as a hardened deployment runs it:
an ACL user of its own (`redis://user:password@`, the default user off) and TLS
(`rediss://` with the CA and, for mutual TLS, a client certificate in the URL). Records
go round through a real client, and the password appears nowhere in what the sidecar
prints."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import known_secrets
import pytest
import redis
import trustme
from confluent_kafka import Consumer, Producer
from conftest import RedisServer, free_port, start_skiff, stop_process, wait_for_port

# characters that need percent-encoding in a URL
PASSWORD = known_secrets.register("Redis ACL user password", "Acl-Us3r/Pa$$word")


def _round_trip(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(3):
        producer.produce(topic, f"v{i}".encode(), key=b"k")
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert got == [b"v0", b"v1", b"v2"]


def test_an_acl_user_with_only_skiffs_commands(
    own_redis: RedisServer, tmp_path: Path, topic: str
) -> None:
    """A Redis ACL user allowed what Skiff needs and not the administrative commands
    (@dangerous: CONFIG, FLUSHALL, DEBUG, SHUTDOWN, ...), with the default user off."""
    admin = own_redis.client()
    admin.acl_setuser(
        "skiff",
        enabled=True,
        passwords=[f"+{PASSWORD}"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-@dangerous", "+info", "+wait"],
    )
    admin.acl_setuser("default", enabled=False)
    url = f"redis://skiff:{quote(PASSWORD, safe='')}@127.0.0.1:{own_redis.port}/0"
    with pytest.raises(redis.AuthenticationError):  # no way in without the password
        redis.Redis(port=own_redis.port).ping()

    skiff = start_skiff(tmp_path / "skiff.log", "--redis-url", url)
    try:
        _round_trip(skiff.bootstrap, topic)
    finally:
        stop_process(skiff.proc)
    out = skiff.log()
    assert PASSWORD not in out and quote(PASSWORD, safe="") not in out, out
    assert "skiff:***@" in out  # the start-up line still names the user
    assert "NOPERM" not in out and "Traceback" not in out, out


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[tuple[int, trustme.CA, Path]]:
    """redis-server with TLS only (`port 0`), client certificates required."""
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed"
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    certs = tmp_path / "certs"
    certs.mkdir()
    server.cert_chain_pems[0].write_to_path(str(certs / "redis.crt"))
    server.private_key_pem.write_to_path(str(certs / "redis.key"))
    ca.cert_pem.write_to_path(str(certs / "ca.crt"))
    port = free_port()
    proc = subprocess.Popen(
        [
            binary, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
            "--tls-cert-file", str(certs / "redis.crt"),
            "--tls-key-file", str(certs / "redis.key"),
            "--tls-ca-cert-file", str(certs / "ca.crt"),
            "--tls-auth-clients", "yes",
            "--requirepass", PASSWORD, "--save", "", "--appendonly", "no",
            "--dir", str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for_port(port, proc)
        yield port, ca, certs
    finally:
        stop_process(proc)


def test_tls_to_redis_with_a_client_certificate(
    tls_redis: tuple[int, trustme.CA, Path], tmp_path: Path, topic: str
) -> None:
    """`rediss://` verifying Redis's certificate against the CA and presenting the
    sidecar's own (Redis's tls-auth-clients yes), plus AUTH. A plaintext client and a
    TLS client without a certificate are refused by that Redis, so the records can only
    have gone over TLS."""
    port, ca, certs = tls_redis
    client_cert = ca.issue_cert("skiff-sidecar")
    client_cert.cert_chain_pems[0].write_to_path(str(certs / "skiff.crt"))
    client_cert.private_key_pem.write_to_path(str(certs / "skiff.key"))
    with pytest.raises(redis.ConnectionError):
        redis.Redis(port=port, password=PASSWORD, socket_timeout=2).ping()
    with pytest.raises(redis.ConnectionError):
        redis.Redis(port=port, password=PASSWORD, ssl=True, ssl_ca_certs=str(certs / "ca.crt"),
                    socket_timeout=2).ping()  # fmt: skip

    url = (
        f"rediss://:{quote(PASSWORD, safe='')}@127.0.0.1:{port}/0"
        f"?ssl_ca_certs={certs / 'ca.crt'}&ssl_certfile={certs / 'skiff.crt'}"
        f"&ssl_keyfile={certs / 'skiff.key'}"
    )
    skiff = start_skiff(tmp_path / "skiff.log", "--redis-url", url)
    try:
        _round_trip(skiff.bootstrap, topic)
    finally:
        stop_process(skiff.proc)
    stored = redis.Redis(
        port=port, password=PASSWORD, ssl=True, ssl_ca_certs=str(certs / "ca.crt"),
        ssl_certfile=str(certs / "skiff.crt"), ssl_keyfile=str(certs / "skiff.key"),
    )  # fmt: skip
    assert any(topic.encode() in key for key in stored.keys("*"))
    out = skiff.log()
    assert PASSWORD not in out and quote(PASSWORD, safe="") not in out, out


def test_tls_to_redis_with_an_untrusted_certificate_fails_clearly(
    tls_redis: tuple[int, trustme.CA, Path], tmp_path: Path
) -> None:
    """A Redis whose certificate the sidecar's CA did not sign: `skiff serve` exits with
    a line naming the Redis (password masked), not a traceback."""
    port, _, certs = tls_redis
    other = trustme.CA()
    other.cert_pem.write_to_path(str(certs / "other-ca.crt"))
    url = (
        f"rediss://:{quote(PASSWORD, safe='')}@127.0.0.1:{port}/0"
        f"?ssl_ca_certs={certs / 'other-ca.crt'}"
    )
    proc = subprocess.run(
        [
            sys.executable, "-m", "sidecar.cli.main", "serve",
            "--listen", f"127.0.0.1:{free_port()}",
            "--http-listen", "off", "--redis-url", url, "--redis-connect-timeout", "2",
        ],
        cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert PASSWORD not in out and quote(PASSWORD, safe="") not in out, out
    assert "Traceback" not in out, out
    assert f"rediss://:***@127.0.0.1:{port}/0" in out, out
