"""SSL listeners (sidecar/security/tls.py): real clients produce and consume over TLS,
mTLS principals with Kafka's ssl.principal.mapping.rules, certificate rotation, and
what a bad peer gets (a closed connection and a log line, other connections untouched).
Certificates are made per test with trustme (tests/tls_certs.py)."""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import known_secrets
import pytest
from clients import (
    aiokafka_client,
    confluent_client,
    franz_client,
    java_client,
    kafka_python_client,
)
from conftest import ROOT, RedisServer, Skiff, free_port, start_skiff, stop_process
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from rawkafka import ConnectionClosed, RawKafka
from tls_certs import TestCerts, serial_of

from sidecar.security.principal import ANONYMOUS, KafkaPrincipal
from sidecar.security.session import ConnectionSecurity
from sidecar.security.ssl_principal import NoMatchingRule, PrincipalMapper, distinguished_name
from sidecar.security.tls import ServerTls, TlsAcceptor, TlsSettings

TLS_KEY_PASSWORD = known_secrets.register("TLS key password", "Tls-Key-Pw-s3cret-7d")

METADATA, API_VERSIONS = 3, 18
RULES = "RULE:^CN=([^,]+),OU=eng,.*$/$1/L,DEFAULT"


def _wait_for(log: Path, pattern: str, timeout: float = 30.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while (found := re.search(pattern, log.read_text(errors="replace"))) is None:
        assert time.monotonic() < deadline, f"{pattern!r} not in:\n{log.read_text()}"
        time.sleep(0.05)
    return found


def _start_ssl(
    tmp: Path, redis: RedisServer, certs: TestCerts, *args: str, plain: bool = False
) -> tuple[Skiff, int]:
    """A sidecar with an SSL listener (and a PLAINTEXT one on port 0 if `plain`);
    returns it and the PLAINTEXT port (0 without one)."""
    port = free_port()
    listeners = f"SSL://127.0.0.1:{port}" + (",PLAINTEXT://127.0.0.1:0" if plain else "")
    log = tmp / "skiff.log"
    skiff = start_skiff(
        log,
        "--redis-url",
        redis.url,
        "--listeners",
        listeners,
        "--inter-broker-listener-name",
        "SSL",
        "--ssl-keystore-location",
        str(certs.server_pem),
        *args,
        port=port,
    )
    plain_port = 0
    if plain:
        plain_port = int(_wait_for(log, r"PLAINTEXT://127\.0\.0\.1:(\d+)")[1])
    _wait_for(log, r"listening on SSL://")
    return skiff, plain_port


def _tls_kafka(port: int, context: ssl.SSLContext) -> RawKafka:
    """A raw Kafka connection over TLS (handshake done)."""
    kafka = RawKafka("127.0.0.1", port)
    kafka.sock = context.wrap_socket(kafka.sock, server_hostname="127.0.0.1")
    return kafka


VERSIONS_BODY = {"client_software_name": "t", "client_software_version": "1"}


def _api_versions_ok(kafka: RawKafka) -> bool:
    answer = kafka.request(API_VERSIONS, 3, VERSIONS_BODY)
    return int(answer.error_code) == 0


RECORDS = [{"key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(5)]


def _values(records: list[dict[str, Any]]) -> list[bytes]:
    return [r["value"] for r in records]


@pytest.fixture
def certs(tmp_path: Path) -> TestCerts:
    return TestCerts(tmp_path / "certs")


def test_clients_produce_and_consume_over_ssl(
    own_redis: RedisServer, tmp_path: Path, certs: TestCerts
) -> None:
    skiff, _ = _start_ssl(tmp_path, own_redis, certs)
    ca = str(certs.ca_pem)
    bootstrap = skiff.bootstrap
    java_props = {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": ca,
    }
    aio_context = aiokafka_client_context(ca)
    clients: dict[str, tuple[Any, Any]] = {
        "confluent": (
            lambda t: confluent_client.produce(
                bootstrap, t, RECORDS, **{"security.protocol": "SSL", "ssl.ca.location": ca}
            ),
            lambda t: confluent_client.consume(
                bootstrap, t, 0, 0, 5, **{"security.protocol": "SSL", "ssl.ca.location": ca}
            ),
        ),
        "kafka-python": (
            lambda t: kafka_python_client.produce(
                bootstrap, t, RECORDS, security_protocol="SSL", ssl_cafile=ca
            ),
            lambda t: kafka_python_client.consume(
                bootstrap, t, 0, 0, 5, security_protocol="SSL", ssl_cafile=ca
            ),
        ),
        "aiokafka": (
            lambda t: aiokafka_client.produce(
                bootstrap, t, RECORDS, security_protocol="SSL", ssl_context=aio_context
            ),
            lambda t: aiokafka_client.consume(
                bootstrap, t, 0, 0, 5, security_protocol="SSL", ssl_context=aio_context
            ),
        ),
        "java": (
            lambda t: java_client.produce(bootstrap, t, RECORDS, properties=java_props),
            lambda t: java_client.consume(bootstrap, t, 0, 0, 5, properties=java_props),
        ),
        "franz-go": (
            lambda t: franz_client.produce(bootstrap, t, RECORDS, properties=java_props),
            lambda t: franz_client.consume(bootstrap, t, 0, 0, 5, properties=java_props),
        ),
    }
    try:
        for name, (produce, consume) in clients.items():
            topic = f"tls-{name}-{uuid.uuid4().hex[:8]}"
            offsets = [m["offset"] for m in produce(topic)]
            assert offsets == [0, 1, 2, 3, 4], name
            assert _values(consume(topic)) == [r["value"] for r in RECORDS], name
        assert "Traceback" not in skiff.log()
    finally:
        stop_process(skiff.proc)


def test_kafka_topics_over_ssl_with_a_client_certificate(
    own_redis: RedisServer, tmp_path: Path, certs: TestCerts
) -> None:
    """Kafka's own kafka-topics with a Kafka client config file (PEM trust and key)."""
    from kafka_tools import ToolsUnavailable, kafka_topics

    skiff, _ = _start_ssl(
        tmp_path,
        own_redis,
        certs,
        "--ssl-client-auth",
        "required",
        "--ssl-truststore-location",
        str(certs.ca_pem),
    )
    try:
        cert, key = certs.client("admin", unit="ops")
        config = tmp_path / "client.properties"
        config.write_text(
            "security.protocol=SSL\n"
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={certs.ca_pem}\n"
            "ssl.keystore.type=PEM\n"
            # Java's PEM keystore: the key and chain inline, one line each (\n escaped).
            "ssl.keystore.key=" + _pkcs8(key).replace("\n", "\\n") + "\n"
            "ssl.keystore.certificate.chain=" + cert.read_text().replace("\n", "\\n") + "\n"
        )
        topic = f"cli-{uuid.uuid4().hex[:8]}"
        try:
            made = kafka_topics(
                skiff.bootstrap,
                "--command-config",
                str(config),
                "--create",
                "--topic",
                topic,
                "--partitions",
                "3",
            )
        except ToolsUnavailable as exc:
            pytest.skip(f"Kafka's tools are not available: {exc}")
        assert made.returncode == 0, made.stderr
        listed = kafka_topics(skiff.bootstrap, "--command-config", str(config), "--list")
        assert topic in listed.stdout.split(), listed.stderr
        _wait_for(skiff.log_path, r"on listener SSL: TLSv1\.\d, principal User:CN=admin,OU=ops")
    finally:
        stop_process(skiff.proc)


def _pkcs8(key: Path) -> str:
    """The key as PKCS#8 PEM, the form Kafka's PEM keystore reads."""
    loaded = serialization.load_pem_private_key(key.read_bytes(), password=None)
    return loaded.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def aiokafka_client_context(cafile: str) -> ssl.SSLContext:
    from aiokafka.helpers import create_ssl_context

    return create_ssl_context(cafile=cafile)


def test_mtls_principal_from_the_client_certificate(
    own_redis: RedisServer, tmp_path: Path, certs: TestCerts
) -> None:
    skiff, _ = _start_ssl(
        tmp_path,
        own_redis,
        certs,
        "--ssl-client-auth",
        "required",
        "--ssl-truststore-location",
        str(certs.ca_pem),
        "--ssl-principal-mapping-rules",
        RULES,
    )
    try:
        alice = certs.client("Alice", unit="eng", organization="Acme")
        with _tls_kafka(skiff.port, certs.client_context(alice)) as kafka:
            assert _api_versions_ok(kafka)
            peer = f"127.0.0.1:{kafka.local_port}"
        _wait_for(
            skiff.log_path,
            rf"TLS connection from {re.escape(peer)} on listener SSL: TLSv1\.\d, "
            "principal User:alice",
        )
        bob = certs.client("bob", unit="ops")  # no rule but DEFAULT: the whole DN
        with _tls_kafka(skiff.port, certs.client_context(bob)) as kafka:
            assert _api_versions_ok(kafka)
            peer = f"127.0.0.1:{kafka.local_port}"
        _wait_for(
            skiff.log_path, rf"{re.escape(peer)} on listener SSL: .*principal User:CN=bob,OU=ops"
        )
        # A real client with a certificate (librdkafka) produces and consumes.
        topic = f"mtls-{uuid.uuid4().hex[:8]}"
        config = {
            "security.protocol": "SSL",
            "ssl.ca.location": str(certs.ca_pem),
            "ssl.certificate.location": str(alice[0]),
            "ssl.key.location": str(alice[1]),
        }
        assert [
            m["offset"] for m in confluent_client.produce(skiff.bootstrap, topic, RECORDS, **config)
        ] == [0, 1, 2, 3, 4]
        assert _values(
            confluent_client.consume(skiff.bootstrap, topic, 0, 0, 5, **config)
        ) == _values(RECORDS)
    finally:
        stop_process(skiff.proc)


def _refused(port: int, context: ssl.SSLContext) -> str | None:
    """The client's address if the sidecar ends a TLS connection with this client
    context: during the handshake (TLS 1.2) or at the first read after it (TLS 1.3
    checks the client's certificate after the client has finished); else None."""
    kafka = RawKafka("127.0.0.1", port)
    peer = f"127.0.0.1:{kafka.local_port}"
    try:
        kafka.sock = context.wrap_socket(kafka.sock, server_hostname="127.0.0.1")
        kafka.send(API_VERSIONS, 3, VERSIONS_BODY)
        kafka.recv(API_VERSIONS, 3)
    except TimeoutError:
        return None
    except (ssl.SSLError, ConnectionError, ConnectionClosed):
        return peer
    finally:
        kafka.close()
    return None


def test_required_client_auth_refuses_expired_untrusted_and_missing_certificates(
    own_redis: RedisServer, tmp_path: Path, certs: TestCerts
) -> None:
    skiff, _ = _start_ssl(
        tmp_path,
        own_redis,
        certs,
        "--ssl-client-auth",
        "required",
        "--ssl-truststore-location",
        str(certs.ca_pem),
    )
    try:
        import trustme

        other_ca = trustme.CA()
        good = certs.client_context(certs.client("carol", unit="eng"))
        with _tls_kafka(skiff.port, good) as survivor:  # open all along
            for context, reason in (
                (
                    certs.client_context(certs.client("old", expired=True)),
                    "certificate has expired",
                ),
                (
                    certs.client_context(certs.client("eve", ca=other_ca)),
                    "unable to get local issuer",
                ),
                (
                    certs.client_context(),
                    "(PEER_DID_NOT_RETURN_A_CERTIFICATE|peer did not return a certificate)",
                ),
            ):
                peer = _refused(skiff.port, context)
                assert peer is not None, reason
                _wait_for(
                    skiff.log_path, rf"TLS handshake with {re.escape(peer)} .*failed: .*{reason}"
                )
            assert _api_versions_ok(survivor)
        assert "Traceback" not in skiff.log()
    finally:
        stop_process(skiff.proc)


def test_bad_peers_get_a_closed_connection_and_a_log_line(
    own_redis: RedisServer, tmp_path: Path, certs: TestCerts
) -> None:
    skiff, plain = _start_ssl(tmp_path, own_redis, certs, plain=True)
    try:
        with _tls_kafka(skiff.port, certs.client_context()) as survivor:
            # A plaintext Kafka client on the TLS port.
            with RawKafka("127.0.0.1", skiff.port) as kafka:
                kafka.send(API_VERSIONS, 3, VERSIONS_BODY)
                assert kafka.closed()
                peer = f"127.0.0.1:{kafka.local_port}"
            _wait_for(
                skiff.log_path,
                rf"TLS handshake with {re.escape(peer)} on listener SSL failed: .*not TLS",
            )
            # Garbage during the handshake: a ClientHello record header, then noise.
            with socket.create_connection(("127.0.0.1", skiff.port)) as sock:
                sock.sendall(b"\x16\x03\x01\x00\x40" + bytes(range(64)))
                peer = f"127.0.0.1:{sock.getsockname()[1]}"
                sock.settimeout(10)
                assert sock.recv(1024) is not None  # an alert or EOF: it is closed below
                assert _closed(sock)
            _wait_for(
                skiff.log_path, rf"TLS handshake with {re.escape(peer)} on listener SSL failed"
            )
            # A TLS client on the PLAINTEXT listener: its ClientHello is no Kafka frame.
            with socket.create_connection(("127.0.0.1", plain)) as raw:
                peer = f"127.0.0.1:{raw.getsockname()[1]}"
                with pytest.raises((ssl.SSLError, ConnectionError)):
                    certs.client_context().wrap_socket(raw, server_hostname="127.0.0.1")
            _wait_for(
                skiff.log_path,
                rf"closing connection {re.escape(peer)}: request size \d+ is outside .*"
                r"\(a TLS client on a plaintext listener\?\)",
            )
            assert _api_versions_ok(survivor)  # untouched by all of the above
        assert "Traceback" not in skiff.log()
    finally:
        stop_process(skiff.proc)


def test_connections_stuck_in_the_handshake_are_bounded_by_max_connections(
    own_redis: RedisServer, tmp_path: Path, certs: TestCerts
) -> None:
    skiff, _ = _start_ssl(tmp_path, own_redis, certs, "--max-connections", "2")
    try:
        # start_skiff's readiness probe connected and hung up: its handshake is over.
        _wait_for(skiff.log_path, r"TLS handshake with .* failed: the client closed")
        idle = [socket.create_connection(("127.0.0.1", skiff.port)) for _ in range(2)]
        try:
            with socket.create_connection(("127.0.0.1", skiff.port)) as third:
                third.settimeout(10)
                assert _closed(third)
                peer = f"127.0.0.1:{third.getsockname()[1]}"
            _wait_for(
                skiff.log_path,
                rf"closing connection {re.escape(peer)} on listener SSL: 2 TLS handshakes in "
                r"progress \(max.connections\)",
            )
        finally:
            for sock in idle:
                sock.close()
        deadline = time.monotonic() + 30  # the two idle ones' handshakes fail and end
        while True:
            try:
                with _tls_kafka(skiff.port, certs.client_context()) as kafka:
                    assert _api_versions_ok(kafka)
                break
            except (ssl.SSLError, ConnectionError, ConnectionClosed):
                assert time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        stop_process(skiff.proc)


def _closed(sock: socket.socket, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if sock.recv(4096) == b"":
                return True
        except ConnectionError:
            return True
        except TimeoutError:
            return False
    return False


def test_certificate_rotation_reaches_new_connections_only(
    own_redis: RedisServer, tmp_path: Path, certs: TestCerts
) -> None:
    skiff, _ = _start_ssl(tmp_path, own_redis, certs)
    try:
        context = certs.client_context()
        with _tls_kafka(skiff.port, context) as before:
            assert serial_of(before.sock) == certs.server_serial  # type: ignore[arg-type]
            new_serial = certs.write_server(certs.server_pem)
            deadline = time.monotonic() + 30
            while True:
                with _tls_kafka(skiff.port, context) as after:
                    seen = serial_of(after.sock)  # type: ignore[arg-type]
                    if seen == new_serial:
                        assert _api_versions_ok(after)
                        break
                assert time.monotonic() < deadline, "the new certificate was not served"
                time.sleep(0.2)
            assert _api_versions_ok(before)  # the open connection keeps its session
        _wait_for(skiff.log_path, r"listener SSL: reloaded its TLS certificate and key")
    finally:
        stop_process(skiff.proc)


def _split_encrypted_pair(certs: TestCerts, password: bytes) -> tuple[Path, Path, int]:
    """cert-manager's layout: tls.crt (chain) and tls.key (here encrypted) apart."""
    leaf = certs.ca.issue_cert("127.0.0.1", "localhost", common_name="skiff-secure")
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
    crt, key_path = certs.dir / "tls.crt", certs.dir / "tls.key"
    crt.write_bytes(b"".join(p.bytes() for p in leaf.cert_chain_pems))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password),
        )
    )
    serial = x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes()).serial_number
    return crt, key_path, serial


