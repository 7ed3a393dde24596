"""The rubric check: the env's own reward must score a correct answer clearly above a wrong one.

For a few of the env's tasks the probe plays two policies in the sandbox (offline rollouts, no model): a
*gold* one that makes the task's expected tool calls and replies with the task's own answer in the family's
answer format (``<answer>X</answer>``), and a *wrong* one that makes the same calls and replies with a
wrong answer. The expected tool calls come from the family's reference solver, run here in the engine
process on the task data the child sent back; when the task data does not fit the family's solver (no
``world``, or the solver disagrees with the task's answer) the replies come without tool calls.

Verdict: the gold policy must beat the wrong one on at least 80% of the tasks, and the mean gap must be at
least half of the largest reward seen. An env whose reward cannot tell them apart is rejected.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean
from typing import Any

import families

__all__ = ["MIN_GAP", "MIN_WINS", "judge_rubric", "rubric_cases"]

MIN_WINS = 0.8  # share of tasks on which gold must score strictly higher than wrong
MIN_GAP = 0.5  # mean(gold) - mean(wrong) >= MIN_GAP * (largest |reward| seen)


def _answer_format(answer: str) -> str:
    return f"<answer>{answer}</answer>"


def _same(a: str, b: str) -> bool:
    return families.normalise_number(a) == families.normalise_number(b)


def wrong_answer(answer: str, others: Sequence[str]) -> str:
    """Another task's answer when one differs, else a perturbed one: clearly wrong, same kind of value."""
    for other in others:
        if other and not _same(other, answer):
            return other
    number = families.normalise_number(answer)
    if number.lstrip("-").isdecimal():  # not isdigit(): it takes "²", which int() refuses
        return str(int(number) + 7)
    return (answer + " (not)") if answer else "none"


def _gold_calls(family_name: str, dump: dict[str, Any], answer: str, tool_names: set[str]) -> list[dict[str, Any]]:
    """The reference solver's tool calls for this task, or [] when the task data does not fit the solver."""
    world = dump.get("world")
    if not isinstance(world, dict) or not world:
        return []
    family = families.get_family(family_name)
    prompt = dump.get("prompt")
    task = families.Task(
        id=str(dump.get("id") or "probe"),
        family=family_name,
        prompt=prompt if isinstance(prompt, str) else "",
        answer=answer,
        world=world,
    )
    try:
        steps = list(family.solve(task))
    except Exception:  # agent-shaped data the solver cannot read: no expected calls, answer-only replies
        return []
    final = next((s.answer for s in steps if s.answer is not None), None)
    calls = [{"name": s.tool, "arguments": dict(s.arguments)} for s in steps if s.tool is not None]
    if final is None or not _same(final, answer) or any(c["name"] not in tool_names for c in calls):
        return []
    return calls


def rubric_cases(
    load_reply: dict[str, Any], family_name: str, tool_names: set[str], n_cases: int
) -> list[dict[str, Any]]:
    """The ``rubric`` request's cases: evenly spread over the tasks the child kept."""
    items: list[dict[str, Any]] = load_reply.get("items", [])
    dumps: list[dict[str, Any]] = load_reply.get("dumps", [])
    pool = min(len(items), len(dumps))
    if pool == 0:
        return []
    n = min(n_cases, pool)
    indices = sorted({round(k * (pool - 1) / max(n - 1, 1)) for k in range(n)})
    answers = [str(items[i].get("answer") or "") for i in indices]
    cases = []
    for pos, i in enumerate(indices):
        answer = answers[pos]
        others = answers[pos + 1 :] + answers[:pos]
        cases.append(
            {
                "index": i,
                "calls": _gold_calls(family_name, dumps[i], answer, tool_names),
                "replies": {
                    "gold": _answer_format(answer),
                    "wrong": _answer_format(wrong_answer(answer, others)),
                },
            }
        )
    return cases


def _hint(errors: list[str]) -> str:
    text = " ".join(errors)
    if "awaitable is required" in text:
        return " (in verifiers 0.4.0 every @vf.reward and @vf.metric must be `async def`)"
    return ""


def judge_rubric(cases: Sequence[dict[str, Any]], results: Sequence[dict[str, Any]]) -> tuple[bool, str]:
    """(ok, detail) from the child's ``rubric`` reply."""
    if not results:
        return False, "no task could be scored (the tasks check must load at least one task)"
    golds: list[float] = []
    wrongs: list[float] = []
    errors: list[str] = []
    for case, res in zip(cases, results, strict=True):
        for kind in ("gold", "wrong"):
            errs = res[kind].get("errors") or []
            if errs:
                errors.append(f"task #{case['index']} ({kind} reply {case['replies'][kind]!r}): {errs[0]}")
        g, w = res["gold"].get("reward"), res["wrong"].get("reward")
        if g is not None and w is not None:
            golds.append(float(g))
            wrongs.append(float(w))
    with_calls = sum(1 for c in cases if c["calls"])
    how = f"{len(cases)} tasks, {with_calls} with the reference tool calls"
    if errors:
        return False, f"scoring failed on {len(errors)} rollout(s) ({how}): " + " | ".join(errors[:3]) + _hint(errors)
    wins = sum(g > w for g, w in zip(golds, wrongs, strict=True))
    scale = max([abs(x) for x in golds + wrongs] + [0.0])
    gap = fmean(golds) - fmean(wrongs)
    summary = (
        f"mean reward {fmean(golds):.3g} for correct answers vs {fmean(wrongs):.3g} for wrong ones "
        f"({wins}/{len(golds)} tasks scored higher; {how})"
    )
    if scale == 0.0:
        return False, f"the reward is 0 for correct and wrong answers alike: {summary}"
    if wins < MIN_WINS * len(golds) or gap < MIN_GAP * scale:
        worst = min(range(len(golds)), key=lambda k: golds[k] - wrongs[k])
        case = cases[worst]
        return False, (
            f"the reward cannot tell a correct answer from a wrong one: {summary}; e.g. task #{case['index']}: "
            f"{case['replies']['gold']!r} -> {golds[worst]:.3g}, {case['replies']['wrong']!r} -> {wrongs[worst]:.3g}. "
            "Score the final answer against the task's answer"
        )
    return True, summary
