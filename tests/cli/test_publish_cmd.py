"""`ait publish`: the LoRA checkpoint and a model card from the run's log reach a Hub (a local stub of its HTTP
API, never the real Hub) in one commit; user errors are one line, exit 2."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cli import main
from tests.fakes.hub import hub_stub
from tests.fakes.tinker_export import FakeExportService

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "examples" / "configs" / "smoke.toml"
TOKEN = "hf_test_token_123"


@pytest.fixture(autouse=True)
def hf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # the client caches a registry there


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    assert main(["--runs-root", str(runs), "train", "--config", str(SMOKE), "--run-id", "s", "--max-steps", "1"]) == 0
    return runs


def test_publish_pushes_the_checkpoint_and_a_model_card(
    smoke_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ckpt = tmp_path / "lora"
    ckpt.mkdir()
    (ckpt / "adapter_config.json").write_text('{"r": 8}')
    (ckpt / "adapter_model.safetensors").write_bytes(b"\x00weights\x01")
    with hub_stub(TOKEN) as hub:
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        code = main(["--runs-root", str(smoke_run), "publish", "s", "--repo", "ada/trainer", "--checkpoint", str(ckpt)])
        assert code == 0, capsys.readouterr().err
        repo = hub.repos["ada/trainer"]
    assert repo["private"] is True
    files = repo["files"]
    assert files["adapter_model.safetensors"] == b"\x00weights\x01" and files["adapter_config.json"] == b'{"r": 8}'
    card = files["README.md"].decode()
    assert card.startswith("---\nlibrary_name: peft\nbase_model: Qwen/Qwen3.6-35B-A3B\n")
    assert "## Reward per outer step" in card and "| 0 | 2 | +0." in card  # the smoke run's one step, 2 episodes
    assert "seed 0" in card and '"group_size": 2' in card
    assert TOKEN not in card and TOKEN not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "env", "needle"),
    [
        (["publish", "nope", "--repo", "ada/x"], {"HF_TOKEN": TOKEN}, "no run"),
        (["publish", "s", "--repo", "ada/x"], {}, "HF_TOKEN is not set"),
        (["publish", "s", "--repo", "x"], {"HF_TOKEN": TOKEN}, "expected USER/NAME"),
        (["publish", "s", "--repo", "ada/x"], {"HF_TOKEN": TOKEN}, "offline backend"),
        (["publish", "s", "--repo", "ada/x", "--checkpoint", "/nonexistent"], {"HF_TOKEN": TOKEN}, "not a directory"),
    ],
)
def test_user_errors_are_one_line(
    smoke_run: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    env: dict[str, str],
    needle: str,
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert main(["--runs-root", str(smoke_run), *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_refused_token_is_reported(smoke_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    ckpt = tmp_path / "lora"
    ckpt.mkdir()
    (ckpt / "adapter_config.json").write_text("{}")
    with hub_stub("another-token") as hub:
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        assert main(["--runs-root", str(smoke_run), "publish", "s", "--repo", "ada/t", "--checkpoint", str(ckpt)]) == 1
        assert hub.routes  # the request reached the stub, which refused it
    assert "the Hub refused" in capsys.readouterr().err


@pytest.fixture
def signed_files() -> Iterator[tuple[str, dict[str, bytes]]]:
    """A local HTTP server (127.0.0.1) standing in for the storage behind Tinker's signed URLs."""
    files = {"adapter_config.json": b'{"r": 8}', "adapter_model.safetensors": b"\x00tinker-lora\x01"}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            name = self.path.split("?", 1)[0].removeprefix("/")
            body = files.get(name)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", files
    finally:
        server.shutdown()
        server.server_close()


def test_a_tinker_checkpoint_is_exported_downloaded_and_published(
    smoke_run: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    signed_files: tuple[str, dict[str, bytes]],
) -> None:
    url, files = signed_files
    state = "tinker://run-9/weights/step-1"
    fake = FakeExportService({n: f"{url}/{n}?sig=x" for n in files}, {state})
    monkeypatch.setattr("adapters.tinker.service.real_service_client", lambda base_url=None: fake)
    with hub_stub(TOKEN) as hub:
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("TINKER_API_KEY", "tml-test-key")
        code = main(["--runs-root", str(smoke_run), "publish", "s", "--repo", "ada/tk", "--checkpoint", state])
        assert code == 0, capsys.readouterr().err
        published = hub.repos["ada/tk"]["files"]
    assert {k: v for k, v in published.items() if k != "README.md"} == files
    assert state in published["README.md"].decode()
    assert [c[0] for c in fake.calls] == [
        "create_training_client_from_state",
        "save_weights_external",
        "get_external_weights_urls",
    ]


@pytest.mark.parametrize(
    ("checkpoint", "key", "needle", "code"),
    [
        ("tinker://run-9/weights/step-1", "", "TINKER_API_KEY is not set", 2),
        ("tinker://run-9/sampler_weights/step-1", "k", "sampler weights", 2),
        ("tinker://run-9/weights/gone", "k", "on Tinker failed", 1),
    ],
)
def test_tinker_checkpoint_errors_are_one_line(
    smoke_run: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    checkpoint: str,
    key: str,
    needle: str,
    code: int,
) -> None:
    fake = FakeExportService({}, {"tinker://run-9/weights/step-1"})
    monkeypatch.setattr("adapters.tinker.service.real_service_client", lambda base_url=None: fake)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("TINKER_API_KEY", key) if key else monkeypatch.delenv("TINKER_API_KEY", raising=False)
    assert main(["--runs-root", str(smoke_run), "publish", "s", "--repo", "ada/x", "--checkpoint", checkpoint]) == code
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
