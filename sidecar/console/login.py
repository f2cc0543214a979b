"""The console's login form (with --http-auth basic): a browser without credentials is
shown a form rather than the Basic dialog; the password is checked as Basic checks it
(HttpSecurity.check_password) and the browser gets a session cookie for /console only,
signed with a key of this process (HMAC-SHA256 of user and expiry), HttpOnly,
SameSite=Strict, Secure over TLS, valid SESSION_SECONDS. Every other path, and any
request carrying an Authorization header, is authenticated as before
(security/http_auth.py)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import secrets
import time
import urllib.parse
from typing import Any

from aiohttp import web

from sidecar.console.app import esc, page
from sidecar.security.http_auth import InvalidCredentials
from sidecar.security.principal import KafkaPrincipal
from sidecar.storage.resilience import RedisUnavailable

PREFIX = "/console"
LOGIN = PREFIX + "/login"
LOGOUT = PREFIX + "/logout"
COOKIE = "skiff_console"
SESSION_SECONDS = 8 * 3600
MAX_FIELD = 1024  # user name and password lengths accepted by the form

log = logging.getLogger("skiff.http.auth")


def _covers(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


class ConsoleLogin:
    def __init__(self, tls: bool) -> None:
        self.tls = tls
        self._key = secrets.token_bytes(32)

    def _sign(self, user: str, expires: int) -> str:
        name = base64.urlsafe_b64encode(user.encode()).decode()
        mac = hmac.new(self._key, f"{name}.{expires}".encode(), hashlib.sha256).hexdigest()
        return f"{name}.{expires}.{mac}"

    def _session(self, value: str | None) -> KafkaPrincipal | None:
        if not value or value.count(".") != 2:
            return None
        name, expires, mac = value.split(".")
        good = hmac.new(self._key, f"{name}.{expires}".encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(mac, good) or not expires.isdigit():
            return None
        if int(expires) < time.time():
            return None
        try:
            return KafkaPrincipal("User", base64.urlsafe_b64decode(name).decode())
        except (binascii.Error, ValueError):
            return None

    async def admit(self, request: web.Request, security: Any) -> Any:
        """For a request without an Authorization header: a response (the form, the
        login's answer), the principal of a valid session, or None (not the console's:
        authenticate as usual)."""
        if not _covers(request.path):
            return None
        if request.path == LOGIN:
            if request.method == "POST":
                return await self._login(request, security)
            return form(request.query.get("next", PREFIX), "", 200)
        if request.path == LOGOUT:
            answer = web.HTTPSeeOther(LOGIN)
            answer.del_cookie(COOKIE, path=PREFIX)
            return answer
        principal = self._session(request.cookies.get(COOKIE))
        if principal is not None:
            return principal
        # 401 without a Basic challenge, so the browser shows this form, not its dialog
        return form(request.path_qs, "Log in to see the console.", 401)

    async def _login(self, request: web.Request, security: Any) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is not None and urllib.parse.urlsplit(origin).netloc != request.host:
            return form(PREFIX, "The login came from another site.", 403)
        posted = await request.post()
        user, password = str(posted.get("user", "")), str(posted.get("password", ""))
        target = str(posted.get("next", PREFIX))
        if not _covers(target) or target.startswith("//"):
            target = PREFIX  # back into the console only, never to another site
        if not user or len(user) > MAX_FIELD or len(password) > MAX_FIELD:
            return form(target, "Wrong user name or password.", 401)
        try:
            principal = await security.check_password(user, password)
        except InvalidCredentials as exc:
            log.info("console login from %s refused: %s", request.remote, exc)
            return form(target, "Wrong user name or password.", 401)
        except RedisUnavailable as exc:  # SCRAM credentials live in Redis
            return form(target, f"Cannot check the password now: {exc}", 503)
        answer = web.HTTPSeeOther(target)
        answer.set_cookie(
            COOKIE,
            self._sign(principal.name, int(time.time()) + SESSION_SECONDS),
            path=PREFIX,
            max_age=SESSION_SECONDS,
            httponly=True,
            samesite="Strict",
            secure=self.tls,
        )
        return answer


def form(target: str, message: str, status: int) -> web.Response:
    body = (
        f'<p id="login-message">{esc(message)}</p>'
        f'<form method="post" action="{LOGIN}">'
        f'<input type="hidden" name="next" value="{esc(target)}">'
        '<p><label>User <input id="user" name="user" autocomplete="username"></label></p>'
        '<p><label>Password <input id="password" name="password" type="password" '
        'autocomplete="current-password"></label></p>'
        '<button id="login" type="submit">Log in</button></form>'
    )
    return page("Log in", body, status, charts=False)  # the scripts need a login too
