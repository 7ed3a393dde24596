"""The local provider: real ``ait pod-agent`` subprocesses, found by name, killed by process group."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import anyio
import pytest

from adapters.local_provider import LocalProvider
from adapters.pod.client import HttpPodAgent
from adapters.pod.tokens import TOKEN_ENV, PodTokens, read_token_file
from cli.worker_wiring import POD_AGENT_COMMAND
from handlers.episode.bundle import make_bundle
from handlers.ports.pod_agent import AgentAuthError, JobSubmission
from handlers.ports.provider import InvalidPodRequest, PodInfo, PodSpec, PodState, pod_name

pytestmark = pytest.mark.timeout(60)

# Everything `ait pod-agent --trainer standin` imports before it listens.
STARTUP_MODULES = "cli, adapters.pod.core, adapters.pod.server, adapters.pod.trainers, adapters.pod.standin"

TOKEN = "local-pod-token-0123456789abcdef"


def spec(token: str = TOKEN) -> PodSpec:
    return PodSpec(gpu_type="local", image="local", env={TOKEN_ENV: token, "AIT_PIN_X": "1"})


def proc_file(pid: int, name: str) -> bytes:
    return Path(f"/proc/{pid}/{name}").read_bytes()


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


async def wait_running(provider: LocalProvider, provider_id: str) -> PodInfo:
    with anyio.fail_after(15):
        while True:
            info = await provider.get_pod(provider_id)
            assert info is not None
            if info.state is PodState.RUNNING:
                return info
            assert info.state is PodState.PENDING, info
            await anyio.sleep(0.05)


def record_pid(provider: LocalProvider, provider_id: str) -> int:
    import json

    pid: int = json.loads((provider.state_dir / provider_id / "pod.json").read_text())["pid"]
    return pid


async def test_a_pod_is_an_authenticated_agent_found_by_name_and_killed_with_its_group(tmp_path: Path) -> None:
    provider = LocalProvider(
        POD_AGENT_COMMAND,
        tmp_path / "pods",
        trainer="tests.fakes.inner:make_trainer",
        trainer_options={"seconds": "30", "steps": "1"},
    )
    provider.trainer_options["spawn_child"] = "1"
    name = pod_name("runA", "p0")
    created = await provider.create_pod(spec(), name)
    assert created.state in (PodState.PENDING, PodState.RUNNING) and created.name == name
    info = await wait_running(provider, created.provider_id)
    assert info.url.startswith("http://127.0.0.1:")
    pid = record_pid(provider, created.provider_id)

    # The token is in a 0600 file only: not on the command line, not in the agent's environment.
    token_file = provider.state_dir / created.provider_id / "token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600 and read_token_file(token_file) == TOKEN
    assert TOKEN.encode() not in proc_file(pid, "cmdline")
    assert TOKEN.encode() not in proc_file(pid, "environ")
    assert b"AIT_PIN_X=1" in proc_file(pid, "environ")  # the rest of the spec's env is passed

    async with HttpPodAgent() as agent:
        assert (await agent.health(info.url, TOKEN)).trainer == "fake"
        with pytest.raises(AgentAuthError):
            await agent.health(info.url, "not-the-token-0123456789")
        bundle = make_bundle({"job.toml": b"[prime_rl]\n"}, b"{}")
        await agent.submit(info.url, TOKEN, JobSubmission(job_id="j1", family="f"), bundle)
        child_file = next((provider.state_dir / created.provider_id).rglob("child.pid"), None)
        with anyio.fail_after(10):
            while child_file is None or not child_file.exists():
                await anyio.sleep(0.05)
                child_file = next((provider.state_dir / created.provider_id).rglob("child.pid"), None)
        child = int(child_file.read_text())
    assert alive(child) and os.getpgid(child) == pid

    # Same name: the same pod (a retried create after a crash launches nothing new).
    again = await provider.create_pod(spec(), name)
    assert again.provider_id == created.provider_id
    other = await provider.create_pod(spec(), pod_name("runB", "p0"))
    listed = await provider.list_pods("ait-runA-")
    assert [p.provider_id for p in listed] == [created.provider_id]

    # A second provider object (a restarted controller) sees the same pods.
    restarted = LocalProvider(POD_AGENT_COMMAND, tmp_path / "pods")
    assert [p.provider_id for p in await restarted.list_pods("ait-runA-")] == [created.provider_id]

    await restarted.terminate_pod(created.provider_id)
    await provider.terminate_pod(other.provider_id)
    with anyio.fail_after(5):
        while alive(pid) or alive(child):
            await anyio.sleep(0.05)
    gone = await provider.get_pod(created.provider_id)
    assert gone is not None and gone.state is PodState.GONE
    assert not token_file.exists()
    await provider.terminate_pod(created.provider_id)  # terminating a gone pod is not an error


async def test_a_pod_that_dies_reports_failed(tmp_path: Path) -> None:
    provider = LocalProvider(POD_AGENT_COMMAND, tmp_path / "pods")
    created = await provider.create_pod(spec(), pod_name("r", "p0"))
    await wait_running(provider, created.provider_id)
    os.killpg(record_pid(provider, created.provider_id), 9)
    with anyio.fail_after(5):
        while (info := await provider.get_pod(created.provider_id)) is not None and info.state is PodState.RUNNING:
            await anyio.sleep(0.05)
    assert info is not None and info.state is PodState.FAILED
    await provider.terminate_pod(created.provider_id)


async def test_a_spec_without_a_token_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidPodRequest, match=TOKEN_ENV):
        await LocalProvider(POD_AGENT_COMMAND, tmp_path).create_pod(
            PodSpec(gpu_type="local", image="x"), pod_name("r", "p0")
        )


def test_pod_tokens_are_per_pod_and_stable_across_processes(tmp_path: Path) -> None:
    a, b = PodTokens(tmp_path / "s" / "key"), PodTokens(tmp_path / "s" / "key")
    assert a("p0") == b("p0") != a("p1") and len(a("p0")) == 64
    assert stat.S_IMODE((tmp_path / "s" / "key").stat().st_mode) == 0o600
    assert PodTokens(tmp_path / "other")("p0") != a("p0")
    assert "key" in repr(a) and a("p0") not in repr(a)


def test_the_agent_starts_fast(tmp_path: Path) -> None:
    """The pod agent's startup path imports nothing heavy: listening within a few seconds even on a busy box."""
    import subprocess
    import sys

    tok = tmp_path / "tok"
    tok.write_text(TOKEN)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "pod-agent", "--token-file", str(tok), "--workdir", str(tmp_path / "w")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        elapsed = time.monotonic() - t0
        assert line.startswith("ait pod-agent: listening on http://127.0.0.1:"), line
        assert elapsed < 5.0
        modules = subprocess.run(
            [sys.executable, "-c", f"import sys, {STARTUP_MODULES}; print(' '.join(sys.modules))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert not {"torch", "numpy", "transformers", "verifiers"} & set(modules)
    finally:
        proc.terminate()
        code = proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
    assert code == 0  # SIGTERM is a clean shutdown


async def test_a_pod_whose_pid_was_never_recorded_is_still_found_and_killed(tmp_path: Path) -> None:
    """A controller killed between spawning an agent and recording its pid leaves no unkillable orphan."""
    import json

    provider = LocalProvider(POD_AGENT_COMMAND, tmp_path / "pods")
    created = await provider.create_pod(spec(), pod_name("r", "p0"))
    await wait_running(provider, created.provider_id)
    pid = record_pid(provider, created.provider_id)
    pod_dir = provider.state_dir / created.provider_id
    record = json.loads((pod_dir / "pod.json").read_text())
    (pod_dir / "pod.json").write_text(json.dumps({**record, "pid": 0, "start_ticks": -1}))
    (pod_dir / "agent.json").unlink()  # not even the agent's own note: only its command line is left

    restarted = LocalProvider(POD_AGENT_COMMAND, tmp_path / "pods")
    info = await restarted.get_pod(created.provider_id)
    assert info is not None and info.state is PodState.PENDING  # alive, URL unknown
    await restarted.terminate_pod(created.provider_id)
    await provider.terminate_pod(created.provider_id)  # already gone: the first controller only reaps its handle
    with anyio.fail_after(5):
        while alive(pid):
            await anyio.sleep(0.05)
