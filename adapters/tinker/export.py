"""Download a ``tinker://`` checkpoint as Hugging Face-format LoRA files (for ``ait publish``).

Tinker keeps checkpoints on its servers. The SDK (0.38) exports one in an external (Hugging Face / PEFT)
format from a training client (``save_weights_external``), then hands out one signed URL per exported file
(``RestClient.get_external_weights_urls``). So: a training client is loaded from the state checkpoint
(``create_training_client_from_state``: weights only, no optimizer), asked to export, and each file is fetched
over plain HTTPS into the destination folder. File names come from the server: one that is absolute or climbs
out of the folder is refused.

The SDK objects sit behind the small Protocols below; ``service`` is a ``tinker.ServiceClient`` in real use
(``adapters.tinker.service.real_service_client``) and an SDK-shaped fake in tests. Synchronous: ``ait publish``
is a one-shot command, and the SDK's futures block on ``.result()``.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import httpx
from tinker import types

__all__ = ["ExportError", "download_checkpoint", "state_path_for_export"]


class _Future(Protocol):
    def result(self, timeout: float | None = None) -> Any: ...


class _ExportingTrainingClient(Protocol):
    def save_weights_external(self, name: str, ttl_seconds: int | None = None) -> _Future: ...


class _RestClient(Protocol):
    def get_external_weights_urls(self, tinker_path: str) -> _Future: ...


class ExportServiceLike(Protocol):
    """The slice of ``tinker.ServiceClient`` an export needs."""

    def create_training_client_from_state(self, path: str) -> _Future: ...

    def create_rest_client(self) -> _RestClient: ...


class ExportError(Exception):
    """The checkpoint could not be exported or downloaded; the message says which step and why."""


def state_path_for_export(path: str) -> str:
    """``path`` if a training client can load it (a state checkpoint), else a one-line reason."""
    if not path.startswith("tinker://"):
        raise ExportError(f"{path}: not a tinker:// checkpoint path")
    if "/sampler_weights/" in path:
        raise ExportError(
            f"{path} holds sampler weights, which no training client loads: pass the step's state checkpoint "
            "(tinker://.../weights/...; `lora.step_applied` state_path in the run's log)"
        )
    return path


def _safe(dest: Path, name: str) -> Path:
    rel = PurePosixPath(name)
    if not name or rel.is_absolute() or ".." in rel.parts:
        raise ExportError(f"the export lists a file outside its folder: {name!r}")
    return dest.joinpath(*rel.parts)


def download_checkpoint(
    state_path: str,
    dest: Path,
    *,
    service: ExportServiceLike,
    http: httpx.Client,
    name: str = "ait-publish",
    ttl_seconds: int = 3600,
    timeout_s: float = 1800.0,
) -> list[Path]:
    """Export ``state_path`` and download its files into ``dest``; returns the files written, sorted."""
    path = state_path_for_export(state_path)
    try:
        client: _ExportingTrainingClient = service.create_training_client_from_state(path).result(timeout_s)
        saved: types.SaveWeightsExternalResponse = client.save_weights_external(name, ttl_seconds).result(timeout_s)
        urls: types.ExternalWeightsUrlsResponse = (
            service.create_rest_client().get_external_weights_urls(saved.path).result(timeout_s)
        )
    except ExportError:
        raise
    except Exception as exc:  # the SDK's APIError family and timeouts: one line naming the step
        raise ExportError(f"exporting {path} on Tinker failed: {type(exc).__name__}: {exc}") from exc
    if not urls.urls:
        raise ExportError(f"Tinker exported {path} as {saved.path} but listed no file to download")
    targets = {_safe(dest, rel): url for rel, url in urls.urls.items()}
    written: list[Path] = []
    for target, url in sorted(targets.items()):
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            with http.stream("GET", url) as resp:
                resp.raise_for_status()
                with target.open("wb") as f:
                    for chunk in resp.iter_bytes():
                        f.write(chunk)
        except httpx.HTTPError as exc:
            # the signed URL carries a credential in its query: name the file, never the URL
            raise ExportError(f"downloading {target.name} of {saved.path} failed: {type(exc).__name__}") from exc
        written.append(target)
    return written
