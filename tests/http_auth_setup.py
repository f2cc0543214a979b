"""A sidecar with HTTP Basic authentication (--http-auth basic over plain HTTP, users
from a PLAIN users file), optionally with the ACL authorizer, on its own Redis; and
the ACLs and credentials tests give it. Shared by test_http_acls.py,
test_http_schema.py and test_console.py."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from conftest import Skiff, start_redis, start_skiff, stop_process


@contextmanager
def basic_auth_skiff(
    tmp: Path, users: dict[str, str], super_users: str | None = None
) -> Iterator[Skiff]:
    """`super_users` given: the ACL authorizer on, those principals (';'-separated)
    super users; User:ANONYMOUS among them lets the PLAINTEXT Kafka listener make ACLs."""
    users_file = tmp / "users"
    users_file.write_text("".join(f"{u}:{p}\n" for u, p in users.items()))
    acls = ("--authorizer-class-name", "standard", "--super-users", super_users)
    redis = start_redis(tmp / "redis")
    try:
        server = start_skiff(
            tmp / "skiff.log",
            "--redis-url",
            redis.url,
            "--http-auth",
            "basic",
            "--http-auth-allow-plaintext",
            "true",
            "--sasl-plain-users-file",
            str(users_file),
            *(acls if super_users is not None else ()),
        )
        try:
            yield server
        finally:
            stop_process(server.proc)
    finally:
        stop_process(redis.proc)


def basic(user: str, password: str) -> dict[str, str]:
    """The Authorization header of HTTP Basic."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def allow(server: Skiff, user: str, kind: ResourceType, name: str, op: AclOperation) -> None:
    """An ALLOW ACL for User:`user` on the literal resource, made through CreateAcls."""
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    binding = AclBinding(
        kind, name, ResourcePatternType.LITERAL, f"User:{user}", "*", op, AclPermissionType.ALLOW
    )
    for future in admin.create_acls([binding]).values():
        future.result(timeout=30)
