"""The principal of an SSL client: its certificate's subject DN as Java prints it
(X500Principal.getName(), RFC 2253), mapped by Kafka's `ssl.principal.mapping.rules`
(SslPrincipalMapper: `RULE:pattern/replacement/[LU]` and `DEFAULT`, first match wins).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography import x509

# Java's RFC 2253 keywords by OID; any other attribute type prints as OID=#<hex of its
# DER value>.
_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
_UTF8_STRING = 12
_WIDE = {30: "utf-16-be", 28: "utf-32-be"}  # BMPString, UniversalString


class NoMatchingRule(ValueError):
    """No ssl.principal.mapping.rules rule applies to a DN: Kafka fails the
    authentication."""


def _escape(value: str) -> str:
    """RFC 2253 escaping of an attribute value, as Java writes it."""
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(raw)]) + raw


def _hex_value(attribute: x509.NameAttribute) -> str:
    """#<DER of the value> for an attribute type Java has no keyword for."""
    value = attribute.value
    data = value if isinstance(value, bytes) else None
    # cryptography keeps the value's ASN.1 string type only privately; UTF8String if absent.
    kind = getattr(getattr(attribute, "_type", None), "value", _UTF8_STRING)
    if data is None:
        data = str(value).encode(_WIDE.get(kind, "utf-8"))
    return "#" + (bytes([kind]) + _der_length(len(data)) + data).hex()


def distinguished_name(certificate_der: bytes) -> str:
    """The certificate's subject as Kafka sees it: RDNs most specific first, `,` between
    them, `+` inside a multi-valued one, keywords as Java names them."""
    from cryptography import x509  # only once a client presents a certificate

    subject = x509.load_der_x509_certificate(certificate_der).subject
    rdns = []
    for rdn in reversed(subject.rdns):
        parts = []
        for attribute in rdn:
            keyword = _KEYWORDS.get(attribute.oid.dotted_string)
            if keyword is None:
                parts.append(f"{attribute.oid.dotted_string}={_hex_value(attribute)}")
            else:
                parts.append(f"{keyword}={_escape(str(attribute.value))}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


# Kafka's rule grammar (SslPrincipalMapper.RULE_PATTERN), in Python's regex syntax.
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT (the DN itself)
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        # Java's String.replaceAll over the whole DN, as Kafka calls it.
        result = self.pattern.sub(_java_replacement(self.replacement, self.pattern.groups), dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


def _java_replacement(text: str, groups: int) -> str:
    """A java.util.regex replacement (`$1`, `\\x` for a literal x) in re.sub's syntax.
    A `$n` past the pattern's groups is literal, as Kafka's escapeLiteralBackReferences
    makes it; `$12` with fewer than 12 groups is group 1 then "2", as in Java."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            out.append(text[i + 1].replace("\\", "\\\\"))
            i += 2
            continue
        if ch == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            j = i + 2
            number = int(text[i + 1])
            while j < len(text) and text[j].isdigit() and number * 10 + int(text[j]) <= groups:
                number = number * 10 + int(text[j])
                j += 1
            if number > groups:
                out.append(text[i:j])  # literal, as Kafka escapes it
            else:
                out.append(f"\\g<{number}>")
            i = j
            continue
        out.append("\\\\" if ch == "\\" else ch)
        i += 1
    return "".join(out)


class PrincipalMapper:
    """ssl.principal.mapping.rules; raises ValueError for a rule Kafka would refuse."""

    def __init__(self, rules: str | None) -> None:
        text = "DEFAULT" if rules is None else rules.strip()
        self.text = text
        self.rules: list[Rule] = []
        for found in _SPLITTER.finditer(text):
            rule = found.group(1)
            match = _PARSER.match(rule)
            if match is None or match.end() != len(rule):
                raise ValueError(f"invalid ssl.principal.mapping.rules rule: {rule!r}")
            if match.group(1) is not None:
                self.rules.append(Rule(None))
            elif match.group(2) is not None:
                try:
                    pattern = re.compile(match.group(2))
                except re.error as exc:
                    raise ValueError(
                        f"ssl.principal.mapping.rules rule {rule!r}: bad pattern: {exc}"
                    ) from None
                self.rules.append(Rule(pattern, match.group(3), match.group(4)))
            # an empty rule is ignored, as Kafka does
            if found.end() >= len(text):
                break

    def name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule applies to {dn}")
