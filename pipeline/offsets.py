"""Offset specs and ranges for the `skiff` source, with the Kafka source's conventions:
`earliest`, `latest`, or JSON {"topic": {"0": 23, "1": -2}} where -2 is earliest and
-1 latest. Positions are {"topic": {"partition": offset}} (JSON-safe: Spark stores
streaming offsets as JSON in the checkpoint)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from .skiff_logs import PartitionLog

Positions = dict[str, dict[str, int]]
EARLIEST, LATEST = -2, -1


@dataclass
class OffsetRange(InputPartition):
    """One Spark task's work: topic/partition records start <= offset < end."""

    topic: str
    partition: int
    start: int
    end: int


def resolve(spec: str, topics: list[str], log: PartitionLog, default: int) -> Positions:
    """Concrete offsets for every partition of `topics`, within [log start, high watermark].
    A partition the JSON spec does not name gets `default` (EARLIEST or LATEST)."""
    spec = spec.strip()
    named: dict[str, dict[str, int]] = {}
    if spec == "earliest":
        default = EARLIEST
    elif spec == "latest":
        default = LATEST
    elif spec:
        named = {
            t: {str(p): int(o) for p, o in parts.items()} for t, parts in json.loads(spec).items()
        }
    out: Positions = {}
    for topic in topics:
        out[topic] = {}
        for p in range(log.partition_count(topic)):
            want = named.get(topic, {}).get(str(p), default)
            low, high = log.watermarks(topic, p)
            # an explicit offset outside the log is clamped into it: records that are not
            # there cannot be read, and waiting for them would stall the task
            exact = low if want == EARLIEST else high if want == LATEST else want
            out[topic][str(p)] = min(max(exact, low), high)
    return out


def ranges(start: Positions, end: Positions, min_partitions: int = 0) -> list[OffsetRange]:
    """One range per partition with records; ranges split evenly until there are at least
    `min_partitions` of them (Kafka's minPartitions). A partition new in `end` starts at 0."""
    out = [
        OffsetRange(topic, int(p), start.get(topic, {}).get(p, 0), stop)
        for topic, parts in end.items()
        for p, stop in parts.items()
        if stop > start.get(topic, {}).get(p, 0)
    ]
    total = sum(r.end - r.start for r in out)
    if min_partitions <= len(out) or total == 0:
        return out
    split: list[OffsetRange] = []
    for r in out:
        size = r.end - r.start
        pieces = max(1, min(size, -(-min_partitions * size // total)))  # ceil
        bounds = [r.start + size * i // pieces for i in range(pieces + 1)]
        split += [
            OffsetRange(r.topic, r.partition, a, b)
            for a, b in zip(bounds, bounds[1:], strict=False)
        ]
    return split


def split_at(found: list[OffsetRange], cuts: dict[tuple[str, int], list[int]]) -> list[OffsetRange]:
    """Each range cut at the offsets `cuts` names for its partition (tiered storage: the
    archived segments' ends, so each Spark task reads one segment)."""
    out: list[OffsetRange] = []
    for r in found:
        bounds = [c for c in cuts.get((r.topic, r.partition), []) if r.start < c < r.end]
        edges = [r.start, *sorted(bounds), r.end]
        out += [
            OffsetRange(r.topic, r.partition, a, b) for a, b in zip(edges, edges[1:], strict=False)
        ]
    return out


def cap(start: Positions, latest: Positions, limit: int) -> Positions:
    """At most `limit` records past `start` in all, shared in proportion to what each
    partition has waiting (as the Kafka source's maxOffsetsPerTrigger)."""
    waiting = {
        (t, p): hw - start.get(t, {}).get(p, 0)
        for t, parts in latest.items()
        for p, hw in parts.items()
    }
    total = sum(max(0, n) for n in waiting.values())
    if total <= limit:
        return latest
    take = {tp: n * limit // total for tp, n in waiting.items() if n > 0}
    left = limit - sum(take.values())
    for tp in take:  # rounding leftovers, so that even limit < partitions moves on
        if left and take[tp] < waiting[tp]:
            take[tp] += 1
            left -= 1
    out: Positions = {t: dict(parts) for t, parts in latest.items()}
    for (t, p), n in take.items():
        out[t][p] = start.get(t, {}).get(p, 0) + n
    return out
