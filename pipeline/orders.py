"""The sample pipeline's input: order events as JSON, and the same aggregation in plain
Python that the Spark job computes (the end-to-end test compares the two)."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

PRODUCTS = ("anchor", "buoy", "compass", "dinghy", "oar", "rope", "sail")


@dataclass(frozen=True)
class Order:
    order_id: str
    product: str
    quantity: int
    price_cents: int  # exact money: Spark reads the price as decimal(10,2)
    event_time_ms: int

    def json(self) -> bytes:
        return json.dumps(
            {
                "order_id": self.order_id,
                "product": self.product,
                "quantity": self.quantity,
                "price": self.price_cents / 100,  # repr is the shortest exact decimal
                # ISO-8601 with milliseconds and a zone: Spark's from_json parses it exactly
                "event_time": _iso(self.event_time_ms),
            }
        ).encode()


def _iso(ms: int) -> str:
    import datetime

    moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def generate(count: int, start_ms: int, span_ms: int, disorder_ms: int, seed: int) -> list[Order]:
    """`count` orders with event times spread over `span_ms`, each up to `disorder_ms`
    late relative to the order it is sent in (keep it under the job's watermark delay, or
    Spark drops the late ones and the comparison with plain Python no longer holds)."""
    rng = random.Random(seed)
    orders = []
    for i in range(count):
        on_time = start_ms + span_ms * i // max(1, count)
        orders.append(
            Order(
                order_id=f"o-{seed}-{i}",
                product=rng.choice(PRODUCTS),
                quantity=rng.randint(1, 5),
                price_cents=rng.randint(100, 10_000),
                event_time_ms=max(start_ms, on_time - rng.randint(0, disorder_ms)),
            )
        )
    return orders


def produce(bootstrap: str, topic: str, orders: list[Order]) -> None:
    """Into `topic`, keyed by product (so one product's orders keep their order)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    errors: list[Any] = []
    for order in orders:
        producer.produce(
            topic,
            key=order.product.encode(),
            value=order.json(),
            on_delivery=lambda err, _m: errors.append(err) if err else None,
        )
        producer.poll(0)
    if producer.flush(60) or errors:
        raise RuntimeError(f"orders not delivered: {errors[:3]}")


Key = tuple[int, str]  # (window start ms, product)


def expected_revenue(orders: list[Order], window_ms: int, delay_ms: int) -> dict[Key, dict]:
    """Revenue (Decimal), order count and quantity per product and tumbling window, for the
    windows Spark emits in append mode: those ending at or before the watermark (the
    largest event time seen, less the delay)."""
    watermark = max(o.event_time_ms for o in orders) - delay_ms
    cents: dict[Key, int] = defaultdict(int)
    counts: dict[Key, list[int]] = defaultdict(lambda: [0, 0])
    for o in orders:
        start = o.event_time_ms - o.event_time_ms % window_ms
        if start + window_ms <= watermark:
            key = (start, o.product)
            cents[key] += o.quantity * o.price_cents
            counts[key][0] += 1
            counts[key][1] += o.quantity
    return {
        key: {"revenue": Decimal(c) / 100, "orders": counts[key][0], "quantity": counts[key][1]}
        for key, c in cents.items()
    }
