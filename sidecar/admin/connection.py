"""One broker connection for the admin client. It asks ApiVersions first and then uses,
per API, the highest version both sides support; requests go one at a time.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from sidecar.admin.wire import (
    API_NAMES,
    API_VERSIONS,
    CLIENT_VERSIONS,
    UNSUPPORTED_VERSION,
    AdminError,
    BrokerUnavailable,
    KafkaError,
    UnsupportedApi,
    decode_response,
    encode_request,
)
from sidecar.config.settings import HostPort

CLIENT_SOFTWARE = ("skiff-admin", "1.0")


class Connection:
    """One broker connection. Requests go one at a time, so responses come in order (an
    admin tool needs no pipelining)."""

    def __init__(
        self,
        address: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client_id: str,
    ) -> None:
        self.address = address
        self.client_id = client_id
        self.versions: dict[int, tuple[int, int]] = {}
        self.closed = False
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()
        self._next_id = 1

    @classmethod
    async def open(cls, host: str, port: int, client_id: str, timeout: float) -> Connection:
        address = str(HostPort(host, port))
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except (OSError, TimeoutError) as exc:
            raise BrokerUnavailable(f"cannot connect to {address}: {exc or 'timed out'}") from None
        conn = cls(address, reader, writer, client_id)
        try:
            await conn._negotiate(timeout)
        except BaseException:
            conn.close()
            raise
        return conn

    async def _negotiate(self, timeout: float) -> None:
        body = {
            "client_software_name": CLIENT_SOFTWARE[0],
            "client_software_version": CLIENT_SOFTWARE[1],
        }
        version = CLIENT_VERSIONS[API_VERSIONS][1]
        resp = await self._roundtrip(API_VERSIONS, version, body, timeout)
        if resp.error_code == UNSUPPORTED_VERSION:
            # The v0 answer lists the ApiVersions versions the broker serves: ask again.
            served = {int(k.api_key): int(k.max_version) for k in resp.api_keys}
            version = min(version, served.get(API_VERSIONS, 0))
            resp = await self._roundtrip(API_VERSIONS, version, body, timeout)
        if resp.error_code:
            raise KafkaError(resp.error_code, f"ApiVersions from {self.address}")
        self.versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys
        }

    def version(self, api_key: int) -> int:
        """The highest version of `api_key` this client and the broker both speak."""
        name = API_NAMES.get(api_key, str(api_key))
        lo, hi = CLIENT_VERSIONS[api_key]
        if api_key not in self.versions:
            raise UnsupportedApi(name, f"{self.address} does not serve {name} requests")
        broker_lo, broker_hi = self.versions[api_key]
        version = min(hi, broker_hi)
        if version < max(lo, broker_lo):
            raise UnsupportedApi(
                name,
                f"{self.address} serves {name} v{broker_lo}-{broker_hi}; "
                f"this client speaks v{lo}-{hi}",
            )
        return version

    async def request(self, api_key: int, body: dict[str, Any], timeout: float) -> tuple[int, Any]:
        """(version used, decoded response)."""
        version = self.version(api_key)
        return version, await self._roundtrip(api_key, version, body, timeout)

    async def _roundtrip(
        self, api_key: int, version: int, body: dict[str, Any], timeout: float
    ) -> Any:
        name = API_NAMES.get(api_key, str(api_key))
        async with self._lock:
            if self.closed:
                raise BrokerUnavailable(f"the connection to {self.address} is closed")
            correlation_id = self._next_id
            self._next_id += 1
            frame = encode_request(api_key, version, correlation_id, self.client_id, body)
            try:
                answer = await asyncio.wait_for(self._exchange(frame), timeout)
            except TimeoutError:
                self.close()  # a late answer would be read as the next request's
                raise BrokerUnavailable(
                    f"{self.address} did not answer {name} within {timeout:.1f}s"
                ) from None
            except (OSError, asyncio.IncompleteReadError) as exc:
                self.close()
                raise BrokerUnavailable(
                    f"{self.address} closed the connection during {name} v{version} ({exc!r})"
                ) from None
        got_id, response = decode_response(api_key, version, answer)
        if got_id != correlation_id:
            self.close()
            raise AdminError(f"{self.address}: correlation id {got_id}, expected {correlation_id}")
        return response

    async def _exchange(self, frame: bytes) -> bytes:
        self._writer.write(frame)
        await self._writer.drain()
        (size,) = struct.unpack(">i", await self._reader.readexactly(4))
        return await self._reader.readexactly(size)

    def close(self) -> None:
        self.closed = True
        self._writer.close()

    async def wait_closed(self) -> None:
        await self._writer.wait_closed()
