"""Counters of Redis faults, kept by the retry layer (sidecar/storage) and exported by
/metrics (sidecar/telemetry). Plain counters so storage code needs no metrics library."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass(slots=True)
class RedisFaultStats:
    # reason -> count; reasons are short names: connection, timeout, loading, busy,
    # readonly, noscript, ...
    errors: Counter[str] = field(default_factory=Counter)
    retries: Counter[str] = field(default_factory=Counter)
    # False while the last Redis call failed for a reason that a retry may cure.
    reachable: bool = True


STATS = RedisFaultStats()
