#!/usr/bin/env python3
"""What one ACL check costs a sidecar (StandardAuthorizer.authorize, answered from the
in-memory index of sidecar/security/acls/) with --acls ACLs loaded (default 10,000).

    .venv/bin/python bench/acl_check.py [--acls 10000] [--repeat 20] [--number 20000]

The ACL set (acl_set): teams with PREFIXED topic ACLs (ALLOW and a host DENY),
users with LITERAL topic and group ACLs, LITERAL `*` and User:* entries; the checked
topic has a LITERAL, a PREFIXED and a wildcard section on it.
CPU time of this thread, no Redis: the best of --repeat timings of --number calls each (a loaded
machine inflates every figure; the best is the least disturbed).

Two figures: `authorize` as a request makes it (the index remembers the last
decisions, so a client's repeated checks of one topic cost a dict lookup), and the
first check of a (principal, host, operation, resource) (the full Kafka matching:
literal, wildcard and every prefix length). Results are in docs/architecture.md
("ACLs").
"""

from __future__ import annotations

import argparse
import time
import timeit

from sidecar.security.acls.authorizer import StandardAuthorizer
from sidecar.security.acls.index import AclIndex
from sidecar.security.acls.model import AclBinding, Permission
from sidecar.security.authorizer import Operation, PatternType, ResourceType
from sidecar.security.principal import KafkaPrincipal
from sidecar.security.session import ConnectionSecurity

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


WORDS = ("ml", "ads", "infra", "search", "billing", "payments", "analytics", "recommendations")


def acl_set(count: int) -> list[AclBinding]:
    """Per team (a word and a number: prefixes of 5 to 20 characters) a PREFIXED topic
    ALLOW for its service account and a DENY from one host; per user a LITERAL topic
    ALLOW of READ and WRITE and a group ALLOW; plus LITERAL `*` and User:* entries."""
    out: list[AclBinding] = [
        AclBinding(TOPIC, "*", LITERAL, "User:auditor", "*", Operation.DESCRIBE, ALLOW),
        AclBinding(GROUP, "*", LITERAL, "User:*", "10.9.9.9", Operation.ALL, DENY),
    ]
    teams = max(count // 40, 1)
    for t in range(teams):
        prefix = f"{WORDS[t % len(WORDS)]}-{t}."
        out += [
            AclBinding(TOPIC, prefix, PREFIXED, f"User:team-{t}", "*", Operation.ALL, ALLOW),
            AclBinding(TOPIC, prefix, PREFIXED, "User:*", "10.0.0.9", Operation.WRITE, DENY),
        ]
    user = 0
    while len(out) < count:
        t = user % teams
        topic = f"{WORDS[t % len(WORDS)]}-{t}.events-{user}"
        who = f"User:svc-{user}"
        out += [
            AclBinding(TOPIC, topic, LITERAL, who, "*", Operation.READ, ALLOW),
            AclBinding(TOPIC, topic, LITERAL, who, "*", Operation.WRITE, ALLOW),
            AclBinding(GROUP, f"app-{user}", LITERAL, who, "*", Operation.READ, ALLOW),
        ]
        user += 1
    return out[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--acls", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--number", type=int, default=20_000)
    args = parser.parse_args()
    acls = acl_set(args.acls)
    authorizer = StandardAuthorizer(None, ("User:admin",))  # type: ignore[arg-type]
    authorizer.index = AclIndex(acls)
    user = 1234
    t = user % max(args.acls // 40, 1)
    topic = f"{WORDS[t % len(WORDS)]}-{t}.events-{user}"
    security = ConnectionSecurity(
        peer_host="10.0.0.1", principal=KafkaPrincipal("User", f"svc-{user}")
    )
    assert authorizer.authorize(security, Operation.WRITE, TOPIC, topic)
    assert not authorizer.authorize(security, Operation.DELETE, TOPIC, topic)

    def best_us(stmt: object) -> float:
        # CPU time of this thread: on a loaded machine wall time counts the waits for a core
        times = timeit.repeat(
            stmt,  # type: ignore[arg-type]
            number=args.number,
            repeat=args.repeat,
            timer=time.thread_time,
        )
        return min(times) / args.number * 1e6

    remembered = best_us(lambda: authorizer.authorize(security, Operation.WRITE, TOPIC, topic))
    index = authorizer.index
    principal = str(security.principal)

    def first_check() -> None:
        # what authorize does on a decision it does not remember
        who = security.principal
        f"{who.type}:{who.name}"
        index._decide(principal, "10.0.0.1", 4, 2, topic)  # WRITE, TOPIC

    full = best_us(first_check)
    probe = {("User:x", "10.0.0.1", 4, 2, topic): True}
    baseline = best_us(lambda: probe.get(("User:x", "10.0.0.1", 4, 2, topic)))
    print(f"ACLs loaded: {len(index)} (topic name {len(topic)} characters)")
    print(f"authorize, as a request makes it (decision remembered): {remembered:.2f} µs")
    print(f"first check of a principal/resource/operation (full match): {full:.2f} µs")
    print(f"(this machine now: one call doing one dict lookup takes {baseline:.2f} µs)")


if __name__ == "__main__":
    main()
