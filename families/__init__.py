"""Six tool-using task families for the inner models, and their shared framework.

``get_family(name)`` returns a family instance (see ``_base.Family``); ``FAMILIES`` maps every family
name to the module that defines it. Modules are imported lazily, on first use, so one family's import
error never breaks another's. ``triage`` is held out: it is never in ``TRAINING_FAMILIES``.
"""

from __future__ import annotations

import functools
import importlib
import inspect

from ._answer import SYSTEM_PROMPT, extract_answer, normalise_number, normalise_text
from ._base import Difficulty, Family, SolverStep, Task, ToolBox, ToolError
from ._family import FamilyBase
from ._key import ENV_VAR as EVAL_KEY_ENV
from ._key import SEAL_VAR as EVAL_KEY_SEAL_ENV
from ._key import EvalKeyError, EvalKeySealed, current_key, key_fingerprint
from ._schema import tool_schema
from ._sets import dev_eval_tasks, dev_tasks, hidden_fingerprints, hidden_tasks
from ._splits import DEV_EVAL_SIZE, DEV_EVAL_START, DEV_SIZE, HIDDEN_SIZE, draw_disjoint, fingerprint, split_rng

__all__ = [
    "DEV_EVAL_SIZE",
    "DEV_EVAL_START",
    "DEV_SIZE",
    "EVAL_KEY_ENV",
    "EVAL_KEY_SEAL_ENV",
    "FAMILIES",
    "HELD_OUT_FAMILIES",
    "HIDDEN_SIZE",
    "SYSTEM_PROMPT",
    "TRAINING_FAMILIES",
    "Difficulty",
    "EvalKeyError",
    "EvalKeySealed",
    "Family",
    "FamilyBase",
    "SolverStep",
    "Task",
    "ToolBox",
    "ToolError",
    "current_key",
    "dev_eval_tasks",
    "dev_tasks",
    "draw_disjoint",
    "extract_answer",
    "fingerprint",
    "get_family",
    "hidden_fingerprints",
    "hidden_tasks",
    "key_fingerprint",
    "normalise_number",
    "normalise_text",
    "split_rng",
    "tool_schema",
]

# name -> defining module. The family class is the one class defined in that module whose ``name``
# ClassVar equals the family name, so the registry does not depend on class names.
FAMILIES: dict[str, str] = {
    "calc_chain": "families.calc_chain",
    "multi_hop": "families.multi_hop",
    "string_pipeline": "families.string_pipeline",
    "ledger": "families.ledger",
    "dispatch": "families.dispatch",
    "triage": "families.triage",
}
HELD_OUT_FAMILIES: tuple[str, ...] = ("triage",)
TRAINING_FAMILIES: tuple[str, ...] = tuple(n for n in FAMILIES if n not in HELD_OUT_FAMILIES)


@functools.cache
def _family_class(name: str) -> type:
    if name not in FAMILIES:
        raise KeyError(f"unknown family {name!r}; known: {', '.join(FAMILIES)}")
    module = importlib.import_module(FAMILIES[name])
    found = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and obj.__module__ == module.__name__
        and not inspect.isabstract(obj)
        and getattr(obj, "name", None) == name
    ]
    if len(found) != 1:
        raise LookupError(f"{module.__name__}: expected one family class with name={name!r}, found {len(found)}")
    cls = found[0]
    if bool(getattr(cls, "held_out", None)) != (name in HELD_OUT_FAMILIES):
        raise LookupError(f"{module.__name__}: {cls.__name__}.held_out disagrees with HELD_OUT_FAMILIES")
    return cls


def get_family(name: str) -> Family:
    """A fresh instance of the named family (families are stateless; tools are built per task)."""
    family: Family = _family_class(name)()
    return family
