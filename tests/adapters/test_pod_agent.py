"""The pod agent over HTTP: auth on every endpoint, idempotent submission, the cursor stream, results, failures.

The real aiohttp app runs on an ephemeral port in this process and is driven through the real httpx client.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp.test_utils import TestServer

from adapters.pod.client import HttpPodAgent
from adapters.pod.core import AgentCore
from adapters.pod.server import make_app
from handlers.episode.bundle import make_bundle
from handlers.ports.inner_trainer import InnerTrainer
from handlers.ports.pod_agent import (
    AgentAuthError,
    AgentBusy,
    AgentError,
    AgentJobConflict,
    AgentJobUnknown,
    AgentNotFinished,
    AgentUnreachable,
    JobSubmission,
)
from tests.fakes.inner import FakeInnerTrainer

pytestmark = pytest.mark.timeout(20)

TOKEN = "s3cret-token-0123456789"
BUNDLE = make_bundle({"job.toml": b"[prime_rl]\n", "env/env.py": b"x = 1\n"}, b'{"task": "t"}')


def sub(job_id: str = "j1", bundle: bytes = BUNDLE, **kw: object) -> JobSubmission:
    return JobSubmission(job_id=job_id, family="calc_chain", bundle_sha256=hashlib.sha256(bundle).hexdigest(), **kw)  # type: ignore[arg-type]


class Agent:
    def __init__(self, server: TestServer, core: AgentCore, client: HttpPodAgent) -> None:
        self.server, self.core, self.client = server, core, client
        self.url = str(server.make_url("")).rstrip("/")

    async def finish(self, job_id: str = "j1") -> None:
        while not (await self.client.events(self.url, TOKEN, job_id, 0, 1.0)).done:
            pass


async def start(tmp_path: Path, trainer: InnerTrainer) -> AsyncIterator[Agent]:
    core = AgentCore(trainer, tmp_path / "agent")
    server = TestServer(make_app(core, TOKEN))
    await server.start_server()
    try:
        async with HttpPodAgent() as client:
            yield Agent(server, core, client)
    finally:
        await core.close()
        await server.close()


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[Agent]:
    async for a in start(tmp_path, FakeInnerTrainer(seconds=0.2, steps=4)):
        yield a


async def test_no_endpoint_does_anything_without_the_token(agent: Agent) -> None:
    async with httpx.AsyncClient(base_url=agent.url) as http:
        for method, path in [
            ("GET", "/health"),
            ("POST", "/jobs/j1"),
            ("GET", "/jobs/j1"),
            ("GET", "/jobs/j1/events"),
            ("GET", "/jobs/j1/result"),
            ("POST", "/jobs/j1/cancel"),
            ("GET", "/no/such/path"),
        ]:
            for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": TOKEN}):
                resp = await http.request(method, path, headers=headers, content=BUNDLE if method == "POST" else None)
                assert resp.status_code == 401, (method, path, headers)
                assert TOKEN not in resp.text
    assert agent.core.health().jobs == 0  # the unauthenticated submissions created nothing
    with pytest.raises(AgentAuthError):
        await agent.client.health(agent.url, "wrong-token-0123456789")


async def test_health_reports_the_trainer_and_the_busy_job(agent: Agent) -> None:
    h = await agent.client.health(agent.url, TOKEN)
    assert (h.ok, h.trainer, h.busy) == (True, "fake", "")
    await agent.client.submit(agent.url, TOKEN, sub(), BUNDLE)
    assert (await agent.client.health(agent.url, TOKEN)).busy == "j1"


async def test_submission_is_idempotent_by_job_id(agent: Agent) -> None:
    first = await agent.client.submit(agent.url, TOKEN, sub(), BUNDLE)
    again = await agent.client.submit(agent.url, TOKEN, sub(), BUNDLE)
    assert first.created and not again.created and again.job_id == "j1"
    await agent.finish()
    after = await agent.client.submit(agent.url, TOKEN, sub(), BUNDLE)  # finished: still the same job
    assert after.state == "succeeded" and not after.created
    assert [c.job_id for c in agent.core.trainer.calls] == ["j1"]  # type: ignore[attr-defined]
    runs = (agent.core.workdir / "runs.jsonl").read_text().splitlines()
    assert len(runs) == 1 and '"job_id":"j1"' in runs[0]


async def test_the_same_id_with_other_bytes_is_refused_and_one_job_runs_at_a_time(agent: Agent) -> None:
    await agent.client.submit(agent.url, TOKEN, sub(), BUNDLE)
    other = make_bundle({"job.toml": b"[prime_rl]\n# other\n"}, b"{}")
    with pytest.raises(AgentJobConflict):
        await agent.client.submit(agent.url, TOKEN, sub("j1", other), other)
    with pytest.raises(AgentBusy):
        await agent.client.submit(agent.url, TOKEN, sub("j2", other), other)


async def test_damaged_or_hostile_bundles_are_rejected(agent: Agent) -> None:
    with pytest.raises(AgentError, match="sha256"):
        await agent.client.submit(agent.url, TOKEN, sub(bundle=BUNDLE), BUNDLE[:-1] + b"!")
    with pytest.raises(AgentError, match="cannot be unpacked"):
        await agent.client.submit(agent.url, TOKEN, sub("j2", b"not a tar"), b"not a tar")
    evil = make_bundle({"../escape.txt": b"x"}, b"{}")
    with pytest.raises(AgentError, match="plain relative file"):
        await agent.client.submit(agent.url, TOKEN, sub("j3", evil), evil)
    with pytest.raises(AgentError, match="job id"):
        await agent.client.submit(agent.url, TOKEN, sub("bad id!"), BUNDLE)
    assert agent.core.health().jobs == 0
    assert not (agent.core.workdir.parent / "escape.txt").exists()


async def test_the_event_stream_resumes_from_any_cursor_without_gaps(agent: Agent) -> None:
    await agent.client.submit(agent.url, TOKEN, sub(), BUNDLE)
    first = await agent.client.events(agent.url, TOKEN, "j1", 0, 0.0)
    assert [e.seq for e in first.events] == list(range(1, first.next_cursor + 1))
    seen = list(first.events)
    cursor = first.next_cursor
    while True:  # a reconnecting reader passes back the last cursor it saw
        page = await agent.client.events(agent.url, TOKEN, "j1", cursor, 2.0)
        seen += page.events
        cursor = page.next_cursor
        if page.done:
            break
    assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
    assert [e.step for e in seen if e.kind == "progress"] == [1, 2, 3, 4]
    assert [e.state for e in seen if e.kind == "state"] == ["queued", "running", "succeeded"]
    replay = await agent.client.events(agent.url, TOKEN, "j1", 2, 0.0)  # from the middle: the rest, no more
    assert replay.events == seen[2:] and replay.done


async def test_a_long_poll_returns_as_soon_as_an_event_arrives(tmp_path: Path) -> None:
    async for agent in start(tmp_path, FakeInnerTrainer(seconds=0.6, steps=2)):
        await agent.client.submit(agent.url, TOKEN, sub(), BUNDLE)
        page = await agent.client.events(agent.url, TOKEN, "j1", 0, 0.0)
        t0 = time.monotonic()
        nxt = await agent.client.events(agent.url, TOKEN, "j1", page.next_cursor, 10.0)
        waited = time.monotonic() - t0
        assert nxt.events and 0.1 < waited < 2.0  # woke at the first step (~0.3 s), not at the 10 s limit


async def test_the_result_document_has_scores_timings_and_the_log(agent: Agent) -> None:
    await agent.client.submit(agent.url, TOKEN, sub(), BUNDLE)
    with pytest.raises(AgentNotFinished):
        await agent.client.result(agent.url, TOKEN, "j1")
    await agent.finish()
    res = await agent.client.result(agent.url, TOKEN, "j1")
    assert (res.state, res.result.ok, res.result.pre, res.result.post) == ("succeeded", True, 0.1, 0.4)
    assert res.bundle_sha256 == hashlib.sha256(BUNDLE).hexdigest() and res.trainer == "fake"
    assert res.timings["finished_at"] >= res.timings["started_at"] >= res.timings["queued_at"]
    assert res.timings["wall_s"] >= 0.2 and "phase.train" in res.timings
    assert "state running" in res.log and "state succeeded" in res.log
    with pytest.raises(AgentJobUnknown):
        await agent.client.result(agent.url, TOKEN, "nope")


@pytest.mark.parametrize(
    ("trainer", "time_budget_s", "failure"),
    [
        (FakeInnerTrainer(error=RuntimeError("env exploded")), 0.0, "trainer_crash"),
        (FakeInnerTrainer(seconds=5.0, steps=5), 0.3, "timeout"),
        (FakeInnerTrainer(failure="oom"), 0.0, "oom"),
    ],
)
async def test_failures_are_classified(
    tmp_path: Path, trainer: InnerTrainer, time_budget_s: float, failure: str
) -> None:
    async for agent in start(tmp_path, trainer):
        await agent.client.submit(agent.url, TOKEN, sub(time_budget_s=time_budget_s), BUNDLE)
        await agent.finish()
        res = await agent.client.result(agent.url, TOKEN, "j1")
        assert (res.state, res.result.failure) == ("failed", failure)
        if failure == "trainer_crash":
            assert "env exploded" in res.result.detail and "RuntimeError" in res.log


async def test_cancel_stops_the_job(tmp_path: Path) -> None:
    async for agent in start(tmp_path, FakeInnerTrainer(seconds=10.0, steps=10)):
        await agent.client.submit(agent.url, TOKEN, sub(), BUNDLE)
        status = await agent.client.cancel(agent.url, TOKEN, "j1")
        assert status.state == "failed"
        assert (await agent.client.result(agent.url, TOKEN, "j1")).result.failure == "cancelled"
        assert (await agent.client.health(agent.url, TOKEN)).busy == ""


async def test_an_agent_that_is_not_there_is_unreachable() -> None:
    async with HttpPodAgent() as client:
        with pytest.raises(AgentUnreachable):
            await client.health("http://127.0.0.1:9", TOKEN)


async def test_a_short_token_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="16 characters"):
        make_app(AgentCore(FakeInnerTrainer(), tmp_path), "short")
