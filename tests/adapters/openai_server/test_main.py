"""The server as a subprocess: prints its URL first, serves, and exits cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import httpx
import msgspec
import pytest

from adapters.openai_server import NONSENSE
from families import get_family, hidden_tasks

ROOT = Path(__file__).resolve().parents[3]


async def start(*args: str) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "adapters.openai_server",
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), timeout=60)
    return proc, line.decode().strip()


async def stop(proc: asyncio.subprocess.Process) -> int:
    proc.send_signal(signal.SIGTERM)
    return await asyncio.wait_for(proc.wait(), timeout=30)


async def ask(url: str, prompt: str) -> dict[str, object]:
    async with httpx.AsyncClient() as client:
        body = {"model": "m", "messages": [{"role": "user", "content": prompt}]}
        resp = await client.post(f"{url}/chat/completions", json=body)
    resp.raise_for_status()
    message: dict[str, object] = resp.json()["choices"][0]["message"]
    return message


async def test_nonsense_subprocess_prints_url_and_serves() -> None:
    proc, url = await start("--policy", "nonsense", "--port", "0")
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        assert (await ask(url, "anything"))["content"] == NONSENSE
    finally:
        assert await stop(proc) == 0


async def test_reference_subprocess_with_a_tasks_file(tmp_path: Path) -> None:
    family = get_family("calc_chain")
    task = hidden_tasks(family)[7]
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_bytes(msgspec.json.encode(task) + b"\n")
    proc, url = await start("--family", "calc_chain", "--policy", "reference", "--tasks-file", str(tasks_file))
    try:
        message = await ask(url, task.prompt)
        first = family.solve(task)[0]
        (call,) = message["tool_calls"]  # type: ignore[misc]
        assert call["function"]["name"] == first.tool
        assert msgspec.json.decode(call["function"]["arguments"]) == first.arguments
    finally:
        assert await stop(proc) == 0


@pytest.mark.parametrize(("args", "needle"), [(["--policy", "reference"], b"needs --family")])
async def test_bad_arguments_exit_with_a_message(args: list[str], needle: bytes) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "adapters.openai_server", *args, cwd=ROOT, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode != 0 and needle in err
