"""Every ``ait`` subcommand meets everyday mistakes with one line naming the file, field or run, and exit 2.

One table of bad inputs, driven through :func:`cli.main` in process: no traceback, exactly the expected name in
the message. Each mistake is cheap to make (a typo in a run id, a config saved in another encoding, a missing
key), so each must cost the user one line to understand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli import main

REPO = Path(__file__).resolve().parents[2]
TASK = str(REPO / "examples" / "tasks" / "calc_chain_v1_fast.json")


def _files(root: Path) -> dict[str, Path]:
    latin1 = root / "latin1.toml"
    latin1.write_bytes('[outer]\nname = "caf\xe9"\n'.encode("latin-1"))  # saved by an editor in Latin-1
    task = root / "task.json"
    task.write_bytes(b'{"name": "caf\xe9"}')
    return {"latin1": latin1, "task": task}


# (argv, text the one line must contain). RUNS/FILES placeholders are filled per test.
CASES: list[tuple[list[str], str]] = [
    (["replay", "no-such-run"], "no-such-run"),
    (["tail", "no-such-run"], "no-such-run"),
    (["report", "no-such-run"], "no-such-run"),
    (["watch", "no-such-run", "--once"], "no-such-run"),
    (["resume", "no-such-run"], "no-such-run"),
    (["worker", "no-such-run", "--once"], "no-such-run"),
    (["train", "--config", "{latin1}"], "latin1.toml"),
    (["train", "--config", "{root}/missing.toml"], "missing.toml"),
    (["episode", "--task", "{task}"], "task.json"),
    (["episode", "--task", "{root}/missing.json"], "missing.json"),
    (["episode", "--task", TASK, "--agent", "openai:gpt-x", "--no-job"], "OPENAI_API_KEY"),
    (["episode", "--task", TASK, "--agent", "nonsense", "--no-job"], "--agent"),
    (["episode", "--task", TASK, "--trainer-opt", "eval_limit", "--no-job"], "--trainer-opt"),
    (["holdout", "--checkpoint", "tinker://nowhere"], "tinker://nowhere"),
    (["holdout", "--checkpoint", "base"], "belongs to no one run"),
    (["baselines", "--family", "no_such_family"], "no_such_family"),
    (["costs", "--by", "colour"], "colour"),
    (["pod-agent", "--token-env", "AIT_NO_SUCH_TOKEN_VAR"], "AIT_NO_SUCH_TOKEN_VAR"),
    (["publish", "no-such-run", "--repo", "me/agent"], "no-such-run"),
    (["doctor", "--config", "{latin1}"], "latin1.toml"),
]


@pytest.mark.parametrize(("argv", "named"), CASES, ids=[" ".join(c[0][:2]) + f" [{c[1]}]" for c in CASES])
def test_a_bad_input_is_one_line_naming_it_and_exit_2(
    argv: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("AIT_NO_SUCH_TOKEN_VAR", raising=False)
    files = _files(tmp_path)
    filled = [a.format(root=tmp_path, **files) for a in argv]
    try:
        code = main(["--runs-root", str(tmp_path / "runs"), *filled])
    except SystemExit as exc:  # argparse's own usage errors exit 2 with their message
        code = exc.code  # type: ignore[assignment]
    captured = capsys.readouterr()
    text = captured.err + captured.out
    assert code == 2, text
    assert "Traceback" not in text
    assert named in text, text
    # One line (argparse adds its usage line above its own one-line error).
    message = [line for line in text.splitlines() if line.strip() and not line.startswith("usage:")]
    assert len([line for line in message if not line.startswith(" ")]) == 1, text


def test_a_keyless_local_endpoint_is_allowed_and_sends_no_key() -> None:
    from adapters.agents.openai import OpenAIConfig, OpenAIPolicy, is_local
    from handlers.ports.policy import PolicyError

    assert is_local("http://127.0.0.1:8000/v1") and is_local("http://localhost/v1") and is_local("http://[::1]:1/v1")
    assert not is_local("https://api.openai.com/v1")
    policy = OpenAIPolicy(OpenAIConfig(model="m", base_url="http://127.0.0.1:8000/v1"), environ={})
    assert "authorization" not in policy._client.headers
    with pytest.raises(PolicyError, match="OPENAI_API_KEY"):
        OpenAIPolicy(OpenAIConfig(model="m"), environ={})


def test_an_unreachable_agent_endpoint_ends_the_episode_non_zero_with_the_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from typing import Any

    from cli import episode_wiring
    from engine.replay import replay
    from handlers.ports.policy import PolicyError
    from handlers.registry import default_projections

    class Unreachable:
        name = "openai:m"
        model = "scripted"  # priced at nothing: the failure comes before any spend

        async def next_turn(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
            raise PolicyError("http://127.0.0.1:9/v1 unreachable after 4 attempts: ConnectError")

    monkeypatch.setattr(episode_wiring, "make_policy", lambda *a, **k: (Unreachable(), "a dead endpoint"))
    argv = ["--runs-root", str(tmp_path), "episode", "--task", TASK, "--run-id", "r", "--no-job"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "episode failed: policy failed: http://127.0.0.1:9/v1 unreachable after 4 attempts: ConnectError" in out
    assert replay(tmp_path / "r" / "events.jsonl", default_projections()).states["run"].status == "finished:failed"


def test_the_parsers_sandbox_flag_is_the_sandboxs_own() -> None:
    from adapters.sandbox import UNSAFE_FLAG, WeakIsolation
    from cli import sandbox_opt

    assert sandbox_opt.FLAG == UNSAFE_FLAG and sandbox_opt.WeakIsolation is WeakIsolation
