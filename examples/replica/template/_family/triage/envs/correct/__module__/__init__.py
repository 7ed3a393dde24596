"""triage-train: a verifiers v1 training environment for on-call incident triage over services and deploys.

A task asks ``Incident INC-48213 is open on checkout. Find the latest deploy made before it opened, to checkout
or to a service it depends on. Answer with the deploy id.`` (or, half the time, ``Who is on call for the service
that deploy went to?``). The model must find when the incident opened (``list_incidents``), which services
the affected one depends on (``get_service``) and each candidate's deploys (``list_deploys``), with the tools
(exactly the hidden eval's tool interface, served from ``tools.py``); compare the times; for the second kind
look up the on-call engineer of the culprit's service; and end with ``<answer>D-417</answer>``.

Per-rollout world. The tools are served by ONE shared tool server for all rollouts, so each task's services,
incidents and deploys go into ``trace.state`` (a ``TriageState``) in ``Task.setup``, and the server reads the
calling rollout's state through verifiers' state channel.

Tasks are generated here from a seeded ``random.Random``: 1..5 direct dependencies, 0..8 decoys, each one of
a deploy to a candidate after the incident opened, a deploy to a service outside the candidates between the
cause and the incident, or a resolved incident on the service (after a late deploy, or before the cause).
Every deploy and incident gets its own minute, so the cause is always unique. Incident ids have five digits
(the eval's four), so no training prompt equals an eval prompt. Duplicate prompts are skipped.

Reward ``reward`` (weight 1): ``rubric.score(reply, gold)``, the one file in which the replica's four
environments (envs/correct, envs/partial, envs/everything, envs/wrong) differ.
"""

from __future__ import annotations

import random
import re
from typing import Any

import verifiers.v1 as vf

from .rubric import score

__all__ = ["TriageTaskset"]

SYSTEM_PROMPT = (
    "Solve the task by calling the tools. When you are done, reply with only the final answer "
    "inside <answer></answer> tags."
)

# ---------------------------------------------------------------------------------------------------------------
# Answer extraction: the eval's convention.
# ---------------------------------------------------------------------------------------------------------------
_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_QUOTES = "\"'`“”‘’"


def extract_answer(reply: str) -> str:
    """The text in the last <answer> tag, else the whole reply without <think> blocks."""
    tags = _ANSWER_RE.findall(reply)
    if tags:
        return str(tags[-1]).strip()
    return _THINK_RE.sub("", reply).strip()


def normalise_answer(answer: str) -> str:
    """Deploy ids and names: collapse whitespace, drop a trailing full stop and surrounding quotes, casefold."""
    text = " ".join(answer.split())
    if text.endswith("."):
        text = text[:-1].rstrip()
    while len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:
        text = text[1:-1].strip()
    return text.casefold()


# ---------------------------------------------------------------------------------------------------------------
# Task generator.
# ---------------------------------------------------------------------------------------------------------------
SERVICES = (
    "checkout", "auth", "cart", "search", "inventory", "gateway", "email", "billing", "profile", "catalog",
    "payments", "shipping", "reviews", "pricing", "notify", "images",
)  # fmt: skip
TEAMS = ("web", "core", "growth", "infra", "data", "mobile")
ENGINEERS = (
    "Maya", "Leo", "Iris", "Tomas", "Priya", "Sven", "Noor", "Kenji", "Ana", "Raul", "Mina", "Olek",
    "Zoe", "Femi", "Lars", "Hana",
)  # fmt: skip
DAY_START, DAY_END = 8 * 60, 23 * 60 + 59  # tool results show "HH:MM" within one day


