"""Task specs: what the trainer agent is given for one family, and their validation on load.

A spec (``examples/tasks/<family>_v1.json`` and ``<family>_v1_fast.json``) holds the description of
what to teach, the hard bounds a training job must respect, the eval tool interface (JSON tool
schemas), the dev examples with their reference solutions, how the hidden eval scores, and whether
the family is held out. It never holds hidden eval tasks. Specs are generated from the family code
(``families.spec_render``) and a test checks the committed files match it.

``load_spec(path)`` decodes with msgspec (unknown fields rejected) and then checks meaning; every
error is a :class:`SpecError` naming the file and the field, e.g.
``examples/tasks/x.json: $.bounds.max_steps: expected int, got str``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import msgspec

__all__ = [
    "BASE_MODELS",
    "Bounds",
    "DevExample",
    "EpisodeLimits",
    "EvalSpec",
    "FloatRange",
    "IntRange",
    "SpecError",
    "TaskSpec",
    "ToolFunction",
    "ToolSpec",
    "load_spec",
    "load_specs",
    "validate_spec",
]

BASE_MODELS = ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B")


class SpecError(ValueError):
    """A spec file is malformed; the message names the file and the field."""


class _Strict(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    pass


class IntRange(_Strict):
    min: int
    max: int


class FloatRange(_Strict):
    min: float
    max: float


class Bounds(_Strict):
    """Hard limits a submitted job must respect (checked by validation before anything runs)."""

    base_models: list[str]
    max_steps: int  # most optimizer steps a job may ask for
    batch_size: IntRange  # rollouts per step
    group_size: IntRange  # rollouts per prompt; batch_size must be a multiple of it
    learning_rate: FloatRange
    seq_len: int  # most tokens per sequence (prompt + completion)
    time_budget_s: int  # wall-clock limit for training plus the pre/post hidden eval


class ToolFunction(_Strict):
    name: str
    description: str
    parameters: dict[str, Any]


class ToolSpec(_Strict):
    type: Literal["function"]
    function: ToolFunction


class ExampleStep(_Strict, omit_defaults=True):
    """A tool call with its result, or (last) the final answer."""

    tool: str | None = None
    arguments: dict[str, Any] = {}
    result: str | None = None
    answer: str | None = None


class DevExample(_Strict):
    id: str
    prompt: str
    answer: str
    solution: list[ExampleStep]


class EvalSpec(_Strict):
    """How the hidden eval scores a model (the tasks themselves are never in a spec)."""

    size: int  # number of hidden tasks
    max_turns: int  # assistant turns allowed per episode
    temperature: float  # sampling temperature of the eval rollouts
    answer_format: str
    scoring: str


class EpisodeLimits(_Strict):
    """A multi-job episode's limits (absent: the one-shot episode, one submitted job ends it).

    The agent may submit up to ``max_jobs`` jobs, read their dev-split results and revise, then name the final
    one. ``budget_usd`` bounds the money of all the episode's jobs together and ``wall_s`` the time from the
    episode's start until its last job must be done: each job's worst case (its whole ``time_budget_s``) is
    reserved against both when it is submitted, so concurrent jobs can never pass either."""

    max_jobs: int
    budget_usd: float
    wall_s: int


class TaskSpec(_Strict, omit_defaults=True):
    name: str  # "<family>_v<version>" or "<family>_v<version>_fast"; equals the file stem
    family: str
    version: int
    fast: bool
    held_out: bool
    description: str
    system_prompt: str
    bounds: Bounds
    tools: list[ToolSpec]
    dev_examples: list[DevExample]
    eval: EvalSpec
    episode: EpisodeLimits | None = None  # None: one job per episode (today's episode, exactly)


_AT_RE = re.compile(r"^(?P<msg>.*?)(?: - at `(?P<at>\$[^`]*)`)?$", re.DOTALL)


def _describe(exc: msgspec.ValidationError) -> str:
    """msgspec's message rewritten as ``$.path: what is wrong``."""
    match = _AT_RE.match(str(exc))
    assert match is not None  # the pattern matches any string
    msg, at = match.group("msg"), match.group("at") or "$"
    missing = re.match(r"Object missing required field `(\w+)`", msg)
    unknown = re.match(r"Object contains unknown field `(\w+)`", msg)
    if missing:
        return f"{at}.{missing.group(1)}: required field is missing"
    if unknown:
        return f"{at}.{unknown.group(1)}: unknown field"
    return f"{at}: {msg[:1].lower()}{msg[1:]}".replace("`", "")


def _check(cond: bool, where: str, message: str, errors: list[str]) -> None:
    if not cond:
        errors.append(f"{where}: {message}")


def _schema_errors(spec: TaskSpec) -> list[str]:
    """Each tool's ``parameters`` checked against the JSON Schema meta-schema (draft 2020-12), and each dev
    example's tool arguments against its tool's schema."""
    import jsonschema  # late: only spec loading needs it
    from jsonschema import Draft202012Validator

    def one_line(exc: jsonschema.ValidationError | jsonschema.SchemaError) -> str:
        where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in exc.absolute_path)
        return " ".join(f"{where.lstrip('.') + ': ' if where else ''}{exc.message}".split())[:300]

    errors: list[str] = []
    validators: dict[str, Draft202012Validator] = {}
    for i, tool in enumerate(spec.tools):
        schema = tool.function.parameters
        try:
            Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as exc:
            errors.append(f"$.tools[{i}].function.parameters: not a valid JSON schema: {one_line(exc)}")
            continue
        if schema.get("type") != "object":
            errors.append(f"$.tools[{i}].function.parameters: a tool's parameters must be an object schema")
            continue
        validators[tool.function.name] = Draft202012Validator(schema)
    for i, ex in enumerate(spec.dev_examples):
        for j, step in enumerate(ex.solution):
            check = validators.get(step.tool or "")
            if check is None:
                continue
            problem = next(iter(sorted(check.iter_errors(step.arguments), key=str)), None)
            if problem is not None:
                errors.append(
                    f"$.dev_examples[{i}].solution[{j}].arguments: do not fit tool {step.tool!r}: {one_line(problem)}"
                )
    return errors


