"""Play replica episodes with a sampled trainer agent, in process: what the agent does at step 0, measured.

The agent is asked through the sampler pool the local learner serves (``SamplerPool.respond``: the same
:class:`~adapters.tiny.policy.TinyPolicy`, chat template and hermes parsing), and its tool calls run on a real
workspace with the real tools (:func:`handlers.episode.tools.run_tool`). An episode ends at ``submit_job``
(where the real harness validates the job: here job.toml is parsed and mapped to its choice) or after
``max_turns`` turns. Episodes run concurrently, so the policy batches their requests.

Used by the tests of the agent and to measure the tokens and seconds an episode costs on this CPU::

    python -m adapters.tiny.agent_play --episodes 64 --seed 0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import msgspec
import torch

from adapters.openai_server import ChatRequest, Reply
from families.spec import TaskSpec
from handlers.episode.choice import Choice, ChoiceError, all_choices, choice_of
from handlers.episode.job_config import JobConfigError, parse_job_config
from handlers.episode.setup import opening_messages, template_files
from handlers.episode.tools import TOOL_SCHEMAS, run_tool
from handlers.episode.workspace import Workspace
from handlers.ports.policy import ToolCall

from .agent import AGENT_DIR, REPLICA_TEMPLATE, replica_specs
from .readme import write_readme

__all__ = ["Played", "Responder", "play", "play_many"]


class Responder(Protocol):
    async def respond(self, request: ChatRequest) -> Reply: ...


class Played(msgspec.Struct, kw_only=True):
    family: str
    submitted: bool = False  # called submit_job
    parseable: bool = False  # job.toml parsed when it did
    choice: Choice | None = None  # the replica choice that job.toml makes (None: not a choice)
    error: str = ""
    turns: int = 0
    sampled_tokens: int = 0
    prompt_tokens: int = 0  # the largest prompt of the episode (the context it needs)


async def play(
    policy: Responder,
    spec: TaskSpec,
    *,
    seed: int,
    session: str,
    model: str = "base",
    max_turns: int = 6,
    max_tokens: int = 1024,
    template_dir: Path = REPLICA_TEMPLATE,
) -> Played:
    """One episode, sampled at temperature 1 with per-turn seeds derived from ``seed``."""
    files = template_files(spec, template_dir=template_dir)
    messages: list[dict[str, Any]] = opening_messages(spec, files)
    out = Played(family=spec.family)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Workspace(Path(tmp))
        for path, data in sorted(files.items()):
            workspace.write(path, data.decode("utf-8"))
        for turn in range(max_turns):
            body = {
                "model": model,
                "messages": messages,
                "tools": TOOL_SCHEMAS,
                "temperature": 1.0,
                "max_tokens": max_tokens,
                "seed": seed * 1000 + turn,
                "session_id": session,
            }
            reply = await policy.respond(msgspec.convert(body, ChatRequest))
            out.turns += 1
            if reply.usage is not None:
                out.sampled_tokens += reply.usage.completion_tokens
                out.prompt_tokens = max(out.prompt_tokens, reply.usage.prompt_tokens)
            ids = [f"call_{turn}_{k}" for k in range(len(reply.tool_calls))]
            messages.append(
                {
                    "role": "assistant",
                    "content": reply.content or "",
                    **(
                        {
                            "tool_calls": [
                                {"id": i, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                for i, c in zip(ids, reply.tool_calls, strict=True)
                            ]
                        }
                        if reply.tool_calls
                        else {}
                    ),
                }
            )
            if not reply.tool_calls:
                out.error = "replied without a tool call"
                return out
            for cid, call in zip(ids, reply.tool_calls, strict=True):
                if call.name == "submit_job":
                    out.submitted = True
                    _judge(out, workspace)
                    return out
                result = run_tool(ToolCall(id=cid, name=call.name, arguments=call.arguments), workspace, {})
                messages.append({"role": "tool", "tool_call_id": cid, "name": call.name, "content": result.content})
    out.error = out.error or f"no submit_job in {max_turns} turns"
    return out


def _judge(out: Played, workspace: Workspace) -> None:
    try:
        job = parse_job_config(workspace.read("job.toml"))
    except (JobConfigError, Exception) as exc:  # a missing file is a WorkspaceError: the same verdict
        out.error = f"job.toml: {exc}"
        return
    out.parseable = True
    try:
        out.choice = choice_of(job)
    except ChoiceError as exc:
        out.error = str(exc)


async def play_many(
    policy: Responder, specs: Sequence[TaskSpec], episodes: int, *, seed: int = 0, max_tokens: int = 1024
) -> list[Played]:
    """``episodes`` episodes, the specs in turn, all at once (the policy batches their turns)."""
    return list(
        await asyncio.gather(
            *(
                play(policy, specs[i % len(specs)], seed=seed * 100_003 + i, session=f"s{i}", max_tokens=max_tokens)
                for i in range(episodes)
            )
        )
    )


def summary(played: Sequence[Played]) -> dict[str, Any]:
    n = len(played)
    shares = Counter(p.choice.label for p in played if p.choice is not None)
    return {
        "episodes": n,
        "submitted_parseable": sum(p.submitted and p.parseable for p in played) / n if n else 0.0,
        "valid_choice": sum(p.choice is not None for p in played) / n if n else 0.0,
        "shares": {k: round(v / n, 3) for k, v in sorted(shares.items())},
        "sampled_tokens_mean": sum(p.sampled_tokens for p in played) / n if n else 0.0,
        "prompt_tokens_max": max((p.prompt_tokens for p in played), default=0),
        "errors": Counter(p.error.split(":")[0] for p in played if p.error).most_common(5),
    }


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    from adapters.local_learner.sampler import SamplerPool  # the local learner's server policy

    pool = SamplerPool(Path(tempfile.mkdtemp()), base_model=str(args.agent), rank=8, seed=args.seed)
    specs = [s for s in replica_specs() if not args.families or s.family in args.families.split(",")]
    try:
        await pool.policy("base")  # load outside the timing
        started = time.perf_counter()
        cpu0 = time.process_time()
        played = await play_many(pool, specs, args.episodes, seed=args.seed)
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu0
    finally:
        await pool.aclose()
    per_episode = round(wall / len(played), 2)
    return {**summary(played), "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "wall_s_per_episode": per_episode}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agent", type=Path, default=AGENT_DIR)
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--families", default="", help="comma-separated families (default: every replica task)")
    parser.add_argument("--record", action="store_true", help="store the figures in the agent's meta.json and README")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    result = asyncio.run(_main(args))
    sys.stdout.write(json.dumps(result, indent=2) + "\n")
    if args.record:
        meta_path = args.agent / "meta.json"
        meta = json.loads(meta_path.read_text())
        text = (
            f"{result['episodes']} episodes (seed {args.seed}, temperature 1, through the local learner's sampler"
            f" pool): {result['submitted_parseable']:.0%} submitted a parseable job.toml, {result['valid_choice']:.0%}"
            f" one of the {len(all_choices())} choices; shares {result['shares']};"
            f" {result['sampled_tokens_mean']:.0f} sampled tokens"
            f" an episode, prompts up to {result['prompt_tokens_max']} tokens;"
            f" {result['wall_s_per_episode']} s an episode with {args.episodes} played at once on one torch thread"
            f" (`python -m adapters.tiny.agent_play --episodes {args.episodes} --seed {args.seed}`)"
        )
        meta["measured"] = {**result, "text": text}
        meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        write_readme(args.agent.parent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
