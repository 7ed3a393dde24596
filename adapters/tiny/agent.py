"""The tiny trainer agent: a Qwen3-architecture model that plays the replica's episode harness (format only).

    python -m adapters.tiny.agent --seed 0 --out fixtures/tiny

An episode of the CPU replica (docs/replica.md) is three tool calls: ``read_file("INSTRUCTIONS.md")``, then
``write_file("job.toml", ...)`` with the job of one choice (a base model, a learning rate and one of the four
rubric packages, :mod:`handlers.episode.choice`), then ``submit_job``. The agent is SFT'd on real transcripts of
that: the opening messages from :func:`handlers.episode.setup.opening_messages`, the replica's workspace
rendered from its template and task specs, and the tool results that the real workspace tools return. The choice
in each transcript is drawn **uniformly** over the 16 (model x rubric x learning rate) choices, every batch
holding each once, so the agent learns the format and nothing about which choice is good: at temperature 1 it
picks each with about equal probability, and whatever the outer loop later teaches it is the outer loop's doing.

It starts from the stage-1 ``tiny-0.6b`` (same tokenizer and chat format as the inner models, and a copying
circuit already formed) and is trained with one torch thread, so the same seed gives the same weights on the
same torch. The checkpoint's ``meta.json`` records the SFT settings, a fingerprint of the transcripts it was
trained on (a test fails when the replica's template changes under it: rebuild then), and measurements.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import structlog
import torch
from transformers import PreTrainedTokenizerFast

from families.spec import TaskSpec, load_spec
from handlers.episode.choice import Choice, all_choices, job_text
from handlers.episode.setup import opening_messages, template_files
from handlers.episode.tools import TOOL_SCHEMAS, run_tool
from handlers.episode.workspace import Workspace
from handlers.ports.policy import ToolCall

from .model import Checkpoint, load_checkpoint, save_checkpoint
from .readme import write_readme
from .sft import encode_conversation, sft_loss
from .specs import FIXTURE_DIR

__all__ = [
    "AGENT_DIR",
    "AGENT_NAME",
    "REPLICA_TASKS",
    "REPLICA_TEMPLATE",
    "AgentSettings",
    "build_agent",
    "main",
    "replica_specs",
    "transcript",
    "transcripts_fingerprint",
]

log = structlog.get_logger(__name__)

AGENT_NAME = "tiny-agent"
AGENT_DIR = FIXTURE_DIR / AGENT_NAME
_ROOT = FIXTURE_DIR.parents[1]
REPLICA_TEMPLATE = _ROOT / "examples" / "replica" / "template"
REPLICA_TASKS = _ROOT / "examples" / "replica" / "tasks"
STAGE1_SMALL = FIXTURE_DIR / "stage1" / "tiny-0.6b"


class AgentSettings(msgspec.Struct, frozen=True, kw_only=True):
    steps: int = 200  # at most
    lr: float = 2e-3
    warmup: int = 10
    repeats: int = 1  # each batch: every choice once per repeat (batch = 16 x repeats)
    # Stop once the mean loss of the last 5 steps is within this of the floor: the entropy of a uniform choice
    # (ln 2 + ln 4 + ln 2 nats a transcript) spread over its assistant tokens, which no amount of training removes.
    # Near the floor every fixed token is all but certain, which is what sampling at temperature 1 needs.
    stop_margin: float = 0.0003  # x ~350 tokens: ~0.1 nats a transcript above the floor, ~90% error-free

    def as_dict(self) -> dict[str, Any]:
        return msgspec.structs.asdict(self)


def replica_specs(tasks_dir: Path = REPLICA_TASKS) -> list[TaskSpec]:
    """The replica's task specs (every family it uses: the held-out one too, see :func:`build_agent`)."""
    specs = [load_spec(p) for p in sorted(tasks_dir.glob("*.json"))]
    if not specs:
        raise FileNotFoundError(f"{tasks_dir}: no task specs (*.json)")
    return specs


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def transcript(spec: TaskSpec, choice: Choice, template_dir: Path = REPLICA_TEMPLATE) -> list[dict[str, Any]]:
    """The episode the agent learns, as OpenAI messages: the real opening, the real tool results, ending with
    the ``submit_job`` call (a valid submission ends the episode, so nothing after it is trained on)."""
    files = template_files(spec, template_dir=template_dir)
    messages = opening_messages(spec, files)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Workspace(Path(tmp))
        for path, data in sorted(files.items()):
            workspace.write(path, data.decode("utf-8"))
        steps = [
            ("read_file", {"path": "INSTRUCTIONS.md"}),
            ("write_file", {"path": "job.toml", "content": job_text(choice, spec)}),
        ]
        for k, (name, arguments) in enumerate(steps):
            call = _call(f"call_{k}", name, arguments)
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            tool_call = ToolCall(id=call["id"], name=name, arguments=call["function"]["arguments"])
            result = run_tool(tool_call, workspace, {})
            if not result.ok:
                raise RuntimeError(f"{spec.name}: the scripted {name} failed: {result.content}")
            messages.append({"role": "tool", "tool_call_id": call["id"], "name": name, "content": result.content})
    messages.append({"role": "assistant", "content": "", "tool_calls": [_call("call_2", "submit_job", {})]})
    return messages


