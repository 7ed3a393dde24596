"""The layout of a run directory: the log is the truth, everything else is derived or a payload."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .blobs import BlobStore

__all__ = ["RunDir", "resolve_run"]


@dataclass(frozen=True)
class RunDir:
    root: Path  # runs/<run_id>

    @property
    def run_id(self) -> str:
        return self.root.name

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def blobs(self) -> BlobStore:
        return BlobStore(self.root / "blobs")

    @property
    def episodes(self) -> Path:
        return self.root / "episodes"

    @property
    def logs(self) -> Path:
        return self.root / "logs.jsonl"


def resolve_run(run: str | Path, runs_root: Path | str = "runs") -> RunDir:
    """Accept a run id (under ``runs_root``), a run directory, or a path to an ``events.jsonl``."""
    p = Path(run)
    if p.name == "events.jsonl" and p.is_file():
        return RunDir(p.parent)
    if (p / "events.jsonl").exists():
        return RunDir(p)
    candidate = Path(runs_root) / str(run)
    if (candidate / "events.jsonl").exists():
        return RunDir(candidate)
    raise FileNotFoundError(
        f"no run at {run!r}: expected a run id under {runs_root}/, a run directory or an events.jsonl"
    )
