"""The replica's outer loop with SIMULATED inner jobs: a tool for tuning the outer learning rate, not a result.

Every part of an outer step is the real one but the inner job. The trainer agent (the replica config's
``[outer] base_model``) samples through the local learner's :class:`~adapters.local_learner.sampler.SamplerPool`
and plays real episodes on a real replica workspace with the real tools (:func:`adapters.tiny.agent_play.play`),
each turn seeded with :func:`~adapters.local_learner.sampler.turn_seed` of (``[run] seed``, episode id, turn) as
``ait train`` seeds it; the tasks are drawn with :func:`handlers.training.batch.draw_tasks` (``[outer] seed``);
the advantages and datums are :mod:`handlers.training` (``build_batch_datums``); the learner is the real
:class:`~adapters.local_learner.learner.LocalLearner` (``train_step`` with the config's loss and clip range,
``save``), and the next step samples the published sampler path.

**The reward is looked up, not measured.** A submitted job's reward is the grid's entry for its (choice,
family) (``per_family.reward_mean`` of ``examples/replica/grid-seed0.json``): the replica's inner jobs are
deterministic per (choice, family) (the cpu trainer's seed is fixed at 0), so that table *is* what a real run's
inner jobs return on today's weights. A failed episode gets the real formula's reward
(:func:`handlers.reward.formula.compute_reward` with the config's ``[reward]``): no parseable ``job.toml`` (or
no ``submit_job``) -> ``no_submission`` (-0.1); parsed but not one of the 16 choices -> ``not_validated``
(0.0). One difference from a real run: an episode ends at its first ``submit_job`` (the real harness gives a
rejected submission ``max_attempts`` tries), so format failures cost here a little more often than there.

Prints per step the mean reward, the share of the grid's best choices (``best`` of the grid JSON), the share of
the ``wrong`` rubric and the format failures, then the first-5 vs last-5 mean reward with a bootstrap 95%
interval over episodes (:func:`views.report.replica.bootstrap_diff`, as ``ait report`` computes it).

    .venv/bin/python benchmarks/replica_bandit.py [--config examples/configs/replica.toml] [--steps 12]
        [--lr 5e-4] [--loss ppo] [--seed 0] [--group-size 4] [--tasks-per-batch 2] [--json PATH]

``--seed`` sets ``[run] seed`` (the LoRA init and the agent's sampling); ``[outer] seed`` (the task draws)
stays the config's, as docs/replica.md's second seed keeps it to compare seeds on the same tasks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapters.local_learner.learner import LocalLearner  # noqa: E402
from adapters.local_learner.lora import lora_state  # noqa: E402
from adapters.local_learner.sampler import BASE, SamplerPool, turn_seed  # noqa: E402
from adapters.openai_server import ChatRequest, PolicyError, Reply  # noqa: E402
from adapters.tiny.agent_play import Played, play  # noqa: E402
from cli.train_config import RunConfig, load_run_config  # noqa: E402
from families.spec import TaskSpec, load_spec  # noqa: E402
from handlers.episode.choice import LEARNING_RATES  # noqa: E402
from handlers.reward.formula import RewardConfig, RewardInputs, compute_reward  # noqa: E402
from handlers.training.batch import draw_tasks  # noqa: E402
from handlers.training.datums import SampledTurn  # noqa: E402
from handlers.training.episodes import EpisodeGroup, FinishedEpisode  # noqa: E402
from handlers.training.loss import loss_fn_config  # noqa: E402
from handlers.training.projection import episode_id_for  # noqa: E402
from handlers.training.step import build_batch_datums  # noqa: E402
from views.report.replica import bootstrap_diff, load_grid  # noqa: E402

CONFIG = ROOT / "examples" / "configs" / "replica.toml"
GRID = ROOT / "examples" / "replica" / "grid-seed0.json"
BANNER = (
    "SIMULATED inner jobs: each reward is the grid's table entry for its (choice, family); a tuning tool, not a result"
)
WINDOW = 5  # outer steps compared at each end


class RewardTable:
    """The grid's per-(choice, family) rewards, and the real formula for an episode that made no choice."""

    def __init__(self, grid_path: Path, reward: RewardConfig) -> None:
        doc = json.loads(grid_path.read_text())
        self.rewards: dict[tuple[str, str], float] = {
            (label, fam): float(row["reward_mean"])
            for label, choice in doc["choices"].items()
            for fam, row in choice["per_family"].items()
        }
        grid = load_grid(grid_path)
        self.best = set(grid.best)
        self.reward = reward

    def of(self, played: Played, episode_id: str) -> tuple[float, str]:
        """(reward, outcome) of one played episode: the table's entry, or the formula's for a failure."""
        if played.choice is not None:
            key = (played.choice.label, played.family)
            if key not in self.rewards:
                raise KeyError(f"grid has no reward for {key[0]} on {key[1]}")
            return self.rewards[key], "scored"
        inputs = RewardInputs(
            episode_id=episode_id, parseable=played.parseable, attempts=1 if played.submitted else 0, validated=False
        )
        rc = compute_reward(inputs, self.reward)
        return rc.reward, rc.outcome


