"""Fuzz the pod agent's HTTP API with schemathesis, driven by the agent's own OpenAPI document (adapters/pod/api.py),
against a real ``ait pod-agent`` process on 127.0.0.1.

Every generated request, valid or deliberately malformed (schemathesis' positive and negative modes), must get
an answer the document allows: never a 5xx; a malformed one a 4xx with a one-line JSON reason (schemathesis'
``negative_data_rejection``: nothing wrong silently accepted); bodies matching their schemas. Hand-written
hostile requests (a non-ASCII bearer token, ``attempt=inf``/``nan``/``1e400``, ``cursor=inf``, a negative time
budget, a job with no family) are sent too. The agent's stderr must hold no traceback at the end.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import given
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from adapters.pod.api import openapi
from tests.fuzzing import fuzz_long, fuzz_settings, record

SURFACE = "pod agent HTTP API"
TOKEN = "fuzz-token-0123456789abcdef"
ROOT = Path(__file__).resolve().parents[2]

schema = schemathesis.openapi.from_dict(openapi())
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
    max_examples=150 if fuzz_long() else 25,
    deterministic=not fuzz_long(),  # a CI run is repeatable
    database="none",
)


@schemathesis.serializer("application/x-tar")
def _tar(ctx: object, value: object) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A real ``ait pod-agent`` (standin trainer) on loopback; yields its URL and its stderr file."""
    work = tmp_path_factory.mktemp("pod-agent")
    url_file, err_file = work / "url.json", work / "stderr.txt"
    env = {**os.environ, "AIT_POD_TOKEN": TOKEN}
    cmd = [sys.executable, "-m", "cli", "pod-agent", "--token-env", "AIT_POD_TOKEN"]
    cmd += ["--workdir", str(work / "w"), "--url-file", str(url_file), "--trainer-opt", "step_s=0.01"]
    with err_file.open("wb") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 30
        while not url_file.exists():
            assert proc.poll() is None, err_file.read_text()
            assert time.monotonic() < deadline, "the agent did not start"
            time.sleep(0.05)
        yield json.loads(url_file.read_text())["url"], err_file
    finally:
        proc.terminate()
        proc.wait(10)
    log = err_file.read_text(errors="replace")
    assert "Traceback" not in log, log[-4000:]


AUTH = {"Authorization": f"Bearer {TOKEN}"}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


@schema.parametrize()
def test_every_generated_request_gets_a_documented_answer(case: schemathesis.Case, agent: tuple[str, Path]) -> None:
    url, _ = agent
    response = case.call(base_url=url, headers=AUTH, timeout=30)
    code = response.status_code
    outcome = "http_500" if code >= 500 else "clean_error" if code >= 400 else "accepted"
    detail = "negative" if case.meta and case.meta.generation.mode == GenerationMode.NEGATIVE else "positive"
    if outcome == "accepted" and detail == "negative":  # what schemathesis' negative mode changed, if the doc allows it
        detail += f".{case.operation.method.upper()} {case.operation.path}"
    try:
        case.validate_response(response, checks=CHECKS)
    except Exception:
        record(SURFACE, "silent_accept" if outcome == "accepted" else outcome, detail)
        raise
    if response.status_code >= 400:
        body = response.json()
        assert body["error"] and "\n" not in body["detail"], body
    record(SURFACE, outcome, detail)


header_bytes = st.binary(max_size=60).filter(lambda b: not set(b) & {0, 10, 13} and b.strip() == b)


@fuzz_settings(ci=60, long=1000)
@given(
    value=st.one_of(
        header_bytes.map(lambda b: b"Bearer " + b),
        header_bytes,
        st.text(max_size=40).map(lambda t: ("Bearer " + t).encode("utf-8", "surrogatepass")),
    ).filter(lambda b: not set(b) & {0, 10, 13} and b.strip() == b),
    path=st.sampled_from(["/health", "/jobs/j1", "/jobs/j1/events?cursor=0", "/openapi.json"]),
)
def test_any_authorization_header_but_the_token_is_a_401(agent: tuple[str, Path], value: bytes, path: str) -> None:
    url, _ = agent
    status, body = raw_get(url, path, value)  # raw bytes: an HTTP client library refuses some of these
    if status == 400 and any((b < 0x20 and b != 0x09) or b == 0x7F for b in value):
        record(SURFACE, "clean_error", "authorization.not_http")  # aiohttp's parser refuses the header itself
        return
    if status >= 500:
        record(SURFACE, "http_500", "authorization")
    elif status == 401:
        record(SURFACE, "clean_error", "authorization")
    else:
        record(SURFACE, "silent_accept", "authorization")
    assert status == 401 and json.loads(body)["error"] == "unauthorized", (value, status, body[:200])


