"""The ACLs of one moment, indexed for Kafka's StandardAuthorizer decision
(StandardAuthorizerData.findAclRule) with a few dict lookups per check:

- the ACLs "on" a resource are its LITERAL ACLs, the LITERAL `*` ACLs of its type and
  the PREFIXED ACLs whose name starts the resource's name;
- among those, one DENY matching principal (or User:*), host (or *) and operation wins;
- else one matching ALLOW allows (an ALLOW of READ, WRITE, DELETE or ALTER also allows
  DESCRIBE, one of ALTER_CONFIGS also DESCRIBE_CONFIGS; ALL matches every operation);
- else, when no ACL at all is on the resource, the caller's no-ACL rule
  (allow.everyone.if.no.acl.found) decides; otherwise the answer is no.

An index is immutable: a change builds a new one and swaps it in."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from operator import index as plain_int

from sidecar.security.acls.model import WILDCARD, WILDCARD_PRINCIPAL, AclBinding, Permission
from sidecar.security.authorizer import Operation, PatternType, ResourceType

# Plain ints throughout the check: hashing an IntEnum member runs Python code (Enum's
# __hash__), a few times slower than an int's.
IMPLIES_DESCRIBE = frozenset(
    plain_int(op)
    for op in (
        Operation.DESCRIBE,
        Operation.READ,
        Operation.WRITE,
        Operation.DELETE,
        Operation.ALTER,
    )
)
IMPLIES_DESCRIBE_CONFIGS = frozenset(
    plain_int(op) for op in (Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS)
)
_ALL = plain_int(Operation.ALL)
_DESCRIBE = plain_int(Operation.DESCRIBE)
_DESCRIBE_CONFIGS = plain_int(Operation.DESCRIBE_CONFIGS)
# Decisions remembered per index (a new index starts empty); beyond this many the
# memory is dropped and refilled, so a client cycling through names cannot grow it.
DECISIONS_KEPT = 65_536

# An entry as the check reads it: (principal, host, operation code, allow?)
Entry = tuple[str, str, int, bool]


class _TypeIndex:
    """The ACLs of one resource type."""

    __slots__ = ("literal", "prefixed", "prefix_lengths")

    def __init__(self) -> None:
        self.literal: dict[str, tuple[Entry, ...]] = {}
        self.prefixed: dict[str, tuple[Entry, ...]] = {}
        self.prefix_lengths: tuple[int, ...] = ()


class AclIndex:
    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self.bindings: tuple[AclBinding, ...] = tuple(sorted(set(bindings), key=_order))
        literal: dict[int, dict[str, list[Entry]]] = defaultdict(lambda: defaultdict(list))
        prefixed: dict[int, dict[str, list[Entry]]] = defaultdict(lambda: defaultdict(list))
        for acl in self.bindings:
            allow = acl.permission == Permission.ALLOW
            entry = (acl.principal, acl.host, plain_int(acl.operation), allow)
            target = literal if acl.pattern_type == PatternType.LITERAL else prefixed
            target[plain_int(acl.resource_type)][acl.name].append(entry)
        self._types: dict[int, _TypeIndex] = {}
        for rt in set(literal) | set(prefixed):
            index = _TypeIndex()
            index.literal = {n: tuple(e) for n, e in literal.get(rt, {}).items()}
            index.prefixed = {n: tuple(e) for n, e in prefixed.get(rt, {}).items()}
            index.prefix_lengths = tuple(sorted({len(n) for n in index.prefixed}))
            self._types[rt] = index
        self._decisions: dict[tuple[str, str, int, int, str], bool | None] = {}

    def __len__(self) -> int:
        return len(self.bindings)

    def decide(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool | None:
        """True (an ALLOW matches and no DENY), False (a DENY matches, or ACLs are on the
        resource and none allows), None (no ACL is on the resource)."""
        op, rt = plain_int(operation), plain_int(resource_type)
        key = (principal, host, op, rt, name)
        decisions = self._decisions
        try:
            return decisions[key]
        except KeyError:
            pass
        result = self._decide(principal, host, op, rt, name)
        if len(decisions) >= DECISIONS_KEPT:
            decisions.clear()
        decisions[key] = result
        return result

    def _decide(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool | None:
        index = self._types.get(resource_type)
        if index is None:
            return None
        sections: list[tuple[Entry, ...]] = []
        literal = index.literal
        if name in literal:
            sections.append(literal[name])
        if name != WILDCARD and WILDCARD in literal:
            sections.append(literal[WILDCARD])
        prefixed = index.prefixed
        for length in index.prefix_lengths:
            if length > len(name):
                break
            entries = prefixed.get(name[:length])
            if entries is not None:
                sections.append(entries)
        if not sections:
            return None
        allowed = False
        for entries in sections:
            for acl_principal, acl_host, acl_op, allow in entries:
                if acl_principal != principal and acl_principal != WILDCARD_PRINCIPAL:
                    continue
                if acl_host != WILDCARD and acl_host != host:
                    continue
                if acl_op != _ALL and acl_op != operation:
                    if not allow:
                        continue  # a DENY of READ does not deny DESCRIBE
                    if operation == _DESCRIBE:
                        if acl_op not in IMPLIES_DESCRIBE:
                            continue
                    elif operation == _DESCRIBE_CONFIGS:
                        if acl_op not in IMPLIES_DESCRIBE_CONFIGS:
                            continue
                    else:
                        continue
                if not allow:
                    return False  # DENY wins
                allowed = True
        return allowed


def _order(acl: AclBinding) -> tuple[int, str, int, str, str, int, int]:
    """DescribeAcls lists bindings in this order (Kafka's is a hash order; a fixed one
    makes answers repeatable)."""
    return (
        acl.resource_type,
        acl.name,
        acl.pattern_type,
        acl.principal,
        acl.host,
        acl.operation,
        acl.permission,
    )
