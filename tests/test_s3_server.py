"""The test S3 store (tests/s3_server.py, SeaweedFS) as obstore, Skiff's S3 client, sees it:
signed requests, put, ranged get, list, delete."""

from __future__ import annotations

import asyncio

import obstore
import pytest
from s3_server import S3Server


def test_obstore_against_weed_s3() -> None:
    with S3Server() as s3:
        assert s3.endpoint == f"http://127.0.0.1:{s3.port}"
        s3.create_bucket("skiff-segments")
        store = s3.store("skiff-segments")
        data = bytes(range(256)) * 64  # 16 KiB, every byte value at a known offset

        obstore.put(store, "topic/0/00000000000000000000.log", data)
        got = obstore.get_range(store, "topic/0/00000000000000000000.log", start=1000, end=1300)
        assert bytes(got) == data[1000:1300]

        async def put_and_read_async() -> bytes:
            await obstore.put_async(store, "topic/1/00000000000000000042.log", b"0123456789")
            return bytes(
                await obstore.get_range_async(
                    store, "topic/1/00000000000000000042.log", start=3, length=4
                )
            )

        assert asyncio.run(put_and_read_async()) == b"3456"

        listed = {m["path"]: m["size"] for m in obstore.list(store, prefix="topic/").collect()}
        assert listed == {
            "topic/0/00000000000000000000.log": len(data),
            "topic/1/00000000000000000042.log": 10,
        }

        obstore.delete(store, list(listed))
        assert obstore.list(store).collect() == []
        with pytest.raises(FileNotFoundError):
            obstore.get(store, "topic/0/00000000000000000000.log")

        # the identity's secret is checked: another secret is refused
        wrong = s3.store("skiff-segments", secret_access_key="not-" + s3.secret_key)
        with pytest.raises(obstore.exceptions.PermissionDeniedError):
            obstore.put(wrong, "x", b"x")
    assert s3.dir is None and s3.proc is None
