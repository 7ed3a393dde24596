"""The content-addressed blob store: names are sha256 of the bytes, writes are atomic and durable."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.blobs import BlobCorrupted, BlobStore


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=2048))
def test_put_get_round_trip_named_by_sha256(tmp_path: Path, data: bytes) -> None:
    store = BlobStore(tmp_path / "blobs")
    digest = store.put(data)
    assert digest == hashlib.sha256(data).hexdigest()
    assert digest in store and store.get(digest) == data
    assert store.put(data) == digest  # idempotent
    assert not [p for p in store.directory.iterdir() if p.name.startswith(".tmp-")]


def test_same_content_is_stored_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = BlobStore(tmp_path)
    digest = store.put(b"payload")
    calls = 0
    real = os.fsync

    def counting(fd: int) -> None:
        nonlocal calls
        calls += 1
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    assert store.put(b"payload") == digest
    assert calls == 0
    assert store.put(b"other") != digest
    assert calls == 2  # the file, then its directory entry


def test_corrupted_blob_is_detected(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    digest = store.put(b"the original bytes")
    store.path(digest).write_bytes(b"the 0riginal bytes")
    with pytest.raises(BlobCorrupted, match=digest):
        store.get(digest)


@pytest.mark.parametrize("bad", ["", "abc", "A" * 64, "g" * 64, "../" + "a" * 61, "a" * 65])
def test_only_sha256_hex_names_are_accepted(tmp_path: Path, bad: str) -> None:
    store = BlobStore(tmp_path)
    with pytest.raises(ValueError, match="not a sha256 hex digest"):
        store.path(bad)
    with pytest.raises(ValueError):
        store.get(bad)


def test_missing_blob(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    digest = hashlib.sha256(b"never stored").hexdigest()
    assert digest not in store
    with pytest.raises(FileNotFoundError):
        store.get(digest)


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = BlobStore(tmp_path)

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(OSError, match="Input/output error"):
        store.put(b"data")
    assert list(tmp_path.iterdir()) == []
    assert hashlib.sha256(b"data").hexdigest() not in store


async def test_async_put_and_get(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    digest = await store.aput(b"x" * 10_000)
    assert await store.aget(digest) == b"x" * 10_000
