"""Contract tests: what the Runpod adapter sends validates against the v2 OpenAPI spec, and what the
spec documents as responses parses into the provider port's data."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.runpod import PROXY_URL, Availability, RunpodProvider, status_to_state
from handlers.ports.provider import InvalidPodRequest, PodSpec, PodState
from tests.adapters import runpod_contract as rc

KEY = "rpa_CONTRACTTESTKEY0000000000"


def provider(fake: rc.FakeRunpod) -> RunpodProvider:
    return RunpodProvider(KEY, transport=fake.transport(), sleep=rc.Sleeps(), rand=lambda: 0.5)


# ---- the validator itself can fail (so the contract tests below can) ----------------------------


def test_spec_validator_rejects_bodies_the_api_would_reject() -> None:
    v = rc.schema_validator("CreatePodRequest")
    example = rc.operation("POST", "/v2/pods")["requestBody"]["content"]["application/json"]["examples"]
    assert list(v.iter_errors(example["gpuPod"]["value"])) == []
    # a v1 field, a missing image, a persistent volume below the floor, a stray field inside gpu
    assert list(v.iter_errors({"name": "x", "image": "i", "gpu": {"id": "g"}, "gpuTypeIds": ["g"]}))
    assert list(v.iter_errors({"name": "x", "gpu": {"id": "g"}}))
    assert list(v.iter_errors({"name": "x", "image": "i", "mounts": {"persistent": {"size": 5, "path": "/w"}}}))
    assert list(v.iter_errors({"name": "x", "image": "i", "gpu": {"id": "g", "bogus": 1}}))


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v2/pods", "200"),
        ("POST", "/v2/pods", "201"),
        ("GET", "/v2/pods/{id}", "200"),
        ("GET", "/v2/catalog/gpus", "200"),
        ("GET", "/v2/catalog/gpus/{id}", "200"),
    ],
)
def test_spec_examples_match_their_own_schemas(method: str, path: str, status: str) -> None:
    # The fixtures the other tests feed the adapter are only "spec-shaped" if this holds.
    example = rc.response_example(method, path, status)
    errors = [e.message for e in rc.validator(rc.response_schema_pointer(method, path, status)).iter_errors(example)]
    assert errors == []


# ---- every request body the adapter can send ------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
_specs = st.builds(
    PodSpec,
    gpu_type=st.one_of(st.sampled_from(["NVIDIA A40", "NVIDIA GeForce RTX 4090", "NVIDIA  RTX A4500"]), _text),
    image=st.one_of(st.just("ghcr.io/ait/pod:1.0"), _text),
    gpu_count=st.integers(-1, 8),
    agent_port=st.integers(-1, 70000),
    env=st.dictionaries(_text, _text, max_size=3),
    args=_text,
    disk_gb=st.integers(-1, 500),
    volume_gb=st.integers(0, 40),
    cloud=st.sampled_from(["SECURE", "COMMUNITY", "ALL", "secure", ""]),
    allowed_cuda_versions=st.lists(st.sampled_from(["12.8", "12.9", "13.0", "12", "v12.8", "١٢.٨"]), max_size=3).map(
        tuple
    ),
    data_center_ids=st.lists(st.sampled_from(["US-KS-2", "EU-RO-1", ""]), max_size=2).map(tuple),
)
_names = st.one_of(st.just("ait-run1-p1"), st.from_regex(r"\Aait-[a-z0-9-]{1,10}-[a-z0-9_]{1,6}\Z"), st.just(""))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=_specs, name=_names)
async def test_every_create_body_sent_validates_against_create_pod_request(spec: PodSpec, name: str) -> None:
    fake = rc.FakeRunpod()
    async with provider(fake) as p:
        try:
            await p.create_pod(spec, name)
        except InvalidPodRequest:
            # Refused locally, before anything went on the wire.
            assert fake.count("POST") == 0
            return
    posts = [r for r in fake.requests if r.method == "POST"]
    assert len(posts) == 1
    body = json.loads(posts[0].content)
    validator = rc.schema_validator("CreatePodRequest")
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]
    assert errors == [], body
    # and it says what the spec asked for
    assert body["name"] == name
    assert body["gpu"] == {"id": spec.gpu_type, "count": spec.gpu_count} | (
        {"allowedCudaVersions": list(spec.allowed_cuda_versions)} if spec.allowed_cuda_versions else {}
    )
    assert body.get("env", {}) == spec.env
    assert f"{spec.agent_port}/http" in body["ports"]


async def test_create_sends_persistent_volume_only_when_asked() -> None:
    fake = rc.FakeRunpod()
    async with provider(fake) as p:
        await p.create_pod(PodSpec(gpu_type="NVIDIA A40", image="img", volume_gb=20), "ait-r-a")
        await p.create_pod(PodSpec(gpu_type="NVIDIA A40", image="img"), "ait-r-b")
    first, second = (json.loads(r.content) for r in fake.requests if r.method == "POST")
    assert first["mounts"] == {"persistent": {"size": 20, "path": "/workspace"}}
    assert "mounts" not in second


@pytest.mark.parametrize("path", ["/v2/catalog/gpus", "/v2/catalog/gpus/{id}"])
async def test_catalog_query_parameters_are_declared_by_the_spec(path: str) -> None:
    fake = rc.FakeRunpod()
    async with provider(fake) as p:
        if path == "/v2/catalog/gpus":
            await p.gpu_catalog(cloud="COMMUNITY", gpu_count=2)
        else:
            await p.gpu_offer("NVIDIA GeForce RTX 4090")
    declared = rc.parameters("GET", path)
    (request,) = fake.requests
    assert request.url.params, "availability must be requested explicitly"
    for name, value in request.url.params.items():
        assert name in declared, f"query parameter {name} is not in the spec"
        param, validator = declared[name]
        schema = param["schema"]
        # style=form, explode=false arrays travel comma-separated
        instance: object = value.split(",") if schema.get("type") == "array" else value
        if schema.get("type") == "integer":
            instance = int(value)
        assert list(validator.iter_errors(instance)) == [], (name, value)


# ---- responses parsed from the spec's examples -----------------------------------------------------


async def test_create_response_example_parses() -> None:
    example = rc.response_example("POST", "/v2/pods", "201")
    fake = rc.FakeRunpod()
    fake.script = [rc.passthrough, rc.respond(201, example)]  # the name lookup, then the create
    async with provider(fake) as p:
        info = await p.create_pod(PodSpec(gpu_type=example["gpu"]["id"], image=example["image"]), example["name"])
    assert info.provider_id == example["id"]
    assert info.name == example["name"]
    assert info.raw_status == example["status"] == "PROVISIONING"
    assert info.state is PodState.PENDING
    assert info.gpu_type == example["gpu"]["id"]
    assert info.gpu_count == example["gpu"]["count"]
    assert info.usd_per_hour == pytest.approx(example["cost"])
    assert info.created_at == example["createdAt"]
    http_port = next(p.split("/")[0] for p in example["ports"] if p.endswith("/http"))
    assert info.url == PROXY_URL.format(pod_id=example["id"], port=http_port)


async def test_a_port_that_is_no_ascii_number_gives_no_url() -> None:
    # "²" is a digit to str.isdigit(): it once made the agent's URL https://<id>-².proxy.runpod.net
    example = {**rc.response_example("POST", "/v2/pods", "201"), "ports": ["²/http", "22/tcp", "8765/http"]}
    fake = rc.FakeRunpod()
    fake.script = [rc.passthrough, rc.respond(201, example)]
    async with provider(fake) as p:
        info = await p.create_pod(PodSpec(gpu_type=example["gpu"]["id"], image=example["image"]), example["name"])
    assert info.url == PROXY_URL.format(pod_id=example["id"], port="8765")


async def test_get_and_list_response_examples_parse() -> None:
    got = rc.response_example("GET", "/v2/pods/{id}", "200")
    listed = rc.response_example("GET", "/v2/pods", "200")
    fake = rc.FakeRunpod()
    fake.script = [rc.respond(200, got), rc.respond(200, listed), rc.respond(200, listed)]
    async with provider(fake) as p:
        info = await p.get_pod(got["id"])
        everything = await p.list_pods("")
        none = await p.list_pods("ait-")
    assert info is not None
    assert (info.provider_id, info.name, info.raw_status) == (got["id"], got["name"], got["status"])
    assert info.state is status_to_state(got["status"])
    assert [i.provider_id for i in everything] == [pod["id"] for pod in listed["pods"]]
    assert none == []  # the example pod is not named with the ait- prefix


async def test_catalog_examples_parse() -> None:
    example = rc.response_example("GET", "/v2/catalog/gpus", "200")["gpus"][0]
    fake = rc.FakeRunpod()
    async with provider(fake) as p:
        (listed,) = await p.gpu_catalog()
        single = await p.gpu_offer(example["id"])
    assert single == listed
    assert listed.gpu_type == example["id"]
    assert listed.memory_gb == example["memory"]
    assert listed.usd_per_hour_secure == pytest.approx(example["price"]["secure"])
    assert listed.usd_per_hour_community == pytest.approx(example["price"]["community"])
    assert listed.availability is Availability(example["availability"])
    assert listed.data_centers == tuple((dc["id"], Availability(dc["availability"])) for dc in example["dataCenters"])
    assert fake.requests[1].url.path == "/v2/catalog/gpus/" + example["id"]


def test_every_status_in_the_spec_maps_to_a_known_state() -> None:
    statuses = rc.spec()["components"]["schemas"]["PodStatus"]["enum"]
    states = {s: status_to_state(s) for s in statuses}
    assert PodState.UNKNOWN not in states.values(), states
    assert states["RUNNING"] is PodState.RUNNING
    assert states["TERMINATED"] is PodState.GONE
    assert status_to_state("HIBERNATING") is PodState.UNKNOWN  # a future status does not crash


async def test_pod_status_variants_of_the_example_all_parse() -> None:
    fake = rc.FakeRunpod()
    statuses = rc.spec()["components"]["schemas"]["PodStatus"]["enum"]
    for i, status in enumerate(statuses):
        fake.pods[f"p{i}"] = rc.pod_example(id=f"p{i}", name=f"ait-r-p{i}", status=status)
    async with provider(fake) as p:
        infos = await p.list_pods("ait-r-")
    assert [i.raw_status for i in infos] == statuses


async def test_error_examples_from_the_spec_are_classified() -> None:
    from handlers.ports.provider import ProviderAuthError, ProviderUnavailable

    responses = rc.spec()["components"]["responses"]

    def example(name: str) -> dict[str, object]:
        content = responses[name]["content"]["application/problem+json"]
        return next(iter(content["examples"].values()))["value"]

    cases: list[tuple[str, type[Exception]]] = [
        ("UnauthorizedError", ProviderAuthError),
        ("ForbiddenError", ProviderAuthError),
        ("BadRequestError", InvalidPodRequest),
        ("UnprocessableEntityError", InvalidPodRequest),
    ]
    for name, expected in cases:
        body = example(name)
        fake = rc.FakeRunpod()
        fake.script = [rc.passthrough, rc.respond(int(body["status"]), body)]  # type: ignore[call-overload]
        async with provider(fake) as p:
            with pytest.raises(expected) as caught:
                await p.create_pod(PodSpec(gpu_type="NVIDIA A40", image="img"), "ait-r-p1")
        assert str(body["detail"]) in str(caught.value)
    body = example("TooManyRequestsError")
    fake = rc.FakeRunpod()
    fake.script = [rc.respond(429, body, {"Retry-After": "1"})] * 10
    async with provider(fake) as p:
        with pytest.raises(ProviderUnavailable):
            await p.list_pods("ait-")


async def test_unknown_and_terminated_pods() -> None:
    fake = rc.FakeRunpod()
    async with provider(fake) as p:
        assert await p.get_pod("nope") is None
        await p.terminate_pod("nope")  # already gone is fine
    assert [r.method for r in fake.requests] == ["GET", "DELETE"]
    assert isinstance(fake.requests[0], httpx.Request)
