"""The order a java.util.HashMap<String, ...> iterates its keys in, for answers Kafka
builds from one (DescribeUserScramCredentials' users, AlterUserScramCredentials'
results): clients print them in that order, so Skiff lists them the same way.

A HashMap of N keys has a table of 16 buckets, doubled while N exceeds 3/4 of it; a key
goes to bucket (h ^ (h >>> 16)) & (buckets - 1), h its String.hashCode, and iteration
walks the buckets in turn, each in insertion order (a resize keeps that order). A
bucket Java turned into a tree (8+ colliding keys in 64+ buckets) is taken as a list."""

from __future__ import annotations

from collections.abc import Iterable

INITIAL_BUCKETS = 16


def string_hash(text: str) -> int:
    """Java's String.hashCode, over UTF-16 code units, as an unsigned 32-bit int."""
    h = 0
    data = text.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] | data[i + 1] << 8)) & 0xFFFFFFFF
    return h


def hash_map_order(keys: Iterable[str]) -> list[str]:
    """`keys` (distinct, in insertion order) in a HashMap's iteration order."""
    ordered = list(keys)
    buckets = INITIAL_BUCKETS
    while len(ordered) > buckets * 3 // 4:
        buckets *= 2
    mask = buckets - 1

    def bucket(key: str) -> int:
        h = string_hash(key)
        return (h ^ (h >> 16)) & mask

    return sorted(ordered, key=bucket)  # stable: insertion order within a bucket
