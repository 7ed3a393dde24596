"""Runpod error classification (stock-out by message, quota, auth), orphan discovery by run prefix,
and the API key never reaching logs, exception text or reprs."""

from __future__ import annotations

import httpx
import pytest
import structlog
from structlog.testing import capture_logs

from adapters.runpod import API_KEY_ENV, ApiKey, Availability, GpuOffer, RetryPolicy, RunpodProvider, in_stock
from handlers.ports.provider import (
    InvalidPodRequest,
    PodSpec,
    ProviderAuthError,
    ProviderUnavailable,
    ProvisionError,
    QuotaExceeded,
    StockOut,
    pod_name,
)
from tests.adapters import runpod_contract as rc

KEY = "rpa_SUPERSECRET_7f3c9a1b2d4e"
SPEC = PodSpec(gpu_type="NVIDIA RTX A5000", image="img")


def make(fake: rc.FakeRunpod, key: str = KEY) -> RunpodProvider:
    policy = RetryPolicy(max_attempts=3)
    return RunpodProvider(key, transport=fake.transport(), policy=policy, sleep=rc.Sleeps(), rand=lambda: 0.5)


async def create_failing_with(status: int, body: object) -> ProvisionError:
    fake = rc.FakeRunpod()
    fake.script = [rc.passthrough, rc.respond(status, body)]
    async with make(fake) as p:
        with pytest.raises(ProvisionError) as caught:
            await p.create_pod(SPEC, "ait-r-p1")
    return caught.value


# Messages as Runpod has been recorded sending them (shared notes, section 3), not this code's fragments.
RECORDED_STOCK_OUTS = [
    "There are no longer any instances available with the requested specifications. Please refresh and try again.",
    "There are no longer any instances available with enough disk space.",
    "There are no longer any instances available with the requested specifications. Please try again later.",
    "There are not enough free GPUs on the host machine to start this pod.",
    "This GPU and data center combination could not be placed.",
]


@pytest.mark.parametrize("message", RECORDED_STOCK_OUTS)
@pytest.mark.parametrize("shape", ["v2", "v1-error", "v1-message", "text"])
async def test_stock_out_messages_are_recognised_in_any_body_shape(message: str, shape: str) -> None:
    body: object = {
        "v2": rc.problem(400, message, "Bad Request"),
        "v1-error": {"error": message},
        "v1-message": {"message": message},
        "text": message,
    }[shape]
    error = await create_failing_with(400, body)
    assert isinstance(error, StockOut)
    assert error.kind == "stock_out"
    assert error.gpu_type == SPEC.gpu_type
    assert SPEC.gpu_type in str(error)


async def test_a_rule_violation_is_not_a_stock_out() -> None:
    error = await create_failing_with(400, rc.problem(400, "allowedCudaVersions and minCudaVersion are exclusive"))
    assert type(error) is InvalidPodRequest
    assert "minCudaVersion" in str(error)


async def test_422_lists_each_violation() -> None:
    body = rc.problem(422, "Request validation failed.") | {"errors": ["$.gpu.count: must be >= 1", "$.bogus: nope"]}
    error = await create_failing_with(422, body)
    assert type(error) is InvalidPodRequest
    assert "$.gpu.count: must be >= 1" in str(error) and "$.bogus" in str(error)


async def test_402_is_quota() -> None:
    error = await create_failing_with(402, rc.problem(402, "Insufficient balance to deploy this pod."))
    assert isinstance(error, QuotaExceeded)
    assert error.kind == "quota"


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_failures_are_fatal_and_name_the_key_variable(status: int) -> None:
    fake = rc.FakeRunpod()
    fake.script = [rc.respond(status, rc.problem(status, "missing bearer token"))]
    async with make(fake) as p:
        with pytest.raises(ProviderAuthError) as caught:
            await p.list_pods("ait-")
    assert API_KEY_ENV in str(caught.value)
    assert caught.value.status == status
    assert not caught.value.retryable
    assert fake.count("GET") == 1  # not retried


