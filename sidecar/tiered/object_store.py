"""The object store segments go to, through obstore (Rust's object_store): S3 and
S3-compatible servers (`s3://bucket/prefix`, credentials and endpoint from the usual
AWS_* environment variables), or a local directory (`file:///path`, the embedded
default of `skiff serve`)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import obstore
from obstore.store import from_url


class ObjectStoreError(Exception):
    """The object store refused or could not be reached."""


class ObjectStore:
    def __init__(self, url: str) -> None:
        self.url = url
        try:
            if url.startswith("file://"):
                Path(url[len("file://") :]).mkdir(parents=True, exist_ok=True)
                self._store: Any = from_url(url)
            else:
                # A store that does not answer fails a Fetch of archived data within
                # ~25 s (retried by the client: KAFKA_STORAGE_ERROR), inside Kafka
                # clients' 30 s request timeout, instead of object_store's 3 minutes.
                self._store = from_url(
                    url,
                    # (client_options replaces what the environment set: allow_http
                    # is read here from AWS_ALLOW_HTTP, as object_store would.)
                    client_options={
                        "connect_timeout": "5s",
                        "timeout": "10s",
                        "allow_http": os.environ.get("AWS_ALLOW_HTTP", "").lower() == "true",
                    },
                    retry_config={
                        "max_retries": 2,
                        "retry_timeout": timedelta(seconds=10),
                        "backoff": {
                            "init_backoff": timedelta(milliseconds=100),
                            "max_backoff": timedelta(seconds=2),
                            "base": 2.0,
                        },
                    },
                )
        except Exception as exc:  # obstore raises its own types, all of them say why
            raise ObjectStoreError(f"remote storage {url}: {_said(exc)}") from None

    async def put(self, path: str, data: bytes | memoryview) -> None:
        try:
            await obstore.put_async(self._store, path, data)
        except Exception as exc:
            raise ObjectStoreError(f"put {path}: {_said(exc)}") from None

    async def get(self, path: str) -> bytes:
        try:
            result = await obstore.get_async(self._store, path)
            return bytes(await result.bytes_async())
        except Exception as exc:
            raise ObjectStoreError(f"get {path}: {_said(exc)}") from None

    async def delete(self, path: str) -> None:
        try:
            await obstore.delete_async(self._store, path)
        except FileNotFoundError:
            return
        except Exception as exc:
            if "not found" in str(exc).lower():
                return
            raise ObjectStoreError(f"delete {path}: {_said(exc)}") from None

    async def list(self, prefix: str) -> list[tuple[str, int]]:
        """(path, last modified ms) of every object under `prefix`."""
        out = []
        try:
            async for page in obstore.list(self._store, prefix):
                for meta in page:
                    out.append((meta["path"], int(meta["last_modified"].timestamp() * 1000)))
        except Exception as exc:
            raise ObjectStoreError(f"list {prefix}: {_said(exc)}") from None
        return out

    async def prefixes(self, prefix: str | None = None) -> list[str]:
        """The 'directories' directly under `prefix`."""
        try:
            result = await obstore.list_with_delimiter_async(self._store, prefix)
        except Exception as exc:
            raise ObjectStoreError(f"list {prefix}: {_said(exc)}") from None
        return list(result["common_prefixes"])


def _said(exc: Exception) -> str:
    """An obstore error's first line: what went wrong, without its multi-line debug dump
    (a log line stays one line)."""
    return str(exc).split("\n", 1)[0].strip() or type(exc).__name__
