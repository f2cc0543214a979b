"""ACL bindings and filters as Kafka spells them (org.apache.kafka.common.acl): a
resource pattern (type, name, LITERAL or PREFIXED) and an entry (principal, host,
operation, ALLOW or DENY). Codes Kafka does not know map to UNKNOWN, as Kafka's
fromCode does."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from sidecar.security.authorizer import CLUSTER_NAME, Operation, PatternType, ResourceType

WILDCARD = "*"  # a LITERAL resource name matching every name; a host matching every host
WILDCARD_PRINCIPAL = "User:*"


class Permission(IntEnum):
    """Kafka's AclPermissionType codes."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


E = TypeVar("E", bound=IntEnum)


def from_code(enum: type[E], code: int) -> E:
    """Kafka's fromCode: an unknown code is UNKNOWN (0 in every ACL enum)."""
    try:
        return enum(code)
    except ValueError:
        return enum(0)


class InvalidAcl(ValueError):
    """An ACL Kafka refuses with INVALID_REQUEST; the message is Kafka's."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str  # "User:alice", "User:*"
    host: str  # "*" or a client IP address
    operation: Operation
    permission: Permission

    @classmethod
    def from_codes(
        cls,
        resource_type: int,
        name: str,
        pattern_type: int,
        principal: str,
        host: str,
        operation: int,
        permission: int,
    ) -> AclBinding:
        return cls(
            from_code(ResourceType, resource_type),
            name,
            from_code(PatternType, pattern_type),
            principal,
            host,
            from_code(Operation, operation),
            from_code(Permission, permission),
        )

    def validate(self) -> None:
        """Kafka's checks of a new ACL (AclApis.handleCreateAcls, then the controller's
        AclControlManager.validateNewAcl), in Kafka's order; raises InvalidAcl."""
        if self.resource_type == ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        if not self.name:
            raise InvalidAcl("Invalid empty resource name")
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise InvalidAcl(f"Invalid resourceType {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"Invalid patternType {self.pattern_type.name}")
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            raise InvalidAcl(f"Invalid operation {self.operation.name}")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise InvalidAcl(f"Invalid permissionType {self.permission.name}")
        kind, colon, who = self.principal.partition(":")
        if not colon or not kind or not who:
            # Skiff's own check: an ACL whose principal names nobody could never match.
            raise InvalidAcl(
                f"Could not parse principal from `{self.principal}` (expected TYPE:NAME, "
                "e.g. User:alice)"
            )

    def encode(self) -> str:
        """The stored form: one JSON array, the same text for the same binding (so the
        Redis hash holds each binding once, as Kafka keeps a set)."""
        return json.dumps(
            [
                int(self.resource_type),
                self.name,
                int(self.pattern_type),
                self.principal,
                self.host,
                int(self.operation),
                int(self.permission),
            ],
            ensure_ascii=False,
            separators=(",", ":"),
        )

    @classmethod
    def decode(cls, text: str | bytes) -> AclBinding:
        rt, name, pt, principal, host, op, perm = json.loads(text)
        return cls.from_codes(rt, name, pt, principal, host, op, perm)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's AclBindingFilter: None and ANY match everything; pattern type MATCH
    matches the literal name, the literal wildcard and every prefix of the name."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    @classmethod
    def from_codes(
        cls,
        resource_type: int,
        name: str | None,
        pattern_type: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission: int,
    ) -> AclFilter:
        return cls(
            from_code(ResourceType, resource_type),
            name,
            from_code(PatternType, pattern_type),
            principal,
            host,
            from_code(Operation, operation),
            from_code(Permission, permission),
        )

    def unknown(self) -> str | None:
        """Kafka's validateFilter (DeleteAcls): why the filter is refused, or None."""
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            return "Unknown patternFilter."
        if self.operation == Operation.UNKNOWN or self.permission == Permission.UNKNOWN:
            return "Unknown entryFilter."
        return None

    def matches(self, acl: AclBinding) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: AclBinding) -> bool:
        # ResourcePatternFilter.matches
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != acl.pattern_type:
            return False
        if self.name is None:
            return True
        if pt == PatternType.ANY or pt == acl.pattern_type:
            return self.name == acl.name
        if acl.pattern_type == PatternType.LITERAL:
            return self.name == acl.name or acl.name == WILDCARD
        return self.name.startswith(acl.name)  # PREFIXED

    def _matches_entry(self, acl: AclBinding) -> bool:
        # AccessControlEntryFilter.matches
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != Operation.ANY and self.operation != acl.operation:
            return False
        return self.permission == Permission.ANY or self.permission == acl.permission
