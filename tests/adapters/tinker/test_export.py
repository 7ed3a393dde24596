"""``adapters.tinker.export``: a tinker:// state checkpoint exported in Hugging Face format on Tinker and its files
downloaded from the signed URLs, against an SDK-shaped fake (tests/fakes/tinker_export.py) and an
``httpx.MockTransport``; no real ``ServiceClient``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

if TYPE_CHECKING:
    from tests.fakes.tinker_export import FakeExportService

STATE = "tinker://run-7/weights/step-3"
SIGNED = "https://storage.example/bucket/{name}?X-Signature=s3cr3t"
FILES = {"adapter_config.json": b'{"r": 8}', "adapter_model.safetensors": b"\x00w\x01" * 1000}


def _http(files: dict[str, bytes], status: int = 200) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        name = request.url.path.removeprefix("/bucket/")
        if request.url.params.get("X-Signature") != "s3cr3t" or name not in files:
            return httpx.Response(403)
        return httpx.Response(status, content=files[name])

    return httpx.Client(transport=httpx.MockTransport(handler))


def _service(names: list[str], states: set[str] | None = None) -> FakeExportService:
    from tests.fakes.tinker_export import FakeExportService

    return FakeExportService({n: SIGNED.format(name=n) for n in names}, {STATE} if states is None else states)


def test_the_state_checkpoint_is_exported_and_every_file_downloaded(tmp_path: Path) -> None:
    from adapters.tinker.export import download_checkpoint

    files = {**FILES, "sub/extra.json": b"{}"}
    service = _service(sorted(files))
    written = download_checkpoint(STATE, tmp_path, service=service, http=_http(files), name="pub")
    assert [p.relative_to(tmp_path).as_posix() for p in written] == sorted(files)
    assert {p.relative_to(tmp_path).as_posix(): p.read_bytes() for p in written} == files
    assert [c[0] for c in service.calls] == [
        "create_training_client_from_state",
        "save_weights_external",
        "get_external_weights_urls",
    ]
    assert service.calls[1] == ("save_weights_external", "pub", 3600)  # the export expires after an hour
    assert service.calls[2][1] == "tinker://run-7/external_weights/pub"


def test_sampler_weights_are_refused_before_any_call() -> None:
    from adapters.tinker.export import ExportError, state_path_for_export

    with pytest.raises(ExportError, match="sampler weights"):
        state_path_for_export("tinker://run-7/sampler_weights/step-3")
    with pytest.raises(ExportError, match="not a tinker://"):
        state_path_for_export("/local/dir")
    assert state_path_for_export(STATE) == STATE


def test_a_missing_checkpoint_is_one_line_naming_it(tmp_path: Path) -> None:
    from adapters.tinker.export import ExportError, download_checkpoint

    with pytest.raises(ExportError, match=r"exporting tinker://run-7/weights/step-3 on Tinker failed: .*not found"):
        download_checkpoint(STATE, tmp_path, service=_service(list(FILES), states=set()), http=_http(FILES))


@pytest.mark.parametrize("name", ["../escape.json", "/etc/passwd", ""])
def test_a_file_outside_the_folder_is_refused(tmp_path: Path, name: str) -> None:
    from adapters.tinker.export import ExportError, download_checkpoint

    with pytest.raises(ExportError, match="outside its folder"):
        download_checkpoint(STATE, tmp_path / "d", service=_service([name]), http=_http({name: b"x"}))
    assert not (tmp_path / "escape.json").exists()


def test_a_refused_download_names_the_file_never_the_signed_url(tmp_path: Path) -> None:
    from adapters.tinker.export import ExportError, download_checkpoint

    with pytest.raises(ExportError) as err:
        download_checkpoint(STATE, tmp_path, service=_service(list(FILES)), http=_http(FILES, status=500))
    assert "adapter_config.json" in str(err.value) and "s3cr3t" not in str(err.value)


def test_an_export_listing_no_file_is_an_error(tmp_path: Path) -> None:
    from adapters.tinker.export import ExportError, download_checkpoint

    with pytest.raises(ExportError, match="listed no file"):
        download_checkpoint(STATE, tmp_path, service=_service([]), http=_http({}))
