"""`skiff serve --config FILE`: server.properties syntax, the mapping of Kafka broker configs
to flags, precedence (flag > SKIFF_* > file > default), and a sidecar whose defaults come
from a file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient
from conftest import ROOT, RedisServer, start_skiff, stop_process

from sidecar.cli import main as cli
from sidecar.config.server_properties import ConfigFileError, Property, parse, resolve

FLAGS = {  # a build that has helper A's retention flags
    "listen",
    "advertise",
    "listeners",
    "advertised-listeners",
    "listener-security-protocol-map",
    "node-id",
    "num-partitions",
    "message-max-bytes",
    "log-retention-ms",
    "log-cleanup-policy",
}


def kv(text: str) -> list[tuple[str, str]]:
    return [(p.key, p.value) for p in parse(text)]


# -- syntax ------------------------------------------------------------------------------------


def test_separators_and_comments() -> None:
    text = (
        "# a comment\n"
        "! another comment\n"
        "   \n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "d   =   4  \n"
        "e:f=g\n"
        "f=\n"
        "g\n"
        "  h = x # not a comment\n"
        "i=a=b:c\n"
    )
    assert kv(text) == [
        ("a", "1"),
        ("b", "2"),
        ("c", "3"),
        ("d", "4  "),  # trailing whitespace is kept, as Java does
        ("e", "f=g"),
        ("f", ""),
        ("g", ""),
        ("h", "x # not a comment"),
        ("i", "a=b:c"),
    ]


def test_continuations_and_line_numbers() -> None:
    text = "a=one, \\\n    two, \\\n\tthree\nb=x\\\\\nc=y\n# c\\\nd=\\\n# not a comment\n"
    props = parse(text)
    assert [(p.key, p.value, p.line) for p in props] == [
        ("a", "one, two, three", 1),
        ("b", "x\\", 4),  # an even number of backslashes does not continue
        ("c", "y", 5),
        ("d", "# not a comment", 7),  # comments do not continue; continued text is no comment
    ]


def test_escapes() -> None:
    text = "key\\ with\\ space=v\nk\\=x\\:y=\\u00e9\\t\\n\\\\\\z\nunicode=caf\\u00E9\\u20ac\n"
    assert kv(text) == [
        ("key with space", "v"),
        ("k=x:y", "é\t\n\\z"),
        ("unicode", "café€"),
    ]


def test_line_endings_and_last_line_continuation() -> None:
    assert kv("a=1\r\nb=2\rc=3\nd=4\\") == [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")]


def test_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(ConfigFileError, match=r"f.properties:2: malformed \\uxxxx"):
        parse("a=1\nb=\\u12x4\n", "f.properties")


# -- mapping to flags ---------------------------------------------------------------------------


def props(text: str) -> list[Property]:
    return parse(text, "server.properties")


def test_kafka_configs_map_to_flags() -> None:
    got = resolve(
        props(
            "node.id=3\nnum.partitions=6\nmessage.max.bytes=2000\n"
            "listeners=PLAINTEXT://:9092,CONTROLLER://127.0.0.1:9093\n"
            "advertised.listeners=PLAINTEXT://kafka.example:9092\n"
            "controller.listener.names=CONTROLLER\n"
            "log.dirs=/var/lib/kafka\nnum.network.threads=3\nzookeeper.connect=zk:2181\n"
            "listener.name.plaintext.foo=1\n"
        ),
        Path("server.properties"),
        FLAGS,
    )
    assert {k: v.value for k, v in got.values.items()} == {
        "node-id": "3",
        "num-partitions": "6",
        "message-max-bytes": "2000",
        "listeners": "PLAINTEXT://:9092",
        "advertised-listeners": "PLAINTEXT://kafka.example:9092",
    }
    assert got.values["num-partitions"].where == "server.properties:2 num.partitions"
    assert got.ignored == [
        "log.dirs",
        "num.network.threads",
        "zookeeper.connect",
        "listener.name.plaintext.foo",
    ]


def test_retention_precedence_ms_minutes_hours() -> None:
    path = Path("p")
    hours_minutes = resolve(props("log.retention.hours=2\nlog.retention.minutes=5\n"), path, FLAGS)
    assert hours_minutes.values["log-retention-ms"].value == str(5 * 60_000)
    all_three = resolve(
        props("log.retention.ms=1234\nlog.retention.hours=2\nlog.retention.minutes=5\n"),
        path,
        FLAGS,
    )
    assert all_three.values["log-retention-ms"].value == "1234"
    hours = resolve(props("log.retention.hours=168\n"), path, FLAGS)
    assert hours.values["log-retention-ms"].value == str(168 * 3_600_000)
    unlimited = resolve(props("log.retention.hours=-1\n"), path, FLAGS)
    assert unlimited.values["log-retention-ms"].value == "-1"


def test_config_for_a_flag_this_build_lacks_is_reported_not_fatal() -> None:
    got = resolve(props("num.partitions=2\nlog.retention.bytes=100\n"), Path("p"), FLAGS)
    assert list(got.values) == ["num-partitions"]
    assert got.unsupported == [
        "line 2: log.retention.bytes maps to --log-retention-bytes, which this skiff does not "
        "have yet: ignored"
    ]


def test_flag_names_beat_kafka_synonyms() -> None:
    got = resolve(props("num-partitions=4\nnum.partitions=6\n"), Path("p"), FLAGS)
    assert got.values["num-partitions"].value == "4"


def test_unknown_key_is_an_error_naming_the_line() -> None:
    with pytest.raises(ConfigFileError, match=r"^p:2: 'num.partition' is neither a Kafka"):
        resolve(props("num.partitions=1\nnum.partition=2\n"), Path("p"), FLAGS)


def test_listener_settings_map_to_their_flags() -> None:
    got = resolve(
        props(
            "listeners=INTERNAL://:9092,EXTERNAL://:9093,CONTROLLER://:9094\n"
            "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL,"
            "CONTROLLER:PLAINTEXT\n"
            "listener.name.external.ssl.keystore.location=/etc/tls/ext.pem\n"
            "listener.name.external.scram-sha-512.sasl.jaas.config=x required;\n"
        ),
        Path("p"),
        FLAGS,
    )
    assert got.listener_overrides == [
        ("EXTERNAL", "ssl.keystore.location", "/etc/tls/ext.pem"),
        ("EXTERNAL", "scram-sha-512.sasl.jaas.config", "x required;"),
    ]
    assert got.ignored == []
    assert {k: v.value for k, v in got.values.items()} == {
        "listeners": "INTERNAL://:9092,EXTERNAL://:9093",
        "listener-security-protocol-map": (
            "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT"
        ),
    }


def test_listener_errors() -> None:
    with pytest.raises(ConfigFileError, match="no listener besides controller listeners"):
        resolve(props("listeners=CONTROLLER://:9093\n"), Path("p"), FLAGS)
    with pytest.raises(ConfigFileError, match="expected NAME://HOST:PORT"):
        resolve(props("listeners=127.0.0.1:9092\n"), Path("p"), FLAGS)


def test_node_id_and_broker_id_must_agree() -> None:
    with pytest.raises(ConfigFileError, match="broker.id 2 differs from node.id 1"):
        resolve(props("node.id=1\nbroker.id=2\n"), Path("p"), FLAGS)
    same = resolve(props("broker.id=2\nnode.id=2\n"), Path("p"), FLAGS)
    assert same.values["node-id"].value == "2"


# -- precedence through the real command line -----------------------------------------------


def serve_args(argv: list[str]) -> object:
    cli._load_config(argv)
    try:
        return cli.build_parser().parse_args(argv)
    finally:
        cli._FILE_VALUES.clear()


def test_precedence_flag_env_file_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "server.properties"
    conf.write_text("num.partitions=5\nmessage.max.bytes=3000\nnode.id=7\n")
    monkeypatch.delenv("SKIFF_CONFIG", raising=False)
    for name in ("NUM_PARTITIONS", "MESSAGE_MAX_BYTES", "NODE_ID", "MIN_INSYNC_REPLICAS"):
        monkeypatch.delenv(f"SKIFF_{name}", raising=False)
    monkeypatch.setenv("SKIFF_MESSAGE_MAX_BYTES", "4000")
    args = serve_args(["serve", "--config", str(conf), "--node-id", "9"])
    assert args.node_id == 9  # flag beats file
    assert args.message_max_bytes == 4000  # env beats file
    assert args.num_partitions == 5  # file beats default
    assert args.min_insync_replicas == 1  # default
    monkeypatch.setenv("SKIFF_CONFIG", str(conf))  # the file named by the environment
    assert serve_args(["serve"]).num_partitions == 5


def test_bad_value_names_file_and_line(tmp_path: Path) -> None:
    conf = tmp_path / "server.properties"
    conf.write_text("# defaults\nnum.partitions=six\n")
    with pytest.raises(ConfigFileError, match=r"server.properties:2 num.partitions=six: "):
        cli._load_config(["serve", "--config", str(conf)])
    conf.write_text("compression.type=brotli\n")
    with pytest.raises(ConfigFileError, match="expected one of producer, uncompressed"):
        cli._load_config(["serve", "--config", str(conf)])
    cli._FILE_VALUES.clear()


def test_serve_refuses_a_bad_file_with_exit_2(tmp_path: Path) -> None:
    conf = tmp_path / "server.properties"
    conf.write_text("num.partitions=1\nfoo.bar=1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", "serve", "--config", str(conf)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert f"{conf}:2: 'foo.bar' is neither a Kafka broker config" in proc.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", "serve", "--config", str(tmp_path / "nope")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2
    assert "cannot read config file" in missing.stderr


# -- a sidecar started with a file ----------------------------------------------------------------


def test_sidecar_uses_file_defaults(own_redis: RedisServer, tmp_path: Path) -> None:
    conf = tmp_path / "server.properties"
    conf.write_text(
        "# a Kafka broker's file, reused\n"
        "process.roles=broker,controller\n"
        "listeners=PLAINTEXT://127.0.0.1:1\n"  # --listen from start_skiff beats it
        "log.dirs=/tmp/kafka-logs\n"
        "num.network.threads=3\n"
        "num.partitions=3\n"
        "message.max.bytes=2000\n"
        f"redis-url={own_redis.url}\n"
    )
    server = start_skiff(tmp_path / "skiff.log", "--config", str(conf))
    try:
        producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
        reports: list[KafkaError | None] = []
        producer.produce("auto-made", b"x" * 100, on_delivery=lambda e, m: reports.append(e))
        assert producer.flush(30) == 0
        producer.produce("auto-made", b"x" * 3000, on_delivery=lambda e, m: reports.append(e))
        assert producer.flush(30) == 0
        assert reports[0] is None
        assert reports[1] is not None and reports[1].code() == KafkaError.MSG_SIZE_TOO_LARGE
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        meta = admin.list_topics("auto-made", timeout=10)
        assert len(meta.topics["auto-made"].partitions) == 3
    finally:
        stop_process(server.proc)
    log = server.log()
    assert (
        f"{conf}: ignoring Kafka broker settings that do not apply to Skiff: process.roles, "
        "log.dirs, num.network.threads"
    ) in log
