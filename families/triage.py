"""triage (held out): on-call incident triage that correlates services, incidents and deploys.

The world is a small service graph: each service has a team, an on-call engineer and the services it
depends on; services have incidents (one of them open) and deploys, at times of one day ("HH:MM"). A
task names an open incident and its service and asks for the likely cause: the latest deploy made
before the incident opened, to that service or to one of its direct dependencies; or, in the other
question kind, who is on call for the service that deploy went to. The model must find the open
incident's time (``list_incidents``), the dependencies (``get_service``), each candidate's deploys
(``list_deploys``), compare times across them, and for the second kind look up one more service.

Difficulty: ``steps`` is the number of direct dependencies (1-5); ``distractors`` the number of decoys
(0-8), each one of: a deploy to a candidate service after the incident opened, a deploy to a service
outside the candidates between the cause and the incident (the most tempting), or a resolved
incident on the service (at any time of day). Default mix: 1-3 dependencies, 1-4 decoys.

Scoring is exact match of the deploy id or the engineer's name (case-insensitive). No partial credit:
the right service with the wrong deploy is still the wrong rollback.

This family is held out: it is never used to train the trainer agent, only to measure transfer.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from ._answer import normalise_text
from ._base import Difficulty, SolverRecorder, SolverStep, Task, ToolBox, ToolError
from ._family import Draw, FamilyBase

__all__ = ["Triage"]

SERVICES = (
    "checkout", "auth", "cart", "search", "inventory", "gateway", "email", "billing", "profile", "catalog",
    "payments", "shipping", "reviews", "pricing", "notify", "images",
)  # fmt: skip
TEAMS = ("web", "core", "growth", "infra", "data", "mobile")
ENGINEERS = (
    "Maya", "Leo", "Iris", "Tomas", "Priya", "Sven", "Noor", "Kenji", "Ana", "Raul", "Mina", "Olek",
    "Zoe", "Femi", "Lars", "Hana",
)  # fmt: skip
MAX_DEPS = 5
MAX_DECOYS = 8
DAY_START, DAY_END = 8 * 60, 23 * 60 + 59

_PROMPT_RE = re.compile(r"^Incident (INC-\d+) is open on (\S+)\.")
_INCIDENT_RE = re.compile(r"^(INC-\d+) (open|resolved) sev\d opened (\d\d:\d\d)$")
_DEPLOY_RE = re.compile(r"^(D-\d+) at (\d\d:\d\d)$")


def _hhmm(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


class TriageTools:
    """The tools of one triage task, bound to its world (read-only)."""

    def __init__(self, world: dict[str, Any]) -> None:
        self._services: dict[str, dict[str, Any]] = world.get("services", {})
        self._incidents: list[dict[str, Any]] = world.get("incidents", [])
        self._deploys: list[dict[str, Any]] = world.get("deploys", [])

    def _service(self, name: str) -> str:
        key = name.strip().lower()
        if key not in self._services:
            raise ToolError(f"no service {name!r}")
        return key

    def get_service(self, name: str) -> str:
        """Get a service's owning team, its on-call engineer and the services it depends on.

        Args:
            name: the service name, e.g. "checkout"
        """
        key = self._service(name)
        rec = self._services[key]
        deps = ", ".join(rec["depends_on"]) or "none"
        return f"{key}: team={rec['team']}; oncall={rec['oncall']}; depends_on={deps}"

    def list_incidents(self, service: str) -> str:
        """List a service's incidents today, newest first: id, status, severity and when it opened.

        Args:
            service: the service name
        """
        key = self._service(service)
        rows = sorted((i for i in self._incidents if i["service"] == key), key=lambda i: -int(i["opened"]))
        lines = [f"{i['id']} {i['status']} sev{i['sev']} opened {_hhmm(i['opened'])}" for i in rows]
        return "\n".join(lines) or "no incidents"

    def list_deploys(self, service: str) -> str:
        """List a service's deploys today, newest first: deploy id and time.

        Args:
            service: the service name
        """
        key = self._service(service)
        rows = sorted((d for d in self._deploys if d["service"] == key), key=lambda d: -int(d["at"]))
        return "\n".join(f"{d['id']} at {_hhmm(d['at'])}" for d in rows) or "no deploys"

    def toolbox(self) -> ToolBox:
        return ToolBox([self.list_incidents, self.get_service, self.list_deploys])


class _Clock:
    """Hands out distinct minutes, so no two deploys or incidents tie (the cause is always unique)."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._used: set[int] = set()

    def take(self, lo: int, hi: int) -> int | None:
        free = [m for m in range(max(lo, DAY_START), min(hi, DAY_END) + 1) if m not in self._used]
        if not free:
            return None
        minute = self._rng.choice(free)
        self._used.add(minute)
        return minute


def _incident(incident_id: str, service: str, status: str, sev: int, opened: int) -> dict[str, Any]:
    return {"id": incident_id, "service": service, "status": status, "sev": sev, "opened": opened}


