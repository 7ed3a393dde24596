"""The worker's pod specs: a Runpod pod starts through the start script (validated against Runpod's OpenAPI
spec on the wire), a local prime_rl pod through the same script, a local CPU pod through the agent alone."""

from __future__ import annotations

import base64
import json
import shlex
from importlib.metadata import version
from pathlib import Path

from adapters.prime_rl.bootstrap import bootstrap_script
from adapters.runpod import RunpodProvider
from cli.options import WorkerOptions
from cli.worker_wiring import DEFAULT_POD_IMAGE, POD_AGENT_COMMAND, local_command, spec_factory
from handlers.fleet.policy import FleetConfig
from tests.adapters import runpod_contract as rc

KEY = "rpa_PODSTARTTESTKEY00000000000"
TOKEN = "pod-token-0123456789abcdef"


def decoded_script(args: str) -> tuple[str, list[str]]:
    inner = shlex.split(args)[2]  # bash -c '<inner>'
    encoded = inner.split()[1]
    return base64.b64decode(encoded).decode(), inner.split("exec bash /tmp/ait-start.sh")[1].split()


async def test_a_runpod_pod_is_created_with_the_start_command_and_the_body_fits_the_spec() -> None:
    opts = WorkerOptions(provider="runpod", trainer="prime_rl", ait_source="git+https://example.org/ait@c0ffee")
    spec = spec_factory(opts, FleetConfig(pins={"prime_rl": "559b44"}))("NVIDIA RTX A5000", "p0", TOKEN)
    fake = rc.FakeRunpod()
    async with RunpodProvider(KEY, transport=fake.transport(), sleep=rc.Sleeps(), rand=lambda: 0.5) as p:
        await p.create_pod(spec, "ait-r1-p0")
    body = json.loads(next(r for r in fake.requests if r.method == "POST").content)
    errors = [
        f"{list(e.absolute_path)}: {e.message}" for e in rc.schema_validator("CreatePodRequest").iter_errors(body)
    ]
    assert errors == [], errors
    assert body["image"] == DEFAULT_POD_IMAGE and body["ports"] == ["8000/http"]
    assert body["env"] == {"AIT_POD_TOKEN": TOKEN, "AIT_POD_ID": "p0", "AIT_PIN_PRIME_RL": "559b44"}
    script, agent_args = decoded_script(body["args"])
    assert agent_args == [
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--token-env",
        "AIT_POD_TOKEN",
        "--trainer",
        "prime_rl",
    ]
    assert f"AIT_VERSION={version('ai-trains-ai')}" in script
    assert "uv pip install --python /opt/ait/ait-venv/bin/python git+https://example.org/ait@c0ffee" in script
    assert bootstrap_script().rstrip() in script
    assert TOKEN not in body["args"]  # the token travels in env only
    given = WorkerOptions(provider="runpod", trainer="prime_rl", image="me/ait-pod:0.1.0")
    assert spec_factory(given, FleetConfig())("A", "p1", TOKEN).image == "me/ait-pod:0.1.0"


def test_local_pods_run_the_agent_alone_unless_they_train_with_prime_rl(tmp_path: Path) -> None:
    assert local_command(WorkerOptions(provider="local", trainer="cpu"), tmp_path) == POD_AGENT_COMMAND
    assert not (tmp_path / "start.sh").exists()
    command = local_command(WorkerOptions(provider="local", trainer="prime_rl"), tmp_path)
    assert command == ("bash", str(tmp_path / "start.sh"))
    script = (tmp_path / "start.sh").read_text()
    assert f"export AIT_ROOT={tmp_path}/ait " in script  # the bootstrap goes under the pods' state dir
    assert script.rstrip().endswith(" ".join(shlex.quote(a) for a in POD_AGENT_COMMAND) + ' "$@"')
