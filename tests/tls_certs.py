"""Test certificates made with trustme, written as PEM files in a test's tmp dir (never
committed): a CA, the sidecar's server certificate for 127.0.0.1/localhost, and client
certificates for mTLS.

    certs = TestCerts(tmp_path)
    certs.server_pem        # key + chain: --ssl-keystore-location
    certs.ca_pem            # the CA bundle: clients' trust, --ssl-truststore-location
    cert, key = certs.client("alice", unit="eng")   # client certificate and key files
"""

from __future__ import annotations

import datetime
import os
import ssl
from pathlib import Path

import trustme
from cryptography import x509


class TestCerts:
    __test__ = False  # not a pytest class

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca = trustme.CA(organization_name="Skiff test CA")
        self.ca_pem = self.dir / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_pem))
        self.server_pem = self.dir / "server.pem"
        self.server_serial = self.write_server(self.server_pem)

    def write_server(self, path: Path, ca: trustme.CA | None = None) -> int:
        """A new server certificate (key + chain in one PEM) at `path`, replaced
        atomically as cert-manager's Secret update is; returns its serial number."""
        leaf = (ca or self.ca).issue_cert("127.0.0.1", "localhost", common_name="skiff")
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as out:
            out.write(leaf.private_key_pem.bytes())
            for pem in leaf.cert_chain_pems:
                out.write(pem.bytes())
        os.replace(tmp, path)
        return x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes()).serial_number

    def client(
        self,
        name: str,
        unit: str | None = None,
        organization: str | None = None,
        ca: trustme.CA | None = None,
        expired: bool = False,
    ) -> tuple[Path, Path]:
        """A client certificate with subject CN=name[,OU=unit][,O=organization]."""
        now = datetime.datetime.now(datetime.UTC)
        leaf = (ca or self.ca).issue_cert(
            f"{name}.clients.example",
            common_name=name,
            organization_unit_name=unit,
            organization_name=organization,
            not_before=now - datetime.timedelta(days=2) if expired else None,
            not_after=now - datetime.timedelta(days=1) if expired else None,
        )
        stem = f"client-{name}-{unit}-{organization}-{expired}-{id(ca)}"
        cert, key = self.dir / f"{stem}.crt", self.dir / f"{stem}.key"
        leaf.cert_chain_pems[0].write_to_path(str(cert))
        leaf.private_key_pem.write_to_path(str(key))
        return cert, key

    def client_context(self, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
        """What a Python client trusts (the test CA), with a client certificate."""
        context = ssl.create_default_context(cafile=str(self.ca_pem))
        if cert is not None:
            context.load_cert_chain(str(cert[0]), str(cert[1]))
        return context


def serial_of(sock: ssl.SSLSocket) -> int:
    """The serial number of the certificate the server presented."""
    der = sock.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number
