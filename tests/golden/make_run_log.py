"""Write the golden run, fixtures/golden/run/ (events.jsonl + blobs/): a small but complete outer run.

Run from the repository root: ``.venv/bin/python -m tests.golden.make_run_log``. The output is committed;
tests/golden/test_golden_run.py regenerates it into a temporary directory and checks that the committed files
are byte for byte what this script writes. Regenerate (and commit) when an event schema, the reward code or this
scenario changes on purpose; the dashboard and report tests read the committed files.

Everything goes through the real :class:`engine.runtime.Runtime` on a :class:`ManualClock`, the real
:class:`handlers.budget.rules.BudgetGate` (so reservation ids, caps and settlements are what a live run records) and
:func:`handlers.reward.formula.compute_reward` (so every ``reward.computed`` is what ``replay --verify`` recomputes).
A small discrete-event simulation orders the actions in time; every choice comes from
``rng_for(SEED, key)``, so the file is reproducible byte for byte.

The run: baselines frozen for six families x two base models; four outer steps, each a batch of the five
training families x a group of two episodes; a holdout arm of four ``triage`` episodes on the base policy and
after steps 2 and 4. Episodes validate on the first or a later attempt, are rejected three times (failed checks)
or never submit. Validated jobs go through the queue onto pods of two GPU types (A40, RTX 4090; the preferred
A5000 is out of stock): assigned, started, progressed, succeeded or failed, one requeued when its pod is lost.
Every agent turn, pod chunk and training step is reserved and settled. Behaviour improves with the sampler
version (fewer rejections, more 1.7B choices, more ``[prime_rl]`` keys changed, larger uplift): the seed's two
"rungs" in miniature.
"""

from __future__ import annotations

import datetime as dt
import heapq
import json
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from engine.blobs import BlobStore
from engine.clock import ManualClock, rng_for
from engine.log import Durability
from engine.projection import Projection
from engine.runtime import Runtime
from engine.writer_lock import LOCK_NAME
from events import (
    AgentTurnTaken,
    BaselineFrozen,
    BatchCollected,
    BatchStarted,
    CheckResult,
    EpisodeFinished,
    EpisodeStarted,
    JobAssigned,
    JobFailed,
    JobProgressed,
    JobQueued,
    JobRequeued,
    JobStarted,
    JobSucceeded,
    LoRAStepApplied,
    PodCreated,
    PodIdle,
    PodLost,
    PodProvisionFailed,
    PodReady,
    PodRequested,
    PodTerminated,
    PodTerminating,
    RunFinished,
    RunStarted,
    SamplerPublished,
    SubmissionReceived,
    SubmissionRejected,
    SubmissionValidated,
    ToolCalled,
    ToolReturned,
    WorkspaceFileWritten,
)
from handlers.budget.prices import PriceTable, parse_prices
from handlers.budget.rules import BudgetConfig, BudgetGate, BudgetProjection, budget_set
from handlers.episode.bundle import make_bundle
from handlers.fleet.projection import FleetProjection, pod_ref
from handlers.fleet.queue import QueueProjection
from handlers.registry import default_projections
from handlers.reward.formula import RewardConfig, RewardInputs, compute_reward
from handlers.reward.projection import RewardsProjection

__all__ = ["OUT", "RUN_ID", "generate", "main"]

