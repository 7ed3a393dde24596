"""Runpod adapter under transient failure: Retry-After, exponential backoff with jitter, bounded
attempts, and creates that stay idempotent by pod name."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.runpod import RetryPolicy, RunpodProvider, parse_retry_after
from handlers.ports.provider import PodSpec, ProviderUnavailable
from tests.adapters import runpod_contract as rc

KEY = "rpa_RETRYTESTKEY"
SPEC = PodSpec(gpu_type="NVIDIA A40", image="img")
POLICY = RetryPolicy(max_attempts=4, base_delay_s=2.0, max_delay_s=5.0, max_retry_after_s=60.0)


def make(fake: rc.FakeRunpod, rand: float = 0.25, policy: RetryPolicy = POLICY) -> tuple[RunpodProvider, rc.Sleeps]:
    sleeps = rc.Sleeps()
    return RunpodProvider(KEY, transport=fake.transport(), policy=policy, sleep=sleeps, rand=lambda: rand), sleeps


async def test_429_sleeps_exactly_retry_after_then_succeeds() -> None:
    fake = rc.FakeRunpod()
    fake.script = [rc.respond(429, headers={"Retry-After": "12"}), rc.respond(429, headers={"Retry-After": "3"})]
    p, sleeps = make(fake)
    async with p:
        assert await p.list_pods("") == []
    assert sleeps.delays == [12.0, 3.0]
    assert fake.count("GET") == 3


async def test_429_longer_than_the_cap_is_handed_back_not_slept() -> None:
    fake = rc.FakeRunpod()
    fake.script = [rc.respond(429, headers={"Retry-After": "3600"})]
    p, sleeps = make(fake)
    async with p:
        with pytest.raises(ProviderUnavailable) as caught:
            await p.list_pods("")
    assert caught.value.retry_after_s == 3600.0
    assert caught.value.status == 429
    assert sleeps.delays == []
    assert fake.count("GET") == 1


async def test_429_without_retry_after_backs_off() -> None:
    fake = rc.FakeRunpod()
    fake.script = [rc.respond(429)]
    p, sleeps = make(fake, rand=0.0)
    async with p:
        await p.list_pods("")
    assert sleeps.delays == [POLICY.base_delay_s * 0.5]


async def test_5xx_backoff_is_exponential_jittered_capped_and_bounded() -> None:
    fake = rc.FakeRunpod()
    fake.script = [rc.respond(503, "upstream down")] * 10
    p, sleeps = make(fake, rand=0.5)
    async with p:
        with pytest.raises(ProviderUnavailable) as caught:
            await p.get_pod("pod1")
    # 4 attempts, 3 pauses between them: ceilings 2, 4, then 8 capped at 5, each at 75% (rand 0.5)
    assert fake.count("GET") == POLICY.max_attempts
    assert sleeps.delays == pytest.approx([1.5, 3.0, 3.75])
    assert caught.value.status == 503
    assert "after 4 attempts" in str(caught.value)


async def test_network_errors_on_reads_are_retried() -> None:
    fake = rc.FakeRunpod()
    fake.add_pod("ait-r-p1")
    fake.script = [rc.fail_network(), rc.fail_network(httpx.ReadTimeout)]
    p, sleeps = make(fake)
    async with p:
        assert len(await p.list_pods("ait-r-")) == 1
    assert len(sleeps.delays) == 2


async def test_different_jitter_draws_give_different_delays() -> None:
    delays = []
    for rand in (0.0, 0.99):
        fake = rc.FakeRunpod()
        fake.script = [rc.respond(500)]
        p, sleeps = make(fake, rand=rand)
        async with p:
            await p.list_pods("")
        delays.append(sleeps.delays[0])
    assert delays[0] < delays[1]


@given(
    attempt=st.integers(0, 60),
    u=st.floats(0.0, 1.0, exclude_max=True),
    base=st.floats(0.01, 10.0),
    extra=st.floats(0.0, 100.0),
)
def test_backoff_stays_within_half_and_full_capped_ceiling(attempt: int, u: float, base: float, extra: float) -> None:
    policy = RetryPolicy(base_delay_s=base, max_delay_s=base + extra)
    delay = policy.backoff_s(attempt, u)
    ceiling = min(base + extra, base * 2.0**attempt)
    assert ceiling / 2 <= delay <= ceiling
    assert delay <= policy.max_delay_s


@pytest.mark.parametrize(
    "kwargs", [{"max_attempts": 0}, {"base_delay_s": 0.0}, {"base_delay_s": 5.0, "max_delay_s": 1.0}]
)
def test_retry_policy_rejects_nonsense(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="RetryPolicy"):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_retry_after_forms() -> None:
    def parsed(headers: dict[str, str]) -> float | None:
        return parse_retry_after(httpx.Response(429, headers=headers))

    assert parsed({"Retry-After": "7"}) == 7.0
    assert parsed({"Retry-After": "1.5"}) == 1.5
    assert parsed({"Retry-After": "-3"}) == 0.0
    assert parsed({}) is None
    assert parsed({"Retry-After": "soon"}) is None
    date = {"Date": "Wed, 21 Oct 2026 07:28:00 GMT"}
    assert parsed({"Retry-After": "Wed, 21 Oct 2026 07:28:30 GMT"} | date) == 30.0
    assert parsed({"Retry-After": "Wed, 21 Oct 2026 07:28:30 GMT"}) is None  # no server clock to compare


# ---- creates stay idempotent -------------------------------------------------------------------------


async def test_create_returns_an_existing_pod_with_the_name_without_posting() -> None:
    fake = rc.FakeRunpod()
    existing = fake.add_pod("ait-r-p1")
    p, _ = make(fake)
    async with p:
        info = await p.create_pod(SPEC, "ait-r-p1")
    assert info.provider_id == existing["id"]
    assert fake.count("POST") == 0


async def test_ambiguous_create_failure_adopts_the_pod_that_was_created() -> None:
    fake = rc.FakeRunpod()

    def created_then_502(request: httpx.Request) -> httpx.Response:
        fake.serve(request)  # the server did create it ...
        return httpx.Response(502, text="bad gateway")  # ... but the answer got lost

    fake.script = [rc.passthrough, created_then_502]
    p, sleeps = make(fake)
    async with p:
        info = await p.create_pod(SPEC, "ait-r-p1")
    assert fake.count("POST") == 1
    assert len(fake.pods) == 1
    assert info.name == "ait-r-p1"
    assert len(sleeps.delays) == 1


async def test_ambiguous_create_failure_that_did_not_take_effect_is_retried() -> None:
    fake = rc.FakeRunpod()
    fake.script = [rc.passthrough, rc.fail_network(httpx.ReadTimeout), rc.passthrough, rc.respond(500)]
    p, _ = make(fake)
    async with p:
        info = await p.create_pod(SPEC, "ait-r-p1")
    assert fake.count("POST") == 3
    assert [pod["name"] for pod in fake.pods.values()] == ["ait-r-p1"]
    assert info.provider_id in fake.pods


async def test_create_gives_up_after_the_policy_attempts() -> None:
    fake = rc.FakeRunpod()
    fake.script = [rc.passthrough] + [rc.respond(503), rc.passthrough] * 10
    p, _ = make(fake)
    async with p:
        with pytest.raises(ProviderUnavailable, match="failed 4 times"):
            await p.create_pod(SPEC, "ait-r-p1")
    assert fake.count("POST") == POLICY.max_attempts
    assert fake.pods == {}


async def test_rate_limited_create_is_retried_in_place() -> None:
    fake = rc.FakeRunpod()
    fake.script = [rc.passthrough, rc.respond(429, headers={"Retry-After": "2"})]
    p, sleeps = make(fake)
    async with p:
        await p.create_pod(SPEC, "ait-r-p1")
    assert sleeps.delays == [2.0]
    assert fake.count("POST") == 2
    assert len(fake.pods) == 1
