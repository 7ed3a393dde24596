"""Where an interrupted episode stands, read back from its events: the point to continue it from.

A process that died mid-episode left a prefix of the episode's events. Turns are the unit of progress: every
recorded ``agent.turn_taken`` is kept (its reply is in the turn blob; asking the policy again would pay for a
second call and could answer differently), and the tool calls of the last turn that have no ``tool.returned``
are *pending*: they run again, against the workspace as it was before the first of them was called. That
makes re-running them reproduce the same files, and an edit is never applied twice.

A pending ``submit_job`` whose ``submission.received`` is already in the log keeps its attempt number; if the
probe's verdict is recorded too it is reused, so a submission is never counted or validated twice.

The conversation is rebuilt exactly as the live runner built it (opening messages from the ``episode.started``
prompt blob, each reply, each tool result in full from its blob, the one reminder after a turn without tool
calls), so a trainable policy renders the same prompt it would have.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from engine.blobs import BlobStore
from events import (
    AgentTurnTaken,
    EpisodeFinished,
    EpisodeStarted,
    EventBody,
    Recorded,
    SubmissionReceived,
    SubmissionRejected,
    SubmissionValidated,
    ToolCalled,
    ToolReturned,
    WorkspaceFileWritten,
)
from handlers.ports.policy import ToolCall

__all__ = ["NUDGE", "PendingSubmit", "ResumePoint", "episode_histories", "resume_point"]

#: The one reminder the runner sends after a turn without tool calls.
NUDGE = "Call submit_job when your job is ready."


@dataclass
class PendingSubmit:
    """A ``submit_job`` call whose submission was received before the crash."""

    attempt: int
    verdict: SubmissionValidated | SubmissionRejected | None  # None: the probe's answer was not recorded


@dataclass
class ResumePoint:
    episode_id: str
    messages: list[dict[str, Any]]
    files: dict[str, str]  # path -> blob: the workspace before the first pending call ("" = deleted)
    turns: int = 0
    attempts: int = 0
    parseable: bool = False
    nudged: bool = False
    ended: bool = False  # the last turn ended the episode (a second turn without tool calls)
    validated: SubmissionValidated | None = None
    rejected_out: bool = False  # the last attempt was rejected and no attempts are left
    pending: list[ToolCall] = field(default_factory=list)
    called: set[str] = field(default_factory=set)  # pending call ids whose tool.called is already recorded
    submits: dict[str, PendingSubmit] = field(default_factory=dict)  # pending call id -> its submission
    usage: dict[str, int] = field(default_factory=dict)
    finished: EpisodeFinished | None = None


def episode_histories(records: Iterable[Recorded], episode_ids: Iterable[str]) -> dict[str, list[EventBody]]:
    """Each wanted episode's events in log order (one pass over the log)."""
    wanted = set(episode_ids)
    out: dict[str, list[EventBody]] = {e: [] for e in wanted}
    for rec in records:
        eid = getattr(rec.event, "episode_id", None)
        if isinstance(eid, str) and eid in wanted:
            out[eid].append(rec.event)
    return out


def _reply_calls(reply: dict[str, Any]) -> list[ToolCall]:
    calls = []
    for c in reply.get("tool_calls") or []:
        fn = c.get("function", {})
        calls.append(
            ToolCall(id=str(c.get("id", "")), name=str(fn.get("name", "")), arguments=str(fn.get("arguments", "")))
        )
    return calls


def resume_point(history: Sequence[EventBody], blobs: BlobStore, *, max_attempts: int) -> ResumePoint | None:
    """The point to continue the episode from, or None when it never started (start it afresh)."""
    started = next((e for e in history if isinstance(e, EpisodeStarted)), None)
    if started is None:
        return None
    opening = msgspec.json.decode(blobs.get(started.prompt_blob)) if started.prompt_blob else {}
    point = ResumePoint(episode_id=started.episode_id, messages=list(opening.get("messages", [])), files={})
    files: dict[str, str] = {}
    snapshot: dict[str, str] | None = None  # files when the first pending call was made
    names: dict[str, str] = {}
    returned: set[str] = set()
    last_calls: list[ToolCall] = []
    received: dict[int, str] = {}  # attempt -> the call id it was received under
    current_call = ""
    verdicts: dict[int, SubmissionValidated | SubmissionRejected] = {}
    for ev in history:
        if isinstance(ev, WorkspaceFileWritten):
            files[ev.path] = ev.blob
        elif isinstance(ev, AgentTurnTaken):
            doc = msgspec.json.decode(blobs.get(ev.blob))
            reply = doc["reply"]
            point.messages.append(reply)
            point.turns += 1
            for k, v in (
                ("input", ev.input_tokens),
                ("cached_input", ev.cached_input_tokens),
                ("output", ev.output_tokens),
            ):
                point.usage[k] = point.usage.get(k, 0) + v
            last_calls = _reply_calls(reply)
            returned = set()
            if not last_calls:
                if point.nudged:
                    point.ended = True
                else:
                    point.nudged = True
                    point.messages.append({"role": "user", "content": NUDGE})
        elif isinstance(ev, ToolCalled):
            names[ev.call_id] = ev.name
            current_call = ev.call_id
            if snapshot is None:
                snapshot = dict(files)  # provisional: kept only if this call turns out pending
        elif isinstance(ev, ToolReturned):
            content = blobs.get(ev.blob).decode("utf-8") if ev.blob else ev.content
            point.messages.append(
                {"role": "tool", "tool_call_id": ev.call_id, "name": names.get(ev.call_id, ""), "content": content}
            )
            returned.add(ev.call_id)
            snapshot = None
        elif isinstance(ev, SubmissionReceived):
            point.attempts = max(point.attempts, ev.attempt)
            point.parseable = point.parseable or ev.parseable
            received[ev.attempt] = current_call
        elif isinstance(ev, SubmissionValidated | SubmissionRejected):
            verdicts[ev.attempt] = ev
            if isinstance(ev, SubmissionValidated):
                point.validated = ev
            elif ev.attempt >= max_attempts:
                point.rejected_out = True
        elif isinstance(ev, EpisodeFinished):
            point.finished = ev
    point.pending = [c for c in last_calls if c.id not in returned]
    point.called = {c.id for c in point.pending if c.id in names}
    point.files = snapshot if (snapshot is not None and point.called) else files
    for attempt, call_id in received.items():
        if call_id in point.called:
            point.submits[call_id] = PendingSubmit(attempt=attempt, verdict=verdicts.get(attempt))
    return point
