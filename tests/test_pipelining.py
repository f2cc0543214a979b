"""Pipelined requests on one connection: consecutive Produce requests run concurrently
in Skiff, yet every partition gets its records in request order and every response
comes back in request order."""

from __future__ import annotations

import uuid

from conftest import Skiff
from rawkafka import RawKafka, Rec, build_batch, fetch_request, fetched_records, produce_request

PRODUCE, FETCH, METADATA, CREATE_TOPICS = 0, 1, 3, 19


def test_pipelined_produces_keep_partition_order(skiff: Skiff) -> None:
    topic = f"pipe-{uuid.uuid4().hex[:10]}"
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        created = kafka.request(
            CREATE_TOPICS,
            5,
            {
                "topics": [
                    {
                        "name": topic,
                        "num_partitions": 3,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout": 5000,
            },
        )
        assert created.topics[0].error_code == 0
        sent: list[tuple[int, int, list[int]]] = []  # (correlation id, api key, partitions)
        expected: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
        for i in range(60):
            # Every request hits partition 0; others hit 1 or 2 as well, with batches of
            # different sizes so their appends take different times.
            parts = [0] + ([1] if i % 2 else [2])
            batches = {}
            for p in parts:
                values = [f"{p}:{i}:{j}".encode() for j in range(1 + (i * 37 + p) % 300)]
                expected[p] += values
                batches[p] = build_batch([Rec(v) for v in values])
            cid = kafka.send(PRODUCE, 9, produce_request(topic, batches, acks=1))
            sent.append((cid, PRODUCE, parts))
            if i % 17 == 5:  # a non-produce request in the middle of the pipeline
                cid = kafka.send(
                    METADATA,
                    12,
                    {
                        "topics": [{"name": topic}],
                        "allow_auto_topic_creation": False,
                        "include_topic_authorized_operations": False,
                    },
                )
                sent.append((cid, METADATA, []))
        next_offset = {0: 0, 1: 0, 2: 0}
        for cid, api_key, parts in sent:
            frame = kafka.recv_raw(timeout=30)
            got_cid = int.from_bytes(frame[:4], "big", signed=True)
            assert got_cid == cid, "responses must come back in request order"
            if api_key != PRODUCE:
                continue
            resp = kafka.decode_response(PRODUCE, 9, frame)
            results = {p.index: p for p in resp.responses[0].partition_responses}
            assert sorted(results) == parts
            for p in parts:
                assert results[p].error_code == 0
                # Base offsets follow request order within each partition.
                assert results[p].base_offset == next_offset[p]
                next_offset[p] += sum(
                    1
                    for v in expected[p]
                    if v.startswith(f"{p}:{_request_index(sent, cid)}:".encode())
                )
        for p, values in expected.items():
            got: list[Rec] = []
            while len(got) < len(values):
                resp = kafka.request(FETCH, 12, fetch_request(topic, {p: len(got)}))
                batch = fetched_records(resp.responses[0].partitions[0].records)
                assert batch, f"partition {p} stopped at offset {len(got)}"
                got += batch
            assert [r.value for r in got] == values
            assert [r.offset for r in got] == list(range(len(values)))


def _request_index(sent: list[tuple[int, int, list[int]]], cid: int) -> int:
    produce_cids = [c for c, api_key, _ in sent if api_key == PRODUCE]
    return produce_cids.index(cid)
