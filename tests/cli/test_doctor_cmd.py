"""`ait doctor`: with no keys it says what is missing and what that blocks; with keys, every service is checked
against fakes shaped like its documented API (Runpod's OpenAPI examples, OpenAI's `/models`, W&B's GraphQL
`viewer`, the Hub's `whoami-v2`, Tinker's capability list), and a refused key or an unserved model fails."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import httpx
import pytest

from cli.doctor_cmd import DoctorPorts, run
from tests.adapters.runpod_contract import FakeRunpod

ROOT = Path(__file__).resolve().parents[2]
KEYS = {
    "TINKER_API_KEY": "tk-secret-1",
    "RUNPOD_API_KEY": "rp-secret-2",
    "OPENAI_API_KEY": "sk-secret-3",
    "WANDB_API_KEY": "wb-secret-4",
    "HF_TOKEN": "hf_secret5",
}


class FakeServices:
    """One MockTransport standing in for every HTTP service, routed by host; it records what it was asked."""

    def __init__(self) -> None:
        self.runpod = FakeRunpod()
        self.refuse: set[str] = set()
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        host = request.url.host
        if host in self.refuse:
            return httpx.Response(401, json={"error": "invalid key"})
        if host == "api.runpod.io":
            assert request.headers["authorization"] == "Bearer " + KEYS["RUNPOD_API_KEY"]
            return self.runpod.handle(request)
        if host == "api.openai.com":
            assert request.url.path == "/v1/models"
            return httpx.Response(200, json={"object": "list", "data": [{"id": "gpt-4.1-mini", "object": "model"}]})
        if host == "api.wandb.ai":
            assert request.url.path == "/graphql" and "viewer" in json.loads(request.content)["query"]
            return httpx.Response(200, json={"data": {"viewer": {"username": "ada", "entity": "ada"}}})
        if host == "huggingface.co":
            assert request.url.path == "/api/whoami-v2"
            return httpx.Response(200, json={"name": "ada", "auth": {"accessToken": {"role": "write"}}})
        return httpx.Response(404)


def tinker(models: list[tuple[str, bool, bool]]):
    def factory(base_url: str):
        async def supported() -> list[tuple[str, bool, bool]]:
            return models

        return supported

    return factory


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # one table row per line, so phrases are not wrapped apart


def doctor(ports: DoctorPorts, config: str | None = None, agent_model: str = "") -> int:
    return run(argparse.Namespace(config=config, agent_model=agent_model), ports)


def test_without_keys_it_lists_what_is_missing_and_what_it_blocks(capsys: pytest.CaptureFixture[str]) -> None:
    assert doctor(DoctorPorts(environ={})) == 1
    out = capsys.readouterr().out
    for env in KEYS:
        assert f"{env} is not set" in out
    assert "[backend] kind = 'tinker'" in out and "ait publish" in out
    assert "not ready: runpod, tinker" in out


def test_a_config_needs_only_what_it_uses(capsys: pytest.CaptureFixture[str]) -> None:
    """The offline smoke config needs no service: ready with no key at all."""
    assert doctor(DoctorPorts(environ={}), config=str(ROOT / "examples" / "configs" / "smoke.toml")) == 0
    assert "ready" in capsys.readouterr().out


def test_with_every_key_each_service_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeServices()
    ports = DoctorPorts(
        environ=KEYS, transport=httpx.MockTransport(fake), tinker_models=tinker([("Qwen/Qwen3-30B-A3B", True, True)])
    )
    assert doctor(ports, agent_model="gpt-4.1-mini") == 0
    out = capsys.readouterr().out
    assert "ready: every required service answered" in out
    assert "spent $42.34 in the last day" in out  # the billing example of Runpod's spec
    assert "stock HIGH, $0.44/h" in out  # the catalog example (RTX 4090) of Runpod's spec
    assert "not in the catalog" in out  # the seed ladder's other rungs are not in that example
    assert "user ada" in out and "role write" in out
    hosts = {r.url.host for r in fake.requests}
    assert hosts == {"api.runpod.io", "api.openai.com", "api.wandb.ai", "huggingface.co"}
    assert not any(v in out for v in KEYS.values())  # no key is ever printed


def test_refused_keys_and_unavailable_models_fail(capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeServices()
    fake.refuse = {"api.runpod.io", "api.openai.com"}
    ports = DoctorPorts(
        environ=KEYS, transport=httpx.MockTransport(fake), tinker_models=tinker([("Qwen/Qwen3-8B", True, True)])
    )
    assert doctor(ports, agent_model="gpt-4.1-mini") == 1
    out = capsys.readouterr().out
    assert "not trainable" in out and "HTTP 401" in out
    assert "not ready: agent endpoint, runpod, tinker" in out