def test_per_listener_tls_settings_and_a_sasl_ssl_listener(
    own_redis: RedisServer, tmp_path: Path, certs: TestCerts
) -> None:
    crt, key, secure_serial = _split_encrypted_pair(certs, TLS_KEY_PASSWORD.encode())
    conf = tmp_path / "server.properties"
    conf.write_text(
        f"ssl.keystore.location={certs.server_pem}\n"
        f"listener.name.secure.ssl.keystore.certificate.location={crt}\n"
        f"listener.name.secure.ssl.keystore.key.location={key}\n"
        f"listener.name.secure.ssl.key.password={TLS_KEY_PASSWORD}\n"
        "listener.name.secure.ssl.enabled.protocols=TLSv1.3\n"
    )
    port = free_port()
    log = tmp_path / "skiff.log"
    skiff = start_skiff(
        log,
        "--config",
        str(conf),
        "--redis-url",
        own_redis.url,
        "--listeners",
        f"INTERNAL://127.0.0.1:{port},SECURE://127.0.0.1:0",
        "--listener-security-protocol-map",
        "INTERNAL:SSL,SECURE:SASL_SSL",
        port=port,
    )
    try:
        secure = int(_wait_for(log, r"SECURE://127\.0\.0\.1:(\d+) \(SASL_SSL\)")[1])
        assert TLS_KEY_PASSWORD not in skiff.log()
        context = certs.client_context()
        with _tls_kafka(port, context) as kafka:  # INTERNAL: the broker-wide keystore
            assert serial_of(kafka.sock) == certs.server_serial  # type: ignore[arg-type]
            assert _api_versions_ok(kafka)
        with _tls_kafka(secure, context) as kafka:  # SECURE: its own pair, key decrypted
            assert serial_of(kafka.sock) == secure_serial  # type: ignore[arg-type]
            assert kafka.sock.version() == "TLSv1.3"  # type: ignore[attr-defined]
            assert _api_versions_ok(kafka)  # SASL_SSL: served before authentication
            kafka.send(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
            assert kafka.closed()  # anything else is not
        tls12 = certs.client_context()
        tls12.maximum_version = ssl.TLSVersion.TLSv1_2
        assert _refused(secure, tls12) is not None  # listener.name.secure.ssl.enabled.protocols
        with _tls_kafka(port, tls12) as kafka:  # INTERNAL still takes TLS 1.2
            assert _api_versions_ok(kafka)
    finally:
        stop_process(skiff.proc)


def test_tls_mistakes_are_one_line_and_exit_status_2(tmp_path: Path, certs: TestCerts) -> None:
    crt, key, _ = _split_encrypted_pair(certs, b"right")
    ssl_listener = ["--listeners", "SSL://127.0.0.1:0"]
    for args, says in (
        (ssl_listener, "listener SSL (SSL) needs a server certificate: ssl.keystore.location"),
        (
            [
                *ssl_listener,
                "--ssl-keystore-certificate-location",
                str(crt),
                "--ssl-keystore-key-location",
                str(key),
                "--ssl-key-password",
                "Hunter2x",
            ],
            "cannot use the key and certificate",
        ),
        (
            [
                *ssl_listener,
                "--ssl-keystore-certificate-location",
                str(crt),
                "--ssl-keystore-key-location",
                str(key),
            ],
            "is encrypted: set ssl.key.password",  # not a prompt on the terminal
        ),
        (
            [*ssl_listener, "--ssl-keystore-location", str(tmp_path / "missing.pem")],
            "cannot read",
        ),
        (
            [
                *ssl_listener,
                "--ssl-keystore-location",
                str(certs.server_pem),
                "--ssl-enabled-protocols",
                "TLSv1.1,TLSv1.2",
            ],
            "Skiff serves TLSv1.2 and TLSv1.3 only",
        ),
        (
            [
                *ssl_listener,
                "--ssl-keystore-location",
                str(certs.server_pem),
                "--ssl-principal-mapping-rules",
                "RULE:^CN=(.*)$/$1/X",
            ],
            "invalid ssl.principal.mapping.rules rule",
        ),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "sidecar.cli.main", "serve", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
        lines = proc.stderr.splitlines()
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert says in lines[0], lines[0]
        assert "Hunter2x" not in lines[0]  # no password in the message


# -- in-process: the principal on the connection's ConnectionSecurity -----------------------


class _Recorder(asyncio.Protocol):
    """Stands in for server.KafkaConnection: keeps the security it is given."""

    def __init__(self, done: asyncio.Future[ConnectionSecurity]) -> None:
        self.security = ConnectionSecurity()
        self.done = done

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        self.security = ConnectionSecurity.for_listener("MTLS", "SSL", peer[0])
        asyncio.get_running_loop().call_soon(
            lambda: self.done.done() or self.done.set_result(self.security)
        )


def test_ssl_connection_security_carries_the_mapped_principal(certs: TestCerts) -> None:
    tls = TlsSettings(
        listener="MTLS",
        keystore=certs.server_pem,
        truststore=certs.ca_pem,
        client_auth="requested",
        principal_rules=RULES,
    )
    alice = certs.client("Alice", unit="eng", organization="Acme")

    async def connect(cert: tuple[Path, Path] | None) -> ConnectionSecurity:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[ConnectionSecurity] = loop.create_future()
        server_tls = ServerTls(tls)
        tasks: set[asyncio.Task[None]] = set()
        server = await loop.create_server(
            lambda: TlsAcceptor(server_tls, lambda: _Recorder(done), "SSL", 10.0, tasks),
            "127.0.0.1",
            0,
        )
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=certs.client_context(cert), server_hostname="127.0.0.1"
        )
        try:
            return await asyncio.wait_for(done, 10)
        finally:
            writer.close()
            server.close()

    with_cert = asyncio.run(connect(alice))
    assert (with_cert.listener, with_cert.protocol) == ("MTLS", "SSL")
    assert with_cert.principal == KafkaPrincipal("User", "alice")
    assert asyncio.run(connect(None)).principal == ANONYMOUS  # requested, not given


# -- Kafka's DN formatting and mapping rules ----------------------------------------------------


def test_principal_mapping_rules_as_kafka_applies_them() -> None:
    # Cases of Kafka's SslPrincipalMapperTest.
    mapper = PrincipalMapper(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/U,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
        "DEFAULT"
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "DUKE@SME"
    assert mapper.name("cn=duke,ou=JavaSoft,o=Sun Microsystems") == "duke"
    assert (
        mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    )
    assert PrincipalMapper("RULE:^CN=(.*),OU=(.*)$/$2 $1/").name("CN=a,OU=b") == "b a"
    with pytest.raises(NoMatchingRule):
        PrincipalMapper("RULE:^CN=(.*)$/$1/").name("OU=x")
    for bad in ("RULE:^CN=(.*)$/$1/X", "RULE:^CN=(.*)/$1", "DEFAULT,RULE:("):
        with pytest.raises(ValueError):
            PrincipalMapper(bad)


_JAVA_DN = """
import java.io.FileInputStream;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
public class Dn {
  public static void main(String[] a) throws Exception {
    for (String path : a) {
      X509Certificate c = (X509Certificate) CertificateFactory.getInstance("X.509")
          .generateCertificate(new FileInputStream(path));
      System.out.println(c.getSubjectX500Principal().getName());
    }
  }
}
"""


def test_subject_dn_is_printed_as_java_prints_it(tmp_path: Path) -> None:
    import datetime

    from cryptography import x509 as cx509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    java = subprocess.run(["java", "-version"], capture_output=True)
    if java.returncode != 0:
        pytest.skip("no java")
    key = ec.generate_private_key(ec.SECP256R1())
    subjects = [
        [
            cx509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
            cx509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Inc"),
            cx509.NameAttribute(NameOID.COMMON_NAME, "alice"),
        ],
        [
            cx509.NameAttribute(NameOID.DOMAIN_COMPONENT, "example"),
            cx509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@example.com"),
            cx509.NameAttribute(NameOID.COMMON_NAME, ' lead+trail; "q" <x> '),
        ],
        [
            cx509.NameAttribute(NameOID.SERIAL_NUMBER, "1234"),
            cx509.NameAttribute(NameOID.USER_ID, "u1"),
            cx509.NameAttribute(NameOID.COMMON_NAME, "#hash\\back"),
        ],
    ]
    paths, ders = [], []
    now = datetime.datetime.now(datetime.UTC)
    for i, attrs in enumerate(subjects):
        name = cx509.Name(attrs)
        cert = (
            cx509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(i + 1)
            .not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256())
        )
        from cryptography.hazmat.primitives.serialization import Encoding

        path = tmp_path / f"c{i}.pem"
        path.write_bytes(cert.public_bytes(Encoding.PEM))
        paths.append(str(path))
        ders.append(cert.public_bytes(Encoding.DER))
    source = tmp_path / "Dn.java"
    source.write_text(_JAVA_DN)
    out = subprocess.run(["java", str(source), *paths], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert [distinguished_name(d) for d in ders] == out.stdout.splitlines()
