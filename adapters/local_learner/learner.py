"""The local learner (``[backend] kind = "local"``): LoRA on a Qwen3-architecture model with peft and torch,
behind :class:`~handlers.ports.learner.LearnerPort`, on the GPU when there is one and on the CPU otherwise.

It takes the same datums as the Tinker learner and computes the same losses (:mod:`.losses`: summed over
tokens, learner log-probs at temperature 1 against the sampler's). One ``train_step`` is Tinker's
``forward_backward`` + ``optim_step``: gradients of the summed loss over every datum (micro-batched by tokens,
which sums to the same gradient), then one AdamW step with Tinker's ``AdamParams`` defaults (beta1 0.9,
beta2 0.95, eps 1e-12, no weight decay, no gradient clipping) at the step's learning rate.

``learn = False`` is the no-learning control of an experiment: each step computes the same loss and gradient
(and reports them) but applies no update, so the agent stays the base model while everything else about the run
(samples, datums, events, checkpoints) is the same as the learning run's.

``save`` writes sampler weights (the adapter) and, with ``with_state``, the adapter plus the Adam state
(:mod:`.checkpoint`); a learner built with ``resume_state_path`` continues from that state exactly. The torch
work runs in a worker thread, so the event loop keeps serving episodes meanwhile.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import structlog
import torch
from torch import Tensor

from handlers.ports.learner import DatumSpec, StepOutcome, check_batch

from .checkpoint import LOCAL_PREFIX, SAMPLER_SUFFIX, STATE_SUFFIX, CheckpointError, read_checkpoint, write_checkpoint
from .lora import LORA_ALPHA, TARGET_MODULES, attach_lora, load_base, lora_state, pick_device, set_lora_state
from .losses import policy_loss

__all__ = ["ADAM", "LocalLearner"]

log = structlog.get_logger(__name__)

#: Tinker's ``AdamParams`` defaults (the Tinker learner sends only the learning rate).
ADAM: dict[str, Any] = {"betas": (0.9, 0.95), "eps": 1e-12, "weight_decay": 0.0}
_FORMAT = 1


class LocalLearner:
    def __init__(
        self,
        root: Path,
        *,
        base_model: str,
        rank: int,
        seed: int = 0,
        device: str = "auto",
        resume_state_path: str = "",
        microbatch_tokens: int = 4096,
        learn: bool = True,
    ) -> None:
        self.root = Path(root)
        self.base_model = base_model
        self.rank = rank
        self.seed = seed
        self.device = pick_device(device)
        self.microbatch_tokens = microbatch_tokens
        self.learn = learn  # False: the no-learning control (see the module doc)
        self.last_state_path = resume_state_path
        self.steps = 0  # optimizer steps in the weights, the resumed ones included
        self._lock = threading.Lock()  # one torch job at a time on the model
        base, tokenizer = load_base(base_model)
        self.pad_id = int(tokenizer.pad_token_id or 0)
        self.model = attach_lora(base, rank, seed=seed).to(self.device)
        self.model.eval()  # no dropout anywhere: a step is a deterministic function of the datums
        self.params = {n: p for n, p in self.model.named_parameters() if p.requires_grad}
        self.optimizer = torch.optim.AdamW(list(self.params.values()), lr=1e-5, **ADAM)
        if resume_state_path:
            self._restore(resume_state_path)

    # -- the port ------------------------------------------------------------------------------------
    async def train_step(
        self,
        datums: Sequence[DatumSpec],
        *,
        loss_fn: str,
        loss_fn_config: dict[str, float] | None,
        learning_rate: float,
    ) -> StepOutcome:
        check_batch(datums)
        return await asyncio.to_thread(self._train_step, list(datums), loss_fn, loss_fn_config, learning_rate)

    async def save(self, name: str, *, with_state: bool) -> tuple[str, str]:
        return await asyncio.to_thread(self._save, name, with_state)

    # -- the work ------------------------------------------------------------------------------------
    def _microbatches(self, datums: list[DatumSpec]) -> list[list[DatumSpec]]:
        out: list[list[DatumSpec]] = []
        current: list[DatumSpec] = []
        width = 0
        for d in datums:
            n = len(d.input_tokens)
            if current and max(width, n) * (len(current) + 1) > self.microbatch_tokens:
                out.append(current)
                current, width = [], 0
            current.append(d)
            width = max(width, n)
        if current:
            out.append(current)
        return out

    def _tensors(self, batch: list[DatumSpec]) -> dict[str, Tensor]:
        """Right-padded ``[B, T]`` tensors; padding has attention 0, advantage 0 and mask 0 (adds nothing)."""
        width = max(len(d.input_tokens) for d in batch)
        shape = (len(batch), width)
        out = {
            "input": torch.full(shape, self.pad_id, dtype=torch.long),
            "attention": torch.zeros(shape, dtype=torch.long),
            "target": torch.zeros(shape, dtype=torch.long),
            "logprobs": torch.zeros(shape),
            "advantages": torch.zeros(shape),
            "mask": torch.zeros(shape),
        }
        for i, d in enumerate(batch):
            n = len(d.input_tokens)
            out["input"][i, :n] = torch.tensor(d.input_tokens, dtype=torch.long)
            out["attention"][i, :n] = 1
            out["target"][i, :n] = torch.tensor(d.target_tokens, dtype=torch.long)
            out["logprobs"][i, :n] = torch.tensor(d.logprobs, dtype=torch.float32)
            out["advantages"][i, :n] = torch.tensor(d.advantages, dtype=torch.float32)
            out["mask"][i, :n] = torch.tensor(d.mask, dtype=torch.float32)
        return {k: v.to(self.device) for k, v in out.items()}

    def learner_logprobs(self, t: Mapping[str, Tensor]) -> Tensor:
        """Log-probs of the target tokens under the current weights, ``[B, T]`` (temperature 1)."""
        logits = self.model(input_ids=t["input"], attention_mask=t["attention"]).logits
        lp = torch.log_softmax(logits.float(), dim=-1).gather(2, t["target"].unsqueeze(2)).squeeze(2)
        return lp * t["attention"]

    def _train_step(
        self, datums: list[DatumSpec], loss_fn: str, config: dict[str, float] | None, lr: float
    ) -> StepOutcome:
        with self._lock:
            self.optimizer.zero_grad(set_to_none=True)
            total, ratio_sum, clipped, kl_sum, tokens = 0.0, 0.0, 0.0, 0.0, 0.0
            for batch in self._microbatches(datums):
                t = self._tensors(batch)
                lp = self.learner_logprobs(t)
                parts = policy_loss(loss_fn, lp, t["logprobs"], t["advantages"], t["mask"], config)
                # Gradients add up across micro-batches: the gradient of the summed loss.
                parts.loss.backward()  # type: ignore[no-untyped-call]
                total += float(parts.loss.detach())
                ratio_sum, clipped = ratio_sum + parts.ratio_sum, clipped + parts.clipped
                kl_sum, tokens = kl_sum + parts.kl_sum, tokens + parts.tokens
            grads = [p.grad for p in self.params.values() if p.grad is not None]
            grad_norm = float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))) if grads else 0.0
            if not math.isfinite(total) or not math.isfinite(grad_norm):
                self.optimizer.zero_grad(set_to_none=True)
                raise FloatingPointError(f"local learner: non-finite loss {total} or gradient norm {grad_norm}")
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            if self.learn:
                self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.steps += 1
        sampled = max(tokens, 1.0)
        return StepOutcome(
            metrics={
                "loss:sum": total,
                "local/ratio_mean": ratio_sum / sampled,
                "local/clip_fraction": clipped / sampled,
                "local/kl_sampler_learner": kl_sum / sampled,
                "local/sampled_tokens": tokens,
                "local/grad_norm": grad_norm,
                "local/steps": float(self.steps),
                "local/applied": float(self.learn),
                "optim/lr": lr,
            }
        )

    # -- checkpoints ---------------------------------------------------------------------------------
    def _meta(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "base_model": self.base_model,
            "rank": self.rank,
            "lora_alpha": LORA_ALPHA,
            "target_modules": list(TARGET_MODULES),
            "steps": self.steps,
            "adam": {k: list(v) if isinstance(v, tuple) else v for k, v in ADAM.items()},
        }

    def adam_state(self) -> dict[str, Tensor]:
        """Every adapter weight's Adam moments and step count, by parameter name (CPU copies)."""
        out: dict[str, Tensor] = {}
        for name, p in self.params.items():
            st = self.optimizer.state.get(p)
            if not st:
                continue
            for key in ("exp_avg", "exp_avg_sq"):
                out[f"{key}/{name}"] = st[key].detach().to("cpu", copy=True).contiguous()
            out[f"step/{name}"] = torch.as_tensor(st["step"], dtype=torch.float32).reshape(1).cpu()
        return out

    def _save(self, name: str, with_state: bool) -> tuple[str, str]:
        with self._lock:
            lora = lora_state(self.model)
            meta = self._meta()
            state_path = ""
            if with_state:
                state_path = f"{LOCAL_PREFIX}checkpoints/{name}{STATE_SUFFIX}"
                write_checkpoint(self.root, state_path, lora=lora, meta=meta, adam=self.adam_state())
                self.last_state_path = state_path
            sampler_path = f"{LOCAL_PREFIX}checkpoints/{name}{SAMPLER_SUFFIX}"
            write_checkpoint(self.root, sampler_path, lora=lora, meta=meta)
        log.info("local_learner.saved", state=state_path, sampler=sampler_path, steps=self.steps)
        return state_path, sampler_path

    def _restore(self, path: str) -> None:
        lora, meta, adam = read_checkpoint(self.root, path, with_state=True)
        for key, want in (("base_model", self.base_model), ("rank", self.rank)):
            if meta.get(key) != want:
                raise CheckpointError(
                    f"local learner: checkpoint {path!r} has {key} {meta.get(key)!r}, the run config {want!r}"
                )
        set_lora_state(self.model, lora)
        assert adam is not None
        for pname, p in self.params.items():
            if f"step/{pname}" not in adam:
                continue
            self.optimizer.state[p] = {
                "step": adam[f"step/{pname}"].reshape(()).clone(),
                "exp_avg": adam[f"exp_avg/{pname}"].to(self.device),
                "exp_avg_sq": adam[f"exp_avg_sq/{pname}"].to(self.device),
            }
        self.steps = int(meta.get("steps", 0))
        log.info("local_learner.resumed", state=path, steps=self.steps)
