"""`skiff serve` flags and their SKIFF_* environment variables; every mistake a user can
make on the command line is one line on stderr saying what to do (exit status 2), and
Ctrl-C during start-up is one line (exit status 130), in skiff, pipeline-demo and
`python -m loadtest` alike."""

from __future__ import annotations

import importlib.metadata
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from confluent_kafka.admin import AdminClient
from conftest import ROOT, RedisServer, free_port, start_skiff, stop_process


def test_environment_variables_set_flags(own_redis: RedisServer, tmp_path: Path) -> None:
    server = start_skiff(
        tmp_path / "skiff.log",
        env={
            "SKIFF_REDIS_URL": own_redis.url,
            "SKIFF_NUM_PARTITIONS": "3",
            "SKIFF_ADVERTISE": "localhost.example:19999",
        },
    )
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        # Metadata auto-creates the topic with SKIFF_NUM_PARTITIONS partitions.
        meta = admin.list_topics("env-flags-topic", timeout=10)
        assert len(meta.topics["env-flags-topic"].partitions) == 3
        assert [(b.host, b.port) for b in meta.brokers.values()] == [("localhost.example", 19999)]
        assert "advertised as localhost.example:19999" in server.log()
        assert own_redis.url in server.log()  # the log says which Redis it uses
    finally:
        stop_process(server.proc)
    assert server.proc.returncode == 0


def test_a_flag_overrides_its_environment_variable(own_redis: RedisServer, tmp_path: Path) -> None:
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--auto-create-topics",
        "false",
        env={"SKIFF_AUTO_CREATE_TOPICS": "true"},
    )
    try:
        meta = AdminClient({"bootstrap.servers": server.bootstrap}).list_topics(
            "never-created", timeout=10
        )
        assert meta.topics["never-created"].error is not None
    finally:
        stop_process(server.proc)


