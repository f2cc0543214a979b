"""What the Redis Cluster broadcast of classic PUBLISH costs (docs/operations-redis.md,
"Redis Cluster"): N script calls on one primary that set a hash field, with and without a
PUBLISH on a wake-up channel, while one pattern subscriber listens on another node;
Redis CPU (used_cpu_user + used_cpu_sys) per call on that primary and summed over the
other nodes of a 3 primary + 3 replica cluster on loopback.

  .venv/bin/python bench/cluster_pubsub.py [--calls 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from redis_cluster_harness import start_redis_cluster  # noqa: E402

SCRIPTS = {
    "no publish": "redis.call('HSET', KEYS[1], 'hw', ARGV[1]) return 1",
    "PUBLISH": "redis.call('HSET', KEYS[1], 'hw', ARGV[1]) "
    "redis.call('PUBLISH', 'skiff:wake:orders/0', ARGV[1]) return 1",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cluster = start_redis_cluster(Path(tempfile.mkdtemp(prefix="skiff-cluster-bench-")))
    try:
        key = "skiff:{orders/0}:meta"
        port = cluster.owner(key)
        listener_port = next(p for p in cluster.ports if p != port)
        sub = redis.Redis(port=listener_port).pubsub()
        sub.psubscribe("skiff:wake:*")
        primary = redis.Redis(port=port)

        def cpu() -> dict[int, float]:
            out = {}
            for p in cluster.ports:
                info = redis.Redis(port=p).info("cpu")
                out[p] = float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
            return out

        for label, source in SCRIPTS.items():
            sha = primary.script_load(source)
            for _ in range(args.rounds):
                before = cpu()
                pipe = primary.pipeline(transaction=False)
                for i in range(args.calls):
                    pipe.evalsha(sha, 1, key, i)
                    if i % 1000 == 999:
                        pipe.execute()
                pipe.execute()
                time.sleep(0.5)
                after = cpu()
                own = after[port] - before[port]
                others = sum(after[p] - before[p] for p in cluster.ports if p != port)
                print(
                    f"{label:11s} per call: primary {own / args.calls * 1e6:5.1f} us, "
                    f"other {len(cluster.ports) - 1} nodes {others / args.calls * 1e6:5.1f} us"
                )
                while sub.get_message(timeout=0.01):
                    pass
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
