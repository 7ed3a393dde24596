"""Structured logs: JSON lines in the run directory, human-readable on the console, secrets masked in both."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from engine.logs import configure_logging, reset_logging


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    yield
    reset_logging()


def test_json_lines_in_the_run_dir_and_human_lines_on_the_console(tmp_path: Path) -> None:
    console = io.StringIO()
    path = configure_logging(run_dir=tmp_path / "runs" / "r1", console=console, run_id="r1")
    assert path == tmp_path / "runs" / "r1" / "logs.jsonl"
    log = structlog.get_logger("handlers.fleet.projection")
    log.info("pod.ready", pod_id="p0", usd_per_hour=0.49)
    log.debug("too.detailed")  # below the level
    logging.getLogger("httpx").warning("HTTP %s", "503")  # a library logging through the stdlib
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["event"] for line in lines] == ["pod.ready", "HTTP 503"]
    first = lines[0]
    assert first["level"] == "info" and first["logger"] == "handlers.fleet.projection" and first["pod_id"] == "p0"
    assert first["run_id"] == "r1" and first["timestamp"].endswith("Z")
    text = console.getvalue()
    assert "pod.ready" in text and "pod_id=p0" in text and not text.lstrip().startswith("{")


def test_secrets_never_reach_the_file_or_the_console(tmp_path: Path) -> None:
    console = io.StringIO()
    path = configure_logging(run_dir=tmp_path, console=console)
    secret = "sk-" + "A1b2C3d4E5f6G7h8I9j0"
    structlog.get_logger("adapters.agents").warning(
        "agent.call",
        api_key=secret,
        headers={"Authorization": f"Bearer {secret}", "accept": "json"},
        detail=f"request failed with key {secret}",
        input_tokens=1234,
    )
    assert path is not None
    for text in (path.read_text(), console.getvalue()):
        assert secret not in text and "[redacted]" in text
        assert "1234" in text  # token counts are not secrets
    record = json.loads(path.read_text())
    assert record["api_key"] == "[redacted]" and record["headers"]["Authorization"] == "[redacted]"
    assert record["headers"]["accept"] == "json"


def test_json_console_and_bad_level(tmp_path: Path) -> None:
    console = io.StringIO()
    assert configure_logging(console=console, console_format="json") is None
    structlog.get_logger("x").info("hello", n=1)
    assert json.loads(console.getvalue())["n"] == 1
    with pytest.raises(ValueError, match="log level 'loud'"):
        configure_logging(level="loud")


def test_configuring_twice_replaces_the_handlers(tmp_path: Path) -> None:
    configure_logging(run_dir=tmp_path / "a", console_format="none")
    path = configure_logging(run_dir=tmp_path / "b", console_format="none")
    structlog.get_logger("x").info("once")
    assert path is not None and len(path.read_text().splitlines()) == 1
    assert not (tmp_path / "a" / "logs.jsonl").read_text()
