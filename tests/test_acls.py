"""ACLs: Kafka's StandardAuthorizer decisions (the matcher, table-driven), the Redis
store every sidecar shares (a real redis-server), and CreateAcls/DescribeAcls/DeleteAcls
between two real sidecars over TCP."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, RedisServer, start_redis, start_skiff, stop_process
from rawkafka import RawKafka
from redis_cluster_harness import start_redis_cluster

from sidecar.security.acls.authorizer import StandardAuthorizer
from sidecar.security.acls.index import AclIndex
from sidecar.security.acls.model import AclBinding, AclFilter, Permission
from sidecar.security.authorizer import Operation as Op
from sidecar.security.authorizer import PatternType, ResourceType
from sidecar.security.principal import KafkaPrincipal
from sidecar.security.session import ConnectionSecurity
from sidecar.storage import keys, resilience, scripts
from sidecar.storage.acl_store import AclStore
from sidecar.storage.connection import client_for

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
CREATE_ACLS, DESCRIBE_ACLS, DELETE_ACLS = 30, 29, 31
NONE, CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST, SECURITY_DISABLED = 0, 31, 42, 54
POLICY_VIOLATION = 44


def acl(
    name: str,
    op: Op,
    perm: Permission = ALLOW,
    principal: str = "User:alice",
    host: str = "*",
    pattern: PatternType = LIT,
    rtype: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def who(name: str = "alice", host: str = "10.0.0.1") -> ConnectionSecurity:
    return ConnectionSecurity(peer_host=host, principal=KafkaPrincipal("User", name))


def authorizer(
    acls: list[AclBinding], super_users: tuple[str, ...] = (), allow_if_none: bool = False
) -> StandardAuthorizer:
    a = StandardAuthorizer(None, super_users, allow_if_none)  # type: ignore[arg-type]
    a.index = AclIndex(acls)
    return a


# (ACLs, allow.everyone.if.no.acl.found, principal, host, operation, type, name, expected)
Case = tuple[list[AclBinding], bool, str, str, Op, ResourceType, str, bool]
CASES: dict[str, Case] = {
    "no ACL, default deny": ([], False, "alice", "h", Op.READ, TOPIC, "t", False),
    "no ACL, allow.everyone": ([], True, "alice", "h", Op.READ, TOPIC, "t", True),
    "literal allow": ([acl("t", Op.READ)], False, "alice", "h", Op.READ, TOPIC, "t", True),
    "other principal: ACLs on the resource, none matches": (
        [acl("t", Op.READ)], True, "bob", "h", Op.READ, TOPIC, "t", False,
    ),
    "other operation": ([acl("t", Op.READ)], True, "alice", "h", Op.WRITE, TOPIC, "t", False),
    "other resource has no ACL": (
        [acl("t", Op.READ)], True, "alice", "h", Op.READ, TOPIC, "t2", True,
    ),
    "same name, other type": ([acl("x", Op.READ)], False, "alice", "h", Op.READ, GROUP, "x", False),
    "READ implies DESCRIBE": (
        [acl("t", Op.READ)], False, "alice", "h", Op.DESCRIBE, TOPIC, "t", True,
    ),
    "WRITE implies DESCRIBE": (
        [acl("t", Op.WRITE)], False, "alice", "h", Op.DESCRIBE, TOPIC, "t", True,
    ),
    "DELETE implies DESCRIBE": (
        [acl("t", Op.DELETE)], False, "alice", "h", Op.DESCRIBE, TOPIC, "t", True,
    ),
    "ALTER implies DESCRIBE": (
        [acl("t", Op.ALTER)], False, "alice", "h", Op.DESCRIBE, TOPIC, "t", True,
    ),
    "CREATE does not imply DESCRIBE": (
        [acl("t", Op.CREATE)], False, "alice", "h", Op.DESCRIBE, TOPIC, "t", False,
    ),
    "ALTER_CONFIGS implies DESCRIBE_CONFIGS": (
        [acl("t", Op.ALTER_CONFIGS)], False, "alice", "h", Op.DESCRIBE_CONFIGS, TOPIC, "t", True,
    ),
    "ALTER does not imply DESCRIBE_CONFIGS": (
        [acl("t", Op.ALTER)], False, "alice", "h", Op.DESCRIBE_CONFIGS, TOPIC, "t", False,
    ),
    "DESCRIBE does not imply READ": (
        [acl("t", Op.DESCRIBE)], False, "alice", "h", Op.READ, TOPIC, "t", False,
    ),
    "ALL allows every operation": (
        [acl("t", Op.ALL)], False, "alice", "h", Op.ALTER_CONFIGS, TOPIC, "t", True,
    ),
    "DENY wins over ALLOW": (
        [acl("t", Op.ALL, principal="User:*"), acl("t", Op.WRITE, DENY)],
        False, "alice", "h", Op.WRITE, TOPIC, "t", False,
    ),
    "DENY of WRITE leaves READ": (
        [acl("t", Op.ALL, principal="User:*"), acl("t", Op.WRITE, DENY)],
        False, "alice", "h", Op.READ, TOPIC, "t", True,
    ),
    "DENY of READ does not deny DESCRIBE": (
        [acl("t", Op.DESCRIBE), acl("t", Op.READ, DENY)],
        False, "alice", "h", Op.DESCRIBE, TOPIC, "t", True,
    ),
    "DENY ALL denies DESCRIBE": (
        [acl("t", Op.DESCRIBE), acl("t", Op.ALL, DENY)],
        False, "alice", "h", Op.DESCRIBE, TOPIC, "t", False,
    ),
    "DENY on a prefix beats a literal ALLOW": (
        [acl("pay", Op.READ, DENY, pattern=PRE), acl("payments", Op.READ)],
        False, "alice", "h", Op.READ, TOPIC, "payments", False,
    ),
    "DENY for the wildcard principal": (
        [acl("t", Op.READ), acl("t", Op.READ, DENY, principal="User:*")],
        False, "alice", "h", Op.READ, TOPIC, "t", False,
    ),
    "prefixed allow": (
        [acl("pay", Op.READ, pattern=PRE)], False, "alice", "h", Op.READ, TOPIC, "payments", True,
    ),
    "prefixed: the prefix itself": (
        [acl("pay", Op.READ, pattern=PRE)], False, "alice", "h", Op.READ, TOPIC, "pay", True,
    ),
    "prefixed: a shorter name is not on it": (
        [acl("pay", Op.READ, pattern=PRE)], True, "alice", "h", Op.READ, TOPIC, "pa", True,
    ),
    "literal is not a prefix": (
        [acl("pay", Op.READ)], False, "alice", "h", Op.READ, TOPIC, "payments", False,
    ),
    "literal * matches every name of its type": (
        [acl("*", Op.READ)], False, "alice", "h", Op.READ, TOPIC, "anything", True,
    ),
    "literal * is on every resource of its type": (
        [acl("*", Op.READ)], True, "bob", "h", Op.READ, TOPIC, "anything", False,
    ),
    "prefixed * is a plain prefix": (
        [acl("*", Op.READ, pattern=PRE)], False, "alice", "h", Op.READ, TOPIC, "anything", False,
    ),
    "User:* matches anyone": (
        [acl("t", Op.READ, principal="User:*")], False, "bob", "h", Op.READ, TOPIC, "t", True,
    ),
    "host matches": (
        [acl("t", Op.READ, host="10.0.0.1")], False, "alice", "10.0.0.1", Op.READ, TOPIC, "t", True,
    ),
    "host differs": (
        [acl("t", Op.READ, host="10.0.0.1")], True, "alice", "10.0.0.2", Op.READ, TOPIC, "t", False,
    ),
    "DENY from one host": (
        [acl("t", Op.READ, principal="User:*"), acl("t", Op.READ, DENY, host="10.0.0.9")],
        False, "alice", "10.0.0.9", Op.READ, TOPIC, "t", False,
    ),
    "DENY from one host, other host allowed": (
        [acl("t", Op.READ, principal="User:*"), acl("t", Op.READ, DENY, host="10.0.0.9")],
        False, "alice", "10.0.0.8", Op.READ, TOPIC, "t", True,
    ),
    "principal type matters": (
        [acl("t", Op.READ, principal="Group:alice")],
        False, "alice", "h", Op.READ, TOPIC, "t", False,
    ),
    "cluster": (
        [acl("kafka-cluster", Op.ALTER, rtype=CLUSTER)],
        False, "alice", "h", Op.ALTER, CLUSTER, "kafka-cluster", True,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_standard_authorizer_semantics(case: str) -> None:
    acls, allow_if_none, name, host, op, rtype, resource, expected = CASES[case]
    a = authorizer(acls, allow_if_none=allow_if_none)
    assert a.authorize(who(name, host), op, rtype, resource) is expected
    assert a.authorize(who(name, host), op, rtype, resource) is expected  # remembered


def test_prefixed_acls_found_among_nested_and_sibling_prefixes() -> None:
    """The index finds a name's prefixes by bisection and parent links: every prefix
    of the name (nested ones, ones sorting between siblings) is found, no other."""
    prefixes = ["a", "ab", "abc", "abd", "abda", "ac", "b", "b-", "b-x", "ba", "", "ab-"]
    acls = [acl(p, Op.ALL, principal=f"User:{p}", pattern=PRE) for p in prefixes]
    a = authorizer(acls + [acl("abda", Op.WRITE, DENY, principal="User:*", pattern=PRE)])
    names = ["a", "ab", "abc", "abca", "abd", "abdz", "abdaa", "ab-", "ab-q", "aa", "ac", "ad"]
    names += ["b", "b-", "b-y", "b-xx", "ba", "bz", "c", "", "abz", "abb"]
    for name in names:
        for p in prefixes:
            allowed = a.authorize(who(p), Op.WRITE, TOPIC, name)
            assert allowed is (name.startswith(p) and not name.startswith("abda")), (name, p)
        assert a.authorize(who("nobody"), Op.READ, TOPIC, name) is False  # ACLs on each


def test_super_users_bypass_every_acl() -> None:
    a = authorizer([acl("t", Op.ALL, DENY, principal="User:*")], super_users=("User:admin",))
    assert a.authorize(who("admin"), Op.DELETE, TOPIC, "t")
    assert not a.authorize(who("alice"), Op.DELETE, TOPIC, "t")


def test_authorized_operations_bitfield() -> None:
    a = authorizer([acl("g", Op.READ, rtype=GROUP)])
    bits = a.authorized_operations(who(), GROUP, "g")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)
    a = authorizer([], allow_if_none=True)
    assert a.authorized_operations(who(), GROUP, "g") == sum(
        1 << op for op in (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
    )


def test_filters_match_as_kafkas() -> None:
    literal, wildcard = acl("payments", Op.READ), acl("*", Op.READ)
    prefixed = acl("pay", Op.WRITE, pattern=PRE)
    every = [literal, wildcard, prefixed]

    def matching(**kw: object) -> list[AclBinding]:
        f = dict(
            resource_type=ResourceType.ANY, name=None, pattern_type=PatternType.ANY,
            principal=None, host=None, operation=Op.ANY, permission=Permission.ANY,
        )  # fmt: skip
        f.update(kw)
        return [b for b in every if AclFilter(**f).matches(b)]  # type: ignore[arg-type]

    assert matching() == every
    assert matching(name="payments") == [literal]  # ANY: exact names only
    assert matching(name="payments", pattern_type=PatternType.MATCH) == every
    assert matching(name="pay", pattern_type=PRE) == [prefixed]
    assert matching(pattern_type=LIT) == [literal, wildcard]
    assert matching(operation=Op.WRITE) == [prefixed]
    assert matching(principal="User:bob") == []
    assert matching(resource_type=GROUP) == []


# -- the store: a real Redis --------------------------------------------------------------


async def _until(check: Callable[[], bool], seconds: float) -> float:
    """How long `check` took to hold; fails after `seconds`."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < seconds, "not within the deadline"
        await asyncio.sleep(0.01)
    return time.monotonic() - start


