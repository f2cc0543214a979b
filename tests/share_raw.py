"""A raw-protocol share-group member (KIP-932) on tests/rawkafka.py, for protocol tests
and bench/share_groups.py: ShareGroupHeartbeat, ShareFetch and ShareAcknowledge with
the session epoch kept here, as Kafka's client keeps it.

    m = ShareMember("127.0.0.1", port, "group")
    m.join(["topic"])                         # heartbeat epoch 0 -> member epoch
    resp = m.fetch({topic_id: [0]}, max_records=100, max_wait_ms=500)
    offsets = acquired_offsets(resp)          # {(topic_id, p): [(offset, count), ...]}
    m.fetch({topic_id: [0]}, acks={(topic_id, 0): [(first, last, [1])]})
"""

from __future__ import annotations

import uuid
from typing import Any

from rawkafka import RawKafka

HEARTBEAT, FETCH, ACK = 76, 78, 79
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4

AckMap = dict[tuple[uuid.UUID, int], list[tuple[int, int, list[int]]]]


def _short_uuid() -> str:
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ShareMember:
    def __init__(self, host: str, port: int, group: str, member_id: str | None = None) -> None:
        self.kafka = RawKafka(host, port, timeout=30)
        self.group = group
        self.member_id = member_id or _short_uuid()
        self.member_epoch = 0
        self.session_epoch = 0

    def close(self) -> None:
        self.kafka.close()

    def heartbeat(self, epoch: int, topics: list[str] | None = None) -> Any:
        resp = self.kafka.request(
            HEARTBEAT,
            1,
            {
                "group_id": self.group,
                "member_id": self.member_id,
                "member_epoch": epoch,
                "rack_id": None,
                "subscribed_topic_names": topics,
            },
        )
        if resp.error_code == 0:
            self.member_epoch = resp.member_epoch
        return resp

    def join(self, topics: list[str]) -> Any:
        resp = self.heartbeat(0, topics)
        assert resp.error_code == 0, resp
        return resp

    def fetch(
        self,
        partitions: dict[uuid.UUID, list[int]],
        acks: AckMap | None = None,
        max_records: int = 500,
        max_wait_ms: int = 0,
        epoch: int | None = None,
        version: int = 2,
        renew: bool = False,
        max_bytes: int = 50 * 1024 * 1024,
    ) -> Any:
        """One ShareFetch; the session epoch steps on when the answer has no top-level
        error (an explicit `epoch` is sent as given)."""
        acks = acks or {}
        wanted = {tid: set(ps) for tid, ps in partitions.items()}
        for tid, p in acks:
            wanted.setdefault(tid, set()).add(p)
        topics = [
            {
                "topic_id": tid,
                "partitions": [
                    {
                        "partition_index": p,
                        "acknowledgement_batches": [
                            {"first_offset": f, "last_offset": la, "acknowledge_types": t}
                            for f, la, t in acks.get((tid, p), [])
                        ],
                    }
                    for p in sorted(ps)
                ],
            }
            for tid, ps in wanted.items()
        ]
        sent = self.session_epoch if epoch is None else epoch
        resp = self.kafka.request(
            FETCH,
            version,
            {
                "group_id": self.group,
                "member_id": self.member_id,
                "share_session_epoch": sent,
                "max_wait": max_wait_ms,
                "min_bytes": 1,
                "max_bytes": max_bytes,
                "max_records": max_records,
                "batch_size": max_records,
                "is_renew_ack": renew,
                "topics": topics,
                "forgotten_topics_data": [],
            },
            timeout=max_wait_ms / 1000 + 30,
        )
        if epoch is None and resp.error_code == 0:
            self.session_epoch = -1 if sent == -1 else (sent + 1 if sent >= 0 else 0)
        return resp

    def acknowledge(self, acks: AckMap, epoch: int | None = None, version: int = 2) -> Any:
        by_topic: dict[uuid.UUID, dict[int, list[tuple[int, int, list[int]]]]] = {}
        for (tid, p), batches in acks.items():
            by_topic.setdefault(tid, {})[p] = batches
        sent = self.session_epoch if epoch is None else epoch
        resp = self.kafka.request(
            ACK,
            version,
            {
                "group_id": self.group,
                "member_id": self.member_id,
                "share_session_epoch": sent,
                "is_renew_ack": any(RENEW in t for bs in acks.values() for _, _, t in bs),
                "topics": [
                    {
                        "topic_id": tid,
                        "partitions": [
                            {
                                "partition_index": p,
                                "acknowledgement_batches": [
                                    {"first_offset": f, "last_offset": la, "acknowledge_types": t}
                                    for f, la, t in bs
                                ],
                            }
                            for p, bs in parts.items()
                        ],
                    }
                    for tid, parts in by_topic.items()
                ],
            },
        )
        if epoch is None and resp.error_code == 0:
            self.session_epoch += 1
        return resp


def acquired_offsets(resp: Any) -> dict[tuple[uuid.UUID, int], list[tuple[int, int]]]:
    """(offset, delivery count) of every acquired record, per (topic id, partition)."""
    out: dict[tuple[uuid.UUID, int], list[tuple[int, int]]] = {}
    for t in resp.responses:
        for p in t.partitions:
            for a in p.acquired_records:
                out.setdefault((t.topic_id, p.partition_index), []).extend(
                    (o, a.delivery_count) for o in range(a.first_offset, a.last_offset + 1)
                )
    return out


def partition_errors(resp: Any) -> dict[tuple[uuid.UUID, int], tuple[int, int]]:
    """(error code, acknowledge error code) per partition of a ShareFetch answer, or
    (error code, 0) of a ShareAcknowledge answer."""
    return {
        (t.topic_id, p.partition_index): (
            int(p.error_code),
            int(getattr(p, "acknowledge_error_code", 0)),
        )
        for t in resp.responses
        for p in t.partitions
    }
