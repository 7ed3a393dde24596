"""Job bundles: the submitted workspace plus the task spec, as one deterministic tar archive.

Deterministic (sorted names, zero mtimes, fixed modes and owners) so the same files always give the same
blob hash: a replay and a retried dispatch refer to exactly the same bytes. Hidden eval items are never in
a workspace, so never in a bundle.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

__all__ = ["bundle_files", "make_bundle", "unpack_bundle"]


def make_bundle(files: Mapping[str, bytes], spec_json: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in sorted({**files, "task_spec.json": spec_json}.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def unpack_bundle(data: bytes, dest: Path) -> list[str]:
    """Unpack regular files only, refusing absolute paths and '..' (a bundle is agent-made content)."""
    names = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        for member in tar.getmembers():
            p = PurePosixPath(member.name)
            if not member.isfile() or p.is_absolute() or ".." in p.parts:
                raise ValueError(f"bundle member {member.name!r} is not a plain relative file")
            target = dest.joinpath(*p.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(member)
            assert src is not None
            target.write_bytes(src.read())
            names.append(p.as_posix())
    return names


def bundle_files(data: bytes) -> dict[str, bytes]:
    """A bundle's regular files by name, in memory (for reading job.toml back or diffing two jobs)."""
    out: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        for member in tar.getmembers():
            src = tar.extractfile(member) if member.isfile() else None
            if src is not None:
                out[member.name] = src.read()
    return out
