"""Ask Apache Kafka and Skiff the same raw Kafka-protocol questions; print where they differ.

    .venv/bin/python -m tools.kafka_reference [--kafka-version 3.9.1] [--only NAME]
        [--json FILE] [--list] [--keep]

Kafka's broker jars come from Maven Central (a generated pom in
~/.cache/skiff/kafka-<version>/, `mvn dependency:copy-dependencies`). The tool formats a
single-node KRaft log dir, starts the broker, redis-server and Skiff on free 127.0.0.1
ports, runs every scenario against both with tests/rawkafka.py, and compares the decoded
responses field by field after masking what must differ (node ids, hosts, ports,
cluster and topic ids, throttle times, "now" timestamps, error message texts).
Everything it starts is stopped by pid at the end, also on errors and Ctrl-C.
See tools/README.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .admin import (
    alter_configs_scenarios,
    create_partitions_scenarios,
    create_topics_bad_input_scenarios,
    delete_topics_v0_scenarios,
    describe_cluster_scenarios,
    describe_configs_scenarios,
    describe_configs_v0_scenarios,
    quorum_scenarios,
    update_features_scenarios,
)
from .basics import api_versions_scenarios, metadata_scenarios, unsupported_scenarios
from .broker import SCENARIO_PROPERTIES, Processes, _raise_interrupt, say, start_kafka, start_skiff
from .compare import Difference, diff, jsonable, normalise, show
from .constants import RUN
from .group_offsets import (
    delete_groups_scenarios,
    describe_groups_scenarios,
    list_groups_scenarios,
    offset_commit_scenarios,
    offset_delete_scenarios,
    offset_fetch_scenarios,
)
from .groups import (
    find_coordinator_scenarios,
    heartbeat_scenarios,
    join_group_scenarios,
    leave_group_scenarios,
    sync_group_scenarios,
)
from .legacy import legacy_scenarios
from .logs import log_scenarios
from .produce_fetch import (
    fetch_scenarios,
    init_producer_id_scenarios,
    list_offsets_scenarios,
    produce_scenarios,
)
from .streams import streams_scenarios
from .talk import SCENARIOS, Scenario, Side
from .topics import create_topics_scenarios, delete_topics_scenarios
from .transactions import transaction_scenarios

GROUP_FAMILIES = (
    find_coordinator_scenarios,
    join_group_scenarios,
    sync_group_scenarios,
    heartbeat_scenarios,
    leave_group_scenarios,
    offset_commit_scenarios,
    offset_fetch_scenarios,
    describe_groups_scenarios,
    list_groups_scenarios,
    delete_groups_scenarios,
    offset_delete_scenarios,
)


for _family in (
    api_versions_scenarios,
    metadata_scenarios,
    produce_scenarios,
    fetch_scenarios,
    list_offsets_scenarios,
    legacy_scenarios,
    init_producer_id_scenarios,
    transaction_scenarios,
    create_topics_scenarios,
    delete_topics_scenarios,
    log_scenarios,
    *GROUP_FAMILIES,
    describe_configs_scenarios,
    describe_configs_v0_scenarios,
    alter_configs_scenarios,
    create_partitions_scenarios,
    describe_cluster_scenarios,
    update_features_scenarios,
    quorum_scenarios,
    streams_scenarios,
    create_topics_bad_input_scenarios,
    delete_topics_v0_scenarios,
    unsupported_scenarios,
):
    _family()


# -- running and reporting -----------------------------------------------------------------------


@dataclasses.dataclass
class Result:
    name: str
    status: str  # SAME, DIFF or ERROR (the tool could not run it)
    note: str
    kafka: Any
    skiff: Any
    differences: list[Difference]
    seconds: float


def run_scenario(scenario: Scenario, kafka: Side, skiff: Side) -> Result:
    started = time.monotonic()
    observed: dict[str, Any] = {}
    errors = []
    for side in (kafka, skiff):
        try:
            observed[side.name] = scenario.run(side)
        except Exception as exc:  # the tool failed, not the broker: report and go on
            observed[side.name] = f"TOOL ERROR {type(exc).__name__}: {exc}"
            errors.append(side.name)
    a, b = normalise(observed["kafka"]), normalise(observed["skiff"])
    differences = diff(a, b)
    status = "ERROR" if errors else "DIFF" if differences else "SAME"
    return Result(
        scenario.name, status, scenario.note, a, b, differences, time.monotonic() - started
    )


def print_result(result: Result) -> None:
    print(f"{result.status:5} {result.name}", flush=True)
    if result.status == "SAME":
        return
    if result.note:
        print(f"        ({result.note})")
    if result.status == "ERROR":
        for side, value in (("kafka", result.kafka), ("skiff", result.skiff)):
            print(f"        {side}: {show(value, limit=600)}")
        return
    for d in result.differences:
        print(
            f"        {d.path}: kafka={show(d.kafka, d.path)}  skiff={show(d.skiff, d.path)}",
            flush=True,
        )


def selected(patterns: list[str] | None) -> list[Scenario]:
    if not patterns:
        return list(SCENARIOS)

    def wanted(name: str) -> bool:
        return any(
            name == p or fnmatch.fnmatchcase(name, p) or name.startswith(p + ".") for p in patterns
        )

    chosen = [s for s in SCENARIOS if wanted(s.name)]
    if not chosen:
        raise SystemExit(f"no scenario matches {patterns}; see --list")
    return chosen


def write_json(path: Path, version: str, results: list[Result], seconds: float) -> None:
    doc = {
        "kafka_version": version,
        "topic_prefix": RUN,
        "seconds": round(seconds, 1),
        "counts": {s: sum(r.status == s for r in results) for s in ("SAME", "DIFF", "ERROR")},
        "results": [
            {
                "name": r.name,
                "status": r.status,
                "note": r.note,
                "seconds": round(r.seconds, 2),
                "differences": [
                    {"path": d.path, "kafka": jsonable(d.kafka), "skiff": jsonable(d.skiff)}
                    for d in r.differences
                ],
                "kafka": jsonable(r.kafka),
                "skiff": jsonable(r.skiff),
            }
            for r in results
        ],
    }
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    say(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.kafka_reference", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--kafka-version", default="3.9.1")
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="a scenario name, a family prefix (fetch, fetch.v4) or a glob; repeatable",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the full results here")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the temporary dir (configs, Kafka, Redis and Skiff logs)",
    )
    parser.add_argument(
        "--start-timeout",
        type=float,
        default=90.0,
        help="seconds to wait for Kafka to answer (default 90)",
    )
    args = parser.parse_args(argv)
    scenarios = selected(args.only)
    if args.list:
        for s in scenarios:
            print(s.name + (f"    # {s.note}" if s.note else ""))
        return 0

    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, _raise_interrupt)
    work = Path(tempfile.mkdtemp(prefix="kafka-reference-"))
    procs = Processes()
    results: list[Result] = []
    started = time.monotonic()
    try:
        say(f"work dir {work}; topics of this run are named {RUN}-*, shown as ~*")
        port = start_kafka(procs, args.kafka_version, work, args.start_timeout, SCENARIO_PROPERTIES)
        kafka = Side("kafka", port)
        skiff = Side("skiff", start_skiff(procs, work))
        say(f"running {len(scenarios)} scenarios")
        for scenario in scenarios:
            result = run_scenario(scenario, kafka, skiff)
            results.append(result)
            print_result(result)
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
        say(f"failed: {exc}")
        return 2
    finally:
        procs.stop_all()
        if args.keep:
            say(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
        if results:
            counts = {s: sum(r.status == s for r in results) for s in ("SAME", "DIFF", "ERROR")}
            elapsed = time.monotonic() - started
            print(
                f"\n{len(results)} scenarios: {counts['SAME']} SAME, {counts['DIFF']} DIFF, "
                f"{counts['ERROR']} ERROR ({elapsed:.0f}s)"
            )
            for r in results:
                if r.status != "SAME":
                    print(f"  {r.status:5} {r.name}")
            if args.json:
                write_json(args.json, args.kafka_version, results, elapsed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
