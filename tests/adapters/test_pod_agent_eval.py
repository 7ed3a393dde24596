"""The hidden eval reaches a pod only after training: ``eval_needed`` on the stream, then ``POST /jobs/{id}/eval``.

The package is the engine's (built here under the test key, as the controller builds it); the agent accepts it
only while the job's scoring waits for it, unpacks it into a fresh private directory, and the trainer scores on
exactly that package. The real aiohttp app and httpx client, as in test_pod_agent.py.
"""

from __future__ import annotations

import hashlib
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from families.eval_env import pack_eval_package, package_files
from handlers.ports.pod_agent import EVAL_NEEDED, AgentEvalRefused, AgentJobConflict
from tests.adapters.test_pod_agent import TOKEN, Agent, start, sub
from tests.fakes.inner import EvalScoringTrainer

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[Agent]:
    async for a in start(tmp_path, EvalScoringTrainer(seconds=0.5)):
        yield a


async def wait_for_eval_needed(agent: Agent, job_id: str = "j1") -> int:
    cursor = 0
    while True:
        page = await agent.client.events(agent.url, TOKEN, job_id, cursor, 2.0)
        for ev in page.events:
            if ev.kind == EVAL_NEEDED:
                return ev.seq
        assert not page.done, "the job ended without asking for its eval package"
        cursor = page.next_cursor


async def test_the_package_is_refused_during_training_and_scored_on_once_asked_for(agent: Agent) -> None:
    package = pack_eval_package("calc_chain")
    _, info = package_files("calc_chain")
    await agent.client.submit(agent.url, TOKEN, sub(), _bundle())
    eval_dir = agent.core.workdir / "jobs" / "j1" / "eval"
    with pytest.raises(AgentEvalRefused, match="not waiting for its eval package"):
        await agent.client.send_eval(agent.url, TOKEN, "j1", package)  # still training
    assert not eval_dir.exists()  # nothing of the hidden set on the pod while the job trains
    await wait_for_eval_needed(agent)
    await agent.client.send_eval(agent.url, TOKEN, "j1", package)
    await agent.client.send_eval(agent.url, TOKEN, "j1", package)  # a re-send (controller restart): no-op
    with pytest.raises(AgentJobConflict, match="another eval package"):
        await agent.client.send_eval(agent.url, TOKEN, "j1", package + b"\0" * 512)
    await agent.finish()
    res = await agent.client.result(agent.url, TOKEN, "j1")
    assert res.result.ok and res.result.post == 0.2 and res.result.detail == info.fingerprint
    assert stat.S_IMODE(eval_dir.stat().st_mode) == 0o700


async def test_the_eval_endpoint_needs_the_token_and_intact_bytes(agent: Agent) -> None:
    await agent.client.submit(agent.url, TOKEN, sub(), _bundle())
    await wait_for_eval_needed(agent)
    package = pack_eval_package("calc_chain")
    async with httpx.AsyncClient(base_url=agent.url) as http:
        assert (await http.post("/jobs/j1/eval", content=package)).status_code == 401
        wrong = {"sha256": hashlib.sha256(b"other").hexdigest()}
        headers = {"Authorization": f"Bearer {TOKEN}"}
        resp = await http.post("/jobs/j1/eval", content=package, params=wrong, headers=headers)
        assert resp.status_code == 400 and "damaged" in resp.text
        resp = await http.post("/jobs/j1/eval", content=b"not a tar", headers=headers)
        assert resp.status_code == 400 and "cannot be unpacked" in resp.text


async def test_scoring_fails_cleanly_when_no_package_arrives(tmp_path: Path) -> None:
    async for a in start(tmp_path, EvalScoringTrainer(seconds=0.0)):
        a.core.eval_wait_s = 0.3
        await a.client.submit(a.url, TOKEN, sub(), _bundle())
        await a.finish()
        res = await a.client.result(a.url, TOKEN, "j1")
        assert (res.result.ok, res.result.failure) == (False, "scoring_error")
        assert "no hidden eval package arrived" in res.result.detail


def _bundle() -> bytes:
    from tests.adapters.test_pod_agent import BUNDLE

    return BUNDLE
