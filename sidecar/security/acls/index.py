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

from bisect import bisect_right
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

# An entry as the check reads it: (host, operation code, allow?). A section (the
# entries of one resource pattern) is split by principal, so a check reads only the
# entries of its principal and of User:* however many principals the pattern names.
Entry = tuple[str, int, bool]
Section = tuple[dict[str, tuple[Entry, ...]], tuple[Entry, ...]]  # (by principal, User:*)


def _section(acls: list[tuple[str, Entry]]) -> Section:
    by_principal: dict[str, list[Entry]] = defaultdict(list)
    for principal, entry in acls:
        by_principal[principal].append(entry)
    wildcard = tuple(by_principal.pop(WILDCARD_PRINCIPAL, ()))
    return {p: tuple(e) for p, e in by_principal.items()}, wildcard


class _TypeIndex:
    """The ACLs of one resource type. The PREFIXED names are kept sorted with, for each,
    the next shorter one that starts it (its parent): the longest prefix of a resource
    name is found with one bisection, the others by following parents, so a check costs
    the same however many prefix lengths are in use."""

    __slots__ = ("literal", "wildcard", "prefixes", "prefix_sections", "prefix_parents")

    def __init__(
        self,
        literal: dict[str, list[tuple[str, Entry]]],
        prefixed: dict[str, list[tuple[str, Entry]]],
    ) -> None:
        self.literal = {n: _section(e) for n, e in literal.items()}
        self.wildcard = self.literal.get(WILDCARD)
        self.prefixes = sorted(prefixed)
        self.prefix_sections = [_section(prefixed[n]) for n in self.prefixes]
        parents: list[int] = []
        for i, name in enumerate(self.prefixes):
            # Sorted order puts a name's prefixes before it; the nearest one is found
            # by walking back along the parents of the name just before it.
            j = i - 1
            while j >= 0 and not name.startswith(self.prefixes[j]):
                j = parents[j]
            parents.append(j)
        self.prefix_parents = parents


class AclIndex:
    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self.bindings: tuple[AclBinding, ...] = tuple(sorted(set(bindings), key=_order))
        literal: dict[int, dict[str, list[tuple[str, Entry]]]] = defaultdict(
            lambda: defaultdict(list)
        )
        prefixed: dict[int, dict[str, list[tuple[str, Entry]]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for acl in self.bindings:
            allow = acl.permission == Permission.ALLOW
            entry = (acl.host, plain_int(acl.operation), allow)
            target = literal if acl.pattern_type == PatternType.LITERAL else prefixed
            target[plain_int(acl.resource_type)][acl.name].append((acl.principal, entry))
        self._types: dict[int, _TypeIndex] = {
            rt: _TypeIndex(literal.get(rt, {}), prefixed.get(rt, {}))
            for rt in set(literal) | set(prefixed)
        }
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
        sections: list[Section] = []
        section = index.literal.get(name)
        if section is not None:
            sections.append(section)
        if index.wildcard is not None and name != WILDCARD:
            sections.append(index.wildcard)
        prefixes = index.prefixes
        if prefixes:
            # the greatest name <= `name`: `name`'s longest prefix, or a sibling whose
            # parents hold the prefixes it shares with `name`
            i = bisect_right(prefixes, name) - 1
            parents = index.prefix_parents
            while i >= 0 and not name.startswith(prefixes[i]):
                i = parents[i]
            if i >= 0:
                prefix_sections = index.prefix_sections
                while i >= 0:  # every parent of a prefix of `name` is one too
                    sections.append(prefix_sections[i])
                    i = parents[i]
        if not sections:
            return None
        allowed = False
        for by_principal, anyone in sections:
            mine = by_principal.get(principal)
            for entries in (mine, anyone) if mine else (anyone,):
                for acl_host, acl_op, allow in entries:
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