def validate_spec(spec: TaskSpec) -> list[str]:
    """Meaning checks past the types; returns ``$.field: problem`` strings (empty when valid)."""
    from . import FAMILIES, HELD_OUT_FAMILIES  # late: families/__init__ imports nothing from here

    errors: list[str] = []
    multi = spec.episode is not None and spec.episode.max_jobs > 1
    expected_name = f"{spec.family}_v{spec.version}" + ("_fast" if spec.fast else "") + ("_multi" if multi else "")
    _check(spec.family in FAMILIES, "$.family", f"unknown family {spec.family!r}", errors)
    _check(spec.name == expected_name, "$.name", f"expected {expected_name!r}, got {spec.name!r}", errors)
    _check(spec.version >= 1, "$.version", "must be >= 1", errors)
    held = spec.family in HELD_OUT_FAMILIES
    _check(spec.held_out == held, "$.held_out", f"must be {str(held).lower()} for {spec.family}", errors)
    b = spec.bounds
    _check(bool(b.base_models), "$.bounds.base_models", "must not be empty", errors)
    for i, model in enumerate(b.base_models):
        _check(model in BASE_MODELS, f"$.bounds.base_models[{i}]", f"{model!r} not in {BASE_MODELS}", errors)
    for field in ("max_steps", "seq_len", "time_budget_s"):
        _check(getattr(b, field) > 0, f"$.bounds.{field}", "must be > 0", errors)
    for field in ("batch_size", "group_size", "learning_rate"):
        r = getattr(b, field)
        _check(0 < r.min <= r.max, f"$.bounds.{field}", f"need 0 < min <= max, got [{r.min}, {r.max}]", errors)
    _check(b.learning_rate.max < 1, "$.bounds.learning_rate.max", "must be < 1", errors)
    fits = any(
        batch % group == 0
        for group in range(max(1, b.group_size.min), b.group_size.max + 1)
        for batch in range(max(group, b.batch_size.min), b.batch_size.max + 1)
    )
    _check(fits, "$.bounds", "no batch_size in range is a multiple of a group_size in range", errors)
    names = [t.function.name for t in spec.tools]
    _check(bool(names), "$.tools", "must not be empty", errors)
    _check(len(set(names)) == len(names), "$.tools", "tool names must be unique", errors)
    _check(bool(spec.dev_examples), "$.dev_examples", "must not be empty", errors)
    for i, ex in enumerate(spec.dev_examples):
        for j, step in enumerate(ex.solution):
            if step.tool is not None:
                _check(step.tool in names, f"$.dev_examples[{i}].solution[{j}].tool", "not in $.tools", errors)
        last_ok = bool(ex.solution) and ex.solution[-1].answer == ex.answer
        _check(last_ok, f"$.dev_examples[{i}].solution", "must end with the example's answer", errors)
    errors += _schema_errors(spec)
    _check(spec.eval.size > 0, "$.eval.size", "must be > 0", errors)
    _check(spec.eval.max_turns > 0, "$.eval.max_turns", "must be > 0", errors)
    _check(0 <= spec.eval.temperature <= 2, "$.eval.temperature", "must be in [0, 2]", errors)
    if spec.episode is not None:
        e = spec.episode
        _check(1 <= e.max_jobs <= 16, "$.episode.max_jobs", f"must be in [1, 16], got {e.max_jobs}", errors)
        _check(e.budget_usd >= 0, "$.episode.budget_usd", "must be >= 0", errors)
        _check(e.wall_s >= b.time_budget_s, "$.episode.wall_s", "must be >= $.bounds.time_budget_s", errors)
    return errors


def load_spec(path: str | Path) -> TaskSpec:
    """Decode and validate one spec file; raise SpecError naming the file and field."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        spec = msgspec.json.decode(raw, type=TaskSpec)
    except msgspec.ValidationError as exc:
        raise SpecError(f"{path}: {_describe(exc)}") from exc
    except msgspec.DecodeError as exc:
        byte = re.search(r"\(byte (\d+)\)", str(exc))
        line = raw[: int(byte.group(1))].count(b"\n") + 1 if byte else 0
        raise SpecError(f"{path}:{line}: invalid JSON: {exc}") from exc
    errors = validate_spec(spec)
    if spec.name != path.stem:
        errors.insert(0, f"$.name: {spec.name!r} does not match the file name {path.name!r}")
    if errors:
        raise SpecError(f"{path}: " + f"\n{path}: ".join(errors))
    return spec


def load_specs(directory: str | Path) -> dict[str, TaskSpec]:
    """Every ``*.json`` spec in ``directory``, by name."""
    return {p.stem: load_spec(p) for p in sorted(Path(directory).glob("*.json"))}