def test_missing_key_variable_is_a_clear_error() -> None:
    with pytest.raises(ProviderAuthError, match=API_KEY_ENV):
        RunpodProvider.from_env({})
    with pytest.raises(ProviderAuthError, match=API_KEY_ENV):
        RunpodProvider.from_env({API_KEY_ENV: "   "})


async def test_from_env_uses_the_key() -> None:
    fake = rc.FakeRunpod()
    async with RunpodProvider.from_env({API_KEY_ENV: KEY}, transport=fake.transport()) as p:
        await p.list_pods("")
        assert p.key_fingerprint == ApiKey(KEY).fingerprint()
    assert fake.requests[0].headers["Authorization"] == f"Bearer {KEY}"


# ---- orphans ---------------------------------------------------------------------------------------


async def test_find_and_reap_orphans_touches_only_this_runs_untracked_pods() -> None:
    fake = rc.FakeRunpod()
    tracked = fake.add_pod(pod_name("run1", "p1"))
    orphan = fake.add_pod(pod_name("run1", "p2"))
    fake.add_pod(pod_name("run1-x", "p3"))  # another run whose id starts with "run1"
    fake.add_pod(pod_name("run2", "p1"))
    fake.add_pod("someone-elses-notebook")
    async with make(fake) as p:
        found = await p.find_orphans("run1", keep=frozenset({tracked["id"]}))
        assert [o.provider_id for o in found] == [orphan["id"]]
        reaped = await p.reap_orphans("run1", keep=frozenset({tracked["id"]}))
    assert [o.provider_id for o in reaped] == [orphan["id"]]
    assert orphan["id"] not in fake.pods
    assert len(fake.pods) == 4


def test_in_stock_keeps_ladder_order_and_drops_only_none() -> None:
    def offer(gpu: str, level: Availability | None) -> GpuOffer:
        return GpuOffer(
            gpu_type=gpu, name=gpu, memory_gb=24, usd_per_hour_secure=1, usd_per_hour_community=1, availability=level
        )

    offers = [offer("A", Availability.NONE), offer("B", Availability.LOW), offer("C", None)]
    assert in_stock(["D", "C", "B", "A"], offers) == ["D", "C", "B"]


# ---- the key never leaks ---------------------------------------------------------------------------


async def test_key_never_in_logs_exceptions_or_reprs() -> None:
    echo = f"invalid token Bearer {KEY}"  # a server that echoes the header back
    scenarios = [
        [rc.respond(401, rc.problem(401, echo))],
        [rc.respond(403, echo)],
        [rc.passthrough, rc.respond(400, {"error": echo})],
        [rc.respond(500, echo)] * 3,
        [rc.respond(429, rc.problem(429, echo), {"Retry-After": "1"})] * 3,
        [rc.fail_network()] * 3,
    ]
    texts: list[str] = []
    with capture_logs() as logs:
        for script in scenarios:
            fake = rc.FakeRunpod()
            fake.script = list(script)
            async with make(fake) as p:
                texts += [repr(p), str(p)]
                try:
                    if len(script) and script[0] is rc.passthrough:
                        await p.create_pod(PodSpec(gpu_type="G", image="i", env={"TOKEN": KEY}), "ait-r-p1")
                    else:
                        await p.list_pods("ait-")
                except ProvisionError as exc:
                    chain: BaseException | None = exc
                    while chain is not None:
                        texts += [str(chain), repr(chain), *map(str, chain.args)]
                        chain = chain.__cause__ or chain.__context__
                else:
                    pytest.fail(f"scenario {script} did not fail")
            texts += [str(r.url) for r in fake.requests]  # the key travels only in the Authorization header
        # the adapter did log (otherwise this test would prove nothing)
        assert any(e["event"] in {"runpod.retry", "runpod.create_failed"} for e in logs)
    texts += [repr(e) for e in logs]
    texts += [repr(ApiKey(KEY)), str(ApiKey(KEY)), repr(PodSpec(gpu_type="G", image="i", env={"TOKEN": KEY}))]
    leaks = [t for t in texts if KEY in t]
    assert leaks == []
    assert any("***" in t for t in texts)  # the echoed key was masked, not dropped silently


