"""README.md's `skiff serve` flag table against the parser in sidecar/cli/main.py.

The parser is built with `build_parser()` (no SKIFF_* variables, no --config file), so
flags added anywhere in it are checked without editing this test: every flag is a row
with its exact env variable, every row is a flag, and each default written in backticks
(or in one of the phrases below) is the parser's.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any

import pytest

from sidecar.cli import main as cli_main

README = Path(__file__).resolve().parents[1] / "README.md"
TABLE_HEADER = "| flag | env | default | meaning |"

# Defaults the README writes in words: the number they stand for.
NUMBER_PHRASES = {"100 MiB": 100 * 1024 * 1024, "256 MiB": 256 * 1024 * 1024, "2^63 − 1": 2**63 - 1}
# Defaults the README writes in words for a flag whose parser default is None or empty.
NONE_PHRASES = {"", "none", "off", "embedded", "the listen address"}


def readme_rows() -> dict[str, tuple[str, str]]:
    """The flag table's rows: flag (with dashes) -> (env cell, default cell), backticks
    kept on the default."""
    lines = README.read_text().splitlines()
    start = lines.index(TABLE_HEADER) + 2  # skip the |---| line
    rows: dict[str, tuple[str, str]] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 4, f"README flag row without 4 cells: {line}"
        flag = re.fullmatch(r"`(--[a-z0-9-]+)(?: [^`]*)?`", cells[0])
        env = re.fullmatch(r"`(SKIFF_[A-Z0-9_]+)`", cells[1])
        assert flag and env, f"README flag row not in the form `--flag ARG` | `SKIFF_X`: {line}"
        assert flag.group(1) not in rows, f"README lists {flag.group(1)} twice"
        rows[flag.group(1)] = (env.group(1), cells[2])
    return rows


@pytest.fixture
def serve_flags(monkeypatch: pytest.MonkeyPatch) -> dict[str, argparse.Action]:
    """`skiff serve`'s flags (with dashes) as the parser declares them."""
    for name in list(os.environ):
        if name.startswith("SKIFF_"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(cli_main, "_FILE_VALUES", {})
    actions = cli_main._serve_actions(cli_main.build_parser())
    return {f"--{name}": action for name, action in actions.items()}


def env_of(action: argparse.Action) -> str | None:
    found = re.findall(r"\$(SKIFF_[A-Z0-9_]+)", action.help or "")
    return found[0] if len(found) == 1 else None


def same_default(cell: str, action: argparse.Action) -> bool | None:
    """Whether the README's default cell says the parser's default; None when the cell
    is prose the test cannot check."""
    default: Any = action.default
    literal = re.fullmatch(r"`([^`]*)`", cell)
    if literal:
        if default is None:
            return False
        text = literal.group(1)
        if text == str(default) or (isinstance(default, bool) and text == str(default).lower()):
            return True
        convert = action.type if callable(action.type) else str
        try:  # the same value written differently: ./skiff-data, 0.0.0.0:9092, ...
            return bool(convert(text) == convert(str(default)))
        except (ValueError, TypeError, argparse.ArgumentTypeError):
            return False
    if cell in NUMBER_PHRASES:
        return default is not None and int(default) == NUMBER_PHRASES[cell]
    if cell in NONE_PHRASES:
        return default in (None, "")
    return None


def test_every_parser_flag_is_a_readme_row(serve_flags: dict[str, argparse.Action]) -> None:
    rows = readme_rows()
    missing = sorted(set(serve_flags) - set(rows))
    assert not missing, f"`skiff serve` flags missing from README.md's flag table: {missing}"


def test_every_readme_row_is_a_parser_flag(serve_flags: dict[str, argparse.Action]) -> None:
    extra = sorted(set(readme_rows()) - set(serve_flags))
    assert not extra, f"README.md's flag table lists flags `skiff serve` does not have: {extra}"


def test_env_column_is_the_parsers(serve_flags: dict[str, argparse.Action]) -> None:
    wrong = {
        flag: (env, env_of(serve_flags[flag]))
        for flag, (env, _) in readme_rows().items()
        if flag in serve_flags and env != env_of(serve_flags[flag])
    }
    assert not wrong, f"env column differs from the parser's $SKIFF_* (readme, parser): {wrong}"


def test_env_variable_sets_the_flag(
    serve_flags: dict[str, argparse.Action], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The env column is the variable the parser really reads, not only its help text."""
    monkeypatch.setenv("SKIFF_NUM_PARTITIONS", "7")
    monkeypatch.setenv("SKIFF_LOG_FORMAT", "json")
    args = cli_main.build_parser().parse_args(["serve"])
    assert (args.num_partitions, args.log_format) == (7, "json")


def test_default_column_is_the_parsers(serve_flags: dict[str, argparse.Action]) -> None:
    wrong, unreadable = {}, {}
    for flag, (_, cell) in readme_rows().items():
        if flag not in serve_flags:
            continue
        same = same_default(cell, serve_flags[flag])
        if same is None:
            unreadable[flag] = cell
        elif not same:
            wrong[flag] = (cell, serve_flags[flag].default)
    assert not wrong, f"default column differs from the parser (readme, parser): {wrong}"
    assert not unreadable, (
        f"write these defaults in backticks (or add the phrase to this test): {unreadable}"
    )