class _Seeded:
    """The pool, with each request's seed replaced by :func:`turn_seed` of (run seed, episode id, turn).

    A request the sampler refuses (a conversation longer than the agent's context) ends the episode, as the real
    harness ends it on a ``PolicyError``: here as a reply without a tool call, so ``play`` stops there."""

    def __init__(self, pool: SamplerPool, run_seed: int, episode_id: str, temperature: float) -> None:
        self.pool, self.run_seed, self.episode_id = pool, run_seed, episode_id
        self.temperature = temperature  # [outer] temperature, as the real LocalPolicy sends it

    async def respond(self, request: ChatRequest) -> Reply:
        turn = sum(m.role == "assistant" for m in request.messages)
        seeded = msgspec.structs.replace(
            request, seed=turn_seed(self.run_seed, self.episode_id, turn), temperature=self.temperature
        )
        try:
            return await self.pool.respond(seeded)
        except PolicyError:
            return Reply(content="")


class StepRow(msgspec.Struct, kw_only=True):
    step: int
    rewards: list[float]
    labels: list[str]  # choice label, or the failure outcome
    families: list[str]
    best_share: float
    wrong_share: float
    high_lr_share: float  # episodes whose job trains at the larger learning rate (3e-05)
    failures: int
    loss: float
    seconds: float


def settings(args: argparse.Namespace) -> tuple[RunConfig, dict[str, Any]]:
    cfg = load_run_config(args.config)
    o = cfg.outer
    s = {
        "lr": o.learning_rate if args.lr is None else args.lr,
        "loss": o.loss_fn if args.loss is None else args.loss,
        "seed": cfg.run.seed if args.seed is None else args.seed,
        "task_seed": o.seed,
        "group_size": args.group_size or o.group_size,
        "tasks_per_batch": args.tasks_per_batch or o.tasks_per_batch,
        "steps": args.steps or o.max_steps,
        "rank": o.lora_rank,
        "max_tokens": args.max_tokens or o.max_tokens,
        "temperature": o.temperature if args.temperature is None else args.temperature,
        "max_turns": cfg.episode.max_turns,
        "families": list(o.families),
        "base_model": o.base_model,
        "clip": (o.clip_low, o.clip_high),
    }
    return cfg, s


async def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    cfg, s = settings(args)
    table = RewardTable(args.grid, cfg.reward)
    specs: dict[str, TaskSpec] = {f: load_spec(cfg.spec_path(f)) for f in s["families"]}
    learner = LocalLearner(
        root, base_model=s["base_model"], rank=s["rank"], seed=s["seed"], device="cpu", learn=not args.no_learn
    )
    pool = SamplerPool(root, base_model=s["base_model"], rank=s["rank"], keep=2, max_batch=cfg.backend.sampler_batch)
    loss_config = loss_fn_config(s["loss"], clip_low=s["clip"][0], clip_high=s["clip"][1])
    template = cfg.template_dir
    rows: list[StepRow] = []
    initial = {k: v.clone() for k, v in lora_state(learner.model).items()}
    path, n_episodes = BASE, 0
    try:
        for step in range(s["steps"]):
            started = time.perf_counter()
            tasks = draw_tasks(s["families"], s["tasks_per_batch"], seed=s["task_seed"], step=step)
            plays: list[tuple[str, str, Any]] = []
            for task in tasks:
                for _ in range(s["group_size"]):
                    eid = episode_id_for(n_episodes)
                    n_episodes += 1
                    kwargs: dict[str, Any] = {"template_dir": template} if template is not None else {}
                    coro = play(
                        _Seeded(pool, s["seed"], eid, s["temperature"]),
                        specs[task.family],
                        seed=0,  # overridden per turn by _Seeded
                        session=eid,
                        model=path,
                        max_turns=s["max_turns"],
                        max_tokens=s["max_tokens"],
                        **kwargs,
                    )
                    plays.append((task.task_id, eid, coro))
            played = await asyncio.gather(*(c for _, _, c in plays))
            groups: dict[str, list[FinishedEpisode]] = {}
            rewards, labels, fams = [], [], []
            for (task_id, eid, _), p in zip(plays, played, strict=True):
                reward, outcome = table.of(p, eid)
                rewards.append(reward)
                fams.append(p.family)
                labels.append(p.choice.label if p.choice is not None else outcome)
                turns = [
                    SampledTurn(prompt_tokens=r.prompt_ids, sampled_tokens=r.token_ids, sampled_logprobs=r.logprobs)
                    for r in pool.session_samples(eid)
                ]
                ep = FinishedEpisode(episode_id=eid, task_id=task_id, sampler_version=step, reward=reward, turns=turns)
                groups.setdefault(task_id, []).append(ep)
            datums = build_batch_datums([EpisodeGroup(task_id=t, episodes=e) for t, e in groups.items()])
            stepped = await learner.train_step(
                datums, loss_fn=s["loss"], loss_fn_config=loss_config, learning_rate=s["lr"]
            )
            _state, path = await learner.save(f"step_{step + 1:06d}", with_state=False)
            n = len(rewards)
            choices = [p.choice for p in played]  # None: the episode made no valid choice (a failure)
            row = StepRow(
                step=step,
                rewards=rewards,
                labels=labels,
                families=fams,
                best_share=sum(lab in table.best for lab in labels) / n,
                wrong_share=sum(c is not None and c.rubric == "wrong" for c in choices) / n,
                high_lr_share=sum(c is not None and c.learning_rate == LEARNING_RATES[-1] for c in choices) / n,
                failures=sum(c is None for c in choices),
                loss=float(stepped.metrics["loss:sum"]),
                seconds=time.perf_counter() - started,
            )
            rows.append(row)
            print(
                f"step {step:2d}  reward {fmean(rewards):+.3f}  best {row.best_share:4.0%}"
                f"  wrong {row.wrong_share:4.0%}  lr {LEARNING_RATES[-1]} {row.high_lr_share:4.0%}"
                f"  failures {row.failures}  loss {row.loss:+.3f}  {row.seconds:4.1f}s  {' '.join(sorted(labels))}",
                flush=True,
            )
    finally:
        await pool.aclose()
    final = lora_state(learner.model)
    delta = max(float((final[k] - v).abs().max()) for k, v in initial.items())
    return {
        "settings": {**s, "clip": list(s["clip"])},
        "steps": [msgspec.to_builtins(r) for r in rows],
        "lora_max_change": delta,  # largest change of any LoRA weight over the run (0: nothing learned)
    }