class _Minutes:
    """Distinct minutes of the day: no two deploys or incidents share one, so no comparison ever ties."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._taken: set[int] = set()

    def pick(self, lo: int, hi: int) -> int | None:
        lo, hi = max(lo, DAY_START), min(hi, DAY_END)
        if lo > hi:
            return None
        for _ in range(16):  # a few dozen taken minutes in a wide range: a random try almost always hits a free one
            minute = self._rng.randint(lo, hi)
            if minute not in self._taken:
                break
        else:  # a narrow, crowded range: choose among what is left, if anything
            free = [m for m in range(lo, hi + 1) if m not in self._taken]
            if not free:
                return None
            minute = self._rng.choice(free)
        self._taken.add(minute)
        return minute


def generate(rng: random.Random, n_deps: int, decoys: int) -> tuple[str, str, dict[str, Any]]:
    """One task: (prompt, gold deploy id or engineer, world of services, incidents and deploys)."""
    names = rng.sample(SERVICES, min(len(SERVICES), 3 + n_deps + decoys // 2))
    target, deps, outsiders = names[0], names[1 : 1 + n_deps], names[1 + n_deps :]
    oncall = dict(zip(names, rng.sample(ENGINEERS, len(names)), strict=True))
    services: dict[str, dict[str, Any]] = {}
    for name in names:
        # Outsiders get edges of their own, some back to the target: a reverse edge is not a candidate.
        others = [n for n in names if n != name]
        depends_on = list(deps) if name == target else rng.sample(others, rng.randint(0, min(2, len(others))))
        services[name] = {"team": rng.choice(TEAMS), "oncall": oncall[name], "depends_on": depends_on}

    minutes = _Minutes(rng)
    # Five-digit incident ids (the eval's have four): the prompt names the incident, so this keeps every training
    # prompt different from every eval prompt. Deploy ids are three digits, as the eval's.
    incident_ids = iter(f"INC-{n}" for n in rng.sample(range(10000, 100000), 10))
    deploy_ids = iter(f"D-{n}" for n in rng.sample(range(100, 1000), 60))
    opened = minutes.pick(12 * 60, 17 * 60)
    assert opened is not None
    incidents = [
        {"id": next(incident_ids), "service": target, "status": "open", "sev": rng.randint(1, 2), "opened": opened}
    ]
    candidates = [target, *deps]
    culprit_service = rng.choice(candidates)
    cause = minutes.pick(opened - 120, opened - 3)
    assert cause is not None
    deploys: list[dict[str, Any]] = [{"id": next(deploy_ids), "service": culprit_service, "at": cause}]

    def add_deploy(service: str, lo: int, hi: int) -> None:
        minute = minutes.pick(lo, hi)
        if minute is not None:
            deploys.append({"id": next(deploy_ids), "service": service, "at": minute})

    for service in candidates:  # older deploys, to rank below the cause
        for _ in range(rng.randint(0, 2)):
            add_deploy(service, DAY_START, cause - 1)
    for service in outsiders:  # unrelated traffic, at any time
        for _ in range(rng.randint(0, 2)):
            add_deploy(service, DAY_START, DAY_END)
    for _ in range(decoys):
        kind = rng.choice(("late", "outsider", "resolved"))
        if kind == "late":  # punishes not comparing with the incident's time
            add_deploy(rng.choice(candidates), opened + 1, opened + 150)
        elif kind == "outsider":  # the most tempting: the latest before the incident, on a non-candidate
            add_deploy(rng.choice(outsiders), cause + 1, opened - 1)
        else:  # a resolved incident whose time would pick another deploy: punishes reading the wrong incident
            if rng.random() < 0.5:
                at = minutes.pick(opened + 10, opened + 180)
                if at is not None:
                    add_deploy(rng.choice(candidates), opened + 1, at - 1)
            else:
                at = minutes.pick(DAY_START + 30, cause - 5)
            if at is not None:
                incidents.append(
                    {
                        "id": next(incident_ids),
                        "service": target,
                        "status": "resolved",
                        "sev": rng.randint(1, 3),
                        "opened": at,
                    }
                )

    lead = (
        f"Incident {incidents[0]['id']} is open on {target}. Find the latest deploy made before it opened, "
        f"to {target} or to a service it depends on."
    )
    if rng.random() < 0.5:
        prompt, answer = f"{lead} Answer with the deploy id.", str(deploys[0]["id"])
    else:
        prompt, answer = f"{lead} Who is on call for the service that deploy went to?", oncall[culprit_service]
    return prompt, answer, {"services": services, "incidents": incidents, "deploys": deploys}


# ---------------------------------------------------------------------------------------------------------------
# Verifiers classes.
# ---------------------------------------------------------------------------------------------------------------
class TriageState(vf.State):
    """One rollout's world, read by the shared tool server through the state channel."""

    services: dict[str, dict[str, Any]] = {}
    incidents: list[dict[str, Any]] = []
    deploys: list[dict[str, Any]] = []


class TriageData(vf.TaskData):
    answer: str  # the gold deploy id ("D-417") or on-call engineer ("Maya")
    steps: int  # number of direct dependencies of the affected service
    world: dict[str, Any] = {}  # {"services": {...}, "incidents": [...], "deploys": [...]}


class TriageTaskConfig(vf.TaskConfig):
    pass


class TriageTask(vf.Task[TriageData, TriageState, TriageTaskConfig]):
    @property
    def key(self) -> str:
        return str(self.data.id)

    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        world = self.data.world
        trace.state = TriageState(services=world["services"], incidents=world["incidents"], deploys=world["deploys"])

    @vf.reward(weight=1.0)
    async def reward(self, trace: vf.Trace) -> float:
        return score(trace.last_reply or "", self.data.answer)

    @vf.metric
    async def answer_tag(self, trace: vf.Trace) -> float:
        return float(bool(_ANSWER_RE.search(trace.last_reply or "")))


class TriageConfig(vf.TasksetConfig):
    num_tasks: int = 2000
    seed: int = 4242
    min_deps: int = 1
    max_deps: int = 5
    max_decoys: int = 8
    task: TriageTaskConfig = TriageTaskConfig()
    tools: vf.SharedToolsetConfig = vf.SharedToolsetConfig()


class TriageTaskset(vf.Taskset[TriageTask, TriageConfig]):
    @classmethod
    def toolsets(cls, config: TriageConfig) -> list[vf.Toolset]:
        # Imported here: verifiers runs tools.py as `python -m triage_train.tools`, and importing it at the top
        # of this module would load it twice in the tool server.
        from .tools import OnCallTools

        return [OnCallTools(config.tools)]  # one shared server; each rollout's world travels in its state

    def load(self) -> list[TriageTask]:
        cfg = self.config
        rng = random.Random(cfg.seed)
        tasks: list[TriageTask] = []
        seen: set[str] = set()
        for _ in range(cfg.num_tasks * 20):  # bounded: a tiny difficulty range cannot loop forever
            if len(tasks) >= cfg.num_tasks:
                break
            n_deps = rng.randint(cfg.min_deps, cfg.max_deps)
            prompt, answer, world = generate(rng, n_deps, rng.randint(0, cfg.max_decoys))
            if prompt in seen:  # the prompt names only the incident and service: a repeat would be ambiguous
                continue
            seen.add(prompt)
            task_id = f"triage-train/{len(tasks)}"
            data = TriageData(
                id=task_id,
                name=task_id,
                prompt=prompt,
                system_prompt=SYSTEM_PROMPT,
                answer=answer,
                steps=n_deps,
                world=world,
            )
            tasks.append(TriageTask(data, cfg.task))
        return tasks
