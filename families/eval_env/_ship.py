"""The hidden eval package as bytes: what the engine sends a pod once the pod's training has ended.

``pack_eval_package("calc_chain")`` builds the package's files under this machine's installation key (the
engine's) and returns a deterministic tar of ``<env id>/...`` (regular files only, sorted, mtime 0), so a
pod never builds the hidden set itself (a pod has no key, or another one). The pod agent unpacks it with
the bundle unpacker, which refuses anything but plain relative files.
"""

from __future__ import annotations

import io
import tarfile

from ._build import package_files

__all__ = ["pack_eval_package"]


def pack_eval_package(family: str) -> bytes:
    """A tar of the family's hidden eval package project, ``<env id>/<files>``."""
    files, info = package_files(family)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in sorted(files):
            data = files[rel].encode("utf-8")
            entry = tarfile.TarInfo(f"{info.env_id}/{rel}")
            entry.size, entry.mtime, entry.mode = len(data), 0, 0o600
            entry.uid = entry.gid = 0
            entry.uname = entry.gname = ""
            tar.addfile(entry, io.BytesIO(data))
    return buf.getvalue()
