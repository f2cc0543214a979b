"""`skiff queues list|describe|redrive` as a subprocess against a running sidecar's HTTP
endpoint, with records dead-lettered by rejecting them through the HTTP API."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import Any

from conftest import ROOT, Skiff
from test_queues_http import Api, configure, create_topic, produce, read, settle


def skiff_queues(skiff: Skiff, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sidecar.cli",
            "queues",
            *args,
            "--http",
            f"http://127.0.0.1:{skiff.http_port}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check:
        assert proc.returncode == 0, f"{args}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def as_json(skiff: Skiff, *args: str) -> Any:
    return json.loads(skiff_queues(skiff, *args, "--json").stdout)


def test_describe_and_redrive(skiff: Skiff) -> None:
    tag = uuid.uuid4().hex[:10]
    topic, group, dlq = f"ct-{tag}", f"cg-{tag}", f"ct-{tag}-dlq"
    create_topic(skiff.bootstrap, topic)
    produce(skiff.bootstrap, topic, [b"one", b"two", b"three", b"four"])
    api = Api(skiff.http_port)
    configure(api, group, dead_letter_topic=dlq)
    recs = read(api, group, topic, "w", 3)
    assert settle(api, group, "reject", "w", recs[:2])[0] == 200
    desc = as_json(skiff, "describe", group)
    (part,) = desc["partitions"]
    assert (part["committed_offset"], part["pending"], part["lag"]) == (2, 1, 2)
    assert part["holders"] == {"w": 1} and part["delivery_counts"] == {"1": 1}
    table = skiff_queues(skiff, "describe", group).stdout
    assert f"Queue group: {group}" in table and f"dead letters: {dlq}" in table
    row = next(line for line in table.splitlines() if line.startswith(topic))
    assert row.split()[:6] == [topic, "0", "2", "4", "2", "1"]
    assert group in as_json(skiff, "list")
    # Redrive: the two rejected records go back to the end of the topic, once.
    out = skiff_queues(skiff, "redrive", group, "--limit", "1").stdout
    assert out.startswith("Moved 1 record(s)")
    assert as_json(skiff, "redrive", group)["moved"] == 1
    assert as_json(skiff, "redrive", group)["moved"] == 0
    again = read(api, group, topic, "w2", 10)
    assert [(r["offset"], r["value"]) for r in again] == [(3, "four"), (4, "one"), (5, "two")]
    # Errors: unknown group, nothing listening.
    proc = skiff_queues(skiff, "describe", f"nope-{tag}", check=False)
    assert proc.returncode == 1 and "does not exist (GROUP_NOT_FOUND)" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "sidecar.cli", "queues", "list", "--http", "http://127.0.0.1:1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and "cannot reach" in proc.stderr
    api.close()
