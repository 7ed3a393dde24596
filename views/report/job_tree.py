"""The report's job trees: each multi-job episode's jobs, which one led to which, and what changed between them.

A job's parent is the episode's previous job (``episode.job_submitted``'s ``parent_job_id``). Under each job the
report shows its outcome (hidden post-score, dev scores, training time) and a unified diff against its parent of
``job.toml`` and of the env package (every file under ``env/``), read from the two job bundles in the blob store.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from engine.blobs import BlobStore
from handlers.episode.bundle import bundle_files
from handlers.episode.job_tools import agent_id
from handlers.episode.projection import EpisodeJob, EpisodeState

__all__ = ["bundle_diff", "job_tree_lines"]

_MAX_DIFF_LINES = 80


def _files(blobs: BlobStore, job: EpisodeJob) -> dict[str, bytes]:
    try:
        files = bundle_files(blobs.get(job.bundle))
    except (OSError, KeyError, ValueError):
        return {}
    return {p: d for p, d in files.items() if p == "job.toml" or p.startswith("env/")}


def bundle_diff(old: Mapping[str, bytes], new: Mapping[str, bytes]) -> list[str]:
    """Unified diff lines of job.toml and the env package between two bundles ([] when they are the same)."""
    out: list[str] = []
    for path in sorted(set(old) | set(new)):
        a = old.get(path, b"").decode("utf-8", "replace").splitlines()
        b = new.get(path, b"").decode("utf-8", "replace").splitlines()
        if a != b:
            out += list(difflib.unified_diff(a, b, f"a/{path}", f"b/{path}", lineterm="", n=1))
    if len(out) > _MAX_DIFF_LINES:
        out = [*out[:_MAX_DIFF_LINES], f"... ({len(out) - _MAX_DIFF_LINES} more diff lines)"]
    return out


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def job_tree_lines(episodes: Mapping[str, EpisodeState], blobs: BlobStore) -> list[str]:
    """Markdown for every multi-job episode ([] when the run has none)."""
    lines: list[str] = []
    for ep in sorted((e for e in episodes.values() if e.jobs), key=lambda e: e.episode_id):
        lines += [f"### {ep.episode_id} ({ep.status}; final: {_final(ep)})", ""]
        depth: dict[str, int] = {}
        files: dict[str, dict[str, bytes]] = {}
        for job in sorted(ep.jobs.values(), key=lambda j: j.index):
            d = depth[job.job_id] = depth.get(job.parent_job_id, -1) + 1
            mark = " **final**" if job.job_id == ep.final_job else ""
            lines.append(
                f"{'  ' * d}- `{agent_id(job)}`{mark} ({job.job_id}): {job.status}"
                f"{' (' + job.failure + ')' if job.failure else ''}, hidden post {_num(job.post)}, "
                f"dev {_num(job.dev_pre)} → {_num(job.dev_post)}, train {job.train_seconds:.1f}s"
            )
            files[job.job_id] = _files(blobs, job)
            parent = ep.jobs.get(job.parent_job_id)
            if parent is not None:
                diff = bundle_diff(files.get(parent.job_id, {}), files[job.job_id])
                lines.append(f"{'  ' * (d + 1)}changes from `{agent_id(parent)}`:")
                block = diff or ["(no change to job.toml or the env package)"]
                lines += ["", "```diff", *block, "```", ""]
        lines.append("")
    return lines


def _final(ep: EpisodeState) -> str:
    job = ep.jobs.get(ep.final_job)
    return agent_id(job) if job is not None else "none"