def _draw(rng: random.Random, difficulty: Difficulty) -> Draw:
    n_deps = difficulty.steps
    n_services = min(len(SERVICES), 1 + n_deps + 2 + difficulty.distractors // 2)
    names = rng.sample(SERVICES, n_services)
    target, deps, others = names[0], names[1 : 1 + n_deps], names[1 + n_deps :]
    oncalls = rng.sample(ENGINEERS, n_services)
    services: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(names):
        if name == target:
            depends_on = list(deps)
        else:  # others may depend on the target (a reverse edge that is not a candidate)
            pool = [n for n in names if n != name]
            depends_on = rng.sample(pool, rng.randint(0, min(2, len(pool))))
        services[name] = {"team": rng.choice(TEAMS), "oncall": oncalls[i], "depends_on": depends_on}

    clock = _Clock(rng)
    # Distinct ids. Incident ids are wide because the prompt names one: it keeps prompts (almost) unique.
    ids = iter(rng.sample(range(100, 1000), 60))  # deploys: never more than 60
    incident_ids = iter(rng.sample(range(1000, 10000), 1 + MAX_DECOYS))
    opened = clock.take(12 * 60, 17 * 60)
    assert opened is not None
    incidents = [_incident(f"INC-{next(incident_ids)}", target, "open", rng.randint(1, 2), opened)]
    candidates = [target, *deps]
    culprit_service = rng.choice(candidates)
    cause = clock.take(opened - 120, opened - 3)
    assert cause is not None
    deploys: list[dict[str, Any]] = [{"id": f"D-{next(ids)}", "service": culprit_service, "at": cause}]

    def deploy(service: str, lo: int, hi: int) -> None:
        minute = clock.take(lo, hi)
        if minute is not None:
            deploys.append({"id": f"D-{next(ids)}", "service": service, "at": minute})

    for service in candidates:  # background: older deploys the model must rank below the cause
        for _ in range(rng.randint(0, 2)):
            deploy(service, DAY_START, cause - 1)
    for service in others:
        for _ in range(rng.randint(0, 2)):
            deploy(service, DAY_START, DAY_END)
    for _ in range(difficulty.distractors):
        kind = rng.choice(("late", "outsider", "resolved_incident"))
        if kind == "late":
            deploy(rng.choice(candidates), opened + 1, opened + 150)
        elif kind == "outsider":
            deploy(rng.choice(others), cause + 1, opened - 1)
        else:
            # A resolved incident whose time would pick another deploy: after a late deploy, or before
            # the cause (older candidate deploys are common). It is not always listed after the open one.
            if rng.random() < 0.5:
                minute = clock.take(opened + 10, opened + 180)
                if minute is not None:
                    deploy(rng.choice(candidates), opened + 1, minute - 1)
            else:
                minute = clock.take(DAY_START + 30, cause - 5)
            if minute is not None:
                incidents.append(_incident(f"INC-{next(incident_ids)}", target, "resolved", rng.randint(1, 3), minute))
    culprit: str = deploys[0]["id"]

    lead = (
        f"Incident {incidents[0]['id']} is open on {target}. Find the latest deploy made before it opened, "
        f"to {target} or to a service it depends on."
    )
    if rng.random() < 0.5:
        prompt, answer = f"{lead} Answer with the deploy id.", culprit
    else:
        prompt, answer = (
            f"{lead} Who is on call for the service that deploy went to?",
            oncalls[names.index(culprit_service)],
        )
    world: dict[str, Any] = {"services": services, "incidents": incidents, "deploys": deploys}
    return prompt, world, answer


class Triage(FamilyBase):
    """Find the deploy behind an open incident (or who to page for it) across three tools."""

    name: ClassVar[str] = "triage"
    prompt_is_template: ClassVar[bool] = True  # the answer lives in the world, not the prompt
    held_out: ClassVar[bool] = True
    steps_range: ClassVar[tuple[int, int]] = (1, MAX_DEPS)
    distractors_range: ClassVar[tuple[int, int]] = (0, MAX_DECOYS)

    def default_difficulty(self, rng: random.Random) -> Difficulty:
        return Difficulty(steps=rng.randint(1, 3), distractors=rng.randint(1, 4))

    def draw(self, rng: random.Random, difficulty: Difficulty) -> Draw:
        return _draw(rng, difficulty)

    def tools(self, task: Task) -> ToolBox:
        return TriageTools(task.world).toolbox()

    def normalise(self, answer: str) -> str:
        return normalise_text(answer).casefold()

    def solve(self, task: Task) -> Sequence[SolverStep]:
        """Open incident's time -> dependencies -> every candidate's deploys -> latest before the time."""
        call = (recorder := SolverRecorder(self.tools(task))).call

        match = _PROMPT_RE.match(task.prompt)
        if match is None:
            raise ValueError(f"{task.id}: no service in the prompt")
        incident, target = match.groups()
        opened = ""
        for line in call("list_incidents", service=target).splitlines():
            inc = _INCIDENT_RE.match(line)
            if inc is not None and inc.group(1) == incident:
                opened = inc.group(3)
        records = {target: _fields(call("get_service", name=target))}
        deps = [d for d in records[target]["depends_on"].split(", ") if d != "none"]
        best: tuple[str, str, str] | None = None  # (time, deploy id, service)
        for service in [target, *deps]:
            for line in call("list_deploys", service=service).splitlines():
                dep = _DEPLOY_RE.match(line)
                # "HH:MM" strings order like the times they name.
                if dep is not None and dep.group(2) < opened and (best is None or dep.group(2) > best[0]):
                    best = (dep.group(2), dep.group(1), service)
        if best is None:
            raise ValueError(f"{task.id}: no deploy before the incident")
        answer = best[1]
        if "on call" in task.prompt:
            if best[2] not in records:
                records[best[2]] = _fields(call("get_service", name=best[2]))
            answer = records[best[2]]["oncall"]
        return recorder.answer(answer)


def _fields(record: str) -> dict[str, str]:
    """``"auth: team=core; oncall=Leo; depends_on=cart"`` -> ``{"team": "core", ...}``."""
    _, _, body = record.partition(": ")
    return dict(part.split("=", 1) for part in body.split("; "))
