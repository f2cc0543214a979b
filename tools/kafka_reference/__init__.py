"""Ask Apache Kafka and Skiff the same raw Kafka-protocol questions; print where they differ.

Run it with `.venv/bin/python -m tools.kafka_reference` (see tools/README.md). The package:
`broker` fetches Kafka's jars and runs Kafka, redis-server and Skiff; `talk` sends requests
to one of them (a `Side`) and holds the scenario registry; `compare` normalises and diffs
the answers; one module per scenario family (`basics`, `produce_fetch`, `legacy`,
`topics`, `logs`, `groups`, `group_offsets`, `admin`); `__main__` is the command line.

Tests import the broker start-up from here (`kafka_reference.start_kafka`, ...).
"""

from __future__ import annotations

import sys

from .constants import ROOT

# tests/ holds the raw Kafka client (rawkafka) and the process helpers (conftest) used here;
# tools/ the Maven jar fetcher (kafka_jars)
for _path in (ROOT / "tools", ROOT / "tests", ROOT):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from .broker import (  # noqa: E402
    SCENARIO_PROPERTIES,
    SKIFF_ENV,
    Processes,
    kafka_jars,
    kafka_properties,
    random_cluster_id,
    running_kafka,
    say,
    start_kafka,
    start_skiff,
    wait_kafka_ready,
)

__all__ = [
    "SCENARIO_PROPERTIES",
    "SKIFF_ENV",
    "Processes",
    "kafka_jars",
    "kafka_properties",
    "random_cluster_id",
    "running_kafka",
    "say",
    "start_kafka",
    "start_skiff",
    "wait_kafka_ready",
]
