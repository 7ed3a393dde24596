"""Pod start on the local provider with stand-ins for the GPU stack: the real start script, the real pod agent
and its self-check, the real dispatcher. A pod whose self-check fails refuses jobs, and the log names why."""

from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path

import anyio
import pytest

from adapters.local_provider import LocalProvider
from adapters.pod.client import HttpPodAgent
from adapters.prime_rl.start import StartPlan, start_script
from cli.worker_wiring import POD_AGENT_COMMAND
from engine.blobs import BlobStore
from engine.log import read_log
from engine.runtime import Runtime
from events import JobAssigned, JobSucceeded, PodProvisionFailed, PodReady, PodSelfChecked, PodTerminated
from handlers.budget.rules import BudgetGate
from handlers.fleet.context import Ports
from handlers.fleet.dispatcher import Dispatcher, DispatchSummary
from handlers.fleet.policy import FleetConfig
from handlers.fleet.projection import FleetProjection
from handlers.ports.pod_agent import AgentHealth, AgentNotReady, JobSubmission
from handlers.ports.provider import PodSpec, PodState
from tests.fakes.gpu_stack import make_stack
from tests.handlers.fleet.fleet_world import prices, projections, queue_jobs, spec, tokens

# Real subprocess pods (the start script, then the agent's interpreter start-up: about 1 s each on an idle
# machine, several on a loaded one): marked slow, CI still runs them.
pytestmark = [pytest.mark.timeout(60), pytest.mark.slow]

TOKEN = "local-pod-token-0123456789abcdef"
CONFIG = FleetConfig(max_pods=1, ladder=("A",), tick_s=0.05, health_every_s=0.2, ready_timeout_s=20.0)


def provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **stack: object) -> LocalProvider:
    """Local pods that start through the start script, self-checking the stand-in stack as prime_rl would."""
    root = tmp_path / "ait"
    path = make_stack(root, **stack)  # type: ignore[arg-type]
    monkeypatch.setenv("PATH", path)  # the pod's nvidia-smi (PATH reaches a local pod)
    plan = StartPlan(
        ait_version=version("ai-trains-ai"), root=str(root), ait_python=sys.executable, agent=POD_AGENT_COMMAND
    )
    script = tmp_path / "start.sh"
    script.write_text(start_script(plan))
    command = ("bash", str(script), "--self-check", "prime_rl")  # the stand-in trainer, checked as prime_rl
    options = {"steps": "1", "step_s": "0.01"}
    return LocalProvider(command, tmp_path / "pods", trainer="standin", trainer_options=options, idle_exit_s=60)


async def checked_health(agent: HttpPodAgent, provider: LocalProvider, provider_id: str) -> tuple[str, AgentHealth]:
    with anyio.fail_after(15):
        while True:
            info = await provider.get_pod(provider_id)
            assert info is not None and info.state in (PodState.PENDING, PodState.RUNNING), info
            if info.url:
                health = await agent.health(info.url, TOKEN)
                if health.self_check.state != "pending":
                    return info.url, health
            await anyio.sleep(0.05)


async def dispatch(tmp_path: Path, local: LocalProvider) -> tuple[DispatchSummary, list[object], FleetProjection]:
    blobs = BlobStore(tmp_path / "r" / "blobs")
    async with HttpPodAgent() as agent, Runtime(tmp_path / "r", projections(), run_id="r") as rt:
        await queue_jobs(rt, blobs, 1)
        ports = Ports(
            provider=local,
            agent=agent,
            gate=BudgetGate.for_runtime(rt, prices(A=0.0)),
            blobs=blobs,
            tokens=tokens,
            spec_for=spec,
        )
        summary = await Dispatcher(rt, ports, CONFIG, once=True).run()
        fleet = rt.state(FleetProjection)
    return summary, [r.event for r in read_log(tmp_path / "r" / "events.jsonl").records], fleet


