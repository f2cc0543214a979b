"""Number types for argparse, shared by `skiff serve` and `python -m loadtest`."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def positive(text: str) -> float:
    """A positive, finite number (seconds, minutes)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    """An int type for argparse that refuses values below `low` (and above `high`)."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high}, got {value}")
        return value

    return parse
