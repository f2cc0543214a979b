"""The HTTP API (sidecar/queues/http_api.py) against its OpenAPI document, driven by
schemathesis over real TCP to a real sidecar: requests generated from the document
(valid ones and, in negative mode, invalid ones) never get a 500, every answer has a
status, content type and body the document declares, and invalid requests are refused
with a 4xx. The document is the one the sidecar serves (test_queues_http.py checks
GET /v1/openapi.json equals it). Bounded: EXAMPLES per operation and mode. The sidecar
and its Redis are this module's own: the generated topics and groups stay out of the
session's Redis. The sidecar runs with --http-auth basic (the document then declares
it): requests carry a user's credentials, and schemathesis' checks also see that
requests without them are refused as declared."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from conftest import Skiff
from http_auth_setup import basic, basic_auth_skiff
from hypothesis import HealthCheck, settings

from sidecar.queues import openapi

EXAMPLES = 20  # per operation and generation mode: ~60 s on a loaded 2-core machine

USER, PASSWORD = "schema-user", "schema-pw"
AUTH = basic(USER, PASSWORD)["Authorization"]
OPEN_PATHS = ("/healthz", "/readyz", "/metrics", "/v1/openapi.json")

schema = schemathesis.openapi.from_dict(openapi.document(("basic",), OPEN_PATHS))
schema.config.generation.update(
    modes=[schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE],
    database="none",  # no .hypothesis/ directory: runs are derandomized instead
)


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Skiff]:
    tmp = tmp_path_factory.mktemp("http-schema")
    with basic_auth_skiff(tmp, {USER: PASSWORD}) as server:
        _wait_ready(server.http_port, tmp / "skiff.log")
        yield server


def _wait_ready(port: int, log: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5):
                return
        except (OSError, urllib.error.URLError):
            if time.monotonic() > deadline:
                pytest.fail(f"/readyz not 200 within {seconds:g}s; see {log}")
            time.sleep(0.1)


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,  # the same requests every run: a failure is reproducible
)
def test_api_answers_as_documented(case: schemathesis.Case, sidecar: Skiff) -> None:
    case.call_and_validate(
        base_url=f"http://127.0.0.1:{sidecar.http_port}",
        timeout=30,
        headers={"Authorization": AUTH},
    )
