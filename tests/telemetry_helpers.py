"""Reading a sidecar's HTTP endpoint in tests: GET with status, and /metrics parsed by
prometheus_client's own text parser into {(sample name, labels): value}."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import known_secrets
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def get(port: int, path: str, timeout: float = 5.0) -> tuple[int, bytes, str]:
    """(status, body, content type) of GET http://127.0.0.1:port/path."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            body = r.read()
            if path.startswith("/metrics"):
                known_secrets.output_text(f"GET :{port}{path}", body)
            return r.status, body, r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("Content-Type", "")


def get_json(port: int, path: str) -> tuple[int, Any]:
    status, body, _ = get(port, path)
    return status, json.loads(body)


def scrape(port: int) -> Samples:
    status, body, content_type = get(port, "/metrics")
    assert status == 200
    assert content_type.startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """A sample's value; 0 when absent (a counter not touched yet)."""
    return samples.get((name, frozenset(labels.items())), 0.0)
