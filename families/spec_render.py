"""Render the task specs from the family code, and write or check ``examples/tasks/``.

The description and bounds of each family live here; tools, dev examples and the eval turn limit come
from the family itself, so a spec can never drift from the code (a test compares the committed files).

    python -m families.spec_render            # check: exit 1 and name the stale files
    python -m families.spec_render --write    # rewrite every spec whose family module imports
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import msgspec
import structlog

from . import FAMILIES, HIDDEN_SIZE, SYSTEM_PROMPT, dev_tasks, get_family
from .spec import BASE_MODELS, Bounds, DevExample, EvalSpec, ExampleStep, FloatRange, IntRange, TaskSpec, ToolSpec

__all__ = ["SPEC_DIR", "TURN_SAMPLE", "VERSION", "longest_reference", "main", "render_spec", "spec_bytes", "spec_path"]

# Public train seeds 0..TURN_SAMPLE-1 whose reference solutions size the turn limit. Not the hidden set: that
# is derived from the secret installation key, and a public spec must neither depend on nor reveal it.
TURN_SAMPLE = 1000

log = structlog.get_logger(__name__)

VERSION = 1
SPEC_DIR = Path(__file__).resolve().parent.parent / "examples" / "tasks"
EVAL_TEMPERATURE = 1.0  # small bases are partial when sampled, not greedy (see the tiny-model notes)

DESCRIPTIONS: dict[str, str] = {
    "calc_chain": (
        "Teach a small model to solve chained integer arithmetic with calculator tools (add, sub, mul, div): "
        "each step's result feeds the next, some operands are named values defined in the prompt, and some "
        "named values are distractors that are never used. The model must call one tool per step, carry "
        "each result into the next call, and end with <answer>N</answer>."
    ),
    "multi_hop": (
        "Teach a small model to answer questions about a generated world of people and companies by chaining "
        "lookups. A question names a person (or 'the person whose hobby is X', found with find_people) and a "
        "chain of links read right to left ('the hq of the employer of the mentor of Ada'); each lookup_person "
        "/ lookup_company result names the entity the next call must look up, so calls cannot be skipped or "
        "reordered. End with the single name, city, company or hobby asked for in <answer></answer>."
    ),
    "string_pipeline": (
        "Teach a small model to apply a pipeline of string transformations with string tools (reverse, "
        "to_upper, append, replace_char, take_first, rotate_left, ...): each step takes the previous "
        "result, which must be copied exactly into the next call. The answer is case-sensitive; end with "
        "<answer>STRING</answer>."
    ),
    "ledger": (
        "Teach a small model to do stateful bookkeeping through bank tools (get_balance, deposit, withdraw, "
        "transfer): starting balances are only visible through the tools, operations must be applied in "
        "order, and withdrawals or transfers above the balance are rejected and skipped. End with the "
        "asked account's final balance in <answer>N</answer>."
    ),
    "dispatch": (
        "Teach a small model to route a support ticket with tools: read the ticket's queue (get_fact), that "
        "queue's ordered rules (get_rules), then fetch with get_fact each fact a rule tests (one field per "
        "call; customer.* fields need the customer's id from the ticket first) and stop at the first rule "
        "whose conditions all hold, else 'otherwise'. Near-miss rules punish checking only a rule's first "
        "condition. End with the team name in <answer></answer>."
    ),
    "triage": (
        "Teach a small model on-call incident triage across three tools: find when the named open incident "
        "opened (list_incidents), which services the affected service depends on (get_service), and each "
        "candidate's deploys (list_deploys); the cause is the latest deploy made before the incident opened "
        "to that service or a direct dependency. Some questions ask for the deploy id, others for the on-call "
        "engineer of the service it went to. Decoys: deploys after the incident, deploys to services outside "
        "the dependency list, resolved incidents. End with the answer in <answer></answer>. Held out: never "
        "used for outer-loop training."
    ),
}

BOUNDS = {
    False: Bounds(
        base_models=list(BASE_MODELS),
        max_steps=100,
        batch_size=IntRange(min=8, max=256),
        group_size=IntRange(min=2, max=16),
        learning_rate=FloatRange(min=1e-7, max=1e-4),
        seq_len=2048,
        time_budget_s=1800,
    ),
    # The fast variant is the first run on a laptop: minutes, end to end. It offers the smaller base only, so
    # its first use freezes one baseline (best_pre is the best base the job could have picked), and allows
    # enough small steps to move that base: 20 x 32 rollouts on the CPU raise calc_chain's hidden score.
    True: Bounds(
        base_models=[BASE_MODELS[0]],
        max_steps=20,
        batch_size=IntRange(min=8, max=64),
        group_size=IntRange(min=2, max=8),
        learning_rate=FloatRange(min=1e-7, max=1e-4),
        seq_len=1024,
        time_budget_s=600,
    ),
}


@functools.cache
def longest_reference(name: str) -> int:
    """Most tool calls of a reference solution over the public train sample (default difficulty mix)."""
    family = get_family(name)
    return max(sum(s.tool is not None for s in family.solve(family.generate("train", i))) for i in range(TURN_SAMPLE))


def render_spec(name: str, fast: bool = False) -> TaskSpec:
    """The spec of family ``name`` generated from its code."""
    family = get_family(name)
    examples = [
        DevExample(
            id=task.id,
            prompt=task.prompt,
            answer=task.answer,
            solution=[msgspec.convert(msgspec.to_builtins(s), ExampleStep) for s in family.solve(task)],
        )
        for task in dev_tasks(family)
    ]
    # Turn limit: the longest reference solution's tool calls + the answer turn, plus slack for a retry.
    longest = longest_reference(name)
    return TaskSpec(
        name=f"{name}_v{VERSION}" + ("_fast" if fast else ""),
        family=name,
        version=VERSION,
        fast=fast,
        held_out=family.held_out,
        description=DESCRIPTIONS[name],
        system_prompt=SYSTEM_PROMPT,
        bounds=BOUNDS[fast],
        tools=[msgspec.convert(s, ToolSpec) for s in family.tool_schemas()],
        dev_examples=examples,
        eval=EvalSpec(
            size=HIDDEN_SIZE,
            max_turns=longest + 3,
            temperature=EVAL_TEMPERATURE,
            answer_format="<answer>...</answer> in the final reply (else the whole reply)",
            scoring="1.0 for a normalised exact match with the gold answer, else 0.0; mean over the hidden set",
        ),
    )


def spec_bytes(spec: TaskSpec) -> bytes:
    """The committed file form: indented JSON, fields in declaration order, trailing newline."""
    return msgspec.json.format(msgspec.json.encode(spec), indent=2) + b"\n"


def spec_path(name: str, fast: bool = False, directory: Path = SPEC_DIR) -> Path:
    return directory / f"{name}_v{VERSION}{'_fast' if fast else ''}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="rewrite the spec files")
    parser.add_argument("--dir", type=Path, default=SPEC_DIR)
    args = parser.parse_args(argv)
    stale: list[str] = []
    for name in FAMILIES:
        try:
            get_family(name)
        except ImportError as exc:
            log.warning("family_unavailable", family=name, error=str(exc))
            stale.append(f"{name}: module does not import")
            continue
        for fast in (False, True):
            path, data = spec_path(name, fast, args.dir), spec_bytes(render_spec(name, fast))
            if args.write:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            elif not path.exists() or path.read_bytes() != data:
                stale.append(f"{path}: differs from the code (run python -m families.spec_render --write)")
    for line in stale:
        sys.stderr.write(line + "\n")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
