"""The sidecar's event loop: uvloop, except with a TLS listener or UDP ingest
(sidecar/process/event_loop.py)."""

from __future__ import annotations

import asyncio

import uvloop

from sidecar.config.listeners import parse_endpoints, parse_protocol_map
from sidecar.config.settings import HostPort, Settings
from sidecar.process import event_loop


def test_plaintext_and_sasl_plaintext_listeners_run_on_uvloop() -> None:
    settings = Settings(
        listeners=parse_endpoints("PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093"),
        listener_security_protocol_map=parse_protocol_map(
            "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT"
        ),
        inter_broker_listener_name="internal",
    )
    assert event_loop.loop_factory(Settings()) is uvloop.new_event_loop
    assert event_loop.loop_factory(settings) is uvloop.new_event_loop

    async def loop_type() -> type:
        return type(asyncio.get_running_loop())

    assert event_loop.run(loop_type(), settings) is uvloop.Loop


def test_a_tls_listener_keeps_asyncios_loop() -> None:
    for protocol in ("SSL", "SASL_SSL"):
        settings = Settings(
            listeners=parse_endpoints("PLAINTEXT://127.0.0.1:9092,SECURE://127.0.0.1:9093"),
            listener_security_protocol_map=parse_protocol_map(
                f"PLAINTEXT:PLAINTEXT,SECURE:{protocol}"
            ),
            inter_broker_listener_name="PLAINTEXT",
        )
        assert event_loop.loop_factory(settings) is None, protocol

        async def loop_type() -> type:
            return type(asyncio.get_running_loop())

        assert event_loop.run(loop_type(), settings) is not uvloop.Loop, protocol


def test_udp_ingest_keeps_asyncios_loop() -> None:
    settings = Settings(udp_listen=HostPort("127.0.0.1", 9999), udp_topic="t")
    assert event_loop.loop_factory(settings) is None
