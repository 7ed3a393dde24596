"""The provider port: pod naming (run prefix, exact parsing), error kinds, and secret-safe PodSpec."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.runpod import RunpodProvider
from handlers.ports.provider import (
    InvalidPodRequest,
    PodSpec,
    Provider,
    ProviderAuthError,
    ProviderUnavailable,
    ProvisionError,
    QuotaExceeded,
    StockOut,
    parse_pod_name,
    pod_name,
    run_prefix,
)

run_ids = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,20}\Z")
pod_ids = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_]{0,10}\Z")


@given(run_id=run_ids, pod_id=pod_ids, other=run_ids)
def test_names_round_trip_and_runs_never_claim_each_others_pods(run_id: str, pod_id: str, other: str) -> None:
    name = pod_name(run_id, pod_id)
    assert name.startswith(run_prefix(run_id))
    assert parse_pod_name(name) == (run_id, pod_id)
    parsed = parse_pod_name(pod_name(other, pod_id))
    assert parsed is not None and (parsed[0] == run_id) == (other == run_id)


@pytest.mark.parametrize(
    ("run_id", "pod_id"), [("", "p"), ("-r", "p"), ("r 1", "p"), ("r", "p-1"), ("r", ""), ("r", "p/1")]
)
def test_bad_ids_are_refused_with_the_field_named(run_id: str, pod_id: str) -> None:
    with pytest.raises(ValueError, match=r"run_id|pod_id"):
        pod_name(run_id, pod_id)


@pytest.mark.parametrize("name", ["my-notebook", "ait-", "ait-run", "ait--p1", "ait-run-p-", "xait-run-p1"])
def test_foreign_names_do_not_parse(name: str) -> None:
    assert parse_pod_name(name) is None


def test_error_kinds_match_the_pod_provision_failed_event() -> None:
    kinds = {
        cls: cls.kind for cls in (StockOut, QuotaExceeded, ProviderAuthError, ProviderUnavailable, InvalidPodRequest)
    }
    assert kinds[StockOut] == "stock_out" and kinds[QuotaExceeded] == "quota"
    assert len(set(kinds.values())) == len(kinds)
    assert all(issubclass(cls, ProvisionError) for cls in kinds)
    assert StockOut("x").retryable and ProviderUnavailable("x").retryable
    assert not ProviderAuthError("x").retryable and not QuotaExceeded("x").retryable


def test_pod_spec_repr_hides_env_values() -> None:
    spec = PodSpec(gpu_type="g", image="i", env={"AIT_POD_TOKEN": "tok_secret_123"})
    for text in (repr(spec), str(spec), f"{spec}", repr([spec])):
        assert "tok_secret_123" not in text and "AIT_POD_TOKEN" in text


async def test_runpod_provider_implements_the_port() -> None:
    async with RunpodProvider("k") as provider:
        assert isinstance(provider, Provider)
        assert provider.name == "runpod"
