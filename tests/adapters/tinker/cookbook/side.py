"""The cookbook's side of the renderer parity test; runs inside the test-only cookbook venv, never in ours.

Reads one JSON request on stdin and writes one JSON answer on stdout. For each case (a recorded conversation
and its tools, OpenAI-shaped, exactly as the episode runner hands them to the policy) it uses
``tinker-cookbook``'s own pieces for the model family: ``model_info.get_recommended_renderer_name(model)``,
``renderers.get_renderer(name, tokenizer)``, ``create_conversation_prefix_with_tools``,
``build_generation_prompt`` (the prompt of every agent turn), ``build_supervised_example`` (the tokens the
model emits for that turn: what the sampler returns), ``parse_response`` (those tokens read back) and
``rl.data_processing.trajectory_to_data`` (the datums the cookbook trains on).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import tinker
from tinker_cookbook import model_info, renderers
from tinker_cookbook.completers import TokensWithLogprobs
from tinker_cookbook.rl.data_processing import trajectory_to_data
from tinker_cookbook.rl.types import Trajectory, Transition
from tinker_cookbook.third_party.openai_compat import openai_messages_to_tinker, openai_tools_to_tinker
from tinker_cookbook.tokenizer_utils import get_tokenizer


def _logprobs(turn: int, n: int) -> list[float]:
    """Stand-in sampler logprobs, exact in float32 (the datums carry float32), distinct per turn and token."""
    return [-((turn * 7 + k) % 64 + 1) / 64.0 for k in range(n)]


def _conversation(renderer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[Any]:
    """The cookbook's messages: the system prompt folded into its tool preamble, the rest converted."""
    converted = openai_messages_to_tinker(messages)
    system = ""
    if converted and converted[0]["role"] == "system":
        system = str(converted[0]["content"])
        converted = converted[1:]
    return [*renderer.create_conversation_prefix_with_tools(openai_tools_to_tinker(tools), system), *converted]


def _completion(renderer: Any, history: list[Any], reply: Any) -> list[int]:
    """The tokens the model samples for ``reply`` after ``history``: the trained tail of the example."""
    model_input, weights = renderer.build_supervised_example([*history, reply])
    tokens = model_input.to_ints()
    w = [float(x) for x in weights.tolist()]
    first = w.index(1.0)
    if any(x != 1.0 for x in w[first:]):
        raise SystemExit("side: the reply's weights are not one trailing run")
    prompt = renderer.build_generation_prompt(history).to_ints()
    if tokens[:first] != prompt:
        raise SystemExit("side: the supervised example does not start with the generation prompt")
    return list(tokens[first:])


def _case(renderer: Any, case: dict[str, Any]) -> dict[str, Any]:
    conv = _conversation(renderer, case["messages"], case["tools"])
    turns: list[dict[str, Any]] = []
    transitions: list[Transition] = []
    for i, message in enumerate(conv):
        if message["role"] != "assistant":
            continue
        prompt = renderer.build_generation_prompt(conv[:i]).to_ints()
        sampled = _completion(renderer, conv[:i], message)
        parsed, termination = renderer.parse_response(sampled)
        calls = [
            {"name": c.function.name, "arguments": json.loads(c.function.arguments)}
            for c in parsed.get("tool_calls", [])
        ]
        content = parsed["content"]
        text = content if isinstance(content, str) else "".join(p["text"] for p in content if p["type"] == "text")
        turns.append(
            {
                "prompt": list(prompt),
                "sampled": sampled,
                "parsed": {"content": text, "tool_calls": calls, "clean": bool(termination.is_clean)},
            }
        )
        logprobs = _logprobs(len(turns), len(sampled))
        ob = tinker.ModelInput.from_ints(list(prompt))
        transitions.append(Transition(ob=ob, ac=TokensWithLogprobs(sampled, logprobs), reward=0.0, episode_done=False))
    traj = Trajectory(transitions=transitions, final_ob=tinker.ModelInput.from_ints([]))
    datums = []
    for d in trajectory_to_data(traj, case["advantage"]):
        datums.append(
            {
                "input_tokens": d.model_input.to_ints(),
                **{k: [float(x) for x in v.data] for k, v in d.loss_fn_inputs.items() if k != "target_tokens"},
                "target_tokens": [int(x) for x in d.loss_fn_inputs["target_tokens"].data],
            }
        )
    return {"name": case["name"], "turns": turns, "datums": datums}


def main() -> None:
    request = json.load(sys.stdin)
    name = model_info.get_recommended_renderer_name(request["model"])
    renderer = renderers.get_renderer(name, get_tokenizer(request["tokenizer"]))
    json.dump(
        {
            "renderer": name,
            "stop": [int(x) for x in renderer.get_stop_sequences()],
            "cases": [_case(renderer, c) for c in request["cases"]],
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