async def test_a_pod_whose_self_check_fails_refuses_jobs_and_names_what_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = provider(tmp_path, monkeypatch, vllm="0.25.1")
    pod = await local.create_pod(PodSpec(gpu_type="A", image="local", env={"AIT_POD_TOKEN": TOKEN}), "ait-x-p0")
    try:
        async with HttpPodAgent() as agent:
            url, health = await checked_health(agent, local, pod.provider_id)
            check = health.self_check
            assert check.state == "failed" and [i.name for i in check.failed()] == ["vllm"]
            assert {i.name for i in check.items} == {
                "bootstrap",
                "ait",
                "gpu",
                "prime_rl_commit",
                "prime_rl_import",
                "vllm",
                "scoring",
            }
            with pytest.raises(AgentNotReady, match=r"self-check failed: vllm: 0\.25\.1 installed, pinned 0\.26"):
                await agent.submit(url, TOKEN, JobSubmission(job_id="j0", family="calc_chain"), b"not even a bundle")
    finally:
        await local.terminate_pod(pod.provider_id)


async def test_the_dispatcher_records_the_failed_check_terminates_the_pod_and_stops_launching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary, events, fleet = await dispatch(tmp_path, provider(tmp_path, monkeypatch, commit="f" * 40))
    checked = [e for e in events if isinstance(e, PodSelfChecked)]
    assert len(checked) == 1 and not checked[0].ok and checked[0].failed() == ["prime_rl_commit"]
    failed = [e for e in events if isinstance(e, PodProvisionFailed)]
    assert [f.kind for f in failed] == ["self_check"]
    assert failed[0].detail.startswith("self-check failed: prime_rl_commit: ffffffffffff checked out, pinned 559b44")
    assert not [e for e in events if isinstance(e, JobAssigned | PodReady)]  # never given work
    assert [e.pod_id for e in events if isinstance(e, PodTerminated)] == ["p0"]  # and not left running
    assert summary.status == "blocked" and "prime_rl_commit" in summary.message  # no second pod of the same kind
    assert fleet.pods["p0"].self_check == "failed: prime_rl_commit"


async def test_a_pod_whose_self_check_passes_runs_the_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary, events, fleet = await dispatch(tmp_path, provider(tmp_path, monkeypatch))
    assert summary.succeeded == 1
    checked = [e for e in events if isinstance(e, PodSelfChecked)]
    assert len(checked) == 1 and checked[0].ok and "gpu: 1 x NVIDIA H100 80GB HBM3" in checked[0].summary()
    kinds = [type(e).__name__ for e in events if isinstance(e, PodSelfChecked | PodReady | JobSucceeded)]
    assert kinds == ["PodSelfChecked", "PodReady", "JobSucceeded"]
    assert fleet.pods["p0"].self_check == "passed"


async def test_a_prime_rl_pod_without_a_gpu_still_answers_and_its_check_names_the_trainer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """prime-rl's trainer cannot be built without a GPU: the agent serves anyway, so the controller learns why."""
    root = tmp_path / "ait"
    monkeypatch.setenv("PATH", make_stack(root, gpus=0))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # whatever this host has: the trainer sees no GPU
    local = LocalProvider(POD_AGENT_COMMAND, tmp_path / "pods", trainer="prime_rl", trainer_options={"root": str(root)})
    pod = await local.create_pod(PodSpec(gpu_type="A", image="local", env={"AIT_POD_TOKEN": TOKEN}), "ait-x-p0")
    try:
        async with HttpPodAgent() as agent:
            _, health = await checked_health(agent, local, pod.provider_id)
    finally:
        await local.terminate_pod(pod.provider_id)
    check = health.self_check
    assert check.state == "failed" and health.trainer == "prime_rl"
    assert [i.name for i in check.failed()] == ["trainer", "gpu"]
    assert check.failed()[0].detail == "prime_rl trainer: needs 1 or 2 GPUs, found 0 (set gpus=1|2 to override)"
