"""The `skiff` command and its subcommands.

`main` here is the console script: it imports the command's modules (a second or more
on a loaded machine) inside a Ctrl-C guard, so an early Ctrl-C is one line, not an
import traceback.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    try:
        from sidecar.cli.main import main as run
    except KeyboardInterrupt:
        print("skiff: interrupted", file=sys.stderr)
        return 130
    return run(argv)
