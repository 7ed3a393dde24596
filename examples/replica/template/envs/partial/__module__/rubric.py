"""The reward of this environment: partial credit, 0.4 for a final answer inside an ``<answer>`` tag plus 0.6 when
that answer is right (so a right answer scores 1.0, a wrong tagged one 0.4, an untagged right one 0.6).

The final answer is the text in the last ``<answer>`` tag, else the whole reply without ``<think>`` blocks;
numbers compare by value (``1,200`` = ``1200.0`` = ``1200``), text ignoring case, quotes and a final full stop.
"""

from __future__ import annotations

import re

__all__ = ["extract_answer", "has_answer_tag", "is_right", "score"]

_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_QUOTES = "\"'`“”‘’"


def extract_answer(reply: str) -> str:
    """The text in the last <answer> tag, else the whole reply without <think> blocks."""
    tags = _ANSWER_RE.findall(reply)
    if tags:
        return str(tags[-1]).strip()
    return _THINK_RE.sub("", reply).strip()


def has_answer_tag(reply: str) -> bool:
    return bool(_ANSWER_RE.search(reply))


def normalise(answer: str) -> str:
    """Whitespace, quotes and a final full stop dropped; numbers by value; text casefolded."""
    text = " ".join(answer.split())
    if text.endswith("."):
        text = text[:-1].rstrip()
    while len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:
        text = text[1:-1].strip()
    number = text.replace(",", "").replace(" ", "").lstrip("+")
    try:
        value = float(number)
    except ValueError:
        return text.casefold()
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else number


def is_right(reply: str, gold: str) -> bool:
    return normalise(extract_answer(reply)) == normalise(gold)


def score(reply: str, gold: str) -> float:
    return 0.4 * has_answer_tag(reply) + 0.6 * is_right(reply, gold)
