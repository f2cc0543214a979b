"""Apache Kafka's `kafka-transactions` tool against Skiff (ListTransactions,
DescribeTransactions, DescribeProducers, WriteTxnMarkers): a hanging transaction is
listed, described, found among the partition's producers and aborted by an operator,
which frees read_committed readers."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Producer
from conftest import Skiff
from kafka_tools import run_tool
from log_helpers import create
from rawkafka import RawKafka

TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"
LIST_OFFSETS = 2
LIST_TRANSACTIONS = 66
INVALID_REQUEST = 42


def _table(out: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.split("\t") if cell.strip()] for line in out.splitlines()
    ]


def _latest_committed(kafka: RawKafka, topic: str) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": 1,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    [p] = kafka.request(LIST_OFFSETS, 7, body).topics[0].partitions
    return int(p.offset)


def test_kafka_transactions_lists_describes_and_aborts_a_hanging_transaction(
    skiff: Skiff,
) -> None:
    bootstrap = f"127.0.0.1:{skiff.port}"
    topic, txn_id = f"hang-{uuid.uuid4().hex[:8]}", f"hanger-{uuid.uuid4().hex[:8]}"
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, topic)
        plain = Producer({"bootstrap.servers": bootstrap})
        plain.produce(topic, b"before")
        plain.flush(30)  # offset 0
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, b"hanging")
        producer.flush(30)  # offset 1, never committed
        assert _latest_committed(kafka, topic) == 1

        def tool(*args: str) -> list[list[str]]:
            done = run_tool(TRANSACTIONS_COMMAND, "--bootstrap-server", bootstrap, *args)
            assert done.returncode == 0, done.stderr
            return _table(done.stdout)

        listed = tool("list")
        assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
        [row] = [r for r in listed if r[0] == txn_id]
        pid = row[2]
        assert row[3] == "Ongoing"

        header, described = tool("describe", "--transactional-id", txn_id)
        fields = dict(zip(header, described, strict=True))
        assert fields["ProducerId"] == pid
        assert fields["TransactionState"] == "Ongoing"
        assert fields["TopicPartitions"] == f"{topic}-0"

        header, *producers = tool("describe-producers", "--topic", topic, "--partition", "0")
        [hanging] = [dict(zip(header, p, strict=True)) for p in producers if p[0] == pid]
        assert hanging["CurrentTransactionStartOffset"] == "1"

        tool("abort", "--topic", topic, "--partition", "0", "--start-offset", "1")
        # The ABORT marker (offset 2) frees the last stable offset.
        assert _latest_committed(kafka, topic) == 3
        header, *producers = tool("describe-producers", "--topic", topic, "--partition", "0")
        [after] = [dict(zip(header, p, strict=True)) for p in producers if p[0] == pid]
        assert after["CurrentTransactionStartOffset"] == "None"  # the tool's word for -1


def test_list_transactions_patterns_run_in_linear_time_and_bad_ones_are_refused(
    skiff: Skiff,
) -> None:
    bootstrap = f"127.0.0.1:{skiff.port}"
    txn_id = "a" * 60 + f"-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    with RawKafka("127.0.0.1", skiff.port) as kafka:

        def listed(pattern: str | None) -> tuple[int, list[str]]:
            body = {
                "state_filters": [],
                "producer_id_filters": [],
                "duration_filter": -1,
                "transactional_id_pattern": pattern,
            }
            answer = kafka.request(LIST_TRANSACTIONS, 2, body)
            return int(answer.error_code), [t.transactional_id for t in answer.transaction_states]

        started = time.monotonic()
        # Catastrophic for a backtracking matcher on 60 a's; RE2 answers at once.
        assert listed("(a+)+$") == (0, [])
        assert time.monotonic() - started < 5
        code, ids = listed("a+-.*")
        assert code == 0 and txn_id in ids
        assert listed("(") == (INVALID_REQUEST, [])
