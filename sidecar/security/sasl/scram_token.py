"""SCRAM with a delegation token (KIP-48): the client-first message carries the
extension `tokenauth=true` after the nonce, the token id is the user name and the
token's HMAC, in base64, the password; the session acts as the token's owner and ends
when the token expires (KIP-368).

Written out here rather than with scramp: Kafka's extension names are longer than RFC
5802's one-letter attributes, and scramp refuses the message, while the client signs
the message as it sent it (the AuthMessage holds it verbatim). The arithmetic is RFC
5802's; the keys come from the HMAC as Kafka's token cache derives them
(ScramFormatter, 4096 iterations)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

from sidecar.security.delegation_tokens import TokenInfo, TokenStore, now_ms
from sidecar.security.principal import KafkaPrincipal
from sidecar.security.sasl import SaslAuthenticationFailed

ITERATIONS = 4096  # Kafka's ScramMechanism minIterations, which its token cache uses
TOKEN_AUTH = "tokenauth"


def client_first_extensions(message: str) -> dict[str, str]:
    """The key=value attributes after n= and r= in a client-first message."""
    parts = message.split(",")
    return dict(p.split("=", 1) for p in parts[4:] if "=" in p)


def _attributes(text: str, expected: str) -> list[str]:
    parts = text.split(",")
    if len(parts) < len(expected):
        raise ValueError("malformed SCRAM message")
    values = []
    for part, key in zip(parts, expected, strict=False):
        if not part.startswith(key + "="):
            raise ValueError("malformed SCRAM message")
        values.append(part[2:])
    return values


class TokenScram:
    """One SCRAM exchange of a token: first(client-first) -> server-first,
    final(client-final) -> server-final."""

    def __init__(self, mechanism: str, digest: str) -> None:
        self.mechanism = mechanism
        self.digest = digest
        self.token: TokenInfo | None = None
        self._auth_prefix = ""
        self._gs2 = ""
        self._nonce = ""
        self._stored_key = b""
        self._server_key = b""

    def _failed(self) -> SaslAuthenticationFailed:
        return SaslAuthenticationFailed(
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self.mechanism}"
        )

    async def first(self, message: str, store: TokenStore) -> str:
        # gs2-header: "n," or "y," (no channel binding), an optional a=authzid, ","
        first_comma = message.find(",")
        second_comma = message.find(",", first_comma + 1)
        if first_comma != 1 or message[0] not in "ny" or second_comma < 0:
            raise ValueError("malformed SCRAM client-first message")
        self._gs2 = message[: second_comma + 1]
        bare = message[second_comma + 1 :]
        user, client_nonce = _attributes(bare, "nr")
        token_id = user.replace("=2C", ",").replace("=3D", "=")
        authzid = message[first_comma + 1 : second_comma]
        if authzid and authzid != f"a={user}":
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        if not client_nonce:
            raise ValueError("malformed SCRAM client-first message")
        token = await store.by_id(token_id)
        if token is None:
            raise self._failed()
        self.token = token
        salt = os.urandom(16)
        password = base64.b64encode(token.hmac)
        salted = hashlib.pbkdf2_hmac(self.digest, password, salt, ITERATIONS)
        client_key = hmac.digest(salted, b"Client Key", self.digest)
        self._stored_key = hashlib.new(self.digest, client_key).digest()
        self._server_key = hmac.digest(salted, b"Server Key", self.digest)
        self._nonce = client_nonce + base64.b64encode(os.urandom(18)).decode()
        server_first = f"r={self._nonce},s={base64.b64encode(salt).decode()},i={ITERATIONS}"
        self._auth_prefix = f"{bare},{server_first},"
        return server_first

    def final(self, message: str) -> str:
        proof_at = message.rfind(",p=")
        if proof_at < 0:
            raise ValueError("malformed SCRAM client-final message")
        without_proof = message[:proof_at]
        channel, nonce = _attributes(without_proof, "cr")
        try:
            proof = base64.b64decode(message[proof_at + 3 :], validate=True)
        except ValueError:
            raise ValueError("malformed SCRAM client-final message") from None
        if channel != base64.b64encode(self._gs2.encode()).decode() or nonce != self._nonce:
            raise self._failed()
        auth_message = (self._auth_prefix + without_proof).encode()
        signature = hmac.digest(self._stored_key, auth_message, self.digest)
        if len(proof) != len(signature):
            raise self._failed()
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.digest, client_key).digest(), self._stored_key):
            raise self._failed()
        assert self.token is not None
        if self.token.expired(now_ms()):
            raise self._failed()
        server_signature = hmac.digest(self._server_key, auth_message, self.digest)
        return "v=" + base64.b64encode(server_signature).decode()

    @property
    def principal(self) -> KafkaPrincipal | None:
        return None if self.token is None else self.token.owner

    @property
    def lifetime_ms(self) -> int | None:
        return None if self.token is None else self.token.expiry_ms - now_ms()