async def test_key_not_in_rendered_log_output(capsys: pytest.CaptureFixture[str]) -> None:
    structlog.reset_defaults()  # the default console renderer, as a CLI would use
    fake = rc.FakeRunpod()
    fake.script = [rc.respond(503, f"Bearer {KEY}")] * 3
    async with make(fake) as p:
        with pytest.raises(ProviderUnavailable):
            await p.list_pods("")
    out = capsys.readouterr()
    assert "runpod.retry" in out.out + out.err
    assert KEY not in out.out + out.err


def test_api_key_refuses_pickling_and_empty_values() -> None:
    import pickle

    with pytest.raises(TypeError):
        pickle.dumps(ApiKey(KEY))
    with pytest.raises(ValueError, match=API_KEY_ENV):
        ApiKey("  ")
    assert ApiKey(KEY).fingerprint() != ApiKey(KEY + "x").fingerprint()
    assert KEY not in ApiKey(KEY).fingerprint()


POD_TOKEN = "tok_PODAGENT_99c1"
TOKEN_SPEC = PodSpec(gpu_type="G", image="i", env={"AIT_POD_TOKEN": POD_TOKEN})
OTHER_SECRET = "sk_other_555"


async def fail_and_log(op: str, script: list[rc.Script]) -> None:
    # Secrets live in module globals, never in this frame's locals: the traceback would show those too.
    fake = rc.FakeRunpod()
    fake.script = list(script)
    async with make(fake) as p:
        try:
            if op == "create":
                await p.create_pod(TOKEN_SPEC, "ait-r-p1")
            elif op == "list":
                await p.list_pods("ait-")
            else:
                RunpodProvider.from_env({"OTHER_SECRET": OTHER_SECRET})
        except ProvisionError:
            structlog.get_logger("caller").exception("provision failed")
        else:
            pytest.fail(f"{op} did not fail")


async def test_tracebacks_rendered_with_locals_show_neither_key_nor_pod_token() -> None:
    # structlog's dev renderer prints Rich tracebacks *with frame locals*: a plain local holding the
    # key or the create body anywhere on the stack would be printed by `log.exception(...)`.
    import io
    import re

    buffer = io.StringIO()
    formatter = structlog.dev.RichTracebackFormatter(show_locals=True, width=200)
    structlog.configure(
        processors=[structlog.dev.ConsoleRenderer(colors=False, exception_formatter=formatter)],
        logger_factory=structlog.PrintLoggerFactory(file=buffer),
    )
    try:
        await fail_and_log("list", [rc.respond(503)] * 3)
        await fail_and_log("list", [rc.fail_network()] * 3)
        await fail_and_log("list", [rc.respond(401)])
        await fail_and_log("create", [rc.passthrough] + [rc.fail_network(httpx.ReadTimeout), rc.passthrough] * 3)
        await fail_and_log("create", [rc.passthrough, rc.respond(400, rc.problem(400, RECORDED_STOCK_OUTS[0]))])
        await fail_and_log("from_env", [])
    finally:
        structlog.reset_defaults()
    rendered = re.sub(r"\x1b\[[0-9;]*m", "", buffer.getvalue())  # Rich colours split words otherwise
    assert rendered.count("locals") >= 6  # tracebacks with locals were rendered
    assert "ApiKey(***)" in rendered and "'AIT_POD_TOKEN': '***'" in rendered
    for secret in (KEY, POD_TOKEN, OTHER_SECRET):
        assert secret not in rendered