def transcripts_fingerprint(specs: Sequence[TaskSpec], template_dir: Path = REPLICA_TEMPLATE) -> str:
    """A short hash of every training transcript and the tools: what the agent was built for."""
    digest = hashlib.sha256()
    for spec in specs:
        for choice in all_choices():
            digest.update(json.dumps(transcript(spec, choice, template_dir), sort_keys=True).encode())
    digest.update(json.dumps(TOOL_SCHEMAS, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def _encoded(
    tokenizer: PreTrainedTokenizerFast, specs: Sequence[TaskSpec], template_dir: Path
) -> dict[tuple[str, Choice], tuple[list[int], list[bool]]]:
    return {
        (spec.name, choice): encode_conversation(tokenizer, transcript(spec, choice, template_dir), TOOL_SCHEMAS)
        for spec in specs
        for choice in all_choices()
    }


def build_agent(
    seed: int, settings: AgentSettings, *, template_dir: Path = REPLICA_TEMPLATE, tasks_dir: Path = REPLICA_TASKS
) -> tuple[Checkpoint, dict[str, Any]]:
    """SFT the agent from the stage-1 ``tiny-0.6b``; returns it and its record (settings, losses, timing)."""
    torch.manual_seed(seed)
    parent = load_checkpoint(STAGE1_SMALL)
    ckpt = Checkpoint(AGENT_NAME, parent.model, parent.tokenizer)
    specs = replica_specs(tasks_dir)
    data = _encoded(ckpt.tokenizer, specs, template_dir)
    lengths = sorted(len(ids) for ids, _ in data.values())
    pad = int(ckpt.tokenizer.pad_token_id or 0)
    model = ckpt.model
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, betas=(0.9, 0.95), weight_decay=0.01)
    choices = all_choices()
    masked = sum(sum(mask) for _, mask in data.values()) / len(data)
    floor = math.log(len(choices)) / masked
    history: list[float] = []
    started = time.process_time()
    for step in range(settings.steps):
        model.train()
        # Every choice once per task in every batch, the tasks in turn: the gradient carries no preference, for
        # any task. (Drawing each row's task at random left the choices of one task unbalanced within a batch,
        # and the last batches' imbalance stayed: 35% / 65% for the two models on calc_chain.)
        batch = [
            data[(specs[(step * settings.repeats + r) % len(specs)].name, c)]
            for r in range(settings.repeats)
            for c in choices
        ]
        lr = settings.lr * min(1.0, (step + 1) / settings.warmup)
        lr *= 0.1 + 0.9 * (1 - step / max(1, settings.steps))  # linear decay to 10%
        for group in opt.param_groups:
            group["lr"] = lr
        loss = sft_loss(model, batch, pad)
        opt.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        history.append(round(float(loss.detach()), 4))
        if (step + 1) % 10 == 0:
            log.info("tiny.agent.step", step=step + 1, loss=history[-1], cpu_s=round(time.process_time() - started, 1))
        if len(history) >= 5 and sum(history[-5:]) / 5 < floor + settings.stop_margin:
            break
    model.train(False)
    record = {
        "settings": settings.as_dict(),
        "steps_run": len(history),
        "final_loss": history[-1] if history else None,
        "loss_floor": round(floor, 4),
        "losses_every_10": history[9::10],
        "train_cpu_s": round(time.process_time() - started, 1),
        "tasks": [s.name for s in specs],
        "transcripts": len(data),
        "transcript_tokens": {"min": lengths[0], "max": lengths[-1]},
        "transcripts_fingerprint": transcripts_fingerprint(specs, template_dir),
    }
    return ckpt, record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=FIXTURE_DIR)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    settings = AgentSettings()
    overrides = {"steps": args.steps, "lr": args.lr}
    settings = msgspec.structs.replace(settings, **{k: v for k, v in overrides.items() if v is not None})
    ckpt, record = build_agent(args.seed, settings)
    meta = {
        "name": AGENT_NAME,
        "role": "trainer agent (replica)",
        "parameters": ckpt.num_parameters(),
        "seed": args.seed,
        "command": "python -m adapters.tiny.agent " + " ".join(sys.argv[1:] if argv is None else argv),
        "init": "stage1/tiny-0.6b",
        **record,
        "versions": {"torch": torch.__version__},
    }
    log.info("tiny.agent.done", **{k: v for k, v in meta.items() if k != "losses_every_10"})
    if not args.no_save:
        save_checkpoint(ckpt, args.out / AGENT_NAME, meta)
        write_readme(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
