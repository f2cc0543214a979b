#!/usr/bin/env python3
"""UDP ingest at fixed send rates: how many datagrams one sidecar reads and stores.

    .venv/bin/python bench/udp_ingest.py [--rates 30000,60000,100000] [--seconds 3]
        [--size 100]

For each rate: starts a sidecar with its embedded Redis in a temp dir, `--udp-topic` with
3 partitions, sends `rate * seconds` datagrams of `size` bytes over loopback at that
rate (one sender process), waits 2 s, stops the sidecar with SIGTERM and prints its final
counters (sidecar/udp_ingest.py). `received` below `sent` means the kernel dropped
datagrams the sidecar did not read in time; `dropped_overload` means the sidecar read
them but Redis did not keep up. Results are in docs/udp.md.
"""

from __future__ import annotations

import argparse
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from conftest import free_port, stop_process, wait_for_port  # noqa: E402

STATS = re.compile(r"UDP ingest stopped: (.*)")


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(rate: int, seconds: float, size: int) -> str:
    with tempfile.TemporaryDirectory(prefix="udp-bench-") as tmp:
        port, udp_port = free_port(), free_udp_port()
        log = Path(tmp) / "skiff.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "sidecar.cli.main",
                    "serve",
                    "--listen",
                    f"127.0.0.1:{port}",
                    "--data-dir",
                    tmp,
                    "--num-partitions",
                    "3",
                    "--udp-listen",
                    f"127.0.0.1:{udp_port}",
                    "--udp-topic",
                    "bench",
                ],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for_port(port, proc)
            while "UDP ingest on" not in log.read_text():
                time.sleep(0.05)
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            payload = b"x" * size
            total, sent, start = int(rate * seconds), 0, time.monotonic()
            while sent < total:
                due = min(int((time.monotonic() - start) * rate), total)
                while sent < due:
                    sock.sendto(payload, ("127.0.0.1", udp_port))
                    sent += 1
                if sent < total:
                    time.sleep(0.0005)
            took = time.monotonic() - start
            time.sleep(2)
        finally:
            stop_process(proc, signal.SIGTERM)
        found = STATS.search(log.read_text())
        stats = found.group(1) if found else "(no counters logged)"
        return f"rate {rate}/s: sent {sent} in {took:.1f} s; {stats}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="30000,60000,100000")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--size", type=int, default=100)
    args = parser.parse_args()
    for rate in (int(r) for r in args.rates.split(",")):
        print(run(rate, args.seconds, args.size), flush=True)


if __name__ == "__main__":
    main()
