"""The sidecar's event loop: uvloop where installed, asyncio's own loop otherwise.

uvloop is a dependency on Linux and macOS, not on Windows. Sidecars with an SSL or
SASL_SSL listener keep asyncio's loop: security/tls.py pauses a new connection in
connection_made until start_tls takes over, and uvloop starts reading after
connection_made whatever the protocol asked, so a ClientHello could reach the plain
protocol and the handshake would stall. Sidecars with UDP ingest keep it too: its reader
drains the socket itself while uvloop's transport reads the same socket, and datagrams
came out of order (tests/test_udp_ingest.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from sidecar.config import listeners as listener_config
from sidecar.config.settings import Settings

T = TypeVar("T")


def loop_factory(settings: Settings) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop constructor, or None (asyncio's default loop)."""
    try:
        import uvloop
    except ImportError:
        return None
    if settings.udp_listen is not None:
        return None
    try:
        if any(listener.tls for listener in listener_config.resolve(settings)):
            return None
    except listener_config.ListenerError:
        return None  # serve reports it
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T], settings: Settings) -> T:
    """asyncio.run on the loop loop_factory picks."""
    with asyncio.Runner(loop_factory=loop_factory(settings)) as runner:
        return runner.run(main)
