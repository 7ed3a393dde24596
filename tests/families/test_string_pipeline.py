"""string_pipeline: the prompt alone determines the answer; tools and case-sensitive scoring."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from families import Difficulty, get_family, hidden_tasks

FAMILY = get_family("string_pipeline")
_STEP = re.compile(
    r'(Reverse it|Make it uppercase|Make it lowercase|Append (\S+)|Prepend (\S+)|Replace every "(.)" with "(.)"'
    r"|Keep the first (\d+) characters?|Remove the first (\d+) characters?|Rotate it left by (\d+))\."
)


def answer_from_prompt(prompt: str) -> str:
    """An independent reading of the prompt text with Python string operations."""
    head, body = prompt.split("Start with ", 1)
    names = dict(re.findall(r'(\w) = "(\w+)"', head))

    def val(tok: str) -> str:
        return tok.strip('"') if tok.startswith('"') else names[tok]

    start, rest = body.split(". ", 1)
    s = val(start)
    for m in _STEP.finditer(rest):
        whole = m.group(1)
        if whole == "Reverse it":
            s = s[::-1]
        elif whole == "Make it uppercase":
            s = s.upper()
        elif whole == "Make it lowercase":
            s = s.lower()
        elif m.group(2):
            s = s + val(m.group(2))
        elif m.group(3):
            s = val(m.group(3)) + s
        elif m.group(4):
            s = s.replace(m.group(4), m.group(5))
        elif m.group(6):
            s = s[: int(m.group(6))]
        elif m.group(7):
            s = s[int(m.group(7)) :]
        else:
            k = int(m.group(8)) % len(s)
            s = s[k:] + s[:k]
        assert 1 <= len(s) <= 14
    return s


def test_hidden_answers_follow_from_the_prompt():
    for task in hidden_tasks(FAMILY):
        assert answer_from_prompt(task.prompt) == task.answer, task.prompt


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), steps=st.integers(1, 8), distractors=st.integers(0, 4))
def test_any_task_answer_follows_from_prompt(seed, steps, distractors):
    task = FAMILY.generate("train", seed, Difficulty(steps=steps, distractors=distractors))
    assert answer_from_prompt(task.prompt) == task.answer
    assert len(_STEP.findall(task.prompt)) == steps


def test_every_tool_appears_in_the_hidden_set():
    used = {s.tool for t in hidden_tasks(FAMILY) for s in FAMILY.solve(t) if s.tool}
    assert used == set(FAMILY.tools(hidden_tasks(FAMILY)[0]).functions())


def test_tools():
    box = FAMILY.tools(hidden_tasks(FAMILY)[0])
    assert box.call("reverse", {"text": "abc"}) == "cba"
    assert box.call("rotate_left", {"text": "abcde", "n": 7}) == "cdeab"
    assert box.call("replace_char", {"text": "banana", "old": "a", "new": "o"}) == "bonono"
    assert box.call("replace_char", {"text": "x", "old": "ab", "new": "o"}).startswith("error:")
    assert box.call("take_first", {"text": "abc", "n": -1}).startswith("error:")
    assert box.call("append", {"text": "ab"}).startswith("error: missing argument 'suffix'")
    assert box.call("shout", {"text": "ab"}).startswith("error: unknown tool 'shout'")


def test_scoring_is_case_sensitive():
    task = next(t for t in hidden_tasks(FAMILY) if t.answer != t.answer.swapcase())
    assert FAMILY.score(task, f"<answer>{task.answer}</answer>") == 1.0
    assert FAMILY.score(task, f'<answer>"{task.answer}"</answer>') == 1.0
    assert FAMILY.score(task, f"<answer>{task.answer.swapcase()}</answer>") == 0.0