def test_bad_flag_values_are_refused_with_a_message() -> None:
    for args, says in (
        (["--listen", "nonsense"], "expected HOST:PORT"),
        (["--auto-create-topics", "maybe"], "expected true or false"),
        (["--message-timestamp-type", "Whenever"], "invalid choice"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "sidecar.cli.main", "serve", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.returncode == 2, args
        assert says in proc.stderr, proc.stderr


def test_unreachable_redis_fails_start_up_with_a_clear_message() -> None:
    port = free_port()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sidecar.cli.main",
            "serve",
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--redis-url",
            f"redis://127.0.0.1:{port}/0",
            "--redis-connect-timeout",
            "2",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 1
    assert f"cannot reach Redis at redis://127.0.0.1:{port}/0" in proc.stderr


def _serve(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """A mistake: exit status 2 and exactly one line on stderr, no traceback."""
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def _listening_socket(port: int = 0) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def test_start_up_mistakes_are_one_line_saying_what_to_do(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    bad_config = tmp_path / "server.properties"
    bad_config.write_text("num.partitions=many\n")
    unknown_key = tmp_path / "unknown.properties"
    unknown_key.write_text("no.such.setting=1\n")
    redis = ["--redis-url", "redis://127.0.0.1:1/0"]
    with _listening_socket() as busy:
        taken = f"127.0.0.1:{busy.getsockname()[1]}"
        for args, says in (
            (["--listen", taken, *redis], f"--listen {taken}: Address already in use; stop"),
            (["--udp-listen", "127.0.0.1:99999", "--udp-topic", "t", *redis], "above 65535"),
            (["--listen", "127.0.0.1:99999", *redis], "port 99999 in '127.0.0.1:99999' is above"),
            (["--redis-url", "http://127.0.0.1:6379/"], "is not a Redis URL: use redis://"),
            (["--redis-url", "redis+sentinel://h1:x/m"], "is malformed"),
            (["--redis-url", "redis+sentinel://h1:26379"], "is malformed"),
            (["--redis-url", "redis://h:port/0"], "is malformed"),
            (["--data-dir", str(a_file)], "is a file, not a directory: pick another --data-dir"),
            (["--data-dir", str(a_file / "sub")], "cannot be created (Not a directory): pick"),
            (["--data-dir", str(tmp_path / ("d" * 120))], "is too deep: the embedded Redis"),
            (["--log-level", "LOUD", *redis], "expected one of DEBUG, INFO, WARNING, ERROR"),
            (["--num-partitions", "-5", *redis], "must be at least 1, got -5"),
            (["--num-partitions", "3.5", *redis], "expected an integer, got '3.5'"),
            (["--workers", "0", *redis], "--workers: must be at least 1"),
            (["--redis-connect-timeout", "nan", *redis], "expected a positive number"),
            (["--redis-connect-timeout", "-1", *redis], "expected a positive number"),
            (["--auto-create-topics", "maybe", *redis], "expected true or false"),
            (["--node-id", "-7", *redis], "must be at least -1"),
            (["--config", str(tmp_path / "missing")], "cannot read config file"),
            (["--config", str(bad_config)], "num.partitions"),
            (["--config", str(unknown_key)], "is neither a Kafka broker config"),
            (["--no-such-flag", *redis], "unrecognized arguments: --no-such-flag"),
        ):
            line = _one_error_line(_serve("serve", *args))
            assert says in line, (args, line)
            assert line.startswith("skiff"), line


def test_a_bad_environment_variable_is_named() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", "serve"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SKIFF_NUM_PARTITIONS": "many"},
    )
    line = _one_error_line(proc)
    assert "--num-partitions: expected an integer, got 'many'" in line
    assert "$SKIFF_NUM_PARTITIONS" in line


def test_workers_with_a_busy_port_plus_i_fail_at_once() -> None:
    """Worker 1 listens on --listen's port + 1: a busy one is found before any worker
    starts (it used to die and be restarted forever)."""
    for _ in range(20):
        with _listening_socket() as busy:
            port = busy.getsockname()[1] - 1
            try:  # port itself must be free, or the error is worker 0's
                _listening_socket(port).close()
            except OSError:
                continue
            started = time.monotonic()
            proc = _serve(
                "serve", "--workers", "2", "--listen", f"127.0.0.1:{port}",
                "--redis-url", "redis://127.0.0.1:1/0",
            )  # fmt: skip
            line = _one_error_line(proc)
            assert f"--listen (worker 1: the port + 1) 127.0.0.1:{port + 1}" in line, line
            assert "Address already in use" in line
            assert time.monotonic() - started < 30
            return
    pytest.fail("found no free port below a busy one")


def test_version() -> None:
    proc = _serve("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"skiff {importlib.metadata.version('skiff')}\n"


def test_no_command_and_bad_subcommand_arguments_are_one_line() -> None:
    assert "the following arguments are required: command" in _one_error_line(_serve())
    line = _one_error_line(_serve("topics", "list", "--bootstrap", "nonsense"))
    assert "expected HOST:PORT" in line
    line = _one_error_line(_serve("groups", "list", "--bootstrap", "127.0.0.1:99999"))
    assert "above 65535" in line
    for args in (["topics", "list"], ["groups", "list"], ["queues", "list"]):
        for timeout in ("-1", "nan", "soon"):
            line = _one_error_line(_serve(*args, "--timeout", timeout))
            assert "--timeout: expected a positive number of seconds" in line, line


def test_admin_commands_against_an_unreachable_bootstrap_say_so() -> None:
    port = free_port()
    for args in (["topics", "list"], ["groups", "list"]):
        proc = _serve(*args, "--bootstrap", f"127.0.0.1:{port}", "--timeout", "5")
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        assert f"Is Skiff running at 127.0.0.1:{port}?" in proc.stderr
    proc = _serve("queues", "list", "--http", f"http://u:Secr3tPw@127.0.0.1:{port}")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "cannot reach http://u:***@127.0.0.1" in proc.stderr
    assert "Secr3tPw" not in proc.stderr


def _interrupt_after(cmd: list[str], log: Path, first_line: str, timeout: float = 90) -> int:
    """Start `cmd` (output to `log`), wait until it printed `first_line`, send SIGINT,
    and return its exit status once it and every process it started are gone."""
    with open(log, "wb") as out:
        # SIGINT as a terminal gives it, even when the suite itself runs as a background
        # job (a non-interactive shell starts those with SIGINT ignored, and Python then
        # installs no KeyboardInterrupt handler).
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    try:
        deadline = time.monotonic() + timeout
        while first_line not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        children = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=timeout)
        _, alive = psutil.wait_procs(children, timeout=30)
        assert not alive, alive  # no Skiff, Redis or locust left behind
        return code
    finally:
        stop_process(proc, signal.SIGKILL)


def test_ctrl_c_while_waiting_for_redis_is_one_line(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    cmd = [
        sys.executable, "-m", "sidecar.cli.main", "serve", "--listen", f"127.0.0.1:{free_port()}",
        "--redis-url", f"redis://127.0.0.1:{free_port()}/0", "--redis-connect-timeout", "300",
    ]  # fmt: skip
    assert _interrupt_after(cmd, log, "Redis is unavailable") == 130
    out = log.read_text()
    assert "Traceback" not in out, out
    assert out.splitlines()[-1] == "skiff: interrupted"


def test_ctrl_c_in_pipeline_demo_stops_skiff(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    cmd = [sys.executable, "-m", "pipeline.demo", "--work-dir", str(tmp_path / "work")]
    assert _interrupt_after(cmd, log, "[demo] starting Skiff") == 130
    out = log.read_text()
    assert "Traceback" not in out, out
    assert out.splitlines()[-1] == "[demo] interrupted; Skiff stopped"


def test_ctrl_c_in_loadtest_stops_skiff_and_locust(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    cmd = [
        sys.executable, "-m", "loadtest", "--users", "1", "--run-time", "5m",
        "--report-dir", str(tmp_path / "report"),
    ]  # fmt: skip
    assert _interrupt_after(cmd, log, "[loadtest] local skiff on", timeout=120) == 130
    out = log.read_text()
    assert "Traceback" not in out, out
    assert out.splitlines()[-1] == "[loadtest] interrupted; the local skiff is stopped"
