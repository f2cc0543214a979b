"""What size retention (retention.bytes) costs an append, measured in Redis.

Starts a redis-server, then alternates rounds of --calls appends of --batch records
(lua/append.lua through RedisStore, as Produce sends them) to two partitions: one
without retention and one with retention.bytes small enough that every append also
trims. Reports the median Redis CPU time per append (INFO cpu, user + sys) and the
Redis-side EVALSHA time (INFO commandstats) of each, and their ratio. CPU time, not
wall time, so other load on the machine disturbs the figures less.

  .venv/bin/python bench/retention_cost.py [--rounds 10] [--calls 100] [--batch 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import start_redis, stop_process  # noqa: E402
from sidecar.maintenance.log_bytes import estimate  # noqa: E402
from sidecar.storage.store import RedisStore  # noqa: E402


async def measure(
    url: str, rounds: int, calls: int, batch: int, value: bytes, retention: int
) -> dict[str, Any]:
    store = await RedisStore.connect(url, "retention-cost")
    topics = {"off": "cost-off", "on": "cost-on"}
    await store.create_topic(topics["off"], 1)
    await store.create_topic(topics["on"], 1, {"retention.bytes": str(retention)})
    samples: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
    offset = {"off": 0, "on": 0}

    async def one_round(label: str) -> tuple[float, float]:
        limit = retention if label == "on" else -1
        before_cpu = await _cpu(store)
        before_cmd = await _evalsha_usec(store)
        for _ in range(calls):
            ts = int(time.time() * 1000)
            flat: list[Any] = [ts, b"k", value, b"", 0] * batch
            args: list[Any] = [batch, 0, ts, 0, -1, -1, -1, *flat]
            prepared = store.prepare_append(topics[label], 0, args, estimate(flat), limit)
            result = await store.append(prepared)
            assert result.base_offset == offset[label]
            offset[label] += batch
        cpu = (await _cpu(store) - before_cpu) / calls * 1e6
        cmd = (await _evalsha_usec(store) - before_cmd) / calls
        return cpu, cmd

    for label in ("off", "on"):  # warm-up: the retained partition reaches its limit
        for _ in range(max(1, retention // (calls * batch * len(value)) + 1)):
            await one_round(label)
    for _ in range(rounds):
        for label in ("off", "on"):
            samples[label].append(await one_round(label))
    lso = (await store.watermarks(topics["on"], 0))[0]
    await store.close()
    out: dict[str, Any] = {"log_start_offset_on": lso}
    for label, values in samples.items():
        out[label] = {
            "redis_cpu_us_per_append": round(statistics.median(v[0] for v in values), 1),
            "evalsha_us_per_append": round(statistics.median(v[1] for v in values), 1),
        }
    for key in ("redis_cpu_us_per_append", "evalsha_us_per_append"):
        out[f"ratio_{key}"] = round(out["on"][key] / out["off"][key], 3)
    return out


async def _cpu(store: RedisStore) -> float:
    info = await store.redis.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def _evalsha_usec(store: RedisStore) -> float:
    info = await store.redis.info("commandstats")
    return float(info.get("cmdstat_evalsha", {}).get("usec", 0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=100, help="appends per round")
    parser.add_argument("--batch", type=int, default=1000, help="records per append")
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--retention-bytes", type=int, default=5_000_000)
    args = parser.parse_args()
    value = bytes((i * 7 + 13) % 251 for i in range(args.record_bytes))
    workdir = Path(tempfile.mkdtemp(prefix="skiff-retention-cost-"))
    proc, url = start_redis(workdir, False)
    try:
        result = asyncio.run(
            measure(url, args.rounds, args.calls, args.batch, value, args.retention_bytes)
        )
    finally:
        stop_process(proc)
    print(
        f"appends of {args.batch} records x {args.record_bytes} B, medians of "
        f"{args.rounds} rounds of {args.calls}; retention.bytes={args.retention_bytes} "
        f"(log start of the retained partition at the end: {result['log_start_offset_on']:,})"
    )
    for label in ("off", "on"):
        r = result[label]
        print(
            f"  retention {label:3}: Redis CPU {r['redis_cpu_us_per_append']:>8.1f} us/append, "
            f"EVALSHA {r['evalsha_us_per_append']:>8.1f} us/append"
        )
    print(
        f"  on/off: CPU {result['ratio_redis_cpu_us_per_append']:.3f}, "
        f"EVALSHA {result['ratio_evalsha_us_per_append']:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
