"""Every secret the tests hand to Skiff, and the check at the end of the session that none of
them appears in what Skiff wrote (docs/security.md, Secrets): the sidecar log files, the
/metrics texts tests scraped and the spans a test receiver got. Only outputs are searched:
a users file or a server.properties holding a password is input.

A secret is registered under a label; findings name the file and the label, never the
secret. Short or common secrets are refused: they would match by chance."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

MIN_LENGTH = 8
# Words a password file or a log may hold for other reasons (and so match by chance).
COMMON = frozenset({"password", "changeit", "changeme", "secret12", "12345678", "admin123"})


@dataclass(frozen=True)
class Finding:
    where: str
    label: str

    def __str__(self) -> str:
        return f"{self.where}: holds the test secret {self.label!r}"


_labels: dict[str, str] = {}  # secret -> its label
_files: list[Path] = []  # sidecar log files written during the session
_text_findings: list[Finding] = []  # in texts scraped or received, searched on arrival


def register(label: str, secret: str) -> str:
    """Remember a secret a test gives Skiff; returns it, to wrap where it is made."""
    if len(secret) < MIN_LENGTH or secret.lower() in COMMON or secret.isalpha():
        raise ValueError(
            f"test secret {label!r} would match by chance: use {MIN_LENGTH}+ characters, not a word"
        )
    _labels.setdefault(secret, label)
    return secret


def register_jwt(label: str, token: str) -> str:
    """A JWT's signature is its secret part (header and claims repeat between tokens)."""
    register(label, token.rsplit(".", 1)[-1])
    return token


def output_file(path: Path) -> None:
    """A file a sidecar writes its log to, searched at the end of the session."""
    _files.append(Path(path))


def output_text(where: str, text: bytes | str) -> None:
    """Something a sidecar answered or exported (a /metrics text, span bodies), searched at
    once (a secret is registered before Skiff gets it), so that no text is kept."""
    data = text.encode() if isinstance(text, str) else text
    _text_findings.extend(search([], [(where, data)], dict(_labels)))


def _forms(secret: str) -> list[bytes]:
    """The secret as written and percent-encoded (as in a URL)."""
    return list(dict.fromkeys([secret.encode(), quote(secret, safe="").encode()]))


def search(
    files: Iterable[Path], texts: Iterable[tuple[str, bytes]], secrets: dict[str, str]
) -> list[Finding]:
    """Which secret ({secret: label}) appears where; missing files are skipped."""
    if not secrets:
        return []
    forms = {form: label for secret, label in secrets.items() for form in _forms(secret)}
    pattern = re.compile(b"|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))
    findings: list[Finding] = []
    sources = [(str(p), p) for p in dict.fromkeys(files)] + [(w, t) for w, t in texts]
    for where, source in sources:
        if isinstance(source, Path):
            try:
                data = source.read_bytes()
            except FileNotFoundError:
                continue
        else:
            data = source
        labels = dict.fromkeys(forms[m.group()] for m in pattern.finditer(data))
        findings.extend(Finding(where, label) for label in labels)
    return findings


def session_findings() -> list[Finding]:
    """Every registered secret searched in every output of this session."""
    return search(_files, [], dict(_labels)) + _text_findings
