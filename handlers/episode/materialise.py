"""Rebuild an episode's workspace from the log: the projection's path -> blob map, written back out."""

from __future__ import annotations

from pathlib import Path

from engine.blobs import BlobStore
from handlers.episode.projection import EpisodeState
from handlers.episode.workspace import Workspace

__all__ = ["materialise"]


def materialise(episode: EpisodeState, blobs: BlobStore, dest: Path) -> list[str]:
    """Write every live file of ``episode`` under ``dest`` (through the same path confinement as the agent)."""
    ws = Workspace(dest)
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for path, blob in sorted(episode.files.items()):
        if not blob:
            continue
        ws.write(path, blobs.get(blob).decode("utf-8"))
        written.append(path)
    return written