@pytest.fixture(params=["redis", "cluster"])
def acl_redis(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """One redis-server, or a 3-primary Redis Cluster (the subscription is on one node,
    the change on the node owning {acls})."""
    if request.param == "redis":
        server = start_redis(tmp_path / "redis")
        yield server
        stop_process(server.proc)
    else:
        cluster = start_redis_cluster(tmp_path / "cluster", nodes=3, replicas=0)
        yield cluster
        cluster.stop()


def test_store_shared_by_two_authorizers(acl_redis: Any) -> None:
    url = acl_redis.url

    async def scenario() -> None:
        resilience.configure(2000, 8000, 16)
        redis = client_for(url, 2.0)
        await scripts.ACLS.load(redis)  # as RedisStore.connect loads every script
        first = StandardAuthorizer(AclStore(redis))
        second = StandardAuthorizer(AclStore(client_for(url, 2.0)), refresh_s=0.5)
        await first.start()
        await second.start()
        try:
            binding = acl("t", Op.READ)
            await first.create([binding, binding])
            # The sidecar that created it sees it before it answers...
            assert first.authorize(who(), Op.READ, TOPIC, "t")
            # ...another one as soon as the announcement arrives.
            await _until(lambda: second.authorize(who(), Op.READ, TOPIC, "t"), 2.0)
            assert first.index.bindings == second.index.bindings == (binding,)
            await first.create([binding])  # again: nothing changes
            assert len(first.index) == 1

            # A change whose announcement is missed (written without PUBLISH) is still
            # picked up by the periodic version check.
            other = acl("u", Op.WRITE)
            raw = acl_redis.client()
            raw.hset(keys.ACLS, other.encode(), "1")
            raw.incr(keys.ACLS_VERSION)
            await _until(lambda: second.authorize(who(), Op.WRITE, TOPIC, "u"), 3.0)

            everything = AclFilter(
                ResourceType.ANY, None, PatternType.ANY, None, None, Op.ANY, Permission.ANY
            )
            only_t = AclFilter(TOPIC, "t", LIT, None, None, Op.ANY, Permission.ANY)
            assert await second.delete([only_t, only_t]) == [[binding], [binding]]
            assert await second.delete([only_t]) == [[]]
            await _until(lambda: not first.authorize(who(), Op.READ, TOPIC, "t"), 2.0)
            assert await first.delete([everything]) == [[other]]
            assert raw.hlen(keys.ACLS) == 0
        finally:
            await first.stop()
            await second.stop()

    asyncio.run(scenario())


# -- the ACL APIs between two sidecars -------------------------------------------------------


def _describe_all(kafka: RawKafka, version: int = 3) -> object:
    return kafka.request(
        DESCRIBE_ACLS,
        version,
        {
            "resource_type_filter": 1,
            "resource_name_filter": None,
            "pattern_type_filter": 1,
            "principal_filter": None,
            "host_filter": None,
            "operation": 1,
            "permission_type": 1,
        },
    )


def _creation(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "resource_type": 4,
        "resource_name": "kafka-cluster",
        "resource_pattern_type": 3,
        "principal": "User:ANONYMOUS",
        "host": "*",
        "operation": 8,  # DESCRIBE
        "permission_type": 3,  # ALLOW
    }
    return {**base, **kw}


def test_acl_created_on_one_sidecar_is_enforced_by_another(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """Sidecar A makes ANONYMOUS a super user (so it may create ACLs), sidecar B does not:
    B refuses DescribeAcls (DESCRIBE on the CLUSTER) until an ACL created through A
    allows it, and answers it within the deadline after."""
    common = ["--redis-url", own_redis.url, "--authorizer-class-name", "standard"]
    a = start_skiff(tmp_path / "a.log", *common, "--super-users", "User:ANONYMOUS")
    b = start_skiff(tmp_path / "b.log", *common)
    plain = start_skiff(tmp_path / "plain.log", "--redis-url", own_redis.url)
    try:
        with (
            RawKafka("127.0.0.1", a.port) as ka,
            RawKafka("127.0.0.1", b.port) as kb,
            RawKafka("127.0.0.1", plain.port) as kp,
        ):
            denied = _describe_all(kb)
            assert denied.error_code == CLUSTER_AUTHORIZATION_FAILED
            assert denied.resources == ()
            refused = kb.request(CREATE_ACLS, 3, {"creations": [_creation()]})
            assert [r.error_code for r in refused.results] == [CLUSTER_AUTHORIZATION_FAILED]
            # No authorizer configured: SECURITY_DISABLED, as Kafka answers.
            assert _describe_all(kp).error_code == SECURITY_DISABLED
            off = kp.request(CREATE_ACLS, 3, {"creations": [_creation()]})
            assert [r.error_code for r in off.results] == [SECURITY_DISABLED]

            bad = [
                _creation(resource_name="other-cluster"),
                _creation(resource_type=2, resource_name=""),
                _creation(resource_type=1),
                _creation(operation=1),
                _creation(principal="nobody"),
            ]
            created = ka.request(CREATE_ACLS, 3, {"creations": [_creation(), *bad]})
            codes = [r.error_code for r in created.results]
            assert codes == [NONE] + [INVALID_REQUEST] * len(bad)
            assert created.results[1].error_message == (
                "The only valid name for the CLUSTER resource is kafka-cluster"
            )
            assert created.results[3].error_message == "Invalid resourceType ANY"

            start = time.monotonic()
            while (answer := _describe_all(kb)).error_code != NONE:
                assert time.monotonic() - start < 3.0, "B never saw the ACL"
                time.sleep(0.02)
            [resource] = answer.resources
            assert (resource.resource_type, resource.resource_name, resource.pattern_type) == (
                4,
                "kafka-cluster",
                3,
            )
            assert [
                (x.principal, x.host, x.operation, x.permission_type) for x in resource.acls
            ] == [("User:ANONYMOUS", "*", 8, 3)]
            # DESCRIBE does not allow ALTER: B still refuses DeleteAcls.
            f = {
                "resource_type_filter": 4,
                "resource_name_filter": None,
                "pattern_type_filter": 1,
                "principal_filter": None,
                "host_filter": None,
                "operation": 1,
                "permission_type": 1,
            }
            no = kb.request(DELETE_ACLS, 3, {"filters": [f]})
            assert [r.error_code for r in no.filter_results] == [CLUSTER_AUTHORIZATION_FAILED]
            unknown = {**f, "resource_type_filter": 99}
            gone = ka.request(DELETE_ACLS, 3, {"filters": [f, unknown]})
            assert [r.error_code for r in gone.filter_results] == [NONE, INVALID_REQUEST]
            assert [m.principal for m in gone.filter_results[0].matching_acls] == ["User:ANONYMOUS"]
            start = time.monotonic()
            while _describe_all(kb).error_code == NONE:
                assert time.monotonic() - start < 3.0, "B never saw the deletion"
                time.sleep(0.02)
            # Kafka's controller bound: more than 10,000 new ACLs change nothing.
            many = [_creation(resource_type=2, resource_name=f"t{i}") for i in range(10_001)]
            big = ka.request(CREATE_ACLS, 3, {"creations": many}, timeout=60)
            assert {r.error_code for r in big.results} == {POLICY_VIOLATION}
            assert _describe_all(ka).resources == ()
        # UNKNOWN (0) fails Kafka's request parsing: the connection is closed.
        with RawKafka("127.0.0.1", a.port) as ka:
            ka.send(CREATE_ACLS, 3, {"creations": [_creation(operation=0)]})
            assert ka.closed()
        assert a.alive() and b.alive()
    finally:
        for s in (a, b, plain):
            stop_process(s.proc)


def test_bad_authorizer_settings_are_one_line_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n")
    for args, says in (
        (["--authorizer-class-name", "com.example.Mine"], "unknown authorizer"),
        (["--super-users", "User:admin;alice"], "expected a principal as TYPE:NAME"),
        (["--allow-everyone-if-no-acl-found", "perhaps"], "expected true or false"),
        (["--config", str(config)], "unknown authorizer"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "sidecar.cli.main", "serve", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, args
        assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_acls_survive_a_storage_reset(own_redis: RedisServer) -> None:
    """`skiff storage reset --fresh` ends a data loss; ACLs are security settings, not
    data: deleting a DENY would open what it closed (allow.everyone.if.no.acl.found)."""
    raw = own_redis.client()
    deny = acl("t", Op.ALL, DENY, principal="User:*").encode()
    raw.hset(keys.ACLS, deny, "1")
    raw.set(keys.ACLS_VERSION, 7)
    raw.hset(keys.TOPICS, "old", "{}")
    reset = subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", "storage", "reset", "--fresh"]
        + ["--redis-url", own_redis.url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert reset.returncode == 0, reset.stderr
    assert not raw.exists(keys.TOPICS)
    assert raw.hkeys(keys.ACLS) == [deny.encode()] and raw.get(keys.ACLS_VERSION) == b"7"