RUN_ID = "golden-run"
SEED = 20261130
OUT = Path(__file__).resolve().parents[2] / "fixtures" / "golden" / "run"
T0 = 1_764_460_800.0  # 2025-11-30 00:00:00 UTC
STEPS = 4
GROUP = 2
TRAINING = ("calc_chain", "multi_hop", "string_pipeline", "ledger", "dispatch")
HOLDOUT_FAMILY = "triage"
HOLDOUT_N = 4
HOLDOUT_AFTER = (0, 2, 4)  # sampler versions the holdout arm runs with (0 = the base policy)
SMALL, LARGE = "qwen3-0.6b", "qwen3-1.7b"
# Hidden-eval scores of the untrained models (n=200); the larger model's are the seed's best_pre.
BASELINES = {
    "calc_chain": (0.655, 0.742),
    "multi_hop": (0.540, 0.654),
    "string_pipeline": (0.445, 0.545),
    "ledger": (0.160, 0.242),
    "dispatch": (0.290, 0.323),
    "triage": (0.275, 0.352),
}
AGENT = "Qwen/Qwen3.6-35B-A3B"
TIME_BUDGET_S = 1800.0
CHUNK_S = 3600.0  # GPU time reserved per pod chunk
BILL_EVERY_S = 1800.0  # how often live pods are settled (well inside a chunk: no overrun)
BUDGET = BudgetConfig(episode_usd=0.10, run_usd=25.0, global_usd=1500.0, ledger="runs/costs.jsonl")
GLOBAL_BEFORE = 412.5
# The golden run carries its own prices: a change to handlers/budget/prices.toml must not change the fixture.
PRICES: PriceTable = parse_prices(
    {
        "version": 1,
        "taken": dt.date(2026, 11, 30),
        "models": {
            AGENT: {
                "provider": "tinker",
                "input_per_mtok": 0.12,
                "cached_input_per_mtok": 0.06,
                "output_per_mtok": 0.30,
                "train_per_mtok": 0.36,
            }
        },
        "gpus": {
            "NVIDIA A40": {"usd_per_hour": 0.49},
            "NVIDIA GeForce RTX 4090": {"usd_per_hour": 0.69},
            "NVIDIA RTX A5000": {"usd_per_hour": 0.27},
        },
    },
    source="golden prices",
)
A40, RTX4090, A5000 = "NVIDIA A40", "NVIDIA GeForce RTX 4090", "NVIDIA RTX A5000"
CHECKS = ("job_toml", "bounds", "env_import", "dataset", "rubric", "probe_rollout")
CHECK_FAILURES = {
    "job_toml": "job.toml: not valid TOML: Expected '=' after a key in a key/value pair (at line 4, column 9)",
    "bounds": "job.toml: [prime_rl].learning_rate = 0.003: outside the task's range [1e-07, 0.0001]",
    "env_import": "env/{module}/__init__.py: NameError: name 'vf' is not defined (line 12)",
    "dataset": "load_environment(): the dataset has 0 rows; the probe needs at least 32",
    "rubric": "the reward function raised KeyError: 'answer' on 3 of 8 probe rollouts",
    "probe_rollout": "probe rollout timed out after 60 s",
}
JOB_FAILURES = {
    "oom": "CUDA out of memory while allocating 2.1 GiB (batch_size x seq_len too large for the GPU)",
    "trainer_crash": "prime-rl trainer exited with code 1: ValueError: advantages are all zero for 16 steps",
    "env_crash": "environment raised during rollout: IndexError: list index out of range",
}
# [prime_rl] keys the template sets to a default, and what an agent that tunes them picks instead.
ADOPTABLE: dict[str, tuple[Any, ...]] = {
    "temperature": (0.7, 0.8, 1.2),
    "optimizer": ("muon", "sgd"),
    "algorithm": ("max_rl", "rae"),
    "scheduler": ("cosine", "linear"),
    "loss": ("ipo",),
    "warmup_steps": (4, 8),
    "lora_rank": (16, 32),
}
TEMPLATE_DEFAULTS: dict[str, Any] = {
    "temperature": 1.0,
    "max_tokens": 256,
    "optimizer": "adamw",
    "algorithm": "grpo",
    "scheduler": "constant",
    "loss": "default",
}

Action = Callable[[], Awaitable[None]]


