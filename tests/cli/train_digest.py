"""What must be the same after any number of crashes and resumes: a digest of the trained outcome of a run,
and the checks that nothing was counted twice or lost. Wall times (and the speed term they feed) are left out.

The digest holds each trained episode's sampled tokens and log-probs (from its turn blobs) and the learner's
state: the offline learner's counters, or the local learner's adapter and Adam tensors (their bytes, hashed).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from engine.blobs import BlobStore
from engine.log import read_log
from engine.replay import replay
from events import (
    AgentTurnTaken,
    CostSettled,
    EpisodeStarted,
    GroupStarted,
    JobQueued,
    JobSucceeded,
    LoRAStepApplied,
    RewardComputed,
    SubmissionReceived,
)
from handlers.registry import default_projections


def _sampled(blobs: BlobStore, turn_blobs: list[str]) -> str:
    """sha256 of an episode's sampled tokens and their log-probs, turn by turn."""
    turns = []
    for blob in turn_blobs:
        training = json.loads(blobs.get(blob)).get("training") or {}
        turns.append([training.get("sampled_tokens"), training.get("sampled_logprobs")])
    return hashlib.sha256(json.dumps(turns).encode()).hexdigest()


def _learner(run: Path, state_path: str) -> dict[str, Any]:
    """The learner's restorable state: the offline counters, or the local checkpoint's meta and tensor hashes."""
    if not state_path.startswith("local:"):
        loaded: dict[str, Any] = json.loads((run / state_path.removeprefix("offline:")).read_text())
        return loaded
    from safetensors.numpy import load_file  # no torch needed to read the tensors

    directory = run / state_path.removeprefix("local:")
    out: dict[str, Any] = {"meta": json.loads((directory / "meta.json").read_text())}
    for name in ("lora", "adam"):
        tensors = load_file(str(directory / f"{name}.safetensors"))
        h = hashlib.sha256()
        for key in sorted(tensors):
            h.update(key.encode())
            h.update(tensors[key].tobytes())
        out[name] = h.hexdigest()
    return out


def trained_digest(run: Path) -> tuple[str, dict[str, Any]]:
    """(sha256, the plain data it hashes): per applied step its episodes (task, reward parts, job result, sampled
    tokens), datums and trained tokens; the learner's restorable state."""
    blobs = BlobStore(run / "blobs")
    states = replay(run / "events.jsonl", default_projections()).states
    training, rewards, queue, episodes = states["training"], states["rewards"], states["queue"], states["episodes"]
    steps = []
    for key in sorted(training.steps, key=int):
        rec = training.steps[key]
        eps = []
        for eid in sorted(rec.episode_ids):
            r = rewards[eid]
            job = queue.jobs.get(f"job-{eid}")
            eps.append(
                {
                    "episode": eid,
                    "task": episodes[eid].task_id,
                    "status": episodes[eid].status,
                    "turns": episodes[eid].turns,
                    "attempts": episodes[eid].attempts,
                    "outcome": r.outcome,
                    "validation": r.validation,
                    "quality": r.quality,
                    "post": r.post,
                    "job": None if job is None else [job.job_id, job.status, job.pre, job.post],
                    "sampled": _sampled(blobs, training.episodes[eid].turn_blobs),
                }
            )
        steps.append(
            {"step": rec.step, "applied": rec.applied, "episodes": eps, "datums": rec.n_datums, "tokens": rec.n_tokens}
        )
    last = training.steps[str(training.step - 1)]
    data = {"steps": steps, "next_step": training.step, "learner": _learner(run, last.state_path)}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest(), data


def duplicates(run: Path) -> list[str]:
    """Every id the run should hold once and holds more often, and every trained episode without a reward."""
    seen: dict[str, Counter[Any]] = {
        k: Counter() for k in ("group", "episode", "turn", "submission", "reward", "job", "job_result", "cost", "step")
    }
    for rec in read_log(run / "events.jsonl").records:
        e = rec.event
        if isinstance(e, GroupStarted):
            seen["group"][e.group_id] += 1
            for eid in e.episode_ids:
                seen["episode"][eid] += 1
        elif isinstance(e, AgentTurnTaken):
            seen["turn"][(e.episode_id, e.turn)] += 1
        elif isinstance(e, SubmissionReceived):
            seen["submission"][(e.episode_id, e.attempt)] += 1
        elif isinstance(e, RewardComputed):
            seen["reward"][e.episode_id] += 1
        elif isinstance(e, JobQueued):
            seen["job"][e.job_id] += 1
        elif isinstance(e, JobSucceeded):
            seen["job_result"][e.job_id] += 1
        elif isinstance(e, CostSettled) and e.reservation_id:
            seen["cost"][e.reservation_id] += 1
        elif isinstance(e, LoRAStepApplied):
            seen["step"][e.step] += 1
    out = [f"{kind} {key} x{n}" for kind, c in seen.items() for key, n in c.items() if n > 1]
    started = Counter(
        r.event.episode_id for r in read_log(run / "events.jsonl").records if isinstance(r.event, EpisodeStarted)
    )
    out += [f"episode.started {k} x{n}" for k, n in started.items() if n > 1]
    states = replay(run / "events.jsonl", default_projections()).states
    for rec in states["training"].steps.values():
        out += [f"trained episode {e} has no reward" for e in rec.episode_ids if e not in states["rewards"]]
    return out
