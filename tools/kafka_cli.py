#!/usr/bin/env python3
"""Run one of Apache Kafka's command-line tools (kafka-topics, kafka-console-producer, ...)
from Maven Central's jars, e.g. against Skiff:

    scripts/kafka-cli kafka-topics --bootstrap-server 127.0.0.1:9092 --list
    scripts/kafka-cli --list                 # the tools it knows

The jars (kafka-tools, kafka_2.13, kafka-clients and their dependencies) are fetched
once with Maven into ~/.cache/skiff/kafka-tools-<version>/lib (tools/kafka_jars.py).
Logging is Kafka's own tools setting (bin/kafka-run-class.sh with
config/tools-log4j.properties): reload4j, WARN and above to stderr, through exactly one
SLF4J binding, so no "SLF4J: ..." lines (Kafka 4.x's tools log through Log4j 2, given
the same settings). $KAFKA_CLI_VERSION picks another Kafka version (3.x or 4.x),
$KAFKA_CLI_LOG_LEVEL another level (ERROR, INFO, DEBUG). Standard library only: it
runs before any venv exists.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafka_jars import JarsUnavailable, java, tools_jars  # noqa: E402

KAFKA_VERSION = os.environ.get("KAFKA_CLI_VERSION", "3.9.1")

# bin/<name>.sh of Kafka 3.9 -> the class it runs
TOOLS = {
    "kafka-acls": "kafka.admin.AclCommand",
    "kafka-broker-api-versions": "kafka.admin.BrokerApiVersionsCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-producer": "kafka.tools.ConsoleProducer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
}
# Kafka 4.0 moved these from Scala (kafka_2.13) to Java (kafka-tools), and 4.4 ConfigCommand
TOOLS_4 = TOOLS | {
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
}
TOOLS_4_4 = TOOLS_4 | {"kafka-configs": "org.apache.kafka.tools.ConfigCommand"}


def tool_class(name: str, version: str = KAFKA_VERSION) -> str:
    """The main class of tool `name` in Kafka `version`."""
    major, minor = (int(part) for part in version.split(".")[:2])
    if major < 4:
        return TOOLS[name]
    return (TOOLS_4 if minor < 4 else TOOLS_4_4)[name]


# config/tools-log4j.properties of Kafka 3.x, with the level a parameter
LOG4J_PROPERTIES = """log4j.rootLogger={level}, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.stderr.Target=System.err
"""
# the same for Kafka 4.x, whose tools log through Log4j 2
LOG4J2_PROPERTIES = """status = error
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = STDERR
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
"""
# kafka-tools brings slf4j-reload4j; the cache also holds slf4j-simple (the broker's binding)
LOG_BINDING = "slf4j-reload4j-"
OTHER_BINDINGS = ("slf4j-simple-", "slf4j-nop-", "logback-classic-")


def classpath(lib: Path) -> list[str]:
    """Every jar of `lib` but the SLF4J bindings other than reload4j: two bindings make
    SLF4J print its 'multiple bindings' lines on every run."""
    jars = sorted(lib.glob("*.jar"))
    if not any(j.name.startswith(LOG_BINDING) for j in jars):
        return [str(j) for j in jars]
    return [str(j) for j in jars if not j.name.startswith(OTHER_BINDINGS)]


def log_config(lib: Path, level: str, template: str = LOG4J_PROPERTIES) -> Path:
    kind = "log4j2" if template is LOG4J2_PROPERTIES else "log4j"
    path = lib.parent / f"tools-{kind}-{level.lower()}.properties"
    if not path.exists():  # written whole, then renamed: parallel runs (threads) may race
        temp = path.with_suffix(f".{os.getpid()}-{threading.get_ident()}")
        temp.write_text(template.format(level=level.upper()))
        temp.replace(path)
    return path


def command(
    main_class: str, args: list[str], log_level: str = "WARN", version: str = KAFKA_VERSION
) -> list[str]:
    """The java command line running `main_class` with `args` (fetching the jars first)."""
    java_binary = java()  # before a fetch that would be of no use without it
    lib = tools_jars(version, lambda message: print(message, file=sys.stderr))
    return [
        java_binary,
        "-Xms64m",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",  # short-lived: start fast
        "-Djava.awt.headless=true",
        f"-Dlog4j.configuration={log_config(lib, log_level).as_uri()}",
        f"-Dlog4j2.configurationFile={log_config(lib, log_level, LOG4J2_PROPERTIES).as_uri()}",
        f"-Dorg.slf4j.simpleLogger.defaultLogLevel={log_level.lower()}",  # without reload4j
        "-cp",
        os.pathsep.join(classpath(lib)),
        main_class,
        *args,
    ]


def usage() -> str:
    return (
        "usage: scripts/kafka-cli TOOL [ARGS...]   e.g. scripts/kafka-cli kafka-topics "
        "--bootstrap-server 127.0.0.1:9092 --list\ntools: " + ", ".join(TOOLS)
    )


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    if argv[0] == "--list":
        print("\n".join(TOOLS))
        return 0
    name = argv[0].removesuffix(".sh")
    if name not in TOOLS:
        print(f"kafka-cli: unknown tool {argv[0]!r}; one of: {', '.join(TOOLS)}", file=sys.stderr)
        return 2
    try:
        cmd = command(tool_class(name), argv[1:], os.environ.get("KAFKA_CLI_LOG_LEVEL", "WARN"))
    except JarsUnavailable as exc:
        print(f"kafka-cli: {exc}", file=sys.stderr)
        return 2
    os.execv(cmd[0], cmd)  # java takes over: stdin, signals and the exit status are its own


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
