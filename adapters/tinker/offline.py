"""The offline backend (``[backend] kind = "offline"``): the learner and sampler ports with no network and no
model. It LEARNS NOTHING. It exists so that ``ait train`` runs end to end on a laptop and in tests (the smoke
config, the crash-resume test): every event, checkpoint and resume path is the real one, only the weights are
absent.

- :class:`OfflineLearner` (``handlers.training.LearnerPort``): checks each datum's alignment as Tinker would,
  counts optimizer steps and the datums and tokens it was given, and "saves" checkpoints as small JSON files
  under the run directory (``offline:checkpoints/<name>.state.json``), which a resumed learner restores from
  exactly as ``create_training_client_from_state_with_optimizer`` would (step and Adam-step counters).
- :class:`OfflinePolicy`: wraps any agent policy (the scripted one in the smoke config) and makes it look
  sampled: a toy tokenizer (a few hash-derived ids per message, so a turn's prompt extends the previous
  prompt plus the sampled reply, like a chat template) and deterministic pseudo-logprobs. Its "weights" never
  change, so the logprobs depend on the tokens alone, not on the sampler version it is bound to.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from engine.atomic import write_atomic
from handlers.ports.learner import DatumSpec, StepOutcome, check_batch
from handlers.ports.policy import AgentPolicy, AgentReply

__all__ = ["OFFLINE_PREFIX", "OfflineLearner", "OfflinePolicy", "message_tokens", "render_tokens"]

OFFLINE_PREFIX = "offline:"
_STATE_SUFFIX = ".state.json"
_SEP = 1  # ends every rendered message
_TOKENS_PER_MESSAGE = 6
_VOCAB = 50_000


class _State(msgspec.Struct, kw_only=True):
    steps: int = 0  # optimizer steps applied (the "weights")
    adam_steps: int = 0  # the optimizer state a state checkpoint carries and a sampler checkpoint does not
    datums: int = 0
    tokens: int = 0


class OfflineLearner:
    """A learner that records what it is given and keeps its counters in checkpoint files (see module doc)."""

    def __init__(self, root: Path, *, resume_state_path: str = "") -> None:
        self.root = Path(root)
        self.state = _State()
        self.last_state_path = resume_state_path
        self.batches: list[list[DatumSpec]] = []  # this process's batches, for tests
        if resume_state_path:
            file = self._file(resume_state_path)
            if not resume_state_path.endswith(_STATE_SUFFIX):  # as Tinker: sampler weights carry no optimizer state
                raise ValueError(f"offline learner: {resume_state_path!r} is not a state checkpoint (*{_STATE_SUFFIX})")
            self.state = msgspec.json.decode(file.read_bytes(), type=_State)

    def _file(self, path: str) -> Path:
        if not path.startswith(OFFLINE_PREFIX):
            raise ValueError(f"offline learner: {path!r} is not an offline checkpoint ({OFFLINE_PREFIX}...)")
        return self.root / path[len(OFFLINE_PREFIX) :]

    async def train_step(
        self,
        datums: Sequence[DatumSpec],
        *,
        loss_fn: str,
        loss_fn_config: dict[str, float] | None,
        learning_rate: float,
    ) -> StepOutcome:
        check_batch(datums)
        self.batches.append(list(datums))
        self.state.steps += 1
        self.state.adam_steps += 1
        self.state.datums += len(datums)
        self.state.tokens += sum(d.n_trained for d in datums)
        # The importance-sampling surrogate at ratio 1, as the Tinker fake reports it: -sum of advantages.
        loss = -sum(sum(d.advantages) for d in datums)
        return StepOutcome(metrics={"loss:sum": loss, "offline/steps": float(self.state.steps), "lr": learning_rate})

    async def save(self, name: str, *, with_state: bool) -> tuple[str, str]:
        data = msgspec.json.encode(self.state)
        state_path = ""
        if with_state:
            state_path = f"{OFFLINE_PREFIX}checkpoints/{name}{_STATE_SUFFIX}"
            write_atomic(self._file(state_path), data)
            self.last_state_path = state_path
        sampler_path = f"{OFFLINE_PREFIX}checkpoints/{name}.sampler.json"
        sampler = msgspec.json.encode(_State(steps=self.state.steps))  # weights only: no optimizer state
        write_atomic(self._file(sampler_path), sampler)
        return state_path, sampler_path


def _hash_ids(data: bytes) -> list[int]:
    digest = hashlib.sha256(data).digest()
    ids = [2 + int.from_bytes(digest[2 * i : 2 * i + 2], "big") % (_VOCAB - 2) for i in range(_TOKENS_PER_MESSAGE)]
    return [*ids, _SEP]


def message_tokens(message: Mapping[str, Any]) -> list[int]:
    """A message's toy token ids: a function of its canonical JSON, so the same message renders the same."""
    return _hash_ids(json.dumps(message, sort_keys=True, ensure_ascii=False).encode("utf-8"))


def render_tokens(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> list[int]:
    """The prompt: the tools block, then every message (prefix-extending as the conversation grows)."""
    out = _hash_ids(json.dumps(list(tools), sort_keys=True).encode("utf-8"))
    for m in messages:
        out.extend(message_tokens(m))
    return out


def _logprob(prefix_len: int, token: int) -> float:
    h = hashlib.sha256(f"{prefix_len}:{token}".encode()).digest()
    return -0.01 - 2.0 * int.from_bytes(h[:4], "big") / 2**32


class OfflinePolicy:
    """Any policy's replies with toy token ids and pseudo-logprobs in ``training``, bound to one sampler version."""

    model = "offline"  # unpriced: no spend is reserved for it

    def __init__(self, inner: AgentPolicy, *, sampler_version: int, sampler_path: str = "") -> None:
        self._inner = inner
        self.name = f"offline:{inner.name}"
        self.sampler_version = sampler_version
        self.sampler_path = sampler_path

    def skip_to(self, turn: int) -> None:
        skip = getattr(self._inner, "skip_to", None)
        if skip is not None:
            skip(turn)

    async def next_turn(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AgentReply:
        reply = await self._inner.next_turn(messages, tools)
        prompt = render_tokens(messages, tools)
        sampled = message_tokens(reply.message())
        training = {
            "prompt_tokens": prompt,
            "sampled_tokens": sampled,
            "sampled_logprobs": [_logprob(len(prompt) + i, t) for i, t in enumerate(sampled)],
            "sampler_version": self.sampler_version,
            "stop_reason": "stop",
        }
        return msgspec.structs.replace(
            reply, model=self.model, input_tokens=len(prompt), output_tokens=len(sampled), training=training
        )