def raw_get(url: str, path: str, authorization: bytes) -> tuple[int, bytes]:
    """GET ``path`` with these exact Authorization bytes over a plain socket; (status, body)."""
    host, port = url.removeprefix("http://").split(":")
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n".encode()
        + b"Authorization: "
        + authorization
        + b"\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


HOSTILE = [
    # (method, path, headers, expected status)
    ("GET", "/health", {"Authorization": "Bearer t\u00f6ken-with-umlaut-12345".encode()}, 401),
    ("GET", "/health", {"Authorization": b"Bearer \xff\xfe\xfd-not-utf8-0123456789"}, 401),
    ("GET", "/health", {"Authorization": "Basic " + TOKEN}, 401),
    ("GET", "/health", {}, 401),
    ("POST", "/jobs/j1?family=calc_chain&attempt=inf", AUTH, 400),
    ("POST", "/jobs/j1?family=calc_chain&attempt=nan", AUTH, 400),
    ("POST", "/jobs/j1?family=calc_chain&attempt=1e400", AUTH, 400),
    ("POST", "/jobs/j1?family=calc_chain&attempt=1.5", AUTH, 400),
    ("POST", "/jobs/j1?family=calc_chain&attempt=99999999999999999999999", AUTH, 400),
    ("POST", "/jobs/j1?family=calc_chain&time_budget_s=-1", AUTH, 400),
    ("POST", "/jobs/j1?family=calc_chain&time_budget_s=inf", AUTH, 400),
    ("POST", "/jobs/j1", AUTH, 400),  # no family
    ("POST", "/jobs/j1?family=", AUTH, 400),
    ("POST", "/jobs/j1?family=../etc", AUTH, 400),
    ("POST", "/jobs/j1?family=calc_chain&sha256=xyz", AUTH, 400),
    ("GET", "/jobs/j1/events?cursor=inf", AUTH, 400),
    ("GET", "/jobs/j1/events?cursor=1e30", AUTH, 400),
    ("GET", "/jobs/j1/events?cursor=-1", AUTH, 400),
    ("GET", "/jobs/j1/events?wait=nan", AUTH, 400),
    ("GET", "/jobs/..%2F..%2Fetc/events", AUTH, 400),
    ("GET", "/nowhere", AUTH, 404),
    ("DELETE", "/jobs/j1", AUTH, 405),
]


@pytest.mark.parametrize(("method", "path", "headers", "status"), HOSTILE)
def test_hostile_requests_get_a_4xx_with_a_one_line_reason(
    agent: tuple[str, Path], method: str, path: str, headers: dict[str, str | bytes], status: int
) -> None:
    url, _ = agent
    with httpx.Client(base_url=url, timeout=10) as client:
        resp = client.request(method, path, headers=headers, content=b"not a tar" if method == "POST" else None)
    record(SURFACE, "http_500" if resp.status_code >= 500 else "clean_error", "hand_written")
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["error"] and body["detail"] and "\n" not in body["detail"]


def test_the_agent_serves_the_document_the_fuzzer_used(agent: tuple[str, Path]) -> None:
    url, _ = agent
    assert httpx.get(f"{url}/openapi.json", headers=AUTH, timeout=10).json() == json.loads(json.dumps(openapi()))


async def test_the_hostile_requests_find_a_500_where_parameters_are_parsed_naively(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks above can fail: with the parsing the agent had before (``int(float(raw))``), ``attempt=inf``
    reaches a handler that raises OverflowError, and aiohttp answers 500."""
    from aiohttp.test_utils import TestServer

    import adapters.pod.server as server
    from adapters.pod.core import AgentCore
    from tests.fakes.inner import FakeInnerTrainer

    def naive(op: str, path: Mapping[str, str], query: Mapping[str, str]) -> dict[str, Any]:
        return {
            "job_id": path.get("job_id", ""),
            "family": query.get("family", ""),
            "attempt": int(float(query.get("attempt", "1"))),
            "time_budget_s": float(query.get("time_budget_s", "0")),
            "sha256": query.get("sha256", ""),
        }

    monkeypatch.setattr(server, "parse_params", naive)
    core = AgentCore(FakeInnerTrainer(seconds=0.1, steps=1), tmp_path / "agent")
    app = server.make_app(core, TOKEN)
    test_server = TestServer(app)
    await test_server.start_server()
    try:
        async with httpx.AsyncClient(base_url=str(test_server.make_url("")).rstrip("/"), timeout=10) as client:
            resp = await client.post("/jobs/j1?family=calc_chain&attempt=inf", headers=AUTH, content=b"x")
            assert resp.status_code == 500
    finally:
        await core.close()
        await test_server.close()
