"""An episode's workspace: a directory the agent may read and write, and nothing outside it.

Every path the agent gives is resolved relative to the workspace root and refused if it is absolute, climbs
out with ``..``, passes through a symlink, or names something that is not a regular file. Writes are capped
in size. Refusals are :class:`WorkspaceError` with a message written for the agent to read and act on;
the episode goes on.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = ["MAX_FILES", "MAX_FILE_BYTES", "Workspace", "WorkspaceError"]

MAX_FILE_BYTES = 256 * 1024
MAX_FILES = 200


class WorkspaceError(Exception):
    """A refused file operation; the message is shown to the agent as the tool result."""


@dataclass(frozen=True)
class Workspace:
    root: Path

    def _rel(self, path: str) -> PurePosixPath:
        if not isinstance(path, str) or not path.strip():
            raise WorkspaceError("path must be a non-empty string relative to the workspace, e.g. 'env/taskset.py'")
        if "\0" in path:
            raise WorkspaceError(f"path {path!r} contains a NUL byte")
        p = PurePosixPath(path.strip())
        if p.is_absolute() or path.startswith("~"):
            raise WorkspaceError(f"path {path!r} is absolute; use a path relative to the workspace root")
        parts = [part for part in p.parts if part not in ("", ".")]
        if ".." in parts:
            raise WorkspaceError(f"path {path!r} leaves the workspace ('..' is not allowed)")
        if not parts:
            raise WorkspaceError(f"path {path!r} names the workspace root, not a file")
        return PurePosixPath(*parts)

    def resolve(self, path: str) -> tuple[PurePosixPath, Path]:
        """(clean relative path, absolute path), refusing escapes and symlinks anywhere along the way."""
        rel = self._rel(path)
        current = self.root
        for part in rel.parts:
            current = current / part
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                continue  # may be created by a write
            if stat.S_ISLNK(st.st_mode):
                raise WorkspaceError(f"path {path!r} goes through a symlink ({part}); symlinks are not allowed")
        return rel, current

    def read(self, path: str) -> str:
        rel, full = self.resolve(path)
        if not full.exists():
            raise WorkspaceError(f"no such file: {rel}")
        if not full.is_file():
            raise WorkspaceError(f"{rel} is a directory, not a file")
        data = full.read_bytes()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise WorkspaceError(f"{rel} is not UTF-8 text") from None

    def write(self, path: str, content: str) -> tuple[PurePosixPath, bytes]:
        """Write ``content``; returns the clean path and the bytes written (for the blob store)."""
        if not isinstance(content, str):
            raise WorkspaceError("content must be a string")
        data = content.encode("utf-8")
        if len(data) > MAX_FILE_BYTES:
            raise WorkspaceError(f"content is {len(data)} bytes; the limit per file is {MAX_FILE_BYTES} bytes")
        rel, full = self.resolve(path)
        if full.is_dir():
            raise WorkspaceError(f"{rel} is a directory; give a file path")
        if not full.exists() and len(self.list()) >= MAX_FILES:
            raise WorkspaceError(f"the workspace already holds {MAX_FILES} files; edit or reuse one")
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(data)
        return rel, data

    def edit(self, path: str, old: str, new: str) -> tuple[PurePosixPath, bytes]:
        """Replace the one exact occurrence of ``old`` with ``new``."""
        if not isinstance(old, str) or not isinstance(new, str):
            raise WorkspaceError("old_text and new_text must be strings")
        if old == "":
            raise WorkspaceError("old_text is empty; give the exact text to replace")
        text = self.read(path)
        count = text.count(old)
        if count == 0:
            raise WorkspaceError(f"old_text was not found in {path}; read the file and copy the text exactly")
        if count > 1:
            raise WorkspaceError(
                f"old_text occurs {count} times in {path}; include more surrounding lines so it matches once"
            )
        return self.write(path, text.replace(old, new, 1))

    def list(self, directory: str = "") -> list[str]:
        """Every regular file under ``directory`` (default: the whole workspace), sorted, relative paths."""
        base = self.root
        if directory.strip() not in ("", "."):
            rel, base = self.resolve(directory)
            if not base.is_dir():
                raise WorkspaceError(f"{rel} is not a directory")
        out = []
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
            for name in filenames:
                full = Path(dirpath) / name
                if full.is_file() and not full.is_symlink():
                    out.append(full.relative_to(self.root).as_posix())
        return sorted(out)

    def snapshot(self) -> dict[str, bytes]:
        return {p: (self.root / p).read_bytes() for p in self.list()}
