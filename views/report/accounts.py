"""What a report needs that no domain projection keeps: each job attempt's pod and time on it, spend by
episode and by training step, the checkpoint path of each published sampler version, and the eval keys the
run's baselines were frozen under.

A pure fold like every projection, so the report is a function of the log alone.
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

from engine.projection import Projection, handles
from events import (
    BaselineFrozen,
    CostSettled,
    JobAssigned,
    JobFailed,
    JobRequeued,
    JobSucceeded,
    SamplerPublished,
)

__all__ = ["Accounts", "AccountsProjection", "Attempt"]

_STEP_REF: Final = re.compile(r"^step[:\-](\d+)$")  # the ref of a training step's spend: "step:3"


class Attempt(msgspec.Struct, kw_only=True):
    pod_id: str
    assigned_ts: float
    ended_ts: float = 0.0  # 0: still open
    outcome: str = ""  # succeeded | failed | requeued


class Accounts(msgspec.Struct, kw_only=True):
    attempts: dict[str, list[Attempt]] = {}  # job id -> its attempts in order
    episode_usd: dict[str, float] = {}  # spend charged to an episode (its agent calls; holdout episodes too)
    training_usd: dict[str, float] = {}  # str(outer step) -> spend of its optimizer step
    settled_usd: float = 0.0
    sampler_paths: dict[str, str] = {}  # str(sampler version) -> path
    eval_keys: list[str] = []  # fingerprints of the eval keys of the frozen baselines, first seen first


class AccountsProjection(Projection[Accounts]):
    name = "accounts"
    state_type = Accounts

    def initial(self) -> Accounts:
        return Accounts()

    @handles(JobAssigned)
    def _assigned(self, s: Accounts, e: JobAssigned) -> Accounts:
        s.attempts.setdefault(e.job_id, []).append(Attempt(pod_id=e.pod_id, assigned_ts=self.current.ts))
        return s

    def _end(self, s: Accounts, job_id: str, outcome: str) -> Accounts:
        attempts = s.attempts.get(job_id)
        if attempts and not attempts[-1].ended_ts:
            attempts[-1].ended_ts, attempts[-1].outcome = self.current.ts, outcome
        return s

    @handles(JobSucceeded)
    def _succeeded(self, s: Accounts, e: JobSucceeded) -> Accounts:
        return self._end(s, e.job_id, "succeeded")

    @handles(JobFailed)
    def _failed(self, s: Accounts, e: JobFailed) -> Accounts:
        return self._end(s, e.job_id, "failed")

    @handles(JobRequeued)
    def _requeued(self, s: Accounts, e: JobRequeued) -> Accounts:
        return self._end(s, e.job_id, "requeued")

    @handles(CostSettled)
    def _settled(self, s: Accounts, e: CostSettled) -> Accounts:
        s.settled_usd += e.usd
        if e.episode_id:
            s.episode_usd[e.episode_id] = s.episode_usd.get(e.episode_id, 0.0) + e.usd
        m = _STEP_REF.match(e.ref) if e.kind == "training" else None
        if m is not None:
            step = str(int(m.group(1)))
            s.training_usd[step] = s.training_usd.get(step, 0.0) + e.usd
        return s

    @handles(SamplerPublished)
    def _sampler(self, s: Accounts, e: SamplerPublished) -> Accounts:
        s.sampler_paths[str(e.sampler_version)] = e.path
        return s

    @handles(BaselineFrozen)
    def _baseline(self, s: Accounts, e: BaselineFrozen) -> Accounts:
        if e.key_fingerprint not in s.eval_keys:
            s.eval_keys.append(e.key_fingerprint)
        return s
