"""The suite-wide secret check (tests/known_secrets.py, run by conftest.py at the end of
every session) finds a registered secret in a sidecar log or a scraped text, names where
and which by its label, never prints the secret, and fails the session."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import quote

import known_secrets
import pytest
from conftest import ROOT

PLANTED = "Planted-Pw-8e41d/x"  # '/' differs when percent-encoded


def test_a_secret_in_a_log_or_a_scraped_text_is_found_by_label(tmp_path: Path) -> None:
    log, users = tmp_path / "skiff.log", tmp_path / "plain-users"
    log.write_text(f"INFO started\nWARNING redis://:{quote(PLANTED, safe='')}@127.0.0.1/0\n")
    users.write_text(f"alice:{PLANTED}\n")  # input: not searched unless declared output
    clean = tmp_path / "clean.log"
    clean.write_text("INFO authentication failed for alice (PLAIN)\n")
    secrets = {PLANTED: "planted password"}
    texts = [("GET :1/metrics", b"skiff_up 1\n"), ("spans", b"\n\x0f" + PLANTED.encode())]
    findings = known_secrets.search([log, clean, tmp_path / "never-written.log"], texts, secrets)
    assert [(f.where, f.label) for f in findings] == [
        (str(log), "planted password"),
        ("spans", "planted password"),
    ]
    assert all(PLANTED not in str(f) and "planted password" in str(f) for f in findings)
    assert known_secrets.search([clean], [], secrets) == []


@pytest.mark.parametrize("secret", ["pw-1", "s3cret", "password", "Changeit", "bearertoken"])
def test_short_or_common_secrets_are_refused(secret: str) -> None:
    """They would match log text by chance: the check would fail on innocent output."""
    with pytest.raises(ValueError, match="would match by chance"):
        known_secrets.register("weak", secret)


def test_a_leak_fails_the_whole_session_naming_file_and_label(tmp_path: Path) -> None:
    """A real pytest session with the suite's conftest: a test passes but a secret it
    registered is in a sidecar log and a /metrics text, so the session fails, saying where."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_leak.py").write_text(
        textwrap.dedent(
            f"""
            import known_secrets

            def test_leaks(tmp_path):
                secret = known_secrets.register("planted password", {PLANTED!r})
                log = tmp_path / "skiff.log"
                log.write_text("INFO login alice password=" + secret + "\\n")
                known_secrets.output_file(log)
                known_secrets.output_text("GET :1/metrics", "skiff_up " + secret)
            """
        )
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider",
         f"--basetemp={tmp_path / 'inner'}", str(tmp_path / "test_leak.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT / 'tests'}:{ROOT}"},
    )  # fmt: skip
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "1 passed" in out, out
    assert "skiff.log: holds the test secret 'planted password'" in out, out
    assert "GET :1/metrics: holds the test secret 'planted password'" in out, out
    assert PLANTED not in out, out
