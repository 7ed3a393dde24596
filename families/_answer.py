"""The answer protocol shared by all families: how a final reply is read and normalised.

The model ends an episode with a reply that should hold ``<answer>X</answer>``; without the tag, the
whole reply (minus any ``<think>`` block) is taken as the answer, so a terse model is not punished for
skipping the tag. With several tags the last one counts (the model's final word).
"""

from __future__ import annotations

import re

__all__ = ["SYSTEM_PROMPT", "extract_answer", "normalise_number", "normalise_text"]

SYSTEM_PROMPT = (
    "Solve the task by calling the tools. When you are done, reply with only the final answer "
    "inside <answer></answer> tags."
)

_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_QUOTES = "\"'`“”‘’"


def extract_answer(reply: str) -> str:
    """The answer inside the last ``<answer>`` tag, else the whole reply without think blocks, stripped."""
    tags = _ANSWER_RE.findall(reply)
    if tags:
        return str(tags[-1]).strip()
    return _THINK_RE.sub("", reply).strip()


def normalise_text(answer: str) -> str:
    """Case-preserving: trim whitespace, surrounding quotes and a trailing full stop; collapse spaces."""
    text = " ".join(answer.split())
    if text.endswith("."):
        text = text[:-1].rstrip()
    while len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:
        text = text[1:-1].strip()
    return text


def normalise_number(answer: str) -> str:
    """Integers compare by value: ``"1,200"``, ``" 1200 "``, ``"1200.0"`` and ``"+1200"`` all give ``"1200"``."""
    text = normalise_text(answer).replace(",", "").replace(" ", "").lstrip("+")
    try:
        value = float(text)
    except ValueError:
        return text
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return text
