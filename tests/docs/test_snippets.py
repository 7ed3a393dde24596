"""Every TOML and JSON snippet the docs show, and every example file, parses with the parser the product uses.

So the docs cannot drift from the code again: a documented setting the code refuses fails here. A TOML block is
a run config fragment (laid over ``examples/configs/smoke.toml``, table by table, then parsed by
``parse_run_config``), or a ``job.toml`` when it has a ``[prime_rl]`` table; a JSON block is a pod-agent wire
document, decoded strictly into the type that field set belongs to.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from cli.train_config import load_run_config, parse_run_config
from families.spec import load_spec
from handlers.episode.job_config import parse_job_config
from handlers.ports.pod_agent import AgentEvent, AgentEventsPage, AgentHealth, AgentJobStatus, AgentResult

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "examples" / "configs" / "smoke.toml"
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def snippets(lang: str) -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m.group(1) == lang:
                line = text[: m.start()].count("\n") + 1
                found.append((f"{doc.relative_to(ROOT)}:{line}", m.group(2)))
    return found


TOML = snippets("toml")
JSON = snippets("json")
# The wire documents a JSON snippet may be, told apart by their fields.
WIRE: list[type[msgspec.Struct]] = [AgentResult, AgentEventsPage, AgentJobStatus, AgentHealth, AgentEvent]


def test_the_docs_have_snippets_to_check() -> None:
    """The scan itself works: the reward, W&B and pod-agent docs each show one (so an empty scan cannot pass)."""
    assert any(where.startswith("docs/reward.md") for where, _ in TOML)
    assert any(where.startswith("docs/observability.md") for where, _ in TOML)
    assert any(where.startswith("docs/gpu-runner-spec.md") for where, _ in JSON)


@pytest.mark.parametrize(("where", "text"), TOML, ids=[w for w, _ in TOML])
def test_toml_snippet_parses_with_the_real_parser(where: str, text: str) -> None:
    doc = tomllib.loads(text)
    if "tool" in doc:  # a pyproject.toml fragment (the README's CPU-only uv settings): every source's index exists
        uv = doc["tool"]["uv"]
        indexes = {i["name"] for i in uv.get("index", [])}
        assert indexes and all(s["index"] in indexes for ss in uv.get("sources", {}).values() for s in ss)
        return
    if "prime_rl" in doc:
        parse_job_config(text, source=where)
        return
    base: dict[str, Any] = tomllib.loads(SMOKE.read_text(encoding="utf-8"))
    merged = {**base, **doc}
    cfg = parse_run_config(merged, source=where)
    # each documented table reached the parsed config, value for value where the config keeps the table
    for table, values in doc.items():
        parsed = getattr(cfg, table, None)
        if parsed is None or not isinstance(values, dict):
            continue
        for key, value in values.items():
            if hasattr(parsed, key) and not isinstance(value, str | dict):
                assert getattr(parsed, key) == pytest.approx(value) or getattr(parsed, key) == value, (table, key)


@pytest.mark.parametrize(("where", "text"), JSON, ids=[w for w, _ in JSON])
def test_json_snippet_is_a_wire_document(where: str, text: str) -> None:
    raw = json.loads(text)
    keys = set(raw)
    for cls in WIRE:
        fields = msgspec.structs.fields(cls)
        names = {f.name for f in fields}
        required = {f.name for f in fields if f.required}
        if keys <= names and required <= keys:
            msgspec.convert(raw, cls, strict=True)  # strict: no "12" for 12
            return
    pytest.fail(f"{where}: fields {sorted(keys)} match no pod-agent document")


@pytest.mark.parametrize("path", sorted((ROOT / "examples" / "configs").glob("*.toml")), ids=lambda p: p.name)
def test_example_run_configs_parse(path: Path) -> None:
    load_run_config(path)


@pytest.mark.parametrize("path", sorted((ROOT / "examples" / "tasks").glob("*.json")), ids=lambda p: p.name)
def test_example_task_specs_parse(path: Path) -> None:
    load_spec(path)


def test_a_setting_the_code_refuses_fails_here() -> None:
    """The check can fail: a documented-looking table the parser does not know is an error, naming the place."""
    with pytest.raises(Exception, match=r"docs/x\.md:1"):
        test_toml_snippet_parses_with_the_real_parser("docs/x.md:1", "[reward]\nweight_of_everything = 1.0\n")


# A path the docs name that is not in the tree on purpose: a placeholder, or a file the command beside it writes.
NOT_IN_THE_TREE = {
    "examples/configs/NAME.toml",  # placeholder
    "examples/tasks/x.json",  # placeholder
    "examples/configs/replica_r1.toml",  # written by the shell line above it (docs/replica.md)
}
PROJECT_PATH = re.compile(
    r"(?<![\w./~-])(?:tests|benchmarks|examples|fixtures|engine|handlers|adapters|families|cli|events|views|template)"
    r"/[\w./-]+\.(?:py|json|toml|md|jsonl)"
)


def named_paths() -> dict[str, str]:
    """Each project file a doc names, with the first place (``doc:line``) it is named."""
    found: dict[str, str] = {}
    for doc in DOCS:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
            for m in PROJECT_PATH.finditer(line):
                found.setdefault(m.group(0), f"{doc.relative_to(ROOT)}:{number}")
    return found


def test_every_file_the_docs_name_is_in_the_tree() -> None:
    """A test, benchmark or example the docs point to exists where they say (files moved in the renovation left
    three stale paths, among them the fuzz command's, which pytest then refused)."""
    named = named_paths()
    assert "benchmarks/log_bench.py" in named and len(named) > 100  # the scan finds what the docs name
    missing = {p: where for p, where in named.items() if p not in NOT_IN_THE_TREE and not (ROOT / p).exists()}
    assert not missing, f"the docs name files that are not in the tree: {missing}"


# `ait CMD`, `uv run ait CMD`, `.venv/bin/ait --runs-root R -v CMD`, ... in prose and in code blocks alike
AIT_COMMAND = re.compile(
    r"(?:^|[`\s(])(?:uv run |\.venv/bin/|\S*/bin/)?ait (?:--runs-root \S+ )?(?:-v )?([a-z][a-z-]*)"
)


def cli_options() -> dict[str, set[str]]:
    """Each ``ait`` command and the options it takes (the global ones included), from the CLI's own parser."""
    import argparse

    from cli import build_parser

    parser = build_parser()
    top = {o for a in parser._actions for o in a.option_strings}
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {c: top | {o for a in p._actions for o in a.option_strings} for c, p in sub.choices.items()}


def test_every_ait_command_the_docs_name_exists() -> None:
    """``ait <command>`` in the docs is a command the CLI has (a renamed one, ``ait outer``, stayed in a doc)."""
    commands = set(cli_options())
    named: dict[str, str] = {}
    for doc in DOCS:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
            for m in AIT_COMMAND.finditer(line):
                named.setdefault(m.group(1), f"{doc.relative_to(ROOT)}:{number}")
    assert {"episode", "train", "replay", "resume", "watch"} <= set(named)  # the scan finds what the docs name
    unknown = {c: where for c, where in named.items() if c not in commands}
    assert not unknown, f"the docs name ait commands the CLI does not have: {unknown}"


def test_every_option_the_docs_give_an_ait_command_is_one_it_takes() -> None:
    """``ait CMD ... --flag`` in the docs (up to the end of the code span, a pipe or the next command): ``--flag``
    is an option of CMD, so a documented command line never fails with argparse's "unrecognized arguments"."""
    options = cli_options()
    line_of_command = re.compile(AIT_COMMAND.pattern + r"([^`]*)")
    checked, unknown = 0, []
    for doc in DOCS:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
            for m in line_of_command.finditer(line):
                command, rest = m.group(1), re.split(r"\bait |[;|]|&&", m.group(2))[0]
                for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest) if command in options else []:
                    checked += 1
                    if flag not in options[command]:
                        unknown.append(f"{doc.relative_to(ROOT)}:{number}: ait {command} {flag}")
    assert checked > 50  # the scan finds the docs' command lines
    assert not unknown, unknown
