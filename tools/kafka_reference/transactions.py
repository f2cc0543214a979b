"""Transactions (docs/transactions.md): InitProducerId with a transactional id,
AddPartitionsToTxn, a transactional Produce, EndTxn, read_committed Fetch and ListOffsets,
TxnOffsetCommit, DescribeTransactions, ListTransactions, DescribeProducers and their
errors. Producer ids differ between brokers: answers name them as "the id" instead."""

from __future__ import annotations

import time
import uuid
from typing import Any

from aiokafka.record.default_records import DefaultRecordBatchBuilder

from .constants import (
    BASE_TS,
    FETCH,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    LIST_OFFSETS,
    PRODUCE,
    RETRIABLE_COORDINATOR,
    RUN,
)
from .talk import SetupError, Side, add, ask, error_of, make_topic, metadata_topic, topic

ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66


def _txn_batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, 1, pid, epoch, seq, 1 << 20)
    for i, value in enumerate(values):
        builder.append(i, BASE_TS + i, None, value, [])
    return bytes(builder.build())


def _init(side: Side, txn_id: str, timeout_ms: int = 60_000) -> dict[str, Any]:
    body = {
        "transactional_id": txn_id,
        "transaction_timeout": timeout_ms,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    # Kafka makes __transaction_state (50 partitions) on the first FindCoordinator for a
    # transactional id, as clients send before InitProducerId: that takes a while.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        found = ask(side, FIND_COORDINATOR, 3, {"key": txn_id, "key_type": 1})
        if error_of(found) == 0:
            break
        time.sleep(0.5)
    while True:
        answer = ask(side, INIT_PRODUCER_ID, 4, body)
        if error_of(answer) not in RETRIABLE_COORDINATOR or time.monotonic() > deadline:
            return answer  # type: ignore[no-any-return]
        time.sleep(0.2)


def _masked(answer: Any, pid: int) -> Any:
    """The answer with the producer id replaced by "the id" wherever it appears."""
    if isinstance(answer, dict):
        return {k: _masked(v, pid) for k, v in answer.items()}
    if isinstance(answer, list):
        return [_masked(v, pid) for v in answer]
    if isinstance(answer, int) and answer == pid and pid > 1000:
        return "the id"
    return answer


def _ids_named(answer: Any, names: dict[uuid.UUID, str]) -> Any:
    """The answer with the given topic ids (which differ between brokers) named."""
    if isinstance(answer, dict):
        return {k: _ids_named(v, names) for k, v in answer.items()}
    if isinstance(answer, list):
        return [_ids_named(v, names) for v in answer]
    for topic_id, label in names.items():
        if str(answer) == str(topic_id):
            return label
    return answer


def _add(side: Side, txn_id: str, pid: int, epoch: int, name: str, version: int = 3) -> Any:
    body = {
        "v3_and_below_transactional_id": txn_id,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": name, "partitions": [0]}],
    }
    deadline = time.monotonic() + 15
    while True:
        answer = ask(side, ADD_PARTITIONS, version, body)
        code = (
            answer["results_by_topic_v3_and_below"][0]["results_by_partition"][0][
                "partition_error_code"
            ]
            if isinstance(answer, dict)
            else None
        )
        if code not in RETRIABLE_COORDINATOR + (51,) or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)  # 51 CONCURRENT_TRANSACTIONS: the last one still completing


def _produce(side: Side, name: str, txn_id: str, batch: bytes, version: int = 9) -> Any:
    body = {
        "transactional_id": txn_id,
        "acks": -1,
        "timeout": 5000,
        "topic_data": [{"name": name, "partition_data": [{"index": 0, "records": batch}]}],
    }
    return ask(side, PRODUCE, version, body)


def _produce_error(answer: Any) -> int | None:
    if not isinstance(answer, dict):
        return None
    return int(answer["responses"][0]["partition_responses"][0]["error_code"])


