"""Feature flags (storage/features.py): ApiVersions reports transaction.version, and
UpdateFeatures changes it for every sidecar, with Kafka's checks; Kafka 4.2's own
`kafka-features` describes, downgrades and upgrades it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import RedisServer, Skiff, start_skiff, stop_process
from kafka_tools import run_batch
from log_helpers import wait_for
from rawkafka import RawKafka

API_VERSIONS, UPDATE_FEATURES = 18, 57
INVALID_UPDATE_VERSION = 95
UPGRADE, SAFE_DOWNGRADE, BOGUS = 1, 2, 9


@pytest.fixture
def two_sidecars(own_redis: RedisServer, tmp_path: Path) -> Iterator[tuple[Skiff, Skiff]]:
    first = start_skiff(tmp_path / "a.log", "--redis-url", own_redis.url)
    second = start_skiff(tmp_path / "b.log", "--redis-url", own_redis.url)
    yield first, second
    stop_process(first.proc)
    stop_process(second.proc)


@pytest.fixture
def own_skiff(own_redis: RedisServer, tmp_path: Path) -> Iterator[Skiff]:
    """One sidecar: the tool's requests all meet the level it just set (another sidecar
    sees it within its one-second refresh)."""
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url)
    yield server
    stop_process(server.proc)


def _finalized(port: int) -> tuple[dict[str, int], int]:
    with RawKafka("127.0.0.1", port) as kafka:
        resp = kafka.request(
            API_VERSIONS, 4, {"client_software_name": "t", "client_software_version": "1"}
        )
    levels = {f.name: f.max_version_level for f in resp.finalized_features}
    return levels, int(resp.finalized_features_epoch)


def _update(port: int, feature: str, level: int, upgrade_type: int, version: int = 1) -> object:
    update = {"feature": feature, "max_version_level": level}
    if version == 0:
        update["allow_downgrade"] = upgrade_type != UPGRADE
    else:
        update["upgrade_type"] = upgrade_type
    body = {"timeout": 60_000, "feature_updates": [update], "validate_only": False}
    with RawKafka("127.0.0.1", port) as kafka:
        return kafka.request(UPDATE_FEATURES, version, body)


def test_update_features_reaches_every_sidecar_with_kafkas_checks(
    two_sidecars: tuple[Skiff, Skiff],
) -> None:
    a, b = two_sidecars
    levels, epoch = _finalized(a.port)
    assert levels == {"transaction.version": 2}

    refused = [
        (_update(a.port, "transaction.version", 1, UPGRADE), "Can't downgrade the version"),
        (_update(a.port, "transaction.version", 3, UPGRADE), "only supports versions [0-2]"),
        (_update(a.port, "metadata.version", 27, UPGRADE), "does not support this feature"),
        (_update(a.port, "transaction.version", 1, BOGUS), "does not support the given upgrade"),
    ]
    for resp, why in refused:
        assert resp.error_code == INVALID_UPDATE_VERSION and why in resp.error_message, resp
        assert resp.results == ()
    assert _finalized(b.port) == (levels, epoch)  # nothing changed

    done = _update(a.port, "transaction.version", 1, SAFE_DOWNGRADE)
    assert done.error_code == 0 and [(r.feature, r.error_code) for r in done.results] == [
        ("transaction.version", 0)
    ]
    # The other sidecar reports it too (within its one-second refresh), at a higher epoch.
    got = wait_for(
        lambda: (lambda f: f if f[0] == {"transaction.version": 1} else None)(_finalized(b.port)),
        what="the new level on the other sidecar",
    )
    assert got[1] > epoch
    assert _update(a.port, "transaction.version", 2, SAFE_DOWNGRADE).error_code == (
        INVALID_UPDATE_VERSION
    )
    # v0's allow_downgrade does not reach Kafka's controller: v0 only upgrades.
    refused = _update(b.port, "transaction.version", 0, SAFE_DOWNGRADE, version=0)
    assert refused.error_code == INVALID_UPDATE_VERSION
    # Level 0 leaves the feature out of FinalizedFeatures.
    assert _update(b.port, "transaction.version", 0, SAFE_DOWNGRADE).error_code == 0
    assert _finalized(b.port)[0] == {}


def test_kafka_features_tool(own_skiff: Skiff) -> None:
    bootstrap = f"127.0.0.1:{own_skiff.port}"
    describe = ["--bootstrap-server", bootstrap, "describe"]
    runs = [
        describe,
        ["--bootstrap-server", bootstrap, "downgrade", "--feature", "transaction.version=0"],
        describe,
        ["--bootstrap-server", bootstrap, "upgrade", "--feature", "transaction.version=2"],
        describe,
        ["--bootstrap-server", bootstrap, "upgrade", "--feature", "transaction.version=5"],
    ]
    out = run_batch("4.2.0", "kafka-features", runs)
    assert [r.returncode for r in out[:5]] == [0, 0, 0, 0, 0], out
    assert (
        "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\t"
        "FinalizedVersionLevel: 2" in out[0].stdout
    ), out[0].stdout
    assert "FinalizedVersionLevel: 0" in out[2].stdout, out[2].stdout
    assert "FinalizedVersionLevel: 2" in out[4].stdout, out[4].stdout
    assert out[5].returncode != 0
    assert "only supports versions [0-2]" in out[5].stdout + out[5].stderr, out[5]
