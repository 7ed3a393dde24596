"""`ait train` drives its fleet itself ([fleet] provider = local | runpod | sim, one process, one log), never
starts a stand-in by accident, records what it ran on, and meters its learner steps as ``training`` costs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cli import main
from cli.train_config import load_run_config
from engine.log import read_log
from engine.logs import reset_logging
from events import CostSettled, PodRequested, RunWiring
from handlers.training import ConfigError
from views.report.data import collect
from views.report.markdown import markdown

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "examples" / "configs" / "smoke.toml"
SEED = ROOT / "examples" / "configs" / "seed.toml"
KEYS = ("TINKER_API_KEY", "RUNPOD_API_KEY")


def _smoke_with(tmp_path: Path, name: str, old: str, new: str) -> Path:
    text = SMOKE.read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return path


def test_the_seed_config_with_no_keys_fails_fast_and_starts_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    cfg = load_run_config(SEED)
    assert cfg.inner.trainer == "prime_rl" and not cfg.standin  # the real GPU trainer, named
    runs = tmp_path / "runs"
    assert main(["--runs-root", str(runs), "train", "--config", str(SEED), "--run-id", "seed"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing key(s) TINKER_API_KEY" in err and str(SEED) in err
    assert not runs.exists()  # no run directory, no log, no pod: nothing started


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # the stand-in with a paid learner: refused even with the opt-in
        (
            'kind = "offline"\n\n[agent]\nkind = "scripted"',
            'kind = "tinker"\n\n[agent]\nkind = "tinker"',
            "[backend] kind = 'tinker' would pay to learn from them",
        ),
        # the stand-in on a paid provider
        ('provider = "local"', 'provider = "runpod"\nimage = "img"', "would pay for GPUs"),
        # the stand-in without the explicit opt-in
        ("allow_standin = true", "allow_standin = false", "set [inner] allow_standin = true"),
    ],
)
def test_the_stand_in_needs_an_opt_in_and_never_goes_with_money(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, needle: str
) -> None:
    path = _smoke_with(tmp_path, "standin.toml", old, new)
    with pytest.raises(ConfigError) as info:
        load_run_config(path)
    assert needle in str(info.value) and str(path) in str(info.value) and "\n" not in str(info.value)
    assert main(["--runs-root", str(tmp_path / "runs"), "train", "--config", str(path)]) == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_sim_on_a_paid_learner_is_refused_too(tmp_path: Path) -> None:
    path = _smoke_with(tmp_path, "sim.toml", 'trainer = "standin"', 'trainer = "cpu"')
    text = path.read_text().replace('provider = "local"', 'provider = "sim"')
    text = text.replace('kind = "offline"\n\n[agent]\nkind = "scripted"', 'kind = "tinker"\n\n[agent]\nkind = "tinker"')
    path.write_text(text)
    with pytest.raises(ConfigError, match="provider = 'sim'"):
        load_run_config(path)


@pytest.mark.slow
def test_train_on_the_sim_provider_runs_end_to_end_in_one_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _smoke_with(tmp_path, "sim.toml", 'provider = "local"', 'provider = "sim"')
    runs = tmp_path / "runs"
    try:
        assert main(["--runs-root", str(runs), "train", "--config", str(config), "--run-id", "sim"]) == 0, (
            capsys.readouterr().err[-3000:]
        )
    finally:
        reset_logging()
    capsys.readouterr()
    bodies = [r.event for r in read_log(runs / "sim" / "events.jsonl").records]
    [wiring] = [b for b in bodies if isinstance(b, RunWiring)]
    assert (wiring.provider, wiring.inner_trainer, wiring.learner_backend, wiring.standin) == (
        "sim",
        "standin",
        "offline",
        True,
    )
    requested = [b for b in bodies if isinstance(b, PodRequested)]
    assert requested and all(b.gpu_type != "local" for b in requested)  # the sim ladder, in this log
    assert not (runs / ".local-pods").exists()  # no local pod was started
    training = [b for b in bodies if isinstance(b, CostSettled) and b.kind == "training"]
    assert len(training) == 2 and all(b.train_tokens > 0 and b.item == "offline" for b in training)

    # The report says at the top what the run ran on.
    report = markdown(collect(runs / "sim"), [])
    top = report.split("## ", 1)[0]
    assert "| inner trainer | standin (STAND-IN: made-up scores) |" in top
    assert "| learner backend | offline (learns nothing) |" in top and "| provider | sim |" in top
    assert "| capped episodes | 0 " in top

    # The ledger has a training line; a replay re-prices it and finds nothing that differs.
    assert main(["--runs-root", str(runs), "costs", "--by", "kind"]) == 0
    table = capsys.readouterr().out
    line = next(ln for ln in table.splitlines() if ln.strip("│ ").startswith("training"))
    assert "train tok" in table and str(sum(b.train_tokens for b in training)) in line.replace(",", "")
    assert main(["--runs-root", str(runs), "replay", "sim", "--verify"]) == 0
    assert "0 differ" in capsys.readouterr().out


def test_runpod_keys_are_checked_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    path = _smoke_with(tmp_path, "rp.toml", 'provider = "local"', 'provider = "runpod"\nimage = "img"')
    path.write_text(path.read_text().replace('trainer = "standin"', 'trainer = "cpu"'))
    assert main(["--runs-root", str(tmp_path / "runs"), "train", "--config", str(path)]) == 2
    assert "missing key(s) RUNPOD_API_KEY (for [fleet] provider = 'runpod')" in capsys.readouterr().err
    assert os.environ.get("RUNPOD_API_KEY") is None and not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_train_drives_runpod_itself_over_http(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``[fleet] provider = "runpod"``: the run's own dispatcher creates pods through the real Runpod adapter
    (served by the provider tests' HTTP fake), with the image and the pod-agent start command; a refusal of the
    credentials ends the run with one line, recorded in its (verifiable) log, and the key reaches no file."""
    import base64
    import json
    import shlex

    import httpx

    from adapters.runpod import RunpodProvider
    from events import PodProvisionFailed, RunFinished
    from tests.adapters.runpod_contract import FakeRunpod, problem

    key = "rpa_" + "k" * 24
    monkeypatch.setenv("RUNPOD_API_KEY", key)
    fake = FakeRunpod()

    def serve(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":  # creating a pod: this account may not
            fake.requests.append(request)
            return httpx.Response(403, json=problem(403, "insufficient permissions", "Forbidden"))
        return fake.handle(request)

    real = RunpodProvider.from_env.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(
        RunpodProvider,
        "from_env",
        classmethod(lambda cls, environ=None, **kw: real(cls, environ, transport=httpx.MockTransport(serve), **kw)),
    )
    config = _smoke_with(tmp_path, "rp.toml", 'provider = "local"', 'provider = "runpod"\nimage = "ghcr.io/x/ait:1"')
    config.write_text(config.read_text().replace('trainer = "standin"', 'trainer = "prime_rl"'))
    runs = tmp_path / "runs"
    try:
        code = main(["--runs-root", str(runs), "train", "--config", str(config), "--run-id", "rp"])
    finally:
        reset_logging()
    err = capsys.readouterr().err
    assert code == 1 and "credentials" in err, err[-3000:]
    assert fake.count("GET") >= 1  # the run's pods listed (reconcile) through the adapter
    [create, *_] = [r for r in fake.requests if r.method == "POST"]
    body = json.loads(create.content)
    assert body["image"] == "ghcr.io/x/ait:1" and body["args"].endswith("--trainer prime_rl'")
    script = base64.b64decode(shlex.split(body["args"])[2].split()[1]).decode()  # the start script (pod start)
    assert 'exec /opt/ait/ait-venv/bin/ait pod-agent "$@"' in script
    assert create.headers["authorization"] == f"Bearer {key}"
    bodies = [r.event for r in read_log(runs / "rp" / "events.jsonl").records]
    assert next(b for b in bodies if isinstance(b, RunWiring)).provider == "runpod"
    assert any(isinstance(b, PodProvisionFailed) for b in bodies)
    assert isinstance(bodies[-1], RunFinished) and bodies[-1].status == "failed"
    for f in (runs / "rp").rglob("*"):
        if f.is_file():
            assert key.encode() not in f.read_bytes(), f
    assert main(["--runs-root", str(runs), "replay", "rp", "--verify"]) == 0


def test_a_worker_never_runs_the_stand_in_on_runpod(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "events.jsonl").write_bytes(b"")
    argv = ["--runs-root", str(tmp_path), "worker", "r", "--provider", "runpod", "--image", "img", "--once"]
    assert main(argv) == 2  # the worker's default trainer is the stand-in: it must be named to run on Runpod
    assert "would pay for GPUs to make up scores" in capsys.readouterr().err
