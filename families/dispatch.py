"""dispatch: route a support ticket by applying a queue's ordered rules to facts fetched one at a time.

The world is one ticket, its customer, and a few queues. Each queue has an ordered rule list; a rule is
one to three conditions joined by "and" (``priority=high``, ``region!=EU``, ``age_hours>24``,
``customer.tier=pro``) and a team, and the last rule is ``otherwise``. The first rule whose conditions
all hold decides the team. The model must fetch the ticket's queue, then that queue's rules, then each
fact a rule needs (``get_fact`` returns one field at a time; a ``customer.*`` field needs the
customer's id from the ticket first), and stop at the first rule that matches.

Difficulty: ``steps`` is the number of rules before ``otherwise`` (1-8); ``distractors`` the number of
near misses (0-8): rules before the winning one whose conditions all hold but the last, so a model
that checks only the first condition of a rule routes wrongly. The winning position is uniform over
the rules and the fallback. Default mix (dev, hidden): 2-5 rules, 0-3 near misses.

Scoring is exact match of the team name (case-insensitive); a route is right or wrong.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from ._answer import normalise_text
from ._base import Difficulty, SolverRecorder, SolverStep, Task, ToolBox, ToolError
from ._family import Draw, FamilyBase

__all__ = ["Dispatch"]

TICKET_CATEGORIES: dict[str, tuple[str, ...]] = {
    "priority": ("low", "medium", "high", "urgent"),
    "region": ("EU", "US", "APAC", "LATAM"),
    "product": ("api", "mobile", "web", "payments"),
    "channel": ("email", "chat", "phone"),
}
CUSTOMER_CATEGORIES: dict[str, tuple[str, ...]] = {
    "tier": ("free", "pro", "enterprise"),
    "country": ("DE", "FR", "US", "JP", "BR"),
}
# Numeric fields: (low, high, thresholds used in rules). Values never equal a threshold, so ">" and "<"
# are never ambiguous.
TICKET_NUMBERS: dict[str, tuple[int, int, tuple[int, ...]]] = {"age_hours": (1, 96, (6, 12, 24, 48, 72))}
CUSTOMER_NUMBERS: dict[str, tuple[int, int, tuple[int, ...]]] = {"seats": (1, 400, (10, 25, 50, 100, 250))}
QUEUES = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
TEAMS = ("Falcon", "Otter", "Lynx", "Heron", "Badger", "Marten", "Osprey", "Panda", "Raven", "Stoat", "Tapir")
EXTRA_QUEUES = 2
MAX_RULES = 8

_TICKET_RE = re.compile(r"\bticket (T-\d+)\b")
_RULE_RE = re.compile(r"^\d+\. (.+) -> (\w+)$")
_COND_RE = re.compile(r"^([\w.]+)(!=|=|>|<)(.+)$")

Condition = list[str]  # [field, op, value] (JSON-friendly)


class DispatchTools:
    """The tools of one dispatch task, bound to its world (read-only)."""

    def __init__(self, world: dict[str, Any]) -> None:
        self._records: dict[str, dict[str, Any]] = {**world.get("tickets", {}), **world.get("customers", {})}
        self._queues: dict[str, list[dict[str, Any]]] = world.get("queues", {})

    def get_fact(self, entity: str, field: str) -> str:
        """Get one field of a ticket (id like "T-123") or of a customer (id like "C-45").

        Args:
            entity: a ticket id or a customer id
            field: the field name, e.g. "priority" or "tier"
        """
        rec = self._records.get(entity.strip().upper())
        if rec is None:
            raise ToolError(f"no ticket or customer {entity!r}")
        field = field.strip().lower()
        if field not in rec:
            if field.startswith("customer."):
                raise ToolError(f"get the ticket's customer id first, then get_fact(<id>, {field[9:]!r})")
            raise ToolError(f"{entity} has no field {field!r}; fields: {', '.join(rec)}")
        return str(rec[field])

    def get_rules(self, queue: str) -> str:
        """Get a queue's routing rules, in order: the first rule whose conditions all hold picks the team.

        Args:
            queue: the queue name, e.g. "alpha"
        """
        rules = self._queues.get(queue.strip().lower())
        if rules is None:
            raise ToolError(f"no queue {queue!r}")
        lines = []
        for i, rule in enumerate(rules, 1):
            when = " and ".join("".join(c) for c in rule["when"]) or "otherwise"
            lines.append(f"{i}. {when} -> {rule['team']}")
        return "\n".join(lines)

    def toolbox(self) -> ToolBox:
        return ToolBox([self.get_fact, self.get_rules])


def _condition(rng: random.Random, field: str, fact: Any, holds: bool) -> Condition:
    """A condition on ``field`` that holds (or fails) for the value ``fact``."""
    name = field.removeprefix("customer.")
    numbers = TICKET_NUMBERS if field == name else CUSTOMER_NUMBERS
    if name in numbers:
        _, _, thresholds = numbers[name]
        op = rng.choice((">", "<"))
        # ">t" holds when t < fact; "<t" holds when t > fact. Flip the operator if no threshold fits.
        for candidate in (op, "<" if op == ">" else ">"):
            fits = [t for t in thresholds if (t < fact) == (holds == (candidate == ">"))]
            if fits:
                return [field, candidate, str(rng.choice(fits))]
        raise AssertionError("thresholds span the value range, so one operator always fits")
    options = (TICKET_CATEGORIES if field == name else CUSTOMER_CATEGORIES)[name]
    other = rng.choice([v for v in options if v != fact])
    if rng.random() < 0.75:
        return [field, "=", fact if holds else other]
    return [field, "!=", other if holds else fact]


def _number(rng: random.Random, spec: tuple[int, int, tuple[int, ...]]) -> int:
    low, high, thresholds = spec
    value = rng.randint(low, high)
    return value + 1 if value in thresholds else value


def _facts(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    ticket: dict[str, Any] = {k: rng.choice(v) for k, v in TICKET_CATEGORIES.items()}
    ticket.update({k: _number(rng, spec) for k, spec in TICKET_NUMBERS.items()})
    customer: dict[str, Any] = {k: rng.choice(v) for k, v in CUSTOMER_CATEGORIES.items()}
    customer.update({k: _number(rng, spec) for k, spec in CUSTOMER_NUMBERS.items()})
    return ticket, customer


FIELDS = (
    *TICKET_CATEGORIES,
    *TICKET_NUMBERS,
    *(f"customer.{k}" for k in CUSTOMER_CATEGORIES),
    *(f"customer.{k}" for k in CUSTOMER_NUMBERS),
)


def _rules(
    rng: random.Random, n_rules: int, near_misses: int, ticket: dict[str, Any], customer: dict[str, Any]
) -> tuple[list[dict[str, Any]], str]:
    """Rules for these facts with a uniformly placed winner; returns (rules, winning team)."""

    def fact(field: str) -> Any:
        return customer[field[9:]] if field.startswith("customer.") else ticket[field]

    winner = rng.randint(0, n_rules)  # n_rules: no rule matches, "otherwise" wins
    near = set(rng.sample(range(winner), min(near_misses, winner)))
    teams = rng.sample(TEAMS, n_rules + 1)
    rules: list[dict[str, Any]] = []
    for j in range(n_rules):
        when = _rule_conditions(rng, j, winner, j in near, fact)
        # A rule identical to an earlier one could never win; redraw it (rarely needed, bounded).
        for _ in range(20):
            if all(when != r["when"] for r in rules):
                break
            when = _rule_conditions(rng, j, winner, j in near, fact)
        rules.append({"when": when, "team": teams[j]})
    rules.append({"when": [], "team": teams[n_rules]})
    return rules, teams[winner]


def _rule_conditions(
    rng: random.Random, j: int, winner: int, near_miss: bool, fact: Callable[[str], Any]
) -> list[Condition]:
    """The conditions of rule ``j``: a near miss, an early failure, the winner, or anything after it."""
    if near_miss:  # every condition holds but the last
        fields = rng.sample(FIELDS, rng.randint(2, 3))
        truths = [True] * (len(fields) - 1) + [False]
    elif j < winner:  # fails at once
        fields = rng.sample(FIELDS, rng.randint(1, 2))
        truths = [False] + [rng.random() < 0.5 for _ in fields[1:]]
    elif j == winner:
        fields = rng.sample(FIELDS, rng.randint(1, 2))
        truths = [True] * len(fields)
    else:  # after the winner: anything, so "first match wins" matters
        fields = rng.sample(FIELDS, rng.randint(1, 2))
        truths = [rng.random() < 0.5 for _ in fields]
    return [_condition(rng, f, fact(f), t) for f, t in zip(fields, truths, strict=True)]


class Dispatch(FamilyBase):
    """Route a ticket: fetch its queue's rules and the facts they test, first match wins."""

    name: ClassVar[str] = "dispatch"
    prompt_is_template: ClassVar[bool] = True  # the answer lives in the world, not the prompt
    held_out: ClassVar[bool] = False
    steps_range: ClassVar[tuple[int, int]] = (1, MAX_RULES)
    distractors_range: ClassVar[tuple[int, int]] = (0, MAX_RULES)

    def default_difficulty(self, rng: random.Random) -> Difficulty:
        return Difficulty(steps=rng.randint(2, 5), distractors=rng.randint(0, 3))

    def draw(self, rng: random.Random, difficulty: Difficulty) -> Draw:
        # Wide ticket ids keep prompts (which name only the ticket) practically unique across tasks.
        ticket_id, customer_id = f"T-{rng.randint(10000, 99999)}", f"C-{rng.randint(100, 999)}"
        ticket, customer = _facts(rng)
        queues = rng.sample(QUEUES, 1 + EXTRA_QUEUES)
        rules, answer = _rules(rng, difficulty.steps, difficulty.distractors, ticket, customer)
        world_queues = {queues[0]: rules}
        # Other queues exist with rules of their own, so fetching the wrong queue gives a plausible wrong route.
        for other in queues[1:]:
            o_ticket, o_customer = _facts(rng)
            world_queues[other] = _rules(rng, difficulty.steps, 0, o_ticket, o_customer)[0]
        world = {
            "tickets": {ticket_id: {"queue": queues[0], **ticket, "customer": customer_id}},
            "customers": {customer_id: customer},
            "queues": dict(sorted(world_queues.items())),
        }
        prompt = (
            f"Which team should handle ticket {ticket_id}? Get its queue, then apply that queue's rules "
            "in order: the first rule that matches picks the team."
        )
        return prompt, world, answer

    def tools(self, task: Task) -> ToolBox:
        return DispatchTools(task.world).toolbox()

    def normalise(self, answer: str) -> str:
        return normalise_text(answer).casefold()

    def solve(self, task: Task) -> Sequence[SolverStep]:
        """Read the queue and its rules, then check rules in order, fetching each fact once, when needed."""
        call = (recorder := SolverRecorder(self.tools(task))).call

        match = _TICKET_RE.search(task.prompt)
        if match is None:
            raise ValueError(f"{task.id}: no ticket id in the prompt")
        ticket = match.group(1)
        facts: dict[str, str] = {}

        def fact(field: str) -> str:
            if field not in facts:
                if field.startswith("customer."):
                    customer = fact("customer")
                    facts[field] = call("get_fact", entity=customer, field=field[9:])
                else:
                    facts[field] = call("get_fact", entity=ticket, field=field)
            return facts[field]

        def holds(condition: str) -> bool:
            cond = _COND_RE.match(condition)
            if cond is None:
                raise ValueError(f"{task.id}: unparseable condition {condition!r}")
            field, op, value = cond.groups()
            have = fact(field)
            if op in "<>":
                return int(have) > int(value) if op == ">" else int(have) < int(value)
            return (have == value) == (op == "=")

        team = ""
        for line in call("get_rules", queue=fact("queue")).splitlines():
            rule = _RULE_RE.match(line)
            if rule is None:
                raise ValueError(f"{task.id}: unparseable rule {line!r}")
            when, team = rule.groups()
            # all() short-circuits: like a careful model, stop fetching facts once a condition fails.
            if when == "otherwise" or all(holds(c) for c in when.split(" and ")):
                break
        return recorder.answer(team)
