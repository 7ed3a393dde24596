"""A synthetic CPU-replica run log (real events, real job bundles of replica choices), read by the report tests
and the replica comparison benchmark's test the way ``ait report`` reads a real run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import anyio

from engine.blobs import BlobStore
from engine.clock import ManualClock
from engine.runtime import Runtime
from events import BaselineFrozen, BatchCollected, EpisodeStarted, JobQueued, RewardComputed, RunStarted, RunWiring
from families.spec import load_spec
from handlers.episode.bundle import make_bundle
from handlers.episode.choice import Choice, job_text
from handlers.registry import default_projections

__all__ = ["BEST", "DEFAULT_STEPS", "WORST", "write_grid", "write_replica_log"]

ROOT = Path(__file__).resolve().parents[2]
BEST = Choice("Qwen/Qwen3-1.7B", "correct", "1e-05")
WORST = Choice("Qwen/Qwen3-0.6B", "wrong", "3e-05")
# Step 0: 0.6B/wrong mostly, rewards about 0.1; step 1: 1.7B/correct, about 0.6.
DEFAULT_STEPS: tuple[tuple[tuple[Choice, ...], float], ...] = (((WORST, WORST, WORST, BEST), 0.1), ((BEST,) * 4, 0.6))


def write_grid(directory: Path, best: object = ("1.7B/correct/1e-05",), *, key_fingerprint: str | None = None) -> Path:
    """A grid JSON as benchmarks/replica_grid.py writes it (``key_fingerprint``: its eval key's, None: unrecorded)."""
    path = directory / "grid.json"
    doc = {"best": list(best) if isinstance(best, tuple) else best, "choices": {"1.7B/correct/1e-05": {"mean": 0.41}}}
    if key_fingerprint is not None:
        doc["eval_key_fingerprint"] = key_fingerprint
    path.write_text(json.dumps(doc))
    return path


def _reward(episode_id: str, reward: float) -> RewardComputed:
    return RewardComputed(
        episode_id=episode_id,
        reward=reward,
        validation=1.0,
        quality=(reward - 0.35) / 0.65,
        speed=0.0,
        w_validation=0.35,
        w_quality=0.65,
        w_speed=0.0,
        attempts=1,
        validated=True,
        parseable=True,
        job_status="succeeded",
        outcome="scored",
    )


def write_replica_log(
    run: Path,
    steps: Sequence[tuple[Sequence[Choice], float]] = DEFAULT_STEPS,
    *,
    seed: int = 0,
    holdout: bool = True,
    learn: bool = True,
    key_fingerprint: str | None = None,
) -> None:
    """One outer step per ``(choices, reward)`` on calc_chain (episode i of a step gets ``reward + 0.01 * i``),
    and with ``holdout`` a triage holdout arm of 3 episodes on v0 and 3 on v2; every episode queued a job of its
    choice. The header records ``[backend] learn`` as ``ait train`` does (false: the control arm); with
    ``key_fingerprint`` the run copies its frozen baselines in at start, frozen under that eval key."""
    spec_path = ROOT / "examples" / "replica" / "tasks" / "calc_chain_v1_fast.json"
    spec, spec_json = load_spec(spec_path), spec_path.read_bytes()
    blobs = BlobStore(run / "blobs")

    async def write() -> None:
        async with Runtime(run, default_projections(), clock=ManualClock()) as rt:
            header = {"command": "train", "config": {"backend": {"kind": "local", "learn": learn}}}
            await rt.emit(RunStarted(run_id=run.name, seed=seed, code_version="t", config=header))
            await rt.emit(RunWiring(inner_trainer="cpu", learner_backend="local", provider="local", agent="local"))
            if key_fingerprint is not None:
                for model, score in ((BEST.model, 0.34), (WORST.model, 0.28)):
                    frozen = BaselineFrozen(
                        family="calc_chain", model=model, score=score, n=64, key_fingerprint=key_fingerprint
                    )
                    await rt.emit(frozen)

            async def episode(eid: str, choice: Choice, reward: float, version: int, group: str) -> None:
                family = "triage" if group.startswith("holdout") else "calc_chain"
                await rt.emit(
                    EpisodeStarted(
                        episode_id=eid,
                        task_id=f"{family}:1",
                        family=family,
                        policy="local",
                        sampler_version=version,
                        group_id=group,
                    )
                )
                files = {"job.toml": job_text(choice, spec).encode()}
                bundle = await blobs.aput(make_bundle(files, spec_json))
                job = JobQueued(
                    job_id=f"job-{eid}", episode_id=eid, family=family, base_model=choice.model, bundle=bundle
                )
                await rt.emit(job)
                await rt.emit(_reward(eid, reward))

            for step, (choices, reward) in enumerate(steps):
                ids = [f"ep{step}-{i}" for i in range(len(choices))]
                for i, (eid, choice) in enumerate(zip(ids, choices, strict=True)):
                    await episode(eid, choice, reward + 0.01 * i, step, f"g{step}")
                await rt.emit(BatchCollected(step=step, episode_ids=ids))
            if holdout:
                for version, base in ((0, 0.2), (2, 0.4)):
                    for i in range(3):
                        await episode(f"ho{version}{i}", BEST, base + 0.01 * i, version, f"holdout-v{version}")

    anyio.run(write)
