"""The `skiff` command and its subcommands.

`skiff` here is the console script: it imports the command's modules (a second or more
on a loaded machine) inside a Ctrl-C guard, so an early Ctrl-C is one line, not an
import traceback. It is not named `main`: that is the submodule `sidecar.cli.main`,
which `from sidecar.cli import main` must find.
"""

from __future__ import annotations

import sys


def skiff(argv: list[str] | None = None) -> int:
    try:
        from sidecar.cli.main import main as run
    except KeyboardInterrupt:
        print("skiff: interrupted", file=sys.stderr)
        return 130
    return run(argv)
