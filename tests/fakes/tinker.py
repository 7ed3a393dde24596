"""A fake Tinker service at the port, shaped exactly like the SDK (0.38): requests return futures at once
(awaitable, with ``.result()``), real ``tinker.types`` objects in and out, ``SampledSequence`` with logprobs,
and the poisoned-client rule: after one failed request every later request on that client fails.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Generator, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    import tinker
    from tinker import types

T = TypeVar("T")


def _failed(message: str, request_id: str, category: str) -> tinker.RequestFailedError:
    """The SDK's error for a server-side request failure."""
    import tinker
    from tinker import types

    return tinker.RequestFailedError(message, request_id, types.RequestErrorCategory[category])


class FakeFuture(Generic[T]):
    """Like ``APIFuture``: already resolved (or failed); ``await`` it or call ``.result()``."""

    def __init__(self, value: T | None = None, error: BaseException | None = None) -> None:
        self._value = value
        self._error = error

    def result(self, timeout: float | None = None) -> T:
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def __await__(self) -> Generator[Any, None, T]:
        yield from asyncio.sleep(0).__await__()
        return self.result()


class FakeTrainingClient:
    def __init__(self, service: FakeTinker, name: str, state: dict[str, Any]) -> None:
        self._service = service
        self.name = name
        self.state = state  # {"steps": int, "adam": bool}: what a checkpoint would restore
        self.poisoned = False
        self.calls: list[str] = []

    def _request(self, what: str, make: Callable[[], T]) -> FakeFuture[T]:
        self.calls.append(what)
        if self.poisoned:
            return FakeFuture(error=RuntimeError(f"{what}: TrainingClient is poisoned by an earlier failure"))
        if self._service.fail_next.get(what, 0) > 0:
            self._service.fail_next[what] -= 1
            self.poisoned = True
            return FakeFuture(error=_failed("injected failure", "req-0", "Server"))
        return FakeFuture(make())

    def forward_backward(
        self, data: list[types.Datum], loss_fn: Any, loss_fn_config: Mapping[str, float] | None = None
    ) -> FakeFuture[types.ForwardBackwardOutput]:
        from tinker import types

        def run() -> types.ForwardBackwardOutput:
            if loss_fn not in ("importance_sampling", "ppo", "cispo", "dro", "gspo", "cross_entropy"):
                raise ValueError(f"unknown loss {loss_fn}")
            for d in data:
                n = d.model_input.length
                for key, td in d.loss_fn_inputs.items():
                    if len(td.tolist()) != n:
                        raise ValueError(f"{key}: {len(td.tolist())} != model_input length {n}")
            self._service.forward_backward_calls.append((list(data), loss_fn, dict(loss_fn_config or {})))
            # importance-sampling surrogate at ratio 1: -sum(A) over tokens
            loss = -sum(sum(d.loss_fn_inputs["advantages"].tolist()) for d in data)
            outs = [{"logprobs": d.loss_fn_inputs["logprobs"]} for d in data]
            return types.ForwardBackwardOutput(
                loss_fn_output_type="ArrayRecord", loss_fn_outputs=outs, metrics={"loss:sum": loss}
            )

        return self._request("forward_backward", run)

    def optim_step(self, optim_params: types.AdamParams) -> FakeFuture[types.OptimStepResponse]:
        from tinker import types

        def run() -> types.OptimStepResponse:
            self.state["steps"] += 1
            self._service.optim_calls.append(optim_params)
            return types.OptimStepResponse(metrics={"lr": optim_params.learning_rate})

        return self._request("optim_step", run)

    def save_state(self, name: str) -> FakeFuture[types.SaveWeightsResponse]:
        from tinker import types

        def run() -> types.SaveWeightsResponse:
            path = f"tinker://fake/{self.name}/state/{name}"
            self._service.states[path] = dict(self.state)
            return types.SaveWeightsResponse(path=path)

        return self._request("save_state", run)

    def save_weights_for_sampler(self, name: str) -> FakeFuture[types.SaveWeightsForSamplerResponse]:
        from tinker import types

        def run() -> types.SaveWeightsForSamplerResponse:
            path = f"tinker://fake/{self.name}/sampler/{name}"
            self._service.samplers[path] = dict(self.state)
            return types.SaveWeightsForSamplerResponse(path=path)

        return self._request("save_weights_for_sampler", run)


class FakeSamplingClient:
    """Samples from a scripted reply function (prompt ids -> reply ids); logprobs are seeded noise."""

    def __init__(self, path: str, reply: Callable[[list[int]], list[int]], seed: int = 0) -> None:
        self.path = path
        self._reply = reply
        self._rng = random.Random(seed)
        self.prompts: list[list[int]] = []
        self.fail_next = 0

    def sample(
        self, prompt: types.ModelInput, num_samples: int, sampling_params: types.SamplingParams
    ) -> FakeFuture[types.SampleResponse]:
        from tinker import types

        if self.fail_next:
            self.fail_next -= 1
            return FakeFuture(error=_failed("sampler down", "req-1", "Server"))
        ids = prompt.to_ints()
        self.prompts.append(ids)
        seqs = []
        for i in range(num_samples):
            toks = self._reply(ids)
            if sampling_params.max_tokens is not None:
                toks = toks[: sampling_params.max_tokens]
            lps = [-self._rng.random() for _ in toks]
            seqs.append(
                types.SampledSequence(
                    stop_reason="stop", sequence_id=f"seq{len(self.prompts)}_{i}", _tokens_list=toks, _logprobs_list=lps
                )
            )
        return FakeFuture(types.SampleResponse(sequences=seqs, prompt_cache_hit_tokens=0))


class FakeTinker:
    """The service: creates clients; ``fail_next[request] = n`` makes the next n such requests fail."""

    def __init__(self, reply: Callable[[list[int]], list[int]] | None = None) -> None:
        self.reply = reply or (lambda ids: [1, 2, 3])
        self.fail_next: dict[str, int] = {}
        self.states: dict[str, dict[str, Any]] = {}
        self.samplers: dict[str, dict[str, Any]] = {}
        self.forward_backward_calls: list[tuple[list[types.Datum], str, dict[str, float]]] = []
        self.optim_calls: list[types.AdamParams] = []
        self.clients: list[FakeTrainingClient] = []
        self.created: list[tuple[str, Any]] = []

    async def create_lora_training_client(self, base_model: str, rank: int) -> FakeTrainingClient:
        self.created.append(("lora", (base_model, rank)))
        c = FakeTrainingClient(self, f"c{len(self.clients)}", {"steps": 0, "rank": rank})
        self.clients.append(c)
        return c

    async def create_training_client_from_state_with_optimizer(self, path: str) -> FakeTrainingClient:
        self.created.append(("from_state", path))
        if path not in self.states:
            raise _failed(f"no checkpoint {path}", "req-2", "User")
        c = FakeTrainingClient(self, f"c{len(self.clients)}", dict(self.states[path]))
        self.clients.append(c)
        return c

    async def create_sampling_client(self, model_path: str | None, base_model: str | None) -> FakeSamplingClient:
        if model_path is not None and model_path not in self.samplers:
            raise _failed(f"no sampler {model_path}", "req-3", "User")
        return FakeSamplingClient(model_path or f"base:{base_model}", self.reply)


def awaitable(x: T) -> Awaitable[T]:
    return FakeFuture(x)
