"""multi_hop: questions over a generated persona world that need several dependent lookups.

The world is a handful of people and companies. Every person has a city, an employer, a hobby and three
links to other people (friend, mentor, rival); every company has a headquarters city (``hq``) and a CEO.
A question names an anchor (a person, or "the person whose hobby is X") and a chain of links read
right to left, e.g. "What is the hq of the employer of the mentor of the friend of Ada?". Each link is
one lookup whose result names the next entity, so the calls cannot be made in parallel or skipped.

Difficulty: ``steps`` is the number of links (1-8), ``distractors`` the number of extra people beyond the
chain's minimum (0-20), which also grows the number of companies. The default mix (dev, hidden) is
2-4 links and 2-6 distractors, with an attribute asked at the end half the time and a hobby anchor (one
more call, to ``find_people``) 30% of the time.

Scoring is exact match of the normalised answer (a name, a city, a company or a hobby): the answer is
a single entity, so partial credit would mean nothing.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from ._answer import normalise_text
from ._base import Difficulty, SolverRecorder, SolverStep, Task, ToolBox, ToolError
from ._family import Draw, FamilyBase

__all__ = ["MultiHop"]

NAMES = (
    "Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jade", "Kai", "Lena", "Milo", "Nia",
    "Omar", "Pia", "Quin", "Rosa", "Sam", "Tess", "Uma", "Vik", "Wren", "Xan", "Yara", "Zed", "Alma",
    "Bo", "Cy", "Dina", "Ezra", "Finn", "Gwen", "Hugo", "Iris", "Jon", "Kira", "Leo", "Mae", "Ned",
)  # fmt: skip
CITIES = (
    "Oslo", "Lima", "Kyiv", "Rome", "Cairo", "Perth", "Quito", "Riga", "Seoul", "Tunis", "Baku", "Dakar",
)  # fmt: skip
COMPANIES = (
    "Acme", "Brightly", "Corvid", "Dunmore", "Everfield", "Flintco", "Gala", "Hexa", "Ionic", "Juno",
    "Kestrel", "Lumen",
)  # fmt: skip
HOBBIES = (
    "chess", "rowing", "pottery", "archery", "baking", "climbing", "fencing", "knitting", "origami",
    "sailing", "surfing", "tango", "yoga", "judo", "birding", "cycling", "darts", "gardening", "juggling",
    "karaoke", "kayaking", "painting", "poetry", "quilting", "running", "skating", "skiing", "snooker",
    "tennis", "weaving", "woodwork", "bowling",
)  # fmt: skip
LINKS = ("friend", "mentor", "rival")  # person -> person
PERSON_ATTRS = ("city", "hobby")
MAX_STEPS = 8
MAX_DISTRACTORS = 20

_LEAD = re.compile(r"^(?:What is the (?P<attr>\w+) of|Who is|Which company is) (?P<chain>.+)\?$")
_HOP = re.compile(r"^the (\w+) of (.+)$")
_HOBBY_ANCHOR = re.compile(r"^the person whose hobby is (\w+)$")


def _norm_key(text: str) -> str:
    return text.strip().casefold()


class MultiHopTools:
    """The tools of one multi_hop task, bound to its world (read-only)."""

    def __init__(self, world: dict[str, Any]) -> None:
        people: dict[str, dict[str, str]] = world.get("people", {})
        companies: dict[str, dict[str, str]] = world.get("companies", {})
        # Case-insensitive lookups: a model writing "ada" means Ada, and the world has no case-only clashes.
        self._people = {_norm_key(k): (k, v) for k, v in people.items()}
        self._companies = {_norm_key(k): (k, v) for k, v in companies.items()}

    def lookup_person(self, name: str) -> str:
        """Look up a person: their city, employer, hobby, and the names of their friend, mentor and rival.

        Args:
            name: the person's first name, e.g. "Ada"
        """
        hit = self._people.get(_norm_key(name))
        if hit is None:
            raise ToolError(f"no person named {name!r}")
        key, rec = hit
        return f"{key}: " + "; ".join(f"{k}={v}" for k, v in rec.items())

    def lookup_company(self, name: str) -> str:
        """Look up a company: its headquarters city (hq) and the name of its CEO.

        Args:
            name: the company name, e.g. "Acme"
        """
        hit = self._companies.get(_norm_key(name))
        if hit is None:
            raise ToolError(f"no company named {name!r}")
        key, rec = hit
        return f"{key}: " + "; ".join(f"{k}={v}" for k, v in rec.items())

    def find_people(self, field: Literal["city", "employer", "hobby"], value: str) -> str:
        """List the people whose field equals value (comma-separated names, or "nobody").

        Args:
            field: which field to match: city, employer or hobby
            value: the value to match, e.g. "chess"
        """
        want = _norm_key(value)
        names = [key for key, rec in self._people.values() if _norm_key(rec[field]) == want]
        return ", ".join(names) if names else "nobody"

    def toolbox(self) -> ToolBox:
        return ToolBox([self.lookup_person, self.lookup_company, self.find_people])


def _parse_record(text: str) -> dict[str, str]:
    """``"Ada: city=Oslo; friend=Ben"`` -> ``{"city": "Oslo", "friend": "Ben"}`` (as a model reads it)."""
    _, _, body = text.partition(": ")
    return dict(part.split("=", 1) for part in body.split("; "))


def _build_world(rng: random.Random, n_people: int, n_companies: int) -> dict[str, Any]:
    names = rng.sample(NAMES, n_people)
    companies = rng.sample(COMPANIES, n_companies)
    people: dict[str, dict[str, str]] = {}
    for i, name in enumerate(names):
        others = [n for n in names if n != name]
        friend, mentor, rival = rng.sample(others, 3)
        people[name] = {
            "city": rng.choice(CITIES),
            # The first n_companies people cover every company, so every company has a CEO among its staff.
            "employer": companies[i] if i < n_companies else rng.choice(companies),
            "hobby": rng.choice(HOBBIES),
            "friend": friend,
            "mentor": mentor,
            "rival": rival,
        }
    company_recs: dict[str, dict[str, str]] = {}
    for company in companies:
        staff = [n for n in names if people[n]["employer"] == company]
        company_recs[company] = {"hq": rng.choice(CITIES), "ceo": rng.choice(staff)}
    return {"people": people, "companies": company_recs}


def _draw(rng: random.Random, difficulty: Difficulty) -> Draw:
    steps = difficulty.steps
    n_people = min(len(NAMES), max(5, steps + 2 + difficulty.distractors))
    n_companies = min(len(COMPANIES), 2 + difficulty.distractors // 2)
    world = _build_world(rng, n_people, n_companies)
    people, companies = world["people"], world["companies"]

    start = rng.choice(sorted(people))
    current, kind = start, "person"
    visited = {start}
    rels: list[str] = []
    for _ in range(steps):
        if kind == "company":
            rel, nxt = "ceo", companies[current]["ceo"]
        else:
            options = [*LINKS, "employer"]
            # Prefer links that reach someone new, so the chain does not loop back to an earlier answer.
            fresh = [r for r in options if r == "employer" or people[current][r] not in visited]
            rel = rng.choice(fresh or options)
            nxt = people[current][rel]
        rels.append(rel)
        current, kind = nxt, ("company" if rel == "employer" else "person")
        visited.add(current)

    attr: str | None = None
    if rng.random() < 0.5:
        attr = "hq" if kind == "company" else rng.choice(PERSON_ATTRS)
    answer = current if attr is None else (companies if kind == "company" else people)[current][attr]

    anchor = start
    if rng.random() < 0.3:
        taken = {rec["hobby"] for name, rec in people.items() if name != start}
        free = [h for h in HOBBIES if h not in taken]
        if free:  # always true while HOBBIES outnumber people; kept as a guard
            people[start]["hobby"] = rng.choice(free)
            anchor = f"the person whose hobby is {people[start]['hobby']}"
            if attr == "hobby" and current == start:
                answer = people[start]["hobby"]

    chain = anchor
    for rel in rels:
        chain = f"the {rel} of {chain}"
    if attr is not None:
        question = f"What is the {attr} of {chain}?"
    elif kind == "company":
        question = f"Which company is {chain}?"
    else:
        question = f"Who is {chain}?"
    return question, world, answer


class MultiHop(FamilyBase):
    """Persona-world questions answered by chaining lookups."""

    name: ClassVar[str] = "multi_hop"
    prompt_is_template: ClassVar[bool] = True  # the answer lives in the world, not the prompt
    held_out: ClassVar[bool] = False
    steps_range: ClassVar[tuple[int, int]] = (1, MAX_STEPS)
    distractors_range: ClassVar[tuple[int, int]] = (0, MAX_DISTRACTORS)

    def default_difficulty(self, rng: random.Random) -> Difficulty:
        return Difficulty(steps=rng.randint(2, 4), distractors=rng.randint(2, 6))

    def draw(self, rng: random.Random, difficulty: Difficulty) -> Draw:
        return _draw(rng, difficulty)

    def tools(self, task: Task) -> ToolBox:
        return MultiHopTools(task.world).toolbox()

    def normalise(self, answer: str) -> str:
        # Names, cities and hobbies are unique regardless of case, so case carries no information.
        return normalise_text(answer).casefold()

    def solve(self, task: Task) -> Sequence[SolverStep]:
        """Parse the question, then follow the chain one lookup per link, reading only tool results."""
        call = (recorder := SolverRecorder(self.tools(task))).call

        match = _LEAD.match(task.prompt.strip())
        if match is None:
            raise ValueError(f"{task.id}: unparseable question {task.prompt!r}")
        attr, rest = match.group("attr"), match.group("chain")
        rels: list[str] = []
        while (hop := _HOP.match(rest)) is not None:
            rels.append(hop.group(1))
            rest = hop.group(2)
        if (hobby := _HOBBY_ANCHOR.match(rest)) is not None:
            current = call("find_people", field="hobby", value=hobby.group(1))
        else:
            current = rest
        kind = "person"
        for rel in reversed(rels):
            if kind == "company":
                current = _parse_record(call("lookup_company", name=current))[rel]
                kind = "person"
            else:
                current = _parse_record(call("lookup_person", name=current))[rel]
                kind = "company" if rel == "employer" else "person"
        if attr is not None:
            tool = "lookup_company" if kind == "company" else "lookup_person"
            current = _parse_record(call(tool, name=current))[attr]
        return recorder.answer(current)
