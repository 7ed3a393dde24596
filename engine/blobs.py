"""Content-addressed blob store: ``<dir>/<sha256>``, immutable, durable before its hash is handed out.

Large payloads (workspace files, token ids, job bundles, result files) live here; events carry the hash.
A blob is written to a temp file, fsynced and renamed into place, so a reader never sees a partial blob
and an event never refers to a blob that a power loss could take back.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import anyio.to_thread

from .atomic import write_atomic

__all__ = ["BlobCorrupted", "BlobStore"]


class BlobCorrupted(Exception):
    """A blob's bytes no longer hash to its name."""


class BlobStore:
    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)

    def path(self, digest: str) -> Path:
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError(f"not a sha256 hex digest: {digest!r}")
        return self.directory / digest

    def put(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        target = self.path(digest)
        if target.exists():
            return digest
        write_atomic(target, data)
        return digest

    def get(self, digest: str) -> bytes:
        data = self.path(digest).read_bytes()
        if hashlib.sha256(data).hexdigest() != digest:
            raise BlobCorrupted(f"{self.path(digest)}: content does not match its hash")
        return data

    def __contains__(self, digest: str) -> bool:
        return self.path(digest).exists()

    async def aput(self, data: bytes) -> str:
        return await anyio.to_thread.run_sync(self.put, data)

    async def aget(self, digest: str) -> bytes:
        return await anyio.to_thread.run_sync(self.get, digest)
