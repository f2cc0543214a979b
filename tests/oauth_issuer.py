"""A small identity provider for OAUTHBEARER tests: real RSA/EC keys, JWTs signed with
them, their JWKS as a file, and an HTTP server publishing the JWKS and an OAuth token
endpoint (client_credentials, as Kafka's OAuthBearerLoginCallbackHandler calls it)."""

from __future__ import annotations

import http.server
import json
import threading
import time
from pathlib import Path
from typing import Any

import jwt
import known_secrets
from cryptography.hazmat.primitives.asymmetric import ec, rsa

ISSUER = "https://idp.example/"
AUDIENCE = "skiff"


class Signer:
    """A private key and its public JWK, as an identity provider holds them."""

    def __init__(self, kid: str, kind: str = "RSA") -> None:
        self.kid = kid
        if kind == "RSA":
            self.key: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self.alg = "RS256"
            jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        else:
            self.key = ec.generate_private_key(ec.SECP256R1())
            self.alg = "ES256"
            jwk = jwt.algorithms.ECAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        self.jwk = {**jwk, "kid": kid, "use": "sig", "alg": self.alg}

    def token(self, sub: str = "alice", lifetime_s: float = 300, **claims: Any) -> str:
        """A signed JWT; a claim given as None is left out."""
        now = int(time.time())
        body = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + lifetime_s}
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        token = jwt.encode(body, self.key, algorithm=self.alg, headers={"kid": self.kid})
        return known_secrets.register_jwt(f"JWT of {sub} signed by {self.kid}", token)


def write_jwks(path: Path, *signers: Signer) -> str:
    """Write the signers' public keys as a JWKS file; return its file: URL."""
    path.write_text(json.dumps({"keys": [s.jwk for s in signers]}))
    return path.as_uri()


class IdentityProvider:
    """GET /jwks.json: the JWKS (counting fetches; `gate` holds each answer until set;
    the first `failures` GETs get 503, and every GET's monotonic time is in `attempts`).
    POST /token: {"access_token": token_for(), "token_type": "Bearer", ...}."""

    def __init__(self, *signers: Signer, failures: int = 0) -> None:
        self.document = json.dumps({"keys": [s.jwk for s in signers]}).encode()
        self.failures = failures
        self.attempts: list[float] = []
        self.fetches = 0
        self.token_requests = 0
        self.gate = threading.Event()
        self.gate.set()
        self.token_for = lambda: signers[0].token("java-client")
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                outer.gate.wait(30)
                outer.attempts.append(time.monotonic())
                if len(outer.attempts) <= outer.failures:
                    self.send_error(503, "identity provider starting")
                    return
                outer.fetches += 1
                self._answer(outer.document)

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.token_requests += 1
                token = outer.token_for()
                body = {"access_token": token, "token_type": "Bearer", "expires_in": 300}
                self._answer(json.dumps(body).encode())

            def _answer(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url = f"{base}/jwks.json"
        self.token_url = f"{base}/token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()