def summarise(steps: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """First-5 vs last-5: mean reward (bootstrap interval over episodes), best-choice share, failures."""
    k = min(WINDOW, len(steps) // 2) or 1
    first, last = steps[:k], steps[-k:]
    before = [r for s in first for r in s["rewards"]]
    after = [r for s in last for r in s["rewards"]]
    rise = bootstrap_diff(before, after)
    return {
        "window": k,
        "first": fmean(before),
        "last": fmean(after),
        "rise": rise.mean,
        "ci95": [rise.low, rise.high],
        "excludes_zero": rise.excludes_zero,
        "best_first": fmean(s["best_share"] for s in first),
        "best_last": fmean(s["best_share"] for s in last),
        "wrong_first": fmean(s["wrong_share"] for s in first),
        "wrong_last": fmean(s["wrong_share"] for s in last),
        "high_lr_first": fmean(s["high_lr_share"] for s in first),
        "high_lr_last": fmean(s["high_lr_share"] for s in last),
        "failures": sum(s["failures"] for s in steps),
        "episodes": sum(len(s["rewards"]) for s in steps),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=CONFIG)
    parser.add_argument("--grid", type=Path, default=GRID, help="the reward table (a replica_grid.py JSON)")
    parser.add_argument("--steps", type=int, default=0, help="outer steps (default: the config's max_steps)")
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--loss", default=None)
    parser.add_argument("--seed", type=int, default=None, help="[run] seed (default: the config's)")
    parser.add_argument("--group-size", type=int, default=0)
    parser.add_argument("--tasks-per-batch", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=0)
    parser.add_argument("--temperature", type=float, default=None, help="agent sampling ([outer] temperature)")
    parser.add_argument("--no-learn", action="store_true", help="the control: compute each step, apply no update")
    parser.add_argument("--json", type=Path, default=None, help="write the settings, steps and summary here")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    print(f"# {BANNER}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(run(args, Path(tmp)))
    summary = summarise(result["steps"])
    result["summary"] = summary
    result["note"] = BANNER
    k = summary["window"]
    print(
        f"# first-{k} {summary['first']:+.3f}  last-{k} {summary['last']:+.3f}  rise {summary['rise']:+.3f}"
        f" [{summary['ci95'][0]:+.3f}, {summary['ci95'][1]:+.3f}]"
        f" ({'excludes 0' if summary['excludes_zero'] else 'includes 0'})"
        f"  best share {summary['best_first']:.0%} -> {summary['best_last']:.0%}"
        f"  wrong {summary['wrong_first']:.0%} -> {summary['wrong_last']:.0%}"
        f"  lr {LEARNING_RATES[-1]} {summary['high_lr_first']:.0%} -> {summary['high_lr_last']:.0%}"
        f"  failures {summary['failures']}/{summary['episodes']}"
    )
    print(f"# {BANNER}")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