class Sim:
    """Actions ordered by time (then by scheduling order); the clock jumps to each action's time."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._queue: list[tuple[float, int, Action]] = []
        self._n = 0

    @property
    def now(self) -> float:
        return self.clock.t - T0

    def at(self, t: float, action: Action) -> None:
        heapq.heappush(self._queue, (round(t, 3), self._n, action))
        self._n += 1

    def after(self, dt_s: float, action: Action) -> None:
        self.at(self.now + dt_s, action)

    async def run(self) -> None:
        while self._queue:
            t, _, action = heapq.heappop(self._queue)
            self.clock.t = max(self.clock.t, T0 + t)
            await action()


@dataclass
class Turn:
    tool: str  # "" = a reply with no tool call
    path: str = ""
    verdict: str = ""  # submit_job: "valid" | "reject" | "unparseable"
    failed: str = ""  # the check that fails a rejected submission


@dataclass
class Episode:
    episode_id: str
    task_id: str
    family: str
    version: int
    group_id: str
    kind: str  # cost kind: "episode" | "holdout"
    step: int  # outer step of its batch (0: holdout)
    skill: float
    plan: list[Turn]
    model: str
    toml: str
    job_fate: str  # "ok" | a JOB_FAILURES reason
    turn: int = 0
    attempts: int = 0
    parseable: bool = False
    validated_attempt: int = 0
    edits: int = 0
    files: dict[str, bytes] = field(default_factory=dict)
    reservation: str = ""
    job_id: str = ""
    tokens: int = 0
    done: bool = False  # rewarded


@dataclass
class Job:
    job_id: str
    episode: Episode
    order: int
    max_steps: int
    attempt: int = 0
    key: str = ""
    pod: str = ""
    pre: float = 0.0
    cursor: int = 0


@dataclass
class Pod:
    pod_id: str
    gpu: str
    rate: float
    reservation: str
    provider_id: str = ""
    status: str = "booting"  # booting | idle | busy | lost | gone
    idle_since: float = 0.0
    billed_until: float = 0.0
    job: str = ""


def _module(family: str) -> str:
    return f"{family}_train"


def _job_toml(family: str, model: str, adopted: dict[str, Any], lr: float, steps: int) -> str:
    values = {**TEMPLATE_DEFAULTS, **{k: v for k, v in adopted.items() if k in TEMPLATE_DEFAULTS}}
    lines = [
        "[prime_rl]",
        f'model = "{model}"',
        f"learning_rate = {lr:g}",
        f"max_steps = {steps}",
        "batch_size = 64",
        "group_size = 8",
    ]
    for key, value in values.items():
        lines.append(f'{key} = "{value}"' if isinstance(value, str) else f"{key} = {value}")
    for key in ("warmup_steps", "lora_rank"):
        if key in adopted:
            lines.append(f"{key} = {adopted[key]}")
    lines += ["", "[env]", f'id = "{family.replace("_", "-")}-train"', 'path = "env"', ""]
    return "\n".join(lines)


def _initial_files(family: str) -> dict[str, bytes]:
    return {
        "INSTRUCTIONS.md": b"# Instructions (golden fixture stand-in)\n\n"
        b"Write env/ and job.toml, then call submit_job.\n",
        "env/pyproject.toml": f'[project]\nname = "{family.replace("_", "-")}-train"\nversion = "0.1.0"\n'.encode(),
        "job.toml": b'[prime_rl]\nmodel = "$default_model"\n\n[env]\nid = "$env_id"\n',
    }


def _env_source(family: str, revision: int) -> bytes:
    return (
        f'"""{family} training environment (golden fixture stand-in, revision {revision})."""\n\n'
        "import verifiers as vf\n\n\n"
        "def load_environment(**kwargs):\n"
        f"    return vf.load_example_env({family!r}, revision={revision}, **kwargs)\n"
    ).encode()


class World:
    def __init__(self, rt: Runtime, blobs: BlobStore, clock: ManualClock) -> None:
        self.rt = rt
        self.blobs = blobs
        self.sim = Sim(clock)
        self.gate = BudgetGate(rt.emit, lambda: rt.state(BudgetProjection), PRICES)
        self.reward_config = RewardConfig()
        self.pods: dict[str, Pod] = {}
        self.jobs: dict[str, Job] = {}
        self.waiting: list[Job] = []
        self.batches: dict[int, list[Episode]] = {}
        self.holdout_left = HOLDOUT_N * len(HOLDOUT_AFTER)  # holdout episodes not rewarded yet
        self.steps_done = 0
        self.finished = False
        self.lost_one = False
        self.next_pod = 0
        self.orders = 0

    # -- helpers -----------------------------------------------------------------------------------

    async def emit(self, body: Any) -> Any:
        return (await self.rt.emit(body)).event

    def rng(self, key: str) -> Any:
        return rng_for(SEED, key)

    async def blob(self, data: bytes) -> str:
        return await self.blobs.aput(data)

    async def json_blob(self, value: Any) -> str:
        return await self.blob(json.dumps(value, sort_keys=True, separators=(",", ":")).encode())

    # -- run -----------------------------------------------------------------------------------------

    async def start(self) -> None:
        config = {
            "outer": {"steps": STEPS, "group_size": GROUP, "families": list(TRAINING), "lr": 4e-5, "lora_rank": 8},
            "agent": {"model": AGENT, "max_attempts": 3},
            "holdout": {"family": HOLDOUT_FAMILY, "n": HOLDOUT_N, "after_versions": list(HOLDOUT_AFTER)},
            "budget": {"episode_usd": BUDGET.episode_usd, "run_usd": BUDGET.run_usd, "global_usd": BUDGET.global_usd},
        }
        await self.emit(RunStarted(run_id=RUN_ID, seed=SEED, code_version="golden", config=config))
        await self.emit(budget_set(BUDGET, global_spent_before_usd=GLOBAL_BEFORE))
        for family, scores in BASELINES.items():
            for model, score in zip((SMALL, LARGE), scores, strict=True):
                await self.emit(BaselineFrozen(family=family, model=model, score=score, n=200))
        await self.emit(SamplerPublished(sampler_version=0, path=f"tinker://{RUN_ID}/sampler/0000"))
        # The ladder: A5000 first (cheapest per job) is out of stock, so the fleet takes A40s and a 4090.
        for gpu, rung in ((A5000, 0), (A40, 1), (A40, 1), (RTX4090, 2)):
            await self.request_pod(gpu, rung)
        self.sim.after(5, partial(self.holdout_arm, 0))
        self.sim.after(10, partial(self.start_batch, 1))
        self.sim.after(BILL_EVERY_S, self.tick)

    async def tick(self) -> None:
        """The dispatcher's billing cadence: settle each live pod's GPU time and reserve its next chunk."""
        if self.finished:
            return
        await self.bill_all()
        self.sim.after(BILL_EVERY_S, self.tick)

    async def finish(self) -> None:
        for pod in sorted(self.pods.values(), key=lambda p: p.pod_id):
            if pod.status in ("idle", "busy", "booting"):
                await self.emit(PodTerminating(pod_id=pod.pod_id, provider_id=pod.provider_id, reason="drained"))
                self.sim.after(8, partial(self.terminated, pod.pod_id, "drained", final=True))
                pod.status = "terminating"

    async def maybe_finished(self) -> None:
        if any(p.status not in ("gone", "lost") for p in self.pods.values()):
            return
        await self.emit(RunFinished(status="ok", reason=f"{STEPS} outer steps done"))

    # -- outer loop ----------------------------------------------------------------------------------

    async def start_batch(self, step: int) -> None:
        tasks = [f"{family}-s{step}" for family in TRAINING]
        await self.emit(BatchStarted(step=step, task_ids=tasks, group_size=GROUP))
        episodes: list[Episode] = []
        for i, (family, task) in enumerate(zip(TRAINING, tasks, strict=True)):
            for g in range(GROUP):
                ep = self.make_episode(
                    f"ep-s{step}-{family}-{g}", task, family, step - 1, f"s{step}-{family}", "episode", step
                )
                episodes.append(ep)
                self.sim.after(1 + 3 * (i * GROUP + g), partial(self.episode_start, ep))
        self.batches[step] = episodes

    async def holdout_arm(self, version: int) -> None:
        for i in range(HOLDOUT_N):
            ep = self.make_episode(
                f"ep-h{version}-{i}", f"triage-h{i}", HOLDOUT_FAMILY, version, f"holdout:v{version}", "holdout", 0
            )
            self.sim.after(2 + 4 * i, partial(self.episode_start, ep))

    async def rewarded(self, ep: Episode) -> None:
        ep.done = True
        if ep.kind == "holdout":
            self.holdout_left -= 1
            self.maybe_done()
        elif all(e.done for e in self.batches[ep.step]):
            self.sim.after(2, partial(self.collect, ep.step))

    def maybe_done(self) -> None:
        if self.holdout_left == 0 and self.steps_done == STEPS and not self.finished:
            self.finished = True
            self.sim.after(30, self.finish)

    async def collect(self, step: int) -> None:
        batch = self.batches[step]
        await self.emit(BatchCollected(step=step, episode_ids=[e.episode_id for e in batch]))
        tokens = sum(e.tokens for e in batch)
        usd = PRICES.llm_usd(AGENT, input_tokens=0, train_tokens=tokens)
        res = await self.gate.reserve("training", f"step:{step}", usd * 1.5, item=AGENT)
        self.sim.after(75, partial(self.trained, step, res.reservation_id, usd, tokens))

    async def trained(self, step: int, reservation: str, usd: float, tokens: int) -> None:
        await self.gate.settle(reservation, usd, price_version=PRICES.label, train_tokens=tokens)
        rng = self.rng(f"lora:{step}")
        rewards = [self.rt.state(RewardsProjection)[e.episode_id].reward for e in self.batches[step]]
        metrics = {
            "loss": round(0.42 - 0.06 * step + rng.uniform(-0.02, 0.02), 4),
            "reward_mean": round(sum(rewards) / len(rewards), 6),
            "kl": round(0.002 + 0.001 * step + rng.uniform(0, 0.001), 5),
            "lr": 4e-5,
            "train_tokens": float(tokens),
        }
        state = f"tinker://{RUN_ID}/state/{step:04d}"
        sampler = f"tinker://{RUN_ID}/sampler/{step:04d}"
        await self.emit(LoRAStepApplied(step=step, metrics=metrics, state_path=state, sampler_path=sampler))
        await self.emit(SamplerPublished(sampler_version=step, path=sampler))
        self.steps_done = step
        if step in HOLDOUT_AFTER:
            self.sim.after(3, partial(self.holdout_arm, step))
        if step == 2:
            await self.request_pod(RTX4090, 2)  # the queue ran long: one more pod
        if step < STEPS:
            self.sim.after(5, partial(self.start_batch, step + 1))
        self.maybe_done()

    # -- episodes ------------------------------------------------------------------------------------

    def make_episode(
        self, ep_id: str, task: str, family: str, version: int, group: str, kind: str, step: int
    ) -> Episode:
        rng = self.rng(f"episode:{ep_id}")
        skill = version / STEPS
        plan = [Turn("read_file", "INSTRUCTIONS.md")]
        looked = rng.random() < 0.15 + 0.75 * skill
        if looked:
            plan.append(Turn("get_baseline_scores"))
        plan += [Turn("write_file", "job.toml"), Turn("write_file", f"env/{_module(family)}/__init__.py")]
        u = rng.random()
        p_none, p_reject = 0.16 * (1 - skill), 0.04 + 0.26 * (1 - skill)
        if u < p_none:
            plan += [Turn(""), Turn("")]  # talks instead of submitting: nudged once, then the episode ends
        else:
            rejected = u < p_none + p_reject
            valid_on = 4 if rejected else (1 if rng.random() < 0.3 + 0.6 * skill else (2 if rng.random() < 0.6 else 3))
            for attempt in range(1, min(valid_on, 4)):
                unparseable = attempt == 1 and rng.random() < 0.35 * (1 - skill)
                failed = "job_toml" if unparseable else rng.choice(CHECKS[1:])
                plan.append(Turn("submit_job", verdict="unparseable" if unparseable else "reject", failed=failed))
                if attempt < 3:
                    path = "job.toml" if failed in ("job_toml", "bounds") else f"env/{_module(family)}/__init__.py"
                    plan.append(Turn("edit_file", path))
            if not rejected:
                plan.append(Turn("submit_job", verdict="valid"))
        model = LARGE if rng.random() < (0.2 + 0.65 * skill + (0.15 if looked else 0.0)) else SMALL
        adopted: dict[str, Any] = {}
        if rng.random() < 0.15 + 0.7 * skill:
            for key in rng.sample(sorted(ADOPTABLE), rng.randint(1, 3)):
                adopted[key] = rng.choice(ADOPTABLE[key])
        lr = rng.choice((1e-6, 5e-6, 1e-5, 2e-5))
        toml = _job_toml(family, model, adopted, lr, rng.choice((20, 30, 40)))
        fail_p = 0.05 + 0.3 * (1 - skill)
        fate = rng.choice(sorted(JOB_FAILURES)) if rng.random() < fail_p else "ok"
        return Episode(ep_id, task, family, version, group, kind, step, skill, plan, model, toml, fate)

    async def episode_start(self, ep: Episode) -> None:
        prompt = await self.json_blob(
            {
                "messages": [{"role": "system", "content": f"Train a small model on {ep.family} (golden stand-in)."}],
                "tools": ["read_file", "write_file", "edit_file", "list_files", "get_baseline_scores", "submit_job"],
            }
        )
        await self.emit(
            EpisodeStarted(
                episode_id=ep.episode_id,
                task_id=ep.task_id,
                family=ep.family,
                policy="tinker",
                sampler_version=ep.version,
                group_id=ep.group_id,
                spec=f"{ep.family}_v1",
                prompt_blob=prompt,
                max_attempts=3,
            )
        )
        for path, data in sorted(_initial_files(ep.family).items()):
            await self.write(ep, path, data)
        self.sim.after(1, partial(self.turn_start, ep))

    async def write(self, ep: Episode, path: str, data: bytes) -> None:
        ep.files[path] = data
        blob = await self.blob(data)
        await self.emit(WorkspaceFileWritten(episode_id=ep.episode_id, path=path, blob=blob, size=len(data)))

    async def turn_start(self, ep: Episode) -> None:
        max_usd = PRICES.llm_max_usd(AGENT, max_input_tokens=65536, max_output_tokens=4096)
        res = await self.gate.reserve(ep.kind, ep.episode_id, max_usd, episode_id=ep.episode_id, item=AGENT)
        ep.reservation = res.reservation_id
        rng = self.rng(f"turn:{ep.episode_id}:{ep.turn}")
        self.sim.after(round(rng.uniform(6, 20), 2), partial(self.turn_reply, ep))

    async def turn_reply(self, ep: Episode) -> None:
        rng = self.rng(f"tokens:{ep.episode_id}:{ep.turn}")
        step = ep.plan[ep.turn]
        tokens_in = 12000 + 6000 * ep.turn + rng.randint(0, 3000)
        cached = int(tokens_in * 0.7) if ep.turn else 0
        tokens_out = rng.randint(200, 1800)
        ep.tokens += tokens_in + tokens_out
        usd = PRICES.llm_usd(AGENT, input_tokens=tokens_in, cached_input_tokens=cached, output_tokens=tokens_out)
        await self.gate.settle(
            ep.reservation,
            usd,
            input_tokens=tokens_in,
            cached_input_tokens=cached,
            output_tokens=tokens_out,
            price_version=PRICES.label,
        )
        call_id = f"call-{ep.turn}"
        args = json.dumps({"path": step.path} if step.path else {})
        reply: dict[str, Any] = {"role": "assistant", "content": _say(step)}
        if step.tool:
            reply["tool_calls"] = [{"id": call_id, "name": step.tool, "arguments": args}]
        blob = await self.json_blob({"reply": reply, "training": None})
        await self.emit(
            AgentTurnTaken(
                episode_id=ep.episode_id,
                turn=ep.turn,
                blob=blob,
                input_tokens=tokens_in,
                cached_input_tokens=cached,
                output_tokens=tokens_out,
                sampler_version=ep.version,
            )
        )
        ep.turn += 1
        if step.tool:
            await self.emit(ToolCalled(episode_id=ep.episode_id, call_id=call_id, name=step.tool, arguments=args))
            if step.tool == "submit_job":
                done = await self.submit(ep, step, call_id)
                if done:
                    return
            else:
                await self.tool(ep, step, call_id)
        if ep.turn < len(ep.plan):
            self.sim.after(1, partial(self.turn_start, ep))
            return
        # The plan ran out without a valid submission: only the no-submission plans end here.
        status = "rejected" if ep.attempts else "no_submission"
        reason = f"stopped after {ep.turn} turns without a valid submission"
        await self.emit(EpisodeFinished(episode_id=ep.episode_id, status=status, reason=reason))
        await self.reward(ep, None)

    async def tool(self, ep: Episode, step: Turn, call_id: str) -> None:
        content = "ok"
        if step.tool == "read_file":
            content = ep.files.get(step.path, b"").decode()
        elif step.tool == "get_baseline_scores":
            small, large = BASELINES[ep.family]
            content = json.dumps({SMALL: small, LARGE: large})
        elif step.path == "job.toml":
            await self.write(ep, "job.toml", ep.toml.encode())
            content = f"wrote job.toml ({len(ep.toml)} bytes)"
        else:
            await self.write(ep, step.path, _env_source(ep.family, ep.edits))
            ep.edits += 1
            content = f"wrote {step.path}"
        await self.emit(ToolReturned(episode_id=ep.episode_id, call_id=call_id, ok=True, content=content[:400]))

    async def submit(self, ep: Episode, step: Turn, call_id: str) -> bool:
        ep.attempts += 1
        parseable = step.verdict != "unparseable"
        ep.parseable = ep.parseable or parseable
        await self.emit(SubmissionReceived(episode_id=ep.episode_id, attempt=ep.attempts, parseable=parseable))
        rng = self.rng(f"probe:{ep.episode_id}:{ep.attempts}")
        checks: list[CheckResult] = []
        for name in CHECKS:
            ok = name != step.failed
            detail = "" if ok else CHECK_FAILURES[name].format(module=_module(ep.family))
            checks.append(CheckResult(name=name, ok=ok, detail=detail, seconds=round(rng.uniform(0.05, 4.0), 3)))
            if not ok:
                break  # the probe stops at the first failed check
        probe_s = round(sum(c.seconds for c in checks), 3)
        if step.verdict == "valid":
            ep.validated_attempt = ep.attempts
            bundle = await self.blob(make_bundle(ep.files, json.dumps({"name": f"{ep.family}_v1"}).encode()))
            await self.emit(
                SubmissionValidated(
                    episode_id=ep.episode_id,
                    attempt=ep.attempts,
                    checks=checks,
                    probe_seconds=probe_s,
                    job_blob=bundle,
                    isolation="subprocess",
                )
            )
            text = f"Job validated on attempt {ep.attempts} and queued for training."
            await self.emit(ToolReturned(episode_id=ep.episode_id, call_id=call_id, ok=True, content=text))
            await self.emit(EpisodeFinished(episode_id=ep.episode_id, status="validated"))
            await self.queue_job(ep, bundle)
            return True
        await self.emit(
            SubmissionRejected(
                episode_id=ep.episode_id,
                attempt=ep.attempts,
                checks=checks,
                probe_seconds=probe_s,
                isolation="subprocess",
            )
        )
        failed = next(c for c in checks if not c.ok)
        text = f"Attempt {ep.attempts} of 3 failed check {failed.name}: {failed.detail}"
        await self.emit(ToolReturned(episode_id=ep.episode_id, call_id=call_id, ok=False, content=text, error=text))
        if ep.attempts >= 3:
            reason = f"rejected {ep.attempts} times (last failed check: {failed.name})"
            await self.emit(EpisodeFinished(episode_id=ep.episode_id, status="rejected", reason=reason))
            await self.reward(ep, None)
            return True
        return False

    async def reward(self, ep: Episode, job: JobSucceeded | JobFailed | None) -> None:
        validated = ep.validated_attempt > 0
        common: dict[str, Any] = {
            "episode_id": ep.episode_id,
            "parseable": ep.parseable,
            "attempts": ep.validated_attempt if validated else ep.attempts,
            "validated": validated,
            "family": ep.family,
        }
        if ep.job_id:
            common.update(job_id=ep.job_id, base_model=ep.model, time_budget_s=TIME_BUDGET_S)
        if isinstance(job, JobSucceeded):
            best = max(BASELINES[ep.family])
            inputs = RewardInputs(
                **common, job_status="succeeded", post=job.post, best_pre=best, train_seconds=job.train_seconds
            )
        elif isinstance(job, JobFailed):
            inputs = RewardInputs(**common, job_status="failed", job_failure=job.reason)
        else:
            inputs = RewardInputs(**common)
        await self.emit(compute_reward(inputs, self.reward_config))
        await self.rewarded(ep)

    # -- jobs ----------------------------------------------------------------------------------------

    async def queue_job(self, ep: Episode, bundle: str) -> None:
        ep.job_id = f"job-{ep.episode_id.removeprefix('ep-')}"
        steps = int(ep.toml.split("max_steps = ")[1].split("\n")[0])
        job = Job(ep.job_id, ep, self.orders, steps)
        self.orders += 1
        self.jobs[job.job_id] = job
        await self.emit(
            JobQueued(
                job_id=job.job_id,
                episode_id=ep.episode_id,
                family=ep.family,
                base_model=ep.model,
                bundle=bundle,
                time_budget_s=TIME_BUDGET_S,
            )
        )
        self.waiting.append(job)
        await self.dispatch()

    async def dispatch(self) -> None:
        self.waiting.sort(key=lambda j: j.order)
        while self.waiting:
            free = sorted((p for p in self.pods.values() if p.status == "idle"), key=lambda p: (p.idle_since, p.pod_id))
            if not free:
                return
            pod, job = free[0], self.waiting.pop(0)
            job.attempt += 1
            assigned = await self.emit(JobAssigned(job_id=job.job_id, pod_id=pod.pod_id, attempt=job.attempt))
            job.key, job.pod, job.cursor = assigned.key, pod.pod_id, 0
            pod.status, pod.job = "busy", job.job_id
            self.sim.after(3, partial(self.job_start, job, job.key))

    async def job_start(self, job: Job, key: str) -> None:
        if job.key != key:
            return
        ep = job.episode
        pod = self.pods[job.pod]
        await self.emit(JobStarted(job_id=job.job_id, pod_id=pod.pod_id, attempt=job.attempt))
        rng = self.rng(f"job:{job.job_id}:{job.attempt}")
        small, large = BASELINES[ep.family]
        job.pre = round((large if ep.model == LARGE else small) + rng.uniform(-0.006, 0.006), 3)
        speed = (0.8 if pod.gpu == RTX4090 else 1.0) * (1.0 if ep.model == LARGE else 0.65)
        train_s = round(rng.uniform(700, 1500) * speed, 1)
        self.sim.after(5, partial(self.progress, job, key, 0, "pre_score", None, None))
        lose = not self.lost_one and ep.step == 3 and pod.gpu == A40
        if lose:
            self.lost_one = True
            self.sim.after(60 + train_s * 0.5, partial(self.pod_lost, pod.pod_id, job, key))
        for i in (1, 2, 3):
            reward = round(0.2 + 0.1 * i * (0.5 + ep.skill) + rng.uniform(-0.03, 0.03), 4)
            loss = round(0.9 - 0.15 * i + rng.uniform(-0.03, 0.03), 4)
            when = 60 + train_s * i / 3
            if ep.job_fate != "ok" and i == 3:
                self.sim.after(60 + train_s * 0.55, partial(self.job_failed, job, key))
                break
            self.sim.after(when, partial(self.progress, job, key, job.max_steps * i // 3, "train", reward, loss))
        else:
            self.sim.after(61 + train_s, partial(self.progress, job, key, job.max_steps, "post_score", None, None))
            self.sim.after(120 + train_s, partial(self.job_succeeded, job, key, train_s))

    async def progress(
        self, job: Job, key: str, step: int, phase: str, reward: float | None, loss: float | None
    ) -> None:
        if job.key != key:
            return
        job.cursor += 1
        await self.emit(
            JobProgressed(
                job_id=job.job_id,
                step=step,
                reward=reward,
                loss=loss,
                phase=phase,
                total_steps=job.max_steps,
                cursor=job.cursor,
                attempt=job.attempt,
            )
        )

    async def job_succeeded(self, job: Job, key: str, train_s: float) -> None:
        if job.key != key:
            return
        ep = job.episode
        rng = self.rng(f"post:{job.job_id}")
        gain = max(-0.04, rng.gauss(0.02 + 0.16 * ep.skill, 0.04)) * (1.0 if ep.model == LARGE else 0.8)
        post = round(min(1.0, max(0.0, job.pre + gain)), 3)
        timings = {"pre_score": 55.0, "train": train_s, "post_score": 59.0}
        metrics = {"final_reward": round(0.3 + 0.4 * ep.skill, 4), "final_loss": round(0.4 - 0.1 * ep.skill, 4)}
        result = await self.json_blob({"job_id": job.job_id, "pre": job.pre, "post": post, "timings": timings})
        body = JobSucceeded(
            key=key,
            job_id=job.job_id,
            pre=job.pre,
            post=post,
            train_seconds=train_s,
            timings=timings,
            result_blob=result,
            pod_id=job.pod,
            attempt=job.attempt,
            metrics=metrics,
        )
        await self.job_done(job, body)

    async def job_failed(self, job: Job, key: str) -> None:
        if job.key != key:
            return
        fate = job.episode.job_fate
        body = JobFailed(
            key=key, job_id=job.job_id, reason=fate, detail=JOB_FAILURES[fate], pod_id=job.pod, attempt=job.attempt
        )
        await self.job_done(job, body)

    async def job_done(self, job: Job, body: JobSucceeded | JobFailed) -> None:
        await self.emit(body)
        pod = self.pods[job.pod]
        pod.status, pod.job, pod.idle_since = "idle", "", self.sim.now
        job.key = ""
        await self.reward(job.episode, body)
        await self.dispatch()

    # -- fleet ---------------------------------------------------------------------------------------

    async def request_pod(self, gpu: str, rung: int) -> None:
        pod_id = f"p{self.next_pod}"
        self.next_pod += 1
        usd = PRICES.gpu_usd(gpu, seconds=CHUNK_S)
        res = await self.gate.reserve("job", pod_ref(pod_id), usd, item=gpu)
        req = await self.emit(
            PodRequested(pod_id=pod_id, gpu_type=gpu, provider="runpod", rung=rung, reservation_id=res.reservation_id)
        )
        pod = Pod(pod_id, gpu, PRICES.gpu(gpu).usd_per_hour, res.reservation_id)
        self.pods[pod_id] = pod
        if gpu == A5000:
            self.sim.after(4, partial(self.provision_failed, pod, req.key))
            return
        rng = self.rng(f"boot:{pod_id}")
        self.sim.after(15, partial(self.pod_created, pod))
        self.sim.after(round(rng.uniform(100, 140), 1), partial(self.pod_ready, pod, req.key))

    async def provision_failed(self, pod: Pod, key: str) -> None:
        detail = f"no {pod.gpu} available in any allowed data center"
        await self.emit(
            PodProvisionFailed(key=key, pod_id=pod.pod_id, kind="stock_out", detail=detail, gpu_type=pod.gpu)
        )
        await self.gate.release(pod.reservation, reason="stock_out: nothing billed")
        pod.status = "gone"

    async def pod_created(self, pod: Pod) -> None:
        pod.provider_id = f"rp-{pod.pod_id}-golden"
        pod.billed_until = self.sim.now
        await self.emit(PodCreated(pod_id=pod.pod_id, provider_id=pod.provider_id, usd_per_hour=pod.rate))

    async def pod_ready(self, pod: Pod, key: str) -> None:
        url = f"https://{pod.provider_id}-8000.proxy.runpod.net"
        await self.emit(
            PodReady(
                key=key,
                pod_id=pod.pod_id,
                provider_id=pod.provider_id,
                url=url,
                gpu_type=pod.gpu,
                usd_per_hour=pod.rate,
            )
        )
        pod.status, pod.idle_since = "idle", self.sim.now
        if not self.waiting:
            await self.emit(PodIdle(pod_id=pod.pod_id))
        await self.dispatch()

    async def pod_lost(self, pod_id: str, job: Job, key: str) -> None:
        if job.key != key:
            return
        pod = self.pods[pod_id]
        await self.emit(PodLost(pod_id=pod_id, reason="heartbeat timeout: the pod agent did not answer for 90 s"))
        pod.status = "lost"
        await self.emit(JobRequeued(key=key, job_id=job.job_id, reason="pod_lost", attempt=job.attempt, pod_id=pod_id))
        job.key, job.pod = "", ""
        self.waiting.append(job)
        await self.emit(PodTerminating(pod_id=pod_id, provider_id=pod.provider_id, reason="lost"))
        self.sim.after(10, partial(self.terminated, pod_id, "lost", final=False))
        await self.request_pod(A40, 1)  # a replacement
        await self.dispatch()

    async def terminated(self, pod_id: str, reason: str, *, final: bool) -> None:
        pod = self.pods[pod_id]
        key = self.rt.state(FleetProjection).pods[pod_id].terminate_key  # the pod.terminating request's key
        await self.emit(PodTerminated(key=key, pod_id=pod_id, reason=reason))
        await self.bill(pod, final=True)
        pod.status = "gone"
        if final:
            await self.maybe_finished()

    async def bill(self, pod: Pod, *, final: bool = False) -> None:
        seconds = round(self.sim.now - pod.billed_until, 3)
        usd = PRICES.gpu_usd(pod.gpu, seconds=seconds)
        await self.gate.settle(pod.reservation, usd, seconds=seconds, price_version=PRICES.label)
        pod.billed_until = self.sim.now
        if not final:
            res = await self.gate.reserve(
                "job", pod_ref(pod.pod_id), PRICES.gpu_usd(pod.gpu, seconds=CHUNK_S), item=pod.gpu
            )
            pod.reservation = res.reservation_id

    async def bill_all(self) -> None:
        for pod in sorted(self.pods.values(), key=lambda p: p.pod_id):
            if pod.status in ("idle", "busy") and pod.provider_id:
                await self.bill(pod)


def _say(step: Turn) -> str:
    if not step.tool:
        return "I think the job is nearly ready; let me explain the plan before submitting."
    if step.tool == "submit_job":
        return "Submitting the job."
    if step.tool == "get_baseline_scores":
        return "Checking which base model scores best before training."
    return f"Calling {step.tool} on {step.path}."


def _projections() -> list[Projection[Any]]:
    projections = default_projections()
    names = {p.name for p in projections}
    projections += [p for p in (QueueProjection(), FleetProjection()) if p.name not in names]
    return projections


async def _write(directory: Path) -> None:
    clock = ManualClock(start=T0)
    async with Runtime(directory, _projections(), run_id=RUN_ID, clock=clock, durability=Durability.NONE) as rt:
        world = World(rt, BlobStore(directory / "blobs"), clock)
        await world.start()
        await world.sim.run()
        queue, fleet = rt.state(QueueProjection), rt.state(FleetProjection)
        if queue.anomalies or fleet.anomalies:
            raise AssertionError(
                f"golden run does not fit the lifecycles: queue {queue.anomalies}, fleet {fleet.anomalies}"
            )
        if rt.state(BudgetProjection).overrun or rt.state(BudgetProjection).open:
            raise AssertionError("golden run left an overrun or an open reservation")
        if rt.pending_requests():
            raise AssertionError(f"golden run left requests without an outcome: {rt.pending_requests()}")


def generate(directory: Path) -> Path:
    """Write the golden run into ``directory`` (which must not exist yet); returns it."""
    if directory.exists():
        raise FileExistsError(f"{directory} exists: generate into a fresh directory")
    anyio.run(_write, directory)
    # The writer lock (engine/writer_lock.py) is a live process's state, not part of the run's record.
    (directory / LOCK_NAME).unlink(missing_ok=True)
    return directory


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp) / "run")
        if OUT.exists():
            shutil.rmtree(OUT)
        OUT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(fresh, OUT)
    lines = (OUT / "events.jsonl").read_bytes().count(b"\n")
    blobs = len(list((OUT / "blobs").iterdir()))
    print(f"wrote {OUT}: {lines} events, {blobs} blobs")


if __name__ == "__main__":
    main()
