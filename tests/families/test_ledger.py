"""ledger: balances are stateful per toolbox, rejections change nothing, answers follow from the bank."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from families import Difficulty, get_family, hidden_tasks

FAMILY = get_family("ledger")


def answer_from_prompt(task) -> int:
    """Apply the prompt's operations to the starting balances with the stated bank rule, independently."""
    bal = dict(task.world["balances"])
    for op in task.prompt.split("In order: ", 1)[1].split(". Skip")[0].split("; "):
        if m := re.fullmatch(r"deposit (\d+) to (\w+)", op):
            bal[m.group(2)] += int(m.group(1))
        elif m := re.fullmatch(r"withdraw (\d+) from (\w+)", op):
            if int(m.group(1)) <= bal[m.group(2)]:
                bal[m.group(2)] -= int(m.group(1))
        else:
            m = re.fullmatch(r"transfer (\d+) from (\w+) to (\w+)", op)
            assert m, op
            if int(m.group(1)) <= bal[m.group(2)]:
                bal[m.group(2)] -= int(m.group(1))
                bal[m.group(3)] += int(m.group(1))
    target = re.search(r"What is (\w+)'s final balance\?", task.prompt).group(1)
    return bal[target]


def test_hidden_answers_follow_from_prompt_and_balances():
    for task in hidden_tasks(FAMILY):
        assert str(answer_from_prompt(task)) == task.answer, task.prompt
        # The starting balances are never given away in the prompt.
        assert not re.search(r"\b(has|balance of) \d", task.prompt)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), steps=st.integers(1, 8), distractors=st.integers(0, 4))
def test_any_task_answer_follows_from_prompt(seed, steps, distractors):
    task = FAMILY.generate("train", seed, Difficulty(steps=steps, distractors=distractors))
    assert str(answer_from_prompt(task)) == task.answer
    assert len(task.world["balances"]) == 2 + distractors
    assert task.prompt.count(";") == steps - 1


def test_some_operations_are_rejected():
    results = [s.result for t in hidden_tasks(FAMILY) for s in FAMILY.solve(t) if s.tool]
    rejected = sum(r.startswith("error: insufficient funds") for r in results)
    assert 0.05 < rejected / len(results) < 0.3


def test_state_is_per_toolbox_and_rejections_change_nothing():
    task = hidden_tasks(FAMILY)[0]
    acct, other = sorted(task.world["balances"])[:2]
    start = task.world["balances"][acct]
    box = FAMILY.tools(task)
    assert box.call("deposit", {"account": acct, "amount": 10}) == f"ok, {acct}: {start + 10}"
    assert box.call("get_balance", {"account": acct}) == str(start + 10)
    too_much = {"source": acct, "target": other, "amount": start + 11}
    assert box.call("transfer", too_much) == f"error: insufficient funds, {acct} has {start + 10}"
    assert box.call("withdraw", {"account": acct, "amount": start + 11}).startswith("error: insufficient")
    assert box.call("get_balance", {"account": acct}) == str(start + 10)
    # A fresh toolbox starts again from the task's starting balances.
    assert FAMILY.tools(task).call("get_balance", {"account": acct}) == str(start)
    assert task.world["balances"][acct] == start  # the task itself is never mutated


def test_bad_requests_are_model_visible_errors():
    box = FAMILY.tools(hidden_tasks(FAMILY)[0])
    acct = sorted(hidden_tasks(FAMILY)[0].world["balances"])[0]
    assert box.call("get_balance", {"account": "zoe"}) == "error: no account named 'zoe'"
    assert box.call("deposit", {"account": acct, "amount": 0}) == "error: amount must be positive"
    assert box.call("transfer", {"source": acct, "target": acct, "amount": 5}).startswith("error: source and")
