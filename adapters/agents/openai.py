"""The OpenAI-compatible agent policy: any ``/chat/completions`` endpoint with tool calling, over httpx.

Retries 429 (honouring ``Retry-After``), 5xx, timeouts and connection errors with bounded exponential
backoff and jitter; a 4xx other than 429 is the caller's fault and is not retried. The API key is read from
the environment variable the config names and lives only in the ``Authorization`` header: it is never
logged, put in an event, or shown in an error message. Token usage (with cached prompt tokens) comes back
in the reply, so the episode loop can settle the call's reservation with the real cost.
"""

from __future__ import annotations

import os
import random
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
import msgspec
import structlog

from adapters.retry import RetryPolicy, parse_retry_after
from handlers.ports.policy import AgentReply, PolicyError, ToolCall

__all__ = ["OpenAIConfig", "OpenAIPolicy", "is_local"]

log = structlog.get_logger(__name__)


class OpenAIConfig(msgspec.Struct, frozen=True, kw_only=True):
    model: str
    base_url: str = "https://api.openai.com/v1"
    api_key_var: str = "OPENAI_API_KEY"  # the NAME of the environment variable holding the key
    temperature: float | None = None
    max_tokens: int = 4096
    timeout_s: float = 120.0
    retry: RetryPolicy = RetryPolicy()


class _Message(msgspec.Struct):
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


class _Choice(msgspec.Struct):
    message: _Message
    finish_reason: str | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_tokens_details: dict[str, Any] | None = None


class _Completion(msgspec.Struct):
    choices: list[_Choice]
    usage: _Usage | None = None
    model: str = ""


def is_local(base_url: str) -> bool:
    """Whether ``base_url`` points at this machine (loopback), where a keyless endpoint is normal."""
    import ipaddress
    from urllib.parse import urlsplit

    host = (urlsplit(base_url).hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OpenAIPolicy:
    def __init__(
        self,
        config: OpenAIConfig,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        environ: dict[str, str] | None = None,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        env = os.environ if environ is None else environ
        key = env.get(config.api_key_var, "")
        if not key and not is_local(config.base_url):
            raise PolicyError(
                f"no API key for {config.base_url}: set the environment variable {config.api_key_var} "
                "(a local endpoint, e.g. --base-url http://127.0.0.1:8000/v1, needs none)"
            )
        self.config = config
        self.model = config.model
        self.name = f"openai:{config.model}"
        self._client = httpx.AsyncClient(
            base_url=config.base_url.rstrip("/"),
            # A local server (vLLM, llama.cpp, a test double) usually wants no key: send none rather than a fake one.
            headers={"Authorization": f"Bearer {key}"} if key else {},
            timeout=config.timeout_s,
            transport=transport,
        )
        self._sleep = sleep
        self._rand = rand

    async def aclose(self) -> None:
        await self._client.aclose()

    async def next_turn(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, seed: int | None = None
    ) -> AgentReply:
        """``seed``: the request's sampling seed (OpenAI's ``seed``), for a caller that makes each turn reproducible."""
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages,
            "tools": tools,
            "max_tokens": self.config.max_tokens,
        }
        if self.config.temperature is not None:
            body["temperature"] = self.config.temperature
        if seed is not None:
            body["seed"] = seed
        response = await self._post(body)
        return self._parse(response)

    async def _post(self, body: dict[str, Any]) -> httpx.Response:
        retry = self.config.retry
        last = ""
        for attempt in range(retry.max_attempts):
            delay: float | None = None
            try:
                response = await self._client.post("/chat/completions", json=body)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last = f"{type(exc).__name__}"
            else:
                if response.status_code < 400:
                    return response
                if response.status_code in (401, 403):
                    raise PolicyError(
                        f"{self.config.base_url} refused the key in {self.config.api_key_var} "
                        f"(HTTP {response.status_code})"
                    )
                if response.status_code != 429 and response.status_code < 500:
                    raise PolicyError(f"HTTP {response.status_code} from {self.config.base_url}: {_brief(response)}")
                last = f"HTTP {response.status_code}"
                if response.status_code == 429:
                    delay = parse_retry_after(response)
            if attempt + 1 == retry.max_attempts:
                break
            wait = retry.backoff_s(attempt, self._rand()) if delay is None else min(delay, retry.max_retry_after_s)
            log.warning("agent.retry", provider=self.config.base_url, error=last, attempt=attempt + 1, wait_s=wait)
            await self._sleep(wait)
        raise PolicyError(f"{self.config.base_url}: giving up after {retry.max_attempts} attempts ({last})")

    def _parse(self, response: httpx.Response) -> AgentReply:
        try:
            data = msgspec.json.decode(response.content, type=_Completion)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise PolicyError(f"malformed chat completion from {self.config.base_url}: {exc}") from None
        if not data.choices:
            raise PolicyError(f"chat completion from {self.config.base_url} has no choices")
        choice = data.choices[0]
        calls = []
        for i, raw in enumerate(choice.message.tool_calls or []):
            fn = raw.get("function") or {}
            args = fn.get("arguments")
            calls.append(
                ToolCall(
                    id=str(raw.get("id") or f"call_{i}"),
                    name=str(fn.get("name", "")),
                    # Kept as the raw text: malformed arguments are the agent's to fix, reported by the tool.
                    arguments=args if isinstance(args, str) else "",
                )
            )
        usage = data.usage or _Usage()
        cached = int((usage.prompt_tokens_details or {}).get("cached_tokens") or 0)
        return AgentReply(
            content=choice.message.content or "",
            tool_calls=calls,
            model=data.model or self.config.model,
            input_tokens=usage.prompt_tokens,  # every prompt token: the price table bills the cached among them
            cached_input_tokens=cached,
            output_tokens=usage.completion_tokens,
            finish_reason=choice.finish_reason or "",
        )


def _brief(response: httpx.Response) -> str:
    text = response.text.strip().replace("\n", " ")
    return text[:300]
