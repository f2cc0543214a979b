"""Runs the locust load test headless against a Kafka bootstrap, or a local Skiff.

    python -m loadtest --scenario mixed --users 8 --run-time 60s --report-dir reports \\
        [--bootstrap HOST:PORT] [-- any locust or locustfile option, e.g. --message-size 1000]

Without --bootstrap it starts `skiff serve` on a free loopback port with its embedded
redis-server (data in a temporary directory) and stops it afterwards. Reports:
<report-dir>/skiff_stats.csv, _failures.csv, _exceptions.csv, _stats_history.csv and
skiff.html. The exit code is locust's (1 when any request failed); 2 for a bad argument;
130 when interrupted (Ctrl-C stops locust, which writes its CSV reports, and the local
Skiff).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sidecar.cli.arg_types import at_least, positive

HERE = Path(__file__).resolve().parent
SCENARIOS = {
    "produce": ["ProducerUser"],
    "consume": ["ConsumerUser"],
    "mixed": ["ProducerUser", "ConsumerUser"],
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_skiff(data_dir: Path, partitions: int) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    log = open(data_dir / "skiff.log", "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sidecar.cli.main",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--http-listen",
            "none",
            "--data-dir",
            str(data_dir / "data"),
            "--num-partitions",
            str(partitions),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=HERE.parent,
    )
    log.close()
    try:
        return _wait_listening(proc, port, data_dir)
    except BaseException:  # Ctrl-C included: no Skiff left behind
        _stop(proc)
        raise


def _wait_listening(
    proc: subprocess.Popen[bytes], port: int, data_dir: Path
) -> tuple[subprocess.Popen[bytes], str]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"skiff exited with {proc.returncode}; see {data_dir}/skiff.log")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"skiff did not listen within 60 s; see {data_dir}/skiff.log")


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, wait_s: float = 30) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, sig)
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _run_locust(command: list[str], stop_timeout: int) -> int:
    """Locust's exit code. On Ctrl-C locust gets SIGTERM (SIGINT would give a traceback
    while it is still importing), stops its users and writes its reports; then
    KeyboardInterrupt goes on."""
    locust = subprocess.Popen(command)
    try:
        return locust.wait()
    except KeyboardInterrupt:
        _stop(locust, signal.SIGTERM, stop_timeout + 30)
        raise


def locust_command(args: argparse.Namespace, bootstrap: str, extra: list[str]) -> list[str]:
    report = Path(args.report_dir)
    return [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(HERE / "locustfile.py"),
        "--headless",
        "--users",
        str(args.users),
        "--spawn-rate",
        str(args.spawn_rate),
        "--run-time",
        args.run_time,
        "--stop-timeout",
        str(args.stop_timeout),
        "--csv",
        str(report / "skiff"),
        "--html",
        str(report / "skiff.html"),
        "--only-summary",
        "--bootstrap",
        bootstrap,
        "--partitions",
        str(args.partitions),
        *extra,
        *SCENARIOS[args.scenario],
    ]


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("[loadtest] interrupted; the local skiff is stopped", file=sys.stderr)
        return 130


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: a local Skiff)")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="mixed")
    parser.add_argument("--users", type=at_least(1), default=4)
    parser.add_argument("--spawn-rate", type=positive, default=4)
    parser.add_argument("--run-time", default="60s", help="locust --run-time (e.g. 60s, 5m)")
    parser.add_argument(
        "--stop-timeout",
        type=at_least(0),
        default=15,
        help="seconds users get to finish their task at the end",
    )
    parser.add_argument("--partitions", type=at_least(1), default=6)
    parser.add_argument("--report-dir", default="loadtest-report")
    args, extra = parser.parse_known_args(argv)
    extra = [a for a in extra if a != "--"]
    if args.scenario == "consume" and not any(a.startswith("--prefill") for a in extra):
        extra += ["--prefill", "100000"]
    try:
        Path(args.report_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        parser.error(f"--report-dir {args.report_dir!r}: {exc.strerror or exc}")

    skiff = None
    with tempfile.TemporaryDirectory(prefix="skiff-loadtest-") as tmp:
        bootstrap = args.bootstrap
        if bootstrap is None:
            skiff, bootstrap = _start_skiff(Path(tmp), args.partitions)
            print(f"[loadtest] local skiff on {bootstrap} (pid {skiff.pid})", file=sys.stderr)
        try:
            return _run_locust(locust_command(args, bootstrap, extra), args.stop_timeout)
        finally:
            if skiff is not None:
                _stop(skiff)


if __name__ == "__main__":
    sys.exit(main())
