"""An SDK-shaped fake of the Tinker calls a checkpoint export makes (0.38): ``ServiceClient``'s
``create_training_client_from_state`` and ``create_rest_client``, the training client's
``save_weights_external`` and ``RestClient.get_external_weights_urls``; futures with ``.result()`` and real
``tinker.types`` responses. The signed URLs point wherever the test serves the files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.fakes.tinker import FakeFuture

__all__ = ["FakeExportService"]


class _TrainingClient:
    def __init__(self, service: FakeExportService, state_path: str) -> None:
        self._service = service
        self.state_path = state_path

    def save_weights_external(self, name: str, ttl_seconds: int | None = None) -> FakeFuture[Any]:
        from tinker import types

        self._service.calls.append(("save_weights_external", name, ttl_seconds))
        run = self.state_path.removeprefix("tinker://").split("/", 1)[0]
        path = f"tinker://{run}/external_weights/{name}"
        self._service.exported.add(path)
        return FakeFuture(types.SaveWeightsExternalResponse(path=path, type="save_weights_external"))


class _RestClient:
    def __init__(self, service: FakeExportService) -> None:
        self._service = service

    def get_external_weights_urls(self, tinker_path: str) -> FakeFuture[Any]:
        from tinker import types

        self._service.calls.append(("get_external_weights_urls", tinker_path, None))
        if tinker_path not in self._service.exported:
            return FakeFuture(error=RuntimeError(f"404: no external weights at {tinker_path}"))
        expires = datetime.now(UTC) + timedelta(hours=1)
        return FakeFuture(types.ExternalWeightsUrlsResponse(urls=dict(self._service.urls), expires=expires))


class FakeExportService:
    """``urls``: file name -> signed URL the export lists. ``states``: the state paths that exist."""

    def __init__(self, urls: dict[str, str], states: set[str]) -> None:
        self.urls = urls
        self.states = states
        self.exported: set[str] = set()
        self.calls: list[tuple[str, str, int | None]] = []

    def create_training_client_from_state(self, path: str) -> FakeFuture[Any]:
        self.calls.append(("create_training_client_from_state", path, None))
        if path not in self.states:
            return FakeFuture(error=RuntimeError(f"checkpoint {path} not found"))
        return FakeFuture(_TrainingClient(self, path))

    def create_rest_client(self) -> _RestClient:
        return _RestClient(self)
