"""TinkerService at the SDK boundary: an SDK-shaped fake ``ServiceClient`` (sync methods returning futures with
``.result()``, the capability response as the SDK's own type) stands in for the real one, which no test builds."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tinker import types

    from adapters.tinker.service import TinkerService


class Future:
    def __init__(self, value: Any = None, error: BaseException | None = None, delay_s: float = 0.0) -> None:
        self.value, self.error, self.delay_s = value, error, delay_s

    def result(self, timeout: float | None = None) -> Any:
        time.sleep(self.delay_s)  # the SDK blocks its caller's thread until the server answers
        if self.error is not None:
            raise self.error
        return self.value


class FakeServiceClient:
    """The real client's method names and call shapes; it records each call and the thread it ran on."""

    def __init__(self, base_url: str | None, delay_s: float = 0.0, error: BaseException | None = None) -> None:
        self.base_url, self.delay_s, self.error = base_url, delay_s, error
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.threads: set[int] = set()

    def _future(self, name: str, value: Any, *args: Any, **kwargs: Any) -> Future:
        self.calls.append((name, args, kwargs))
        self.threads.add(threading.get_ident())
        return Future(value, self.error, self.delay_s)

    def create_lora_training_client(self, base_model: str, rank: int = 32) -> Future:
        return self._future("create_lora_training_client", f"training:{base_model}:{rank}", base_model, rank=rank)

    def create_training_client_from_state_with_optimizer(self, path: str) -> Future:
        return self._future("from_state_with_optimizer", f"training:{path}", path)

    def create_sampling_client(self, model_path: str | None = None, base_model: str | None = None) -> Future:
        value = f"sampling:{model_path or base_model}"
        return self._future("create_sampling_client", value, model_path=model_path, base_model=base_model)

    def get_server_capabilities(self) -> types.GetServerCapabilitiesResponse:
        from tinker import types

        self.calls.append(("get_server_capabilities", (), {}))
        if self.error is not None:
            raise self.error
        models = [
            types.SupportedModel(model_name="Qwen/Qwen3-30B-A3B", trainable=True, sampleable=True),
            types.SupportedModel(model_name="meta-llama/Llama-3.1-8B", trainable=False, sampleable=True),
        ]
        return types.GetServerCapabilitiesResponse(supported_models=models)


def service(**kw: Any) -> tuple[TinkerService, list[FakeServiceClient]]:
    from adapters.tinker.service import TinkerService

    built: list[FakeServiceClient] = []

    def factory(base_url: str | None) -> FakeServiceClient:
        built.append(FakeServiceClient(base_url, **kw))
        return built[-1]

    return TinkerService(base_url="https://tinker.example", client_factory=factory), built


async def test_the_client_is_built_once_lazily_and_each_call_reaches_the_sdk_off_the_event_loop() -> None:
    svc, built = service()
    assert built == []  # constructing the service builds no client (the real one blocks for minutes offline)
    assert await svc.create_lora_training_client("Qwen/Qwen3-30B-A3B", 8) == "training:Qwen/Qwen3-30B-A3B:8"
    assert await svc.create_training_client_from_state_with_optimizer("tinker://run/state/3") == (
        "training:tinker://run/state/3"
    )
    assert await svc.create_sampling_client("tinker://run/sampler/3", None) == "sampling:tinker://run/sampler/3"
    assert await svc.supported_models() == [
        ("Qwen/Qwen3-30B-A3B", True, True),
        ("meta-llama/Llama-3.1-8B", False, True),
    ]
    assert len(built) == 1 and built[0].base_url == "https://tinker.example"
    names = [c[0] for c in built[0].calls]
    assert names == [
        "create_lora_training_client",
        "from_state_with_optimizer",
        "create_sampling_client",
        "get_server_capabilities",
    ]
    assert built[0].calls[0][2] == {"rank": 8}
    assert built[0].calls[2][2] == {"model_path": "tinker://run/sampler/3", "base_model": None}
    assert threading.get_ident() not in built[0].threads  # the blocking SDK calls ran in worker threads


async def test_a_client_that_never_answers_times_out_instead_of_stalling_the_loop() -> None:
    from adapters.tinker.service import TinkerService

    built: list[FakeServiceClient] = []

    def factory(base_url: str | None) -> FakeServiceClient:
        built.append(FakeServiceClient(base_url, delay_s=1.0))
        return built[-1]

    svc = TinkerService(create_timeout_s=0.1, client_factory=factory)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    with pytest.raises(TimeoutError):
        await svc.create_lora_training_client("Qwen/Qwen3-30B-A3B", 8)
    task.cancel()
    assert ticks >= 5  # the event loop kept running while the SDK call blocked


async def test_sdk_errors_reach_the_caller_unchanged() -> None:
    import tinker

    error = tinker.APIConnectionError(request=None)  # type: ignore[arg-type]
    svc, _ = service(error=error)
    with pytest.raises(tinker.APIConnectionError):
        await svc.create_sampling_client(None, "Qwen/Qwen3-30B-A3B")
    with pytest.raises(tinker.APIConnectionError):
        await svc.supported_models()