def _end(side: Side, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> Any:
    body = {
        "transactional_id": txn_id,
        "producer_id": pid,
        "producer_epoch": epoch,
        "committed": commit,
    }
    return ask(side, END_TXN, version, body)


def _fetch_committed(side: Side, name: str) -> Any:
    body = {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": name,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
        "forgotten_topics_data": [],
    }
    answer = ask(side, FETCH, 11, body)
    if not isinstance(answer, dict):
        return answer
    part = answer["responses"][0]["partitions"][0]
    keep = ("error_code", "high_watermark", "last_stable_offset", "aborted_transactions", "records")
    return {k: part[k] for k in keep}


def _latest_committed(side: Side, name: str) -> Any:
    body = {
        "replica_id": -1,
        "isolation_level": 1,
        "topics": [{"name": name, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    answer = ask(side, LIST_OFFSETS, 7, body)
    if not isinstance(answer, dict):
        return answer
    return answer["topics"][0]["partitions"][0]["offset"]


def _group_coordinator(side: Side, group: str) -> None:
    """Wait for the group's coordinator: Kafka makes __consumer_offsets on the first ask."""
    deadline = time.monotonic() + 60
    while error_of(ask(side, FIND_COORDINATOR, 3, {"key": group, "key_type": 0})) != 0:
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)


def _offsets_body(
    txn_id: str, group: str, pid: int, epoch: int, name: str, offset: int, metadata: str
) -> dict[str, Any]:
    """TxnOffsetCommit of partition 0's offset, without member fields."""
    partition = {
        "partition_index": 0,
        "committed_offset": offset,
        "committed_leader_epoch": -1,
        "committed_metadata": metadata,
    }
    return {
        "transactional_id": txn_id,
        "group_id": group,
        "producer_id": pid,
        "producer_epoch": epoch,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [{"name": name, "partitions": [partition]}],
    }


def _started(side: Side, label: str) -> tuple[str, str, int, int]:
    name, txn_id = topic(label), f"{RUN}-{label}"
    make_topic(side, name)
    init = _init(side, txn_id)
    if error_of(init) != 0:
        raise SetupError(f"InitProducerId: {init}")
    return name, txn_id, int(init["producer_id"]), int(init["producer_epoch"])


def transaction_scenarios() -> None:
    def ended(commit: bool) -> Any:
        def run(side: Side) -> Any:
            name, txn_id, pid, epoch = _started(side, "txn-commit" if commit else "txn-abort")
            out: dict[str, Any] = {"add": _add(side, txn_id, pid, epoch, name)}
            out["produce"] = _produce(side, name, txn_id, _txn_batch(pid, epoch, 0, [b"a", b"b"]))
            out["latest_committed_while_open"] = _latest_committed(side, name)
            out["fetch_committed_while_open"] = _fetch_committed(side, name)
            out["end"] = _end(side, txn_id, pid, epoch, commit)
            out["end_again"] = _end(side, txn_id, pid, epoch, commit)  # a retried EndTxn
            out["end_other_way"] = _end(side, txn_id, pid, epoch, not commit)
            out["latest_committed"] = _latest_committed(side, name)
            out["fetch_committed"] = _fetch_committed(side, name)
            describe = ask(side, DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn_id]})
            out["describe_transactions"] = describe
            out["describe_producers"] = ask(
                side,
                DESCRIBE_PRODUCERS,
                0,
                {"topics": [{"name": name, "partition_indexes": [0]}]},
            )
            return _masked(out, pid)

        return run

    add("txn.commit", ended(True), "AddPartitionsToTxn v3, Produce, EndTxn v3 commit (twice)")
    add("txn.abort", ended(False), "the same, aborted: the aborted transaction is listed")

    def fenced(side: Side) -> Any:
        name, txn_id, pid, epoch = _started(side, "txn-fenced")
        _add(side, txn_id, pid, epoch, name)
        _produce(side, name, txn_id, _txn_batch(pid, epoch, 0, [b"zombie"]))
        again = _init(side, txn_id)  # a new instance: aborts the open transaction
        out = {
            "init_again_same_id": again.get("producer_id") == pid,
            "old_epoch_add": _add(side, txn_id, pid, epoch, name),
            "old_epoch_end": _end(side, txn_id, pid, epoch, True),
            "old_epoch_produce": _produce(side, name, txn_id, _txn_batch(pid, epoch, 1, [b"late"])),
            "fetch_committed": _fetch_committed(side, name),
        }
        return _masked(out, pid)

    add("txn.fenced", fenced, "a second InitProducerId fences the first instance")

    def no_transaction(side: Side) -> Any:
        name, txn_id, pid, epoch = _started(side, "txn-none")
        return _masked({"end_without_transaction": _end(side, txn_id, pid, epoch, True)}, pid)

    add("txn.end_without_transaction", no_transaction, "EndTxn v3 with nothing added")

    def timeout_too_long(side: Side) -> Any:
        return _init(side, f"{RUN}-txn-long", 900_001)

    add("txn.timeout_too_long", timeout_too_long, "transaction.timeout.ms 900001")

    def unknown(side: Side) -> Any:
        return {
            "describe": ask(
                side, DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [f"{RUN}-nobody"]}
            ),
            "list_bogus_state": ask(
                side,
                LIST_TRANSACTIONS,
                0,
                {"state_filters": ["Bogus"], "producer_id_filters": []},
            ),
            "add_offsets_unknown": ask(
                side,
                ADD_OFFSETS,
                3,
                {
                    "transactional_id": f"{RUN}-nobody",
                    "producer_id": 123,
                    "producer_epoch": 0,
                    "group_id": f"{RUN}-g",
                },
            ),
        }

    add("txn.unknown_id", unknown, "DescribeTransactions, ListTransactions, AddOffsetsToTxn")

    def offsets(side: Side) -> Any:
        name, txn_id, pid, epoch = _started(side, "txn-offsets")
        group = f"{RUN}-txn-group"
        out: dict[str, Any] = {
            "add_offsets": ask(
                side,
                ADD_OFFSETS,
                3,
                {
                    "transactional_id": txn_id,
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "group_id": group,
                },
            )
        }
        _group_coordinator(side, group)
        body = _offsets_body(txn_id, group, pid, epoch, name, 5, "m")
        out["txn_offset_commit"] = ask(side, TXN_OFFSET_COMMIT, 3, body)
        out["end"] = _end(side, txn_id, pid, epoch, True)
        return _masked(out, pid)

    add("txn.offsets", offsets, "AddOffsetsToTxn v3, TxnOffsetCommit v3, EndTxn commit")

    def member_checks(side: Side) -> Any:
        """KIP-447: TxnOffsetCommit v3's member id and generation, checked as the group
        coordinator checks a transactional commit."""
        from .groups import Scene

        name, txn_id, pid, epoch = _started(side, "txn-members")
        with Scene(side) as sc:
            a = sc.member("A", f"{RUN}-txn-members")
            a.join_new()
            sync = a.sync(assignments={a.member_id: b""})
            ids = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch}
            added = ask(side, ADD_OFFSETS, 3, {**ids, "group_id": a.group})

            def commit(generation: int, member: str, group: str = a.group) -> Any:
                partition = {
                    "partition_index": 0,
                    "committed_offset": 5,
                    "committed_leader_epoch": -1,
                    "committed_metadata": None,
                }
                body = {
                    **ids,
                    "group_id": group,
                    "generation_id": generation,
                    "member_id": member,
                    "group_instance_id": None,
                    "topics": [{"name": name, "partitions": [partition]}],
                }
                return ask(side, TXN_OFFSET_COMMIT, 3, body)

            out = {
                "sync": sync,
                "add_offsets": added,
                "older_generation": commit(a.generation - 1, a.member_id),
                "newer_generation": commit(a.generation + 1, a.member_id),
                "unknown_member": commit(a.generation, "no-such-member"),
                "unknown_group": commit(3, "", f"{RUN}-txn-no-group"),
                "no_member_fields": commit(-1, ""),
                "current_member": commit(a.generation, a.member_id),
                "end": _end(side, txn_id, pid, epoch, True),
            }
            return _masked(sc.out(out), pid)

    add("txn.offsets_members", member_checks, "TxnOffsetCommit v3 generation and member checks")

    def version_2(side: Side) -> Any:
        """Transaction version 2 (KIP-890 part 2; Kafka 4.x finalizes it): Produce v12
        adds the partition, TxnOffsetCommit v5 the group, EndTxn v5 bumps the epoch."""
        name, txn_id, pid, epoch = _started(side, "txn-v2")
        group = f"{RUN}-txn-v2-group"
        _group_coordinator(side, group)

        def produce(e: int, seq: int, values: list[bytes]) -> Any:
            answer = _produce(side, name, txn_id, _txn_batch(pid, e, seq, values), 12)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and _produce_error(answer) == 51:
                time.sleep(0.2)  # CONCURRENT_TRANSACTIONS: the last one still completing
                answer = _produce(side, name, txn_id, _txn_batch(pid, e, seq, values), 12)
            return answer

        def settled(answer: Any) -> Any:
            """Kafka answers EndTxn before its markers are written: wait for them, so
            what follows meets a completed transaction on both sides."""
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                described = ask(side, DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn_id]})
                state = described["transaction_states"][0]["transaction_state"]
                if state.startswith("Complete"):
                    break
                time.sleep(0.1)
            return answer

        out: dict[str, Any] = {
            "produce": produce(epoch, 0, [b"a", b"b"]),
            "offsets": ask(
                side, TXN_OFFSET_COMMIT, 5, _offsets_body(txn_id, group, pid, epoch, name, 1, "")
            ),
            "end": settled(_end(side, txn_id, pid, epoch, True, 5)),
            "end_again": _end(side, txn_id, pid, epoch, True, 5),
            "end_other_way": _end(side, txn_id, pid, epoch, False, 5),
            "old_epoch_produce": produce(epoch, 2, [b"late"]),
            "next_produce": produce(epoch + 1, 0, [b"x"]),
            "next_abort": settled(_end(side, txn_id, pid, epoch + 1, False, 5)),
            "commit_nothing": _end(side, txn_id, pid, epoch + 2, True, 5),
            "abort_nothing": _end(side, txn_id, pid, epoch + 2, False, 5),
            "fetch_committed": _fetch_committed(side, name),
            "describe_producers": ask(
                side, DESCRIBE_PRODUCERS, 0, {"topics": [{"name": name, "partition_indexes": [0]}]}
            ),
        }
        return _masked(out, pid)

    add("txn.v2", version_2, "Produce v12, TxnOffsetCommit v5, EndTxn v5 (Kafka 4.x only)")

    def by_topic_id(side: Side) -> Any:
        """TxnOffsetCommit v6 (KIP-1319, Kafka 4.4): topics by id, an unknown id, and a
        member's commit to a group nobody made (v6 and v5)."""
        name, txn_id, pid, epoch = _started(side, "txn-v6")
        group = f"{RUN}-txn-v6-group"
        _group_coordinator(side, group)
        known = uuid.UUID(str(metadata_topic(side, name)["topic_id"]))
        unknown = uuid.uuid4()
        body = _offsets_body(txn_id, group, pid, epoch, name, 4, "m")
        [entry] = body.pop("topics")
        body["topics"] = [
            {"topic_id": known, "partitions": entry["partitions"]},
            {"topic_id": unknown, "partitions": entry["partitions"]},
        ]
        member = {"group_id": f"{group}-none", "generation_id": 3, "member_id": "m-1"}
        out: dict[str, Any] = {
            "by_id": ask(side, TXN_OFFSET_COMMIT, 6, body),
            "member_of_no_group_v6": ask(side, TXN_OFFSET_COMMIT, 6, body | member),
            "member_of_no_group_v5": ask(
                side,
                TXN_OFFSET_COMMIT,
                5,
                _offsets_body(txn_id, group, pid, epoch, name, 4, "m") | member,
            ),
        }
        out["end"] = _end(side, txn_id, pid, epoch, True, 5)
        named = _ids_named(out, {known: "the topic's id", unknown: "an unknown id"})
        for answer in (named["by_id"], named["member_of_no_group_v6"]):
            if isinstance(answer, dict):  # Kafka's order of topics follows no rule
                answer["topics"].sort(key=lambda t: str(t["topic_id"]))
        return _masked(named, pid)

    add("txn.v6_by_topic_id", by_topic_id, "TxnOffsetCommit v6 (Kafka 4.4 only)")
